package storage_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/subscription/subscriptionstore"
	"paysvc/storage"
)

func sub(t *testing.T, id string) subscription.State {
	t.Helper()
	s, err := subscription.Apply(subscription.State{}, subscription.Create{SubscriptionID: id, MerchantID: "M1", CustomerID: "C1",
		Plan: subscription.Plan{PlanID: "P1", Frequency: 1, FrequencyUnit: "M", BillingCycles: 2}, StartDate: "2025-01-31",
		SetupTokenHash: "hash-" + id, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// subRows is the engine's generic row of one subscription state (ADR 0004).
func subRows(t *testing.T, prev, version int64, s subscription.State) rawRows {
	t.Helper()
	st, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := json.Marshal([]map[string]any{{"id": s.SubscriptionID, "merchant_id": s.MerchantID, "prev": prev, "version": version,
		"state": json.RawMessage(st)}})
	return rawRows{storage.SubscriptionKind, string(rows)}
}

// paysvc_apply_subscription (storage/functions) with the engine's generic rows:
// insert, the due scan, a charged cycle recorded with its payment, a stale update.
func TestCommitBatchSubscriptions(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	created := sub(t, "S1")
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, subRows(t, 0, 1, created))); err != nil {
		t.Fatal(err)
	}
	// Not billed while PENDING.
	if due, err := storage.DueSubscriptions(b.ctx, b.db, storage.DueQuery{Environment: "sandbox", MerchantID: "M1", Today: "2025-02-01", Limit: 10}); err != nil || len(due) != 0 {
		t.Fatalf("due while pending: %v %v", due, err)
	}
	active, err := subscription.Apply(created, subscription.Activate{CardToken: "tok", CardNetwork: "VISA", CardNumber: "400000******0077",
		CardOutcome: subscription.CardApproves, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, subRows(t, 1, 2, active))); err != nil {
		t.Fatal(err)
	}
	due, err := storage.DueSubscriptions(b.ctx, b.db, storage.DueQuery{Environment: "sandbox", MerchantID: "M1", Today: "2025-01-31", Limit: 10})
	if err != nil || len(due) != 1 || due[0].Date != "2025-01-31" || due[0].Slot != 0 || due[0].MerchantID != "M1" {
		t.Fatalf("due: %+v %v", due, err)
	}
	if due, _ := storage.DueSubscriptions(b.ctx, b.db, storage.DueQuery{Environment: "sandbox", MerchantID: "M1", Today: "2025-01-30", Limit: 10}); len(due) != 0 {
		t.Fatalf("due a day early: %+v", due)
	}
	// A charged cycle: the payment is recorded in the same batch, once.
	charged, err := subscription.Apply(active, subscription.ChargeCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "INV1",
		Approved: true, Payment: &subscription.Payment{InvoiceID: "INV1", Slot: 0, Date: "2025-01-31", Status: "COMPLETE",
			Invoice: json.RawMessage(`{"invoice_id":"INV1","state":"COMPLETE","value":"100.00","currency":"KES"}`)}, At: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 3, subRows(t, 2, 3, charged))); err != nil {
		t.Fatal(err)
	}
	if due, _ := storage.DueSubscriptions(b.ctx, b.db, storage.DueQuery{Environment: "sandbox", MerchantID: "M1", Today: "2025-02-01", Limit: 10}); len(due) != 0 {
		t.Fatalf("due again after the charge: %+v", due)
	}
	pays, _, err := subscriptionstore.Payments(b.ctx, b.db, "M1", "S1", 10, 0)
	if err != nil || len(pays) != 1 || pays[0].Invoice.InvoiceID != "INV1" || pays[0].CycleDate != "2025-01-31" {
		t.Fatalf("payments: %+v %v", pays, err)
	}
	if pays, n, _ := subscriptionstore.Payments(b.ctx, b.db, "M2", "S1", 10, 0); len(pays) != 0 || n != 0 {
		t.Fatalf("another merchant sees the payments: %+v", pays)
	}
	got, err := subscriptionstore.Get(b.ctx, b.db, "M1", "S1")
	if err != nil || got.CompletedCycles != 1 || got.NextDate != "2025-02-28" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := subscriptionstore.Get(b.ctx, b.db, "M2", "S1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another merchant's: %v", err)
	}
	if s, err := subscriptionstore.BySetupToken(b.ctx, b.db, "hash-S1"); err != nil || s.SubscriptionID != "S1" {
		t.Fatalf("by token: %+v %v", s, err)
	}
	// A later change keeps last_payment: the record is not written twice.
	canceled, err := subscription.Apply(charged, subscription.Unsubscribe{At: t0.Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 4, subRows(t, 3, 4, canceled))); err != nil {
		t.Fatal(err)
	}
	if pays, _, _ := subscriptionstore.Payments(b.ctx, b.db, "M1", "S1", 10, 0); len(pays) != 1 {
		t.Fatalf("payments after cancel: %+v", pays)
	}
	// A stale update (from the version before) is refused and writes nothing.
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 5, subRows(t, 3, 4, charged))); !errors.Is(err, storage.ErrStaleSnapshot) {
		t.Fatalf("stale: %v", err)
	}
}

func TestTestClocks(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	c := storage.TestClock{ClockID: "TC1", MerchantID: "M1", FrozenTime: t0, CreatedAt: t0}
	if err := storage.CreateTestClock(b.ctx, b.db, c); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.GetTestClock(b.ctx, b.db, "M2", "TC1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another merchant's clock: %v", err)
	}
	if _, err := storage.AdvanceTestClock(b.ctx, b.db, "M1", "TC1", t0.Add(-time.Hour)); !errors.Is(err, storage.ErrClockBackwards) {
		t.Fatalf("backwards: %v", err)
	}
	got, err := storage.AdvanceTestClock(b.ctx, b.db, "M1", "TC1", t0.Add(48*time.Hour))
	if err != nil || !got.FrozenTime.Equal(t0.Add(48*time.Hour)) {
		t.Fatalf("advance: %+v %v", got, err)
	}
}

// SubscriptionPayments cuts its page in SQL: the limit and offset reach the query,
// the total is counted apart, and a page past the end reads nothing.
func TestSubscriptionPaymentsPagedInSQL(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	s, err := subscription.Apply(subscription.State{}, subscription.Create{SubscriptionID: "S1", MerchantID: "M1", CustomerID: "C1",
		Plan: subscription.Plan{PlanID: "P1", Frequency: 1, FrequencyUnit: "D", BillingCycles: 10}, StartDate: "2025-01-01", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if s, err = subscription.Apply(s, subscription.Activate{CardToken: "tok", CardOutcome: subscription.CardApproves, At: t0}); err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	commit := func(st subscription.State) {
		t.Helper()
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, st.Version, subRows(t, prev, st.Version, st))); err != nil {
			t.Fatal(err)
		}
		prev = st.Version
	}
	commit(s)
	for i := range 5 {
		inv := fmt.Sprintf("INV%d", i)
		if s, err = subscription.Apply(s, subscription.ChargeCycle{Slot: s.Slot, Date: s.NextDate, Today: s.NextDate, InvoiceID: inv, Approved: true,
			Payment: &subscription.Payment{InvoiceID: inv, Slot: s.Slot, Date: s.NextDate, Status: "COMPLETE",
				Invoice: json.RawMessage(`{"invoice_id":"` + inv + `","state":"COMPLETE"}`)}, At: t0}); err != nil {
			t.Fatal(err)
		}
		commit(s)
	}
	pays, total, err := subscriptionstore.Payments(b.ctx, b.db, "M1", "S1", 2, 1)
	if err != nil || total != 5 || len(pays) != 2 || pays[0].Slot != 1 || pays[1].Slot != 2 || pays[1].CycleDate != "2025-01-03" {
		t.Fatalf("page 2 of 2: %+v total %d %v", pays, total, err)
	}
	if pays, total, err := subscriptionstore.Payments(b.ctx, b.db, "M1", "S1", 500, 499_999_500); err != nil || total != 5 || len(pays) != 0 {
		t.Fatalf("a page past the end: %+v total %d %v", pays, total, err)
	}
	if pays, total, _ := subscriptionstore.Payments(b.ctx, b.db, "M2", "S1", 10, 0); len(pays) != 0 || total != 0 {
		t.Fatalf("another merchant's: %+v %d", pays, total)
	}
}

// Migration 0046 gives a snapshot stored before State.LastChargeDate existed the
// date of its last recorded charge, and leaves one that has it alone.
func TestMigrationBackfillsLastChargeDate(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	s := sub(t, "S1")
	s, err := subscription.Apply(s, subscription.Activate{CardToken: "tok", CardOutcome: subscription.CardApproves, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, subRows(t, 0, s.Version, s))); err != nil {
		t.Fatal(err)
	}
	for i, d := range []string{"2025-01-31", "2025-02-28"} {
		if _, err := b.db.ExecContext(b.ctx, `INSERT INTO subscription_invoices (invoice_id, subscription_id, merchant_id, customer_id, slot,
			cycle_date, status, data, created_at) VALUES ($1, 'S1', 'M1', 'C1', $2, $3, 'COMPLETE', '{}', now())`, fmt.Sprint("I", i), i, d); err != nil {
			t.Fatal(err)
		}
	}
	sql, err := os.ReadFile("migrations/0046_subscription_last_charge_date.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.ExecContext(b.ctx, string(sql)); err != nil {
		t.Fatal(err)
	}
	got, err := subscriptionstore.Get(b.ctx, b.db, "M1", "S1")
	if err != nil || got.LastChargeDate != "2025-02-28" {
		t.Fatalf("backfilled: %q %v", got.LastChargeDate, err)
	}
	if _, err := subscription.Apply(got, subscription.SetNextDate{Date: "2025-02-28", Today: "2025-02-28"}); !errors.Is(err, subscription.ErrCharged) {
		t.Fatalf("the backfilled date is not protected: %v", err)
	}
	// Run again after a later charge: the state's own date wins.
	if _, err := b.db.ExecContext(b.ctx, `UPDATE subscriptions SET data = jsonb_set(data, '{last_charge_date}', '"2025-03-31"')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.ExecContext(b.ctx, string(sql)); err != nil {
		t.Fatal(err)
	}
	if got, _ := subscriptionstore.Get(b.ctx, b.db, "M1", "S1"); got.LastChargeDate != "2025-03-31" {
		t.Fatalf("overwritten: %q", got.LastChargeDate)
	}
}
