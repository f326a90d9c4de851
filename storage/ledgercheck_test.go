package storage_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

type ledgerBundle struct {
	ctx context.Context
	db  *sqlx.DB
}

// setupLedger commits balanced data: W1 (100.00) and W2 (0.00) of M1, one deposit.
func setupLedger(t *testing.T) ledgerBundle {
	t.Helper()
	b := setupBatch(t)
	if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
		t.Fatal(err)
	}
	return ledgerBundle{ctx: b.ctx, db: b.db}
}

func (b ledgerBundle) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := b.db.ExecContext(b.ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// dropWalletChecks removes the CHECK constraints of this test schema's wallets table,
// so a corrupt snapshot can be written.
func (b ledgerBundle) dropWalletChecks(t *testing.T) {
	t.Helper()
	var names []string
	if err := sqlx.SelectContext(b.ctx, b.db, &names, `SELECT conname FROM pg_constraint
		WHERE conrelid = 'wallets'::regclass AND contype = 'c'`); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("wallets has no CHECK constraint to drop")
	}
	for _, n := range names {
		b.exec(t, fmt.Sprintf(`ALTER TABLE wallets DROP CONSTRAINT %q`, n))
	}
}

func (b ledgerBundle) check(t *testing.T) storage.LedgerReport {
	t.Helper()
	r, err := storage.CheckLedger(b.ctx, b.db)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckLedger(t *testing.T) {
	t.Parallel()

	t.Run("EmptyDatabase_OK", func(t *testing.T) {
		t.Parallel()
		r, err := storage.CheckLedger(context.Background(), storagetest.New(t).DB)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK || r.Entries != 0 || r.Wallets != 0 {
			t.Fatalf("report %+v", r)
		}
	})

	t.Run("Balanced_OK", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		r := b.check(t)
		if !r.OK || r.Entries != 2 || r.Wallets != 2 || len(r.WalletMismatch) != 0 || len(r.NegativeWallets) != 0 {
			t.Fatalf("report %+v", r)
		}
		if sum, ok := r.CurrencySums["KES"]; !ok || !sum.IsZero() {
			t.Fatalf("KES sum %v (present %v)", sum, ok)
		}
	})

	t.Run("UnbalancedEntry_NotOK", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.exec(t, `UPDATE ledger_entries SET amount = amount + 0.01 WHERE account = 'system:sandbox_funding'`)
		r := b.check(t)
		if r.OK {
			t.Fatalf("report OK after unbalancing the ledger: %+v", r)
		}
		if !r.CurrencySums["KES"].Equal(amt("0.01")) {
			t.Fatalf("KES sum %s, want 0.01", r.CurrencySums["KES"])
		}
		if len(r.WalletMismatch) != 0 {
			t.Fatalf("no wallet changed, but mismatches %v", r.WalletMismatch)
		}
	})

	t.Run("SnapshotDiffersFromEntries_Mismatch", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.exec(t, `UPDATE wallets SET current_balance = 150, available_balance = 150 WHERE wallet_id = 'W1'`)
		b.exec(t, `UPDATE wallets SET current_balance = 1, available_balance = 1 WHERE wallet_id = 'W2'`) // no entries at all
		r := b.check(t)
		if r.OK {
			t.Fatal("report OK with wrong snapshots")
		}
		slices.Sort(r.WalletMismatch)
		if fmt.Sprint(r.WalletMismatch) != "[W1 W2]" || len(r.NegativeWallets) != 0 {
			t.Fatalf("mismatches %v negatives %v", r.WalletMismatch, r.NegativeWallets)
		}
		if !r.CurrencySums["KES"].IsZero() {
			t.Fatalf("entries still balance, but sum %s", r.CurrencySums["KES"])
		}
	})

	t.Run("EntryMovedBetweenWallets_Mismatch", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		// Still balanced per currency, but W1's entry now belongs to W2.
		b.exec(t, `UPDATE ledger_entries SET wallet_id = 'W2', account = 'wallet:W2' WHERE wallet_id = 'W1'`)
		r := b.check(t)
		slices.Sort(r.WalletMismatch)
		if r.OK || fmt.Sprint(r.WalletMismatch) != "[W1 W2]" {
			t.Fatalf("report %+v", r)
		}
	})

	t.Run("NegativeWallet_Reported", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.dropWalletChecks(t)
		b.exec(t, `UPDATE wallets SET available_balance = -5 WHERE wallet_id = 'W2'`)
		r := b.check(t)
		if r.OK || fmt.Sprint(r.NegativeWallets) != "[W2]" {
			t.Fatalf("report %+v, want W2 negative", r)
		}
	})
}

// holdSources writes one open hold of each kind on W1 (100.00): a payment file
// holding 30.00, a PENDING refund of 20.00 and an uncleared card collection of
// 10.00; plus a finished one of each, which hold nothing.
func (b ledgerBundle) holdSources(t *testing.T) {
	t.Helper()
	b.exec(t, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at) VALUES
		('F1', 'M1', gen_random_uuid(), 'PROCESSING', 2, '{"wallet_id": "W1", "held": "30.00"}', now(), now()),
		('F2', 'M1', gen_random_uuid(), 'COMPLETE', 3, '{"wallet_id": "W1", "held": "0.00"}', now(), now())`)
	b.exec(t, `INSERT INTO refund_books (invoice_id, merchant_id, version, data, created_at, updated_at)
		VALUES ('I1', 'M1', 1, '{}', now(), now())`)
	b.exec(t, `INSERT INTO refunds (id, merchant_id, invoice_id, status, data, created_at, updated_at) VALUES
		(1, 'M1', 'I1', 'PENDING', '{"wallet_id": "W1", "amount": "20.00"}', now(), now()),
		(2, 'M1', 'I1', 'COMPLETED', '{"wallet_id": "W1", "amount": "7.00"}', now(), now()),
		(3, 'M1', 'I1', 'CANCELLED', '{"wallet_id": "W1", "amount": "8.00"}', now(), now())`)
	b.exec(t, `INSERT INTO invoices (invoice_id, merchant_id, state, version, data, created_at, updated_at) VALUES
		('I1', 'M1', 'COMPLETE', 2, '{"wallet_id": "W1", "provider": "CARD", "net_amount": "10.00"}', now(), now()),
		('I2', 'M1', 'COMPLETE', 3, '{"wallet_id": "W1", "provider": "CARD", "net_amount": "4.00", "cleared": true}', now(), now()),
		('I3', 'M1', 'COMPLETE', 2, '{"wallet_id": "W1", "provider": "MPESA", "net_amount": "5.00", "cleared": true}', now(), now())`)
}

func TestCheckLedger_Holds(t *testing.T) {
	t.Parallel()

	t.Run("HeldFundsAreTheOpenHolds_OK", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.holdSources(t)
		b.exec(t, `UPDATE wallets SET available_balance = 40 WHERE wallet_id = 'W1'`) // 100 - (30 + 20 + 10)
		if r := b.check(t); !r.OK || len(r.HoldMismatches) != 0 {
			t.Fatalf("report %+v, want OK: W1's 60.00 held is its file, refund and uncleared collection", r)
		}
	})

	t.Run("AvailableLoweredWithoutHold_Mismatch", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.exec(t, `UPDATE wallets SET available_balance = 95 WHERE wallet_id = 'W1'`)
		r := b.check(t)
		if r.OK || len(r.HoldMismatches) != 1 {
			t.Fatalf("report %+v, want W1's 5.00 held with no open hold", r)
		}
		m := r.HoldMismatches[0]
		if m.WalletID != "W1" || !m.Held.Equal(amt("5.00")) || !m.Open.IsZero() {
			t.Fatalf("finding %+v, want W1 held 5.00, open 0", m)
		}
		// The snapshot still equals its entries: only the hold check sees it.
		if len(r.WalletMismatch) != 0 || len(r.NegativeWallets) != 0 || !r.CurrencySums["KES"].IsZero() {
			t.Fatalf("report %+v", r)
		}
		// The continuous audit's heuristic finds it too (ledgeraudit.go: orphaned_hold).
		a, err := storage.AuditLedger(b.ctx, b.db, true, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if a.Imbalances[storage.ImbalanceOrphanedHold] != 1 {
			t.Fatalf("audit %+v, want the orphaned hold", a)
		}
	})

	t.Run("HoldsExceedHeldFunds_Mismatch", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.holdSources(t)
		// One open hold's worth (the refund's 20.00) was never set aside.
		b.exec(t, `UPDATE wallets SET available_balance = 60 WHERE wallet_id = 'W1'`)
		r := b.check(t)
		if r.OK || len(r.HoldMismatches) != 1 {
			t.Fatalf("report %+v, want W1 short of its holds", r)
		}
		m := r.HoldMismatches[0]
		if m.WalletID != "W1" || !m.Held.Equal(amt("40.00")) || !m.Open.Equal(amt("60.00")) ||
			!m.Files.Equal(amt("30.00")) || !m.Refunds.Equal(amt("20.00")) || !m.Uncleared.Equal(amt("10.00")) {
			t.Fatalf("finding %+v", m)
		}
	})

	t.Run("HoldOnMissingWallet_Mismatch", func(t *testing.T) {
		t.Parallel()
		b := setupLedger(t)
		b.exec(t, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
			VALUES ('F9', 'M1', gen_random_uuid(), 'PROCESSING', 2, '{"wallet_id": "W9", "held": "3.00"}', now(), now())`)
		r := b.check(t)
		if r.OK || len(r.HoldMismatches) != 1 || r.HoldMismatches[0].WalletID != "W9" || !r.HoldMismatches[0].Open.Equal(amt("3.00")) {
			t.Fatalf("report %+v, want W9's hold reported", r)
		}
	})
}
