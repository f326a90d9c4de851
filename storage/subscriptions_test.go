package storage_test

import (
	"errors"
	"testing"
	"time"

	"paysvc/actors/subscription"
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

func TestCommitBatchSubscriptions(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	created := sub(t, "S1")
	w := storage.NewSubscriptionWrites()
	w.Touch(subscription.State{}, created)
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, w)); err != nil {
		t.Fatal(err)
	}
	// Not billed while PENDING.
	if due, err := storage.DueSubscriptions(b.ctx, b.db, "2025-02-01", "", 10); err != nil || len(due) != 0 {
		t.Fatalf("due while pending: %v %v", due, err)
	}
	active, err := subscription.Apply(created, subscription.Activate{CardToken: "tok", CardNetwork: "VISA", CardNumber: "400000******0077", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	w = storage.NewSubscriptionWrites()
	w.Touch(created, active)
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, w)); err != nil {
		t.Fatal(err)
	}
	due, err := storage.DueSubscriptions(b.ctx, b.db, "2025-01-31", "", 10)
	if err != nil || len(due) != 1 || due[0].Date != "2025-01-31" || due[0].Slot != 0 || due[0].MerchantID != "M1" {
		t.Fatalf("due: %+v %v", due, err)
	}
	if due, _ := storage.DueSubscriptions(b.ctx, b.db, "2025-01-30", "", 10); len(due) != 0 {
		t.Fatalf("due a day early: %+v", due)
	}
	// A cycle attempt is recorded with its invoice, in the same batch.
	charging, err := subscription.Apply(active, subscription.StartCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "INV1", At: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	w = storage.NewSubscriptionWrites()
	w.Touch(active, charging)
	iw := storage.NewInvoiceWrites()
	iw.Touch(inv("INV1", 0, "", t0), inv("INV1", 1, "PENDING", t0))
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 3, iw, w)); err != nil {
		t.Fatal(err)
	}
	if due, _ := storage.DueSubscriptions(b.ctx, b.db, "2025-02-01", "", 10); len(due) != 0 {
		t.Fatalf("due while charging: %+v", due)
	}
	pays, err := storage.SubscriptionPayments(b.ctx, b.db, "M1", "S1")
	if err != nil || len(pays) != 1 || pays[0].Invoice.InvoiceID != "INV1" || pays[0].CycleDate != "2025-01-31" {
		t.Fatalf("payments: %+v %v", pays, err)
	}
	if pays, _ := storage.SubscriptionPayments(b.ctx, b.db, "M2", "S1"); len(pays) != 0 {
		t.Fatalf("another merchant sees the payments: %+v", pays)
	}
	got, err := storage.GetSubscription(b.ctx, b.db, "M1", "S1")
	if err != nil || got.Version != charging.Version || got.Attempt == nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := storage.GetSubscription(b.ctx, b.db, "M2", "S1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another merchant's: %v", err)
	}
	if s, err := storage.SubscriptionBySetupToken(b.ctx, b.db, "hash-S1"); err != nil || s.SubscriptionID != "S1" {
		t.Fatalf("by token: %+v %v", s, err)
	}
	// A stale update (from the version before) is refused and writes nothing.
	w = storage.NewSubscriptionWrites()
	w.Touch(active, charging)
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 4, w)); !errors.Is(err, storage.ErrStaleSnapshot) {
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
