package storage_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
