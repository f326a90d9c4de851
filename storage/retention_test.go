package storage_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// mustExec runs one statement of a test's setup; a failure names the statement.
func mustExec(t testing.TB, db *sqlx.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestTrimProcessedReplies(t *testing.T) {
	t.Parallel()
	db := storagetest.New(t).DB
	ctx := context.Background()
	// 5 old commands with replies, 1 old with an already-empty reply, 2 recent.
	for i := range 8 {
		age, reply := "10 days", `{"command_id":"x"}`
		if i >= 6 {
			age = "1 hour"
		}
		if i == 5 {
			reply = ""
		}
		mustExec(t, db, `INSERT INTO processed_commands (command_id, merchant_id, command_type, kafka_partition, kafka_offset, reply, processed_at)
			VALUES ($1, 'M1', 'wallet.transfer', 0, $2, convert_to($3, 'UTF8'), now() - $4::interval)`, fmt.Sprintf("c%d", i), i, reply, age)
	}
	week := 7 * 24 * time.Hour
	n, err := storage.TrimProcessedReplies(ctx, db, week, 3)
	if err != nil || n != 3 {
		t.Fatalf("first batch: %d, %v; want 3 (the limit)", n, err)
	}
	n, err = storage.TrimProcessedReplies(ctx, db, week, 3)
	if err != nil || n != 2 {
		t.Fatalf("second batch: %d, %v; want the 2 old ones left", n, err)
	}
	var kept, rows int
	if err := db.Get(&kept, `SELECT count(*) FROM processed_commands WHERE octet_length(reply) > 0`); err != nil {
		t.Fatal(err)
	}
	rows = count(t, db, "processed_commands")
	if kept != 2 || rows != 8 {
		t.Fatalf("replies kept %d (want the 2 recent), rows %d (want all 8: the dedupe set stays)", kept, rows)
	}
	// The engine's lookup still finds every trimmed command, so it is never applied again.
	done, _, err := storage.ProcessedReplies(ctx, db, []string{"c0", "c5", "c7", "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	_, c0 := done["c0"]
	_, unknown := done["unknown"]
	if !c0 || len(done["c0"]) != 0 || len(done["c7"]) == 0 || unknown {
		t.Fatalf("lookup after trim: %q", done)
	}
}

func TestPruneWebhookEvents(t *testing.T) {
	t.Parallel()
	db := storagetest.New(t).DB
	ctx := context.Background()
	mustExec(t, db, `INSERT INTO merchants (merchant_id, name, environment, enabled) VALUES ('M1', 'Acme', 'sandbox', true)`)
	mustExec(t, db, `INSERT INTO webhooks (webhook_id, merchant_id, endpoint, challenge) VALUES ('W1', 'M1', 'https://example.com', 's')`)
	add := func(id, status, age string) {
		mustExec(t, db, `INSERT INTO webhook_deliveries (event_id, webhook_id, merchant_id, topic, body, status, created_at)
			VALUES ($1, 'W1', 'M1', 'wallet_transfer_event', '\x7b7d', $2, now() - $3::interval)`, id, status, age)
		mustExec(t, db, `INSERT INTO webhook_attempts (event_id, webhook_id, http_status, latency_ms) VALUES ($1, 'W1', 200, 5)`, id)
	}
	add("old-delivered", "DELIVERED", "40 days")
	add("old-failed", "FAILED", "40 days")
	add("old-pending", "PENDING", "40 days")       // still owed: never pruned
	add("old-processing", "PROCESSING", "40 days") // a retry is due: never pruned
	add("new-delivered", "DELIVERED", "1 day")
	n, err := storage.PruneWebhookEvents(ctx, db, 30*24*time.Hour, 100)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	var left []string
	if err := db.Select(&left, `SELECT event_id FROM webhook_deliveries ORDER BY event_id`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[new-delivered old-pending old-processing]" {
		t.Fatalf("left %v", left)
	}
	var orphans int
	if err := db.Get(&orphans, `SELECT count(*) FROM webhook_attempts a WHERE NOT EXISTS
		(SELECT 1 FROM webhook_deliveries d WHERE d.event_id = a.event_id AND d.webhook_id = a.webhook_id)`); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 || count(t, db, "webhook_attempts") != 3 {
		t.Fatalf("attempts: %d orphans, %d rows; want 0 and 3", orphans, count(t, db, "webhook_attempts"))
	}
	if n, err := storage.PruneWebhookEvents(ctx, db, 30*24*time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("second run pruned %d, %v; want 0", n, err)
	}
}

// Migration 0017 gives claims_key to the transactions that held their key before the
// engine wrote their rows at approval, by payoutstore.ClaimsKey's rule, and to no other.
func TestMigration0017ClaimsKeysOfApprovedFiles(t *testing.T) {
	t.Parallel()
	db := storagetest.New(t).DB
	mustExec(t, db, `INSERT INTO merchants (merchant_id, name, environment, enabled) VALUES ('M1', 'Acme', 'sandbox', true)`)
	file := func(id, status string) {
		mustExec(t, db, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
			VALUES ($1, 'M1', gen_random_uuid(), $2, 1, '{}', now(), now())`, id, status)
	}
	seq := 0
	txn := func(id, fileID, status string, key any) {
		seq++
		mustExec(t, db, `INSERT INTO payout_transactions (transaction_id, file_id, merchant_id, seq, status, provider, account,
			idempotency_key, claims_key, data, created_at, updated_at)
			VALUES ($1, $2, 'M1', $3, $4, 'MPESA-B2C', '254708374149', $5, false, '{}', now(), now())`, id, fileID, seq, status, key)
	}
	file("APPROVED", "PROCESSING")
	file("DONE", "COMPLETE")
	file("PREVIEW", "PREVIEW-AND-APPROVE")
	file("CANCELLED", "CANCELLED")
	txn("held-pending", "APPROVED", "PENDING", "k1")
	txn("held-paid", "DONE", "COMPLETE", "k2")
	txn("failed", "APPROVED", "FAILED", "k3")
	txn("no-key", "APPROVED", "PENDING", nil)
	txn("not-approved", "PREVIEW", "PENDING", "k4")
	txn("cancelled", "CANCELLED", "PENDING", "k5")
	sql, err := os.ReadFile("migrations/0017_payout_key_claims.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, string(sql))
	var claimed []string
	if err := db.Select(&claimed, `SELECT transaction_id FROM payout_transactions WHERE claims_key ORDER BY transaction_id`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(claimed) != "[held-paid held-pending]" {
		t.Fatalf("claims_key set on %v, want [held-paid held-pending]", claimed)
	}
}
