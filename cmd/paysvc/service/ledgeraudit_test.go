package service_test

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// metricValue is the value of the series named exactly series (name plus its
// labels as exposed) in a scrape, and whether it is there.
func metricValue(scrape, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(scrape))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// The relay role audits the ledger on its schedule and exports the finding: a
// sound ledger is 1, an unbalanced entry or a changed snapshot written by SQL
// turns it to 0 at the next run, with the imbalance counted by kind.
func TestLedgerAuditMetrics(t *testing.T) {
	env := servicetest.Start(t, func(c *service.Config) {
		c.LedgerAudit = service.LedgerAudit{Interval: 100 * time.Millisecond, FullInterval: time.Hour}
	})
	m := env.Merchant("Acme")
	key := m.SecretKey
	wallet := env.Settlement(servicetest.Bearer(key))
	env.Deposit(servicetest.Bearer(key), wallet, "10.00")

	// waitFor scrapes until every series has its value.
	waitFor := func(what string, want map[string]float64) {
		t.Helper()
		waittest.Eventually(t, 10*time.Second, func() (bool, string) {
			scrape := env.Metrics()
			bad := ""
			for s, v := range want {
				if got, ok := metricValue(scrape, s); !ok || got < v || (v <= 1 && got != v) {
					bad += "\n" + s + " = " + strconv.FormatFloat(got, 'f', -1, 64) + " (present " + strconv.FormatBool(ok) + "), want " + strconv.FormatFloat(v, 'f', -1, 64)
				}
			}
			return bad == "", what + ":" + bad
		})
	}
	waitFor("a sound ledger", map[string]float64{
		`paysvc_ledger_check_ok`:                                        1,
		`paysvc_ledger_imbalances{kind="currency_sum"}`:                 0,
		`paysvc_ledger_imbalances{kind="snapshot"}`:                     0,
		`paysvc_ledger_imbalances{kind="orphaned_hold"}`:                0,
		`paysvc_ledger_check_entries_audited_total{mode="incremental"}`: 2, // at least the deposit's two entries
	})
	before, _ := metricValue(env.Metrics(), `paysvc_ledger_check_last_success_timestamp_seconds`)
	if time.Since(time.Unix(int64(before), 0)) > time.Minute {
		t.Fatalf("last success at %v", before)
	}

	ctx := context.Background()
	if _, err := env.Schema.DB.ExecContext(ctx, `INSERT INTO ledger_entries (transaction_id, command_id, merchant_id, account,
		currency, amount, trans_type, narrative, created_at) VALUES ('BAD', 'BAD', $1, 'system:sandbox_funding', 'KES', 0.01, 'DEPOSIT', 'x', now())`,
		m.MerchantID); err != nil {
		t.Fatal(err)
	}
	waitFor("an unbalanced entry", map[string]float64{
		`paysvc_ledger_check_ok`:                        0,
		`paysvc_ledger_imbalances{kind="currency_sum"}`: 1,
		`paysvc_ledger_imbalances{kind="snapshot"}`:     0,
	})
	if _, err := env.Schema.DB.ExecContext(ctx, `UPDATE wallets SET current_balance = current_balance + 5,
		available_balance = available_balance + 5 WHERE wallet_id = $1`, wallet); err != nil {
		t.Fatal(err)
	}
	waitFor("a changed snapshot", map[string]float64{
		`paysvc_ledger_check_ok`:                        0,
		`paysvc_ledger_imbalances{kind="currency_sum"}`: 1,
		`paysvc_ledger_imbalances{kind="snapshot"}`:     1,
	})
	if !strings.Contains(env.Logs.String(), "ledger audit found imbalances") {
		t.Fatal("the imbalance was not logged")
	}

	// A second relay instance on the same database waits as a standby: one
	// session holds the audit's lock.
	peer := servicetest.StartPeer(t, env, "sandbox", service.RoleRelay)
	// Several of the peer's intervals. This sleep proves an absence and stays: a
	// standby's tries leave no trace of their own to wait for (the job counters
	// are the process's, shared with this test's relay and every other test's).
	time.Sleep(500 * time.Millisecond)
	var holders int
	if err := env.Schema.DB.GetContext(ctx, &holders, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = $1 AND objid = hashtext($2)::oid AND objsubid = 2`, storage.AuditLock, env.Schema.Name); err != nil {
		t.Fatal(err)
	}
	if holders != 1 {
		t.Fatalf("%d sessions hold the ledger audit lock, want 1", holders)
	}
	if strings.Contains(peer.Logs.String(), "this instance audits the ledger") {
		t.Fatal("the standby relay audits the ledger too")
	}
}
