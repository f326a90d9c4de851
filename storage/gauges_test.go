package storage_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// TestDashboardGauges checks the database gauges' reads against rows written by
// hand: each counts only its environment's rows of the state it names, the
// wallet totals are exact, and each counted read can use its partial index.
func TestDashboardGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	mustExec(t, db, `INSERT INTO merchants (merchant_id, name, environment) VALUES ('MS', 'Sandbox', 'sandbox'), ('ML', 'Live', 'live')`)
	file := func(id, merchant, status string) {
		mustExec(t, db, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
			VALUES ($1, $2, gen_random_uuid(), $3, 1, '{}', now() - interval '5 minutes', now())`, id, merchant, status)
	}
	file("F1", "MS", "PREVIEW-AND-APPROVE")
	file("F2", "MS", "PROCESSING")
	file("F3", "ML", "PREVIEW-AND-APPROVE")
	hook := func(id, merchant string, active bool) {
		mustExec(t, db, `INSERT INTO webhooks (webhook_id, merchant_id, endpoint, challenge, is_active) VALUES ($1, $2, 'https://example.com/h', 'c', $3)`, id, merchant, active)
	}
	hook("H1", "MS", true)
	hook("H2", "MS", false)
	hook("H3", "ML", false)
	delivery := func(event, hook, merchant, status string) {
		mustExec(t, db, `INSERT INTO webhook_deliveries (event_id, webhook_id, merchant_id, topic, body, status) VALUES ($1, $2, $3, 't', '\x7b7d', $4)`, event, hook, merchant, status)
	}
	delivery("E1", "H1", "MS", "PENDING")
	delivery("E2", "H1", "MS", "PROCESSING")
	delivery("E3", "H1", "MS", "DELIVERED")
	delivery("E4", "H3", "ML", "PENDING")
	wallet := func(id, merchant, currency, label, current, available string) {
		mustExec(t, db, `INSERT INTO wallets (wallet_id, merchant_id, currency, wallet_type, label, current_balance, available_balance, version, created_at, updated_at)
			VALUES ($1, $2, $3, 'WORKING', $4, $5, $6, 1, now(), now())`, id, merchant, currency, label, current, available)
	}
	wallet("W1", "MS", "KES", "a", "100.10", "90.05")
	wallet("W2", "MS", "KES", "b", "0.20", "0.20")
	wallet("W3", "MS", "USD", "c", "7.00", "7.00")
	wallet("W4", "ML", "KES", "d", "1000000.00", "1000000.00")

	n, age, err := storage.FilesAwaitingApproval(ctx, db, "sandbox")
	if err != nil || n != 1 || age < 290 || age > 400 {
		t.Errorf("files awaiting approval: %d, oldest %vs, %v; want 1, ~300", n, age, err)
	}
	if n, err := storage.DisabledWebhooks(ctx, db, "sandbox"); err != nil || n != 1 {
		t.Errorf("disabled webhooks: %d %v, want 1", n, err)
	}
	if n, err := storage.WebhookBacklog(ctx, db, "sandbox"); err != nil || n != 2 {
		t.Errorf("webhook backlog: %d %v, want 2", n, err)
	}
	if n, err := storage.DisabledWebhooks(ctx, db, "live"); err != nil || n != 1 {
		t.Errorf("live disabled webhooks: %d %v, want 1", n, err)
	}
	totals, err := storage.WalletTotals(ctx, db, "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if len(totals) != 2 || totals[0].Currency != "KES" || !totals[0].Current.Equal(money.MustParse("100.30")) ||
		!totals[0].Available.Equal(money.MustParse("90.25")) || totals[1].Currency != "USD" || !totals[1].Current.Equal(money.MustParse("7.00")) {
		t.Errorf("wallet totals: %+v, want KES 100.30/90.25 and USD 7.00", totals)
	}

	// Each counted read can be answered from its partial index, whatever the
	// table holds besides (the planner prefers a scan of tables this small, so
	// scans are switched off to ask whether the index fits the query at all).
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for index, q := range storage.GaugeReads {
		var plan []string
		args := []any{"sandbox"}
		if strings.Contains(q, "$2") {
			args = append(args, storage.BacklogCap)
		}
		if err := tx.SelectContext(ctx, &plan, `EXPLAIN `+q, args...); err != nil {
			t.Fatal(err)
		}
		p, used := strings.Join(plan, "\n"), false
		for _, ix := range strings.Split(index, "|") {
			used = used || strings.Contains(p, " "+ix+" ")
		}
		if !used {
			t.Errorf("%s does not use %s:\n%s", q, index, p)
		}
	}
}
