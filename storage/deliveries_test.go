package storage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/waittest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// A dispatcher whose lease of a queue ran out before it wrote its outcomes (it was
// slow) finds the queue claimed by another: its outcomes are recorded, but it
// neither goes on with the queue nor gives it back, so only the new holder sends
// the aggregate's events. Without the lease ids, the slow one went on to the next
// event while the other was sending the earlier ones again: the receiver saw a
// later event of the aggregate before earlier ones repeated (the cluster test's
// finding).
func TestStaleLeaseHolderStepsAside(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	merchantWithWebhook(t, db)
	delivery := func(n int) storage.NewDelivery {
		return storage.NewDelivery{EventID: fmt.Sprintf("E%d", n), WebhookID: "W1", MerchantID: "M1", Topic: "wallet_transfer_event",
			AggKey: "WALLET-A", Partition: 3, Offset: int64(n), Body: []byte(`{}`)}
	}
	const lease = 300 * time.Millisecond

	// Dispatcher A records T1 and T2 and holds their new queue.
	insA, err := storage.InsertDeliveries(ctx, db, []storage.NewDelivery{delivery(1), delivery(2)}, 1, lease)
	if err != nil || len(insA.Leased) != 1 || insA.Leased[0].ID == 0 {
		t.Fatalf("insert: %+v %v", insA, err)
	}
	leaseA := insA.Leased[0]
	// T3 arrives while A holds the queue: it waits its turn.
	if ins, err := storage.InsertDeliveries(ctx, db, []storage.NewDelivery{delivery(3)}, 1, lease); err != nil || len(ins.New) != 1 || len(ins.Leased) != 0 {
		t.Fatalf("insert T3 into a held queue: %+v %v", ins, err)
	}

	// A sends T1 and T2 but is slow to write that down: its lease runs out, and B
	// claims the queue, from T1. A lease runs by the database clock (now() in
	// SQL), which a test cannot move; the queue's lease end is moved past instead,
	// as the time passing would.
	if _, err := db.ExecContext(ctx, `UPDATE webhook_queues SET next_attempt_at = next_attempt_at - $1 * interval '1 millisecond'
		WHERE webhook_id = 'W1'`, (lease + 100*time.Millisecond).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	claimedB, err := storage.ClaimQueues(ctx, db, time.Minute, 10, 10)
	if err != nil || len(claimedB) != 1 || len(claimedB[0].Deliveries) != 3 || claimedB[0].Deliveries[0].EventID != "E1" {
		t.Fatalf("B's claim: %+v %v", claimedB, err)
	}
	if claimedB[0].LeaseID == leaseA.ID {
		t.Fatalf("B's lease has A's id %d", leaseA.ID)
	}

	// A's outcomes arrive now, asking to go on with the queue.
	delivered := func(n int) storage.Outcome {
		s := 200
		return storage.Outcome{EventID: fmt.Sprintf("E%d", n), WebhookID: "W1", Status: "DELIVERED", Next: time.Now(),
			Attempted: true, Recorded: true, HTTPStatus: &s}
	}
	res, err := storage.FinishDeliveries(ctx, db, storage.Finish{Outcomes: []storage.Outcome{delivered(1), delivered(2)},
		Continue: []storage.QueueLease{leaseA}, Lease: time.Minute, PerQueue: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Next) != 0 || res.Lost != 1 {
		t.Fatalf("A went on with a queue B holds: next %+v, lost %d", res.Next, res.Lost)
	}
	// A asking to give it back (due now) must not make it due either: a third
	// dispatcher would claim it while B sends.
	if res, err := storage.FinishDeliveries(ctx, db, storage.Finish{Due: []storage.QueueNext{{Queue: leaseA.Queue, LeaseID: leaseA.ID, Next: time.Now()}}}); err != nil || res.Lost != 1 {
		t.Fatalf("A gives back B's queue: %+v %v", res, err)
	}
	if c, err := storage.ClaimQueues(ctx, db, time.Minute, 10, 10); err != nil || len(c) != 0 {
		t.Fatalf("a queue B holds was claimed again: %+v %v", c, err)
	}

	// A's results stand (T1 and T2 went through) ...
	var statuses []string
	if err := db.SelectContext(ctx, &statuses, `SELECT status FROM webhook_deliveries ORDER BY src_offset`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(statuses) != "[DELIVERED DELIVERED PENDING]" {
		t.Fatalf("statuses %v", statuses)
	}
	// ... and a late outcome never takes a delivery back out of DELIVERED: B's
	// attempt of T1 failing after A's success leaves it delivered, so nobody sends
	// it again after T3.
	failed := storage.Outcome{EventID: "E1", WebhookID: "W1", Status: "PROCESSING", Next: time.Now(), Attempted: true, Recorded: true}
	res, err = storage.FinishDeliveries(ctx, db, storage.Finish{Outcomes: []storage.Outcome{failed, delivered(2), delivered(3)},
		Continue: []storage.QueueLease{claimedB[0].Lease()}, Lease: time.Minute, PerQueue: 10})
	if err != nil || res.Lost != 0 {
		t.Fatalf("B's finish: %+v %v", res, err)
	}
	if err := db.SelectContext(ctx, &statuses, `SELECT status FROM webhook_deliveries ORDER BY src_offset`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(statuses) != "[DELIVERED DELIVERED DELIVERED]" {
		t.Fatalf("statuses after B %v", statuses)
	}
	var attempts, queues int
	if err := db.GetContext(ctx, &attempts, `SELECT count(*) FROM webhook_attempts`); err != nil || attempts != 5 {
		t.Fatalf("%d attempts recorded, want every one of the 5 made: %v", attempts, err)
	}
	// B went on, found nothing left, and the queue is gone.
	if err := db.GetContext(ctx, &queues, `SELECT count(*) FROM webhook_queues`); err != nil || queues != 0 || len(res.Next) != 0 {
		t.Fatalf("%d queues left, next %+v: %v", queues, res.Next, err)
	}
}

// The events list's count and its page come from one snapshot: while deliveries
// are recorded all the time, a page that holds every delivery always has exactly
// count of them. Read in two statements, a delivery recorded between them was in
// the page and not in the count (seen: "count": 0 beside one result).
func TestListDeliveriesCountAgreesWithPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	merchantWithWebhook(t, db)
	const writes = 400
	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		defer close(wrote)
		for n := range writes {
			select {
			case <-stop:
				return
			default:
			}
			// Each its own transaction, committing while the reader reads.
			if _, err := db.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, webhook_id, merchant_id, topic, agg_key,
				src_partition, src_offset, body) VALUES ($1, 'W1', 'M1', 'wallet_transfer_event', 'A', 0, $2, '{}')`,
				fmt.Sprintf("E%04d", n), n); err != nil {
				wrote <- err
				return
			}
		}
	}()
	defer close(stop)
	for i := 0; i < 300; i++ {
		rows, total, err := storage.ListDeliveries(ctx, db, "M1", "", "", time.Time{}, writes+1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != total {
			t.Fatalf("read %d: count %d beside a page of %d (every delivery fits the page)", i, total, len(rows))
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// Deleting a webhook while a dispatcher writes its outcomes: the dispatcher holds
// one of the webhook's queues and then takes the webhook row (FinishDeliveries);
// the delete takes the queues before the webhook, the same order, so both finish.
// Deleting the webhook row first, and its queues in the cascade, deadlocked with
// the dispatcher and answered the merchant's DELETE with a 500.
func TestDeleteWebhookBesideADispatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := storagetest.New(t)
	db := schema.DB
	merchantWithWebhook(t, db)
	if _, err := storage.InsertDeliveries(ctx, db, []storage.NewDelivery{{EventID: "E1", WebhookID: "W1", MerchantID: "M1",
		Topic: "wallet_transfer_event", AggKey: "A", Partition: 0, Offset: 1, Body: []byte(`{}`)}}, 1, time.Minute); err != nil {
		t.Fatal(err)
	}

	// The dispatcher's finish: its queue locked first.
	disp, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer disp.Rollback() //nolint:errcheck // committed below
	if _, err := disp.ExecContext(ctx, `SELECT 1 FROM webhook_queues WHERE webhook_id = 'W1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- storage.DeleteWebhook(ctx, db, "M1", "W1") }()
	waittest.Eventually(t, 10*time.Second, func() (bool, string) {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
			schema.Name); err != nil {
			t.Fatal(err)
		}
		return n > 0, "the delete never waited for the dispatcher's queue"
	})
	// ... then the webhook row, as FinishDeliveries counts its failures.
	if _, err := disp.ExecContext(ctx, `SELECT 1 FROM webhooks WHERE webhook_id = 'W1' FOR NO KEY UPDATE`); err != nil {
		t.Fatalf("the dispatcher's finish: %v", err)
	}
	if err := disp.Commit(); err != nil {
		t.Fatalf("the dispatcher's finish: %v", err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("delete the webhook: %v", err)
	}
	var left int
	if err := db.GetContext(ctx, &left, `SELECT (SELECT count(*) FROM webhooks) + (SELECT count(*) FROM webhook_queues)
		+ (SELECT count(*) FROM webhook_deliveries)`); err != nil || left != 0 {
		t.Fatalf("%d rows left after the delete: %v", left, err)
	}
}

// A dispatcher whose recording committed but whose answer was lost (the database
// dropped the connection) records the same events again under the same lease
// token: the queues the lost call leased to it, which nobody is sending, are due at
// once for a claim, instead of waiting out their lease (a minute) with their events
// undelivered. Another caller's token leaves them leased.
func TestUnansweredInsertFreesItsLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	merchantWithWebhook(t, db)
	rows := []storage.NewDelivery{{EventID: "E1", WebhookID: "W1", MerchantID: "M1", Topic: "wallet_transfer_event",
		AggKey: "A", Partition: 0, Offset: 1, Body: []byte(`{}`)}}
	token, err := storage.NewLeaseToken(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// The call whose answer is lost: it leased the new queue under token.
	if lost, err := storage.InsertDeliveriesAs(ctx, db, rows, 1, time.Minute, token); err != nil || len(lost.Leased) != 1 || lost.Leased[0].ID != token {
		t.Fatalf("first insert: %+v %v", lost, err)
	}
	if c, err := storage.ClaimQueues(ctx, db, time.Minute, 10, 10); err != nil || len(c) != 0 {
		t.Fatalf("a leased queue was claimed: %+v %v", c, err)
	}
	// Another dispatcher's token does not free it.
	other, err := storage.NewLeaseToken(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := storage.InsertDeliveriesAs(ctx, db, rows, 1, time.Minute, other); err != nil || len(again.New)+len(again.Leased) != 0 {
		t.Fatalf("insert under another token: %+v %v", again, err)
	}
	if c, err := storage.ClaimQueues(ctx, db, time.Minute, 10, 10); err != nil || len(c) != 0 {
		t.Fatalf("another token freed the queue: %+v %v", c, err)
	}
	// The retry under the lost call's token: nothing new, nothing leased, and the
	// queue is claimable now, with its delivery.
	again, err := storage.InsertDeliveriesAs(ctx, db, rows, 1, time.Minute, token)
	if err != nil || len(again.New) != 0 || len(again.Leased) != 0 {
		t.Fatalf("retry: %+v %v", again, err)
	}
	c, err := storage.ClaimQueues(ctx, db, time.Minute, 10, 10)
	if err != nil || len(c) != 1 || len(c[0].Deliveries) != 1 || c[0].Deliveries[0].EventID != "E1" || c[0].LeaseID == token {
		t.Fatalf("claim after the retry: %+v %v", c, err)
	}
}

// merchantWithWebhook makes merchant M1 with webhook W1 on wallet transfers: the
// queue and delivery tests' fixture.
func merchantWithWebhook(t *testing.T, db *sqlx.DB) {
	t.Helper()
	ctx := context.Background()
	if err := storage.InsertMerchant(ctx, db, storage.Merchant{MerchantID: "M1", Name: "m", Environment: "sandbox", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := storage.InsertWebhook(ctx, db, storage.Webhook{WebhookID: "W1", MerchantID: "M1", Endpoint: "https://example.com/h",
		Challenge: "c", IsActive: true, WalletTransferEvent: true, CreatedAt: now, UpdatedAt: now, SigningSecret: make([]byte, 32)}); err != nil {
		t.Fatal(err)
	}
}
