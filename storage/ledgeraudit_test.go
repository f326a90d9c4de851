package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/storage"
)

func (b ledgerBundle) audit(t *testing.T, full bool) storage.AuditReport {
	t.Helper()
	r, err := storage.AuditLedger(b.ctx, b.db, full, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// entrySQL inserts one ledger entry of amount into account (a wallet's when
// wallet is not empty), as an operator or a defect would, outside the engine.
func entrySQL(txn, account, wallet, amount string) string {
	w := "NULL"
	if wallet != "" {
		w = "'" + wallet + "'"
	}
	return fmt.Sprintf(`INSERT INTO ledger_entries (transaction_id, command_id, merchant_id, account, wallet_id, currency,
		amount, trans_type, narrative, created_at) VALUES ('%s', 'C-%s', 'M1', '%s', %s, 'KES', %s, 'DEPOSIT', 'test', now())`,
		txn, txn, account, w, amount)
}

func wantImbalances(t *testing.T, r storage.AuditReport, currency, snapshot, hold int) {
	t.Helper()
	got := [3]int{r.Imbalances[storage.ImbalanceCurrencySum], r.Imbalances[storage.ImbalanceSnapshot], r.Imbalances[storage.ImbalanceOrphanedHold]}
	if got != [3]int{currency, snapshot, hold} || r.OK != (currency+snapshot+hold == 0) {
		t.Fatalf("imbalances (currency_sum, snapshot, orphaned_hold) %v ok %v, want %v\n%+v", got, r.OK, [3]int{currency, snapshot, hold}, r)
	}
}

func TestAuditLedger(t *testing.T) {
	t.Parallel()

	t.Run("Balanced_ThenOnlyNewEntriesRead", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		r := b.audit(t, false)
		wantImbalances(t, r, 0, 0, 0)
		if !r.Full || r.Read != 2 || r.Entries != 2 || r.ThroughEntryID != 2 {
			t.Fatalf("first run (no checkpoint) %+v, want a full run over 2 entries", r)
		}
		// A balanced deposit into W2, with its snapshot, as the engine would.
		b.exec(t, entrySQL("T2", "wallet:W2", "W2", "40.00"))
		b.exec(t, entrySQL("T2", "system:sandbox_funding", "", "-40.00"))
		b.exec(t, `UPDATE wallets SET current_balance = 40, available_balance = 40 WHERE wallet_id = 'W2'`)
		r = b.audit(t, false)
		wantImbalances(t, r, 0, 0, 0)
		if r.Full || r.Read != 2 || r.Entries != 4 || r.ThroughEntryID != 4 {
			t.Fatalf("incremental run %+v, want 2 entries read, 4 covered", r)
		}
		if r = b.audit(t, false); r.Read != 0 || !r.OK {
			t.Fatalf("run with nothing new %+v", r)
		}
		if r = b.audit(t, true); !r.Full || r.Read != 4 || !r.OK {
			t.Fatalf("full run %+v", r)
		}
	})

	t.Run("UnbalancedEntryInsertedBySQL_Reported_AndStaysReported", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		wantImbalances(t, b.audit(t, false), 0, 0, 0)
		b.exec(t, entrySQL("BAD", "system:sandbox_funding", "", "0.01"))
		r := b.audit(t, false)
		wantImbalances(t, r, 1, 0, 0)
		if r.Read != 1 || fmt.Sprint(r.Currencies) != "[KES]" || !r.CurrencySums["KES"].Equal(amt("0.01")) {
			t.Fatalf("report %+v", r)
		}
		// The checkpoint moved past the bad entry; its sum still carries it.
		r = b.audit(t, false)
		wantImbalances(t, r, 1, 0, 0)
		if r.Read != 0 {
			t.Fatalf("read %d, want 0", r.Read)
		}
		// An operator's correcting entry clears it.
		b.exec(t, entrySQL("FIX", "system:sandbox_funding", "", "-0.01"))
		wantImbalances(t, b.audit(t, false), 0, 0, 0)
	})

	t.Run("SnapshotChanged_Reported_WithoutNewEntries", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		wantImbalances(t, b.audit(t, false), 0, 0, 0)
		b.exec(t, `UPDATE wallets SET current_balance = 150, available_balance = 150 WHERE wallet_id = 'W1'`)
		r := b.audit(t, false)
		wantImbalances(t, r, 0, 1, 0)
		if fmt.Sprint(r.Wallets) != "[W1]" || r.Read != 0 {
			t.Fatalf("report %+v", r)
		}
	})

	t.Run("EntryForMissingWallet_Snapshot", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.exec(t, entrySQL("GHOST", "wallet:W9", "W9", "5.00"))
		b.exec(t, entrySQL("GHOST", "system:sandbox_funding", "", "-5.00"))
		r := b.audit(t, false)
		wantImbalances(t, r, 0, 1, 0)
		if fmt.Sprint(r.Wallets) != "[W9]" {
			t.Fatalf("wallets %v", r.Wallets)
		}
	})

	t.Run("OrphanedHold_Reported_UnlessSomethingOpenHoldsIt", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.exec(t, `UPDATE wallets SET available_balance = 90 WHERE wallet_id = 'W1'`)
		r := b.audit(t, false)
		wantImbalances(t, r, 0, 0, 1)
		if fmt.Sprint(r.Holds) != "[W1]" {
			t.Fatalf("holds %v", r.Holds)
		}
		// An approved payment file still being paid is what such a hold is for.
		b.exec(t, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
			VALUES ('F1', 'M1', gen_random_uuid(), 'PROCESSING', 1, '{}', now(), now())`)
		wantImbalances(t, b.audit(t, false), 0, 0, 0)
		b.exec(t, `UPDATE payout_files SET status = 'COMPLETE'`)
		wantImbalances(t, b.audit(t, false), 0, 0, 1)
	})

	t.Run("AuditedEntryEdited_OnlyAFullRunFindsIt", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		wantImbalances(t, b.audit(t, false), 0, 0, 0)
		b.exec(t, `UPDATE ledger_entries SET amount = amount + 1 WHERE account = 'system:sandbox_funding'`)
		// The incremental run trusts what it has summed: the documented reason for
		// the full runs (PAYSVC_LEDGER_AUDIT_FULL_INTERVAL).
		wantImbalances(t, b.audit(t, false), 0, 0, 0)
		wantImbalances(t, b.audit(t, true), 1, 0, 0)
	})

	t.Run("CheckpointPastTheLedger_FullRun", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.audit(t, false)
		b.exec(t, `UPDATE ledger_audit_checkpoint SET through_entry_id = 1000`) // as after a restore to an earlier point
		if r := b.audit(t, false); !r.Full || r.ThroughEntryID != 2 || !r.OK {
			t.Fatalf("report %+v, want a full run back to entry 2", r)
		}
	})

	t.Run("UncommittedEntry_WaitedFor_NeverSkipped", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.audit(t, false)
		// A batch that drew an entry id and has not committed yet.
		tx, err := b.db.BeginTxx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck
		if _, err := tx.ExecContext(b.ctx, entrySQL("LATE", "system:sandbox_funding", "", "3.00")); err != nil {
			t.Fatal(err)
		}
		// A later batch commits an entry with a higher id.
		b.exec(t, entrySQL("EARLY", "system:sandbox_funding", "", "-3.00"))
		if _, err := storage.AuditLedger(b.ctx, b.db, false, 200*time.Millisecond); !errors.Is(err, storage.ErrAuditBusy) {
			t.Fatalf("audit with a batch in flight: %v, want ErrAuditBusy (it must not move past the batch's entry)", err)
		}
		var batch int
		if err := tx.GetContext(b.ctx, &batch, `SELECT pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
		done := make(chan storage.AuditReport, 1)
		go func() {
			r, err := storage.AuditLedger(context.Background(), b.db, false, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		// The audit waits for the batch: its lock on the ledger is blocked by it.
		waittest.Eventually(t, 5*time.Second, func() (bool, string) {
			var waiting int
			if err := b.db.GetContext(b.ctx, &waiting, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, batch); err != nil {
				t.Fatal(err)
			}
			return waiting > 0, "the audit never waited for the batch in flight"
		})
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		r := <-done
		wantImbalances(t, r, 0, 0, 0)
		if r.Read != 2 || r.ThroughEntryID != 4 {
			t.Fatalf("report %+v, want both entries read, checkpoint at 4", r)
		}
	})
}
