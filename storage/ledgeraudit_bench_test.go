package storage_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// BenchmarkLedgerAudit measures the audit on a large ledger: it seeds
// PAYSVC_LEDGER_AUDIT_BENCH_ENTRIES entries (default 1,000,000) over 10,000 wallets
// with generate_series, then times CheckLedger (the CLI's full check) and a full
// audit once, and the incremental audit after each typical minute of traffic
// (2,000 new entries) as the benchmark's loop (docs/benchmarks-history.md):
//
//	PAYSVC_LEDGER_AUDIT_BENCH_ENTRIES=10000000 go test ./storage -run '^$' -bench LedgerAudit -benchtime 5x
func BenchmarkLedgerAudit(t *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("PAYSVC_LEDGER_AUDIT_BENCH_ENTRIES"))
	if n == 0 {
		n = 1_000_000
	}
	ctx := context.Background()
	db := storagetest.New(t).DB
	const wallets = 10_000
	start := time.Now()
	mustExec(t, db, `INSERT INTO merchants (merchant_id, name, environment, enabled, created_at) VALUES ('M1', 'M1', 'sandbox', true, now())`)
	mustExec(t, db, `INSERT INTO wallets (wallet_id, merchant_id, currency, wallet_type, label, version, created_at, updated_at)
		SELECT 'W' || g, 'M1', 'KES', 'WORKING', 'w' || g, 1, now(), now() FROM generate_series(1, $1) g`, wallets)
	// Pairs: a wallet's credit and the funding account's debit.
	mustExec(t, db, `INSERT INTO ledger_entries (transaction_id, command_id, merchant_id, account, wallet_id, currency, amount, trans_type, narrative, created_at)
		SELECT 'T' || (g / 2), 'C' || (g / 2), 'M1',
		       CASE WHEN g % 2 = 0 THEN 'wallet:W' || ((g / 2) % $2 + 1) ELSE 'system:sandbox_funding' END,
		       CASE WHEN g % 2 = 0 THEN 'W' || ((g / 2) % $2 + 1) END, 'KES',
		       CASE WHEN g % 2 = 0 THEN 1.00 ELSE -1.00 END, 'DEPOSIT', 'bench', now()
		  FROM generate_series(0, $1 - 1) g`, n, wallets)
	mustExec(t, db, `UPDATE wallets w SET current_balance = s.t, available_balance = s.t
		FROM (SELECT wallet_id, sum(amount) t FROM ledger_entries WHERE wallet_id IS NOT NULL GROUP BY wallet_id) s WHERE s.wallet_id = w.wallet_id`)
	mustExec(t, db, `VACUUM ANALYZE ledger_entries`)
	mustExec(t, db, `VACUUM ANALYZE wallets`)
	t.Logf("seeded %d entries over %d wallets in %v", n, wallets, time.Since(start).Round(time.Second))

	once := map[string]float64{} // reported after the loop: ResetTimer clears metrics
	timed := func(what, unit string, f func() error) {
		t.Helper()
		s := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		d := time.Since(s)
		t.Logf("%-36s %v", what, d.Round(time.Millisecond))
		once[unit] = d.Seconds()
	}
	timed("CheckLedger (paysvc ledger check)", "check-s", func() error {
		r, err := storage.CheckLedger(ctx, db)
		if err == nil && !r.OK {
			t.Fatalf("seeded ledger not OK: %+v", r)
		}
		return err
	})
	timed("AuditLedger full", "full-s", func() error {
		r, err := storage.AuditLedger(ctx, db, true, 5*time.Second)
		if err == nil && (!r.OK || r.Read != int64(n)) {
			t.Fatalf("full audit %+v", r)
		}
		return err
	})
	// A minute of traffic at ~17 transfers a second: 2,000 entries.
	minute := func() {
		mustExec(t, db, `INSERT INTO ledger_entries (transaction_id, command_id, merchant_id, account, wallet_id, currency, amount, trans_type, narrative, created_at)
		SELECT 'N' || (g / 2), 'N' || (g / 2), 'M1', CASE WHEN g % 2 = 0 THEN 'wallet:W1' ELSE 'system:sandbox_funding' END,
		       CASE WHEN g % 2 = 0 THEN 'W1' END, 'KES', CASE WHEN g % 2 = 0 THEN 1.00 ELSE -1.00 END, 'DEPOSIT', 'bench', now()
		  FROM generate_series(0, 1999) g`)
		mustExec(t, db, `UPDATE wallets SET current_balance = current_balance + 1000, available_balance = available_balance + 1000 WHERE wallet_id = 'W1'`)
	}
	t.ResetTimer()
	for t.Loop() {
		t.StopTimer()
		minute()
		t.StartTimer()
		r, err := storage.AuditLedger(ctx, db, false, 5*time.Second)
		if err != nil || !r.OK || r.Full || r.Read != 2000 {
			t.Fatalf("incremental audit %+v %v", r, err)
		}
	}
	for unit, v := range once {
		t.ReportMetric(v, unit)
	}
}
