package subscription

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 8, 0, 0, 0, time.UTC)

func mustApply(t *testing.T, s State, cmd any) State {
	t.Helper()
	n, err := Apply(s, cmd)
	if err != nil {
		t.Fatalf("%T: %v", cmd, err)
	}
	return n
}

func monthly(cycles int) Plan {
	return Plan{PlanID: "P1", Frequency: 1, FrequencyUnit: UnitMonth, BillingCycles: cycles}
}

func created(t *testing.T, start string, p Plan) State {
	return mustApply(t, State{}, Create{SubscriptionID: "S1", MerchantID: "M1", CustomerID: "C1", Plan: p, StartDate: start, At: t0})
}

func active(t *testing.T, start string, p Plan) State {
	return mustApply(t, created(t, start, p), Activate{CardToken: "tok", CardNetwork: "VISA", CardNumber: "424242******4242", At: t0})
}

// charge runs one attempt of the due cycle to the given outcome.
func charge(t *testing.T, s State, ok bool) State {
	t.Helper()
	inv := "INV" + s.NextDate
	s = mustApply(t, s, StartCycle{Slot: s.Slot, Date: s.NextDate, Generation: s.Generation, Today: s.NextDate, InvoiceID: inv, At: t0})
	if ok {
		return mustApply(t, s, CycleCharged{InvoiceID: inv, At: t0})
	}
	return mustApply(t, s, CycleFailed{InvoiceID: inv, Reason: "Insufficient funds", At: t0})
}

func TestCreateAndActivate(t *testing.T) {
	s := created(t, "2025-01-31", monthly(3))
	if s.Status != StatusPending || s.NextDate != "2025-01-31" || s.Version != 1 {
		t.Fatalf("created: %+v", s)
	}
	if _, err := Apply(s, StartCycle{Slot: 0, Date: "2025-01-31", Today: "2025-02-01"}); !errors.Is(err, ErrStale) {
		t.Fatalf("a PENDING subscription was charged: %v", err)
	}
	s = mustApply(t, s, Activate{CardToken: "tok", CardNetwork: "VISA", CardNumber: "424242******4242", At: t0})
	if s.Status != StatusActive || s.CardToken != "tok" {
		t.Fatalf("activated: %+v", s)
	}
	if _, err := Apply(s, Activate{CardToken: "other"}); !errors.Is(err, ErrState) {
		t.Fatalf("activated twice with another card: %v", err)
	}
}

func TestTwelveMonthlyCyclesComplete(t *testing.T) {
	s := active(t, "2025-01-31", monthly(12))
	want := []string{"2025-02-28", "2025-03-31", "2025-04-30", "2025-05-31", "2025-06-30", "2025-07-31",
		"2025-08-31", "2025-09-30", "2025-10-31", "2025-11-30", "2025-12-31", ""}
	for i, w := range want {
		s = charge(t, s, true)
		if s.CompletedCycles != i+1 || s.NextDate != w {
			t.Fatalf("cycle %d: completed %d next %q, want %d %q", i+1, s.CompletedCycles, s.NextDate, i+1, w)
		}
	}
	if s.Status != StatusComplete {
		t.Fatalf("status %s after 12 cycles", s.Status)
	}
	if s.Billing() {
		t.Fatal("a complete subscription is still billed")
	}
}

func TestFailureRetriesAtNextScheduledDate(t *testing.T) {
	s := active(t, "2025-01-31", monthly(3))
	s = charge(t, s, false)
	if s.Status != StatusFailed || s.FailReason != "Insufficient funds" || s.CompletedCycles != 0 || s.NextDate != "2025-02-28" {
		t.Fatalf("after failure: %+v", s)
	}
	s = charge(t, s, false) // still failing
	if s.Status != StatusFailed || s.NextDate != "2025-03-31" {
		t.Fatalf("after second failure: %+v", s)
	}
	s = charge(t, s, true)
	if s.Status != StatusActive || s.FailReason != "" || s.CompletedCycles != 1 || s.NextDate != "2025-04-30" {
		t.Fatalf("after recovery: %+v", s)
	}
}

func TestCycleIsChargedOnce(t *testing.T) {
	s := active(t, "2025-01-31", monthly(3))
	start := StartCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", At: t0}
	s = mustApply(t, s, start)
	if _, err := Apply(s, start); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second start: %v", err)
	}
	if _, err := Apply(s, StartCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I2"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second start with another invoice: %v", err)
	}
	s = mustApply(t, s, CycleCharged{InvoiceID: "I1", At: t0})
	if _, err := Apply(s, CycleCharged{InvoiceID: "I1"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("result twice: %v", err)
	}
	if _, err := Apply(s, start); !errors.Is(err, ErrStale) {
		t.Fatalf("the charged cycle started again: %v", err)
	}
	if _, err := Apply(s, StartCycle{Slot: 1, Date: "2025-02-28", Today: "2025-02-27", InvoiceID: "I3"}); !errors.Is(err, ErrStale) {
		t.Fatalf("a cycle charged before its date: %v", err)
	}
}

func TestUnsubscribe(t *testing.T) {
	for _, st := range []string{StatusPending, StatusActive, StatusFailed} {
		s := active(t, "2025-01-31", monthly(3))
		switch st {
		case StatusPending:
			s = created(t, "2025-01-31", monthly(3))
		case StatusFailed:
			s = charge(t, s, false)
		}
		s = mustApply(t, s, Unsubscribe{At: t0})
		if s.Status != StatusCanceled || s.NextDate != "" || s.Billing() {
			t.Fatalf("from %s: %+v", st, s)
		}
		if _, err := Apply(s, Unsubscribe{}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("twice: %v", err)
		}
	}
	s := active(t, "2025-01-31", monthly(1))
	s = charge(t, s, true)
	if _, err := Apply(s, Unsubscribe{}); !errors.Is(err, ErrState) {
		t.Fatalf("COMPLETE canceled: %v", err)
	}
}

// A charge already with the rail when the subscription is canceled is recorded
// (the customer paid) but bills nothing more.
func TestCanceledDuringCharge(t *testing.T) {
	s := active(t, "2025-01-31", monthly(3))
	s = mustApply(t, s, StartCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", At: t0})
	s = mustApply(t, s, Unsubscribe{At: t0})
	s = mustApply(t, s, CycleCharged{InvoiceID: "I1", At: t0})
	if s.Status != StatusCanceled || s.CompletedCycles != 1 || s.NextDate != "" || s.Billing() {
		t.Fatalf("%+v", s)
	}
}

func TestChangePlanFromNextCycle(t *testing.T) {
	s := active(t, "2025-01-31", monthly(12))
	s = charge(t, s, true) // next 2025-02-28
	weekly := Plan{PlanID: "P2", Frequency: 2, FrequencyUnit: UnitWeek, BillingCycles: 4}
	s = mustApply(t, s, ChangePlan{Plan: weekly, At: t0})
	if s.NextDate != "2025-02-28" || s.Plan.PlanID != "P2" || s.Generation != 1 {
		t.Fatalf("after change: %+v", s)
	}
	s = charge(t, s, true)
	if s.NextDate != "2025-03-14" || s.CompletedCycles != 2 {
		t.Fatalf("next after change: %+v", s)
	}
	if _, err := Apply(s, ChangePlan{Plan: Plan{PlanID: "P3", Frequency: 1, FrequencyUnit: UnitMonth, BillingCycles: 2}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a plan with fewer cycles than completed: %v", err)
	}
}

func TestSetNextDate(t *testing.T) {
	s := active(t, "2025-01-31", monthly(3))
	if _, err := Apply(s, SetNextDate{Date: "2025-01-30", Today: "2025-01-31"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a past date: %v", err)
	}
	old := s
	s = mustApply(t, s, SetNextDate{Date: "2025-02-10", Today: "2025-01-31", At: t0})
	if s.NextDate != "2025-02-10" || s.Generation != 1 {
		t.Fatalf("%+v", s)
	}
	// The cycle's command of the old date is overtaken, not applied.
	if _, err := Apply(s, StartCycle{Slot: 0, Date: old.NextDate, Generation: 0, Today: "2025-02-10"}); !errors.Is(err, ErrStale) {
		t.Fatalf("old cycle applied: %v", err)
	}
	if CycleCommandID("S1", 0, "2025-02-10", 1) == CycleCommandID("S1", 0, "2025-02-10", 0) {
		t.Fatal("a re-anchored cycle has the same command id")
	}
	s = charge(t, s, true)
	if s.NextDate != "2025-03-10" {
		t.Fatalf("after override: %+v", s)
	}
	s = mustApply(t, s, StartCycle{Slot: s.Slot, Date: s.NextDate, Generation: s.Generation, Today: s.NextDate, InvoiceID: "X", At: t0})
	if _, err := Apply(s, SetNextDate{Date: "2025-04-01", Today: "2025-03-10"}); !errors.Is(err, ErrCharging) {
		t.Fatalf("override during a charge: %v", err)
	}
}

// Every move Apply makes is one the machine allows.
func TestTransitionsFollowTheMachine(t *testing.T) {
	for from, tos := range allowedTransitions {
		for _, to := range tos {
			if !CanMove(from, to) {
				t.Fatalf("%s -> %s", from, to)
			}
		}
	}
	for _, bad := range [][2]string{{StatusComplete, StatusActive}, {StatusCanceled, StatusActive}, {StatusPending, StatusComplete}, {StatusPending, StatusFailed}} {
		if CanMove(bad[0], bad[1]) {
			t.Fatalf("%s -> %s allowed", bad[0], bad[1])
		}
	}
}

// A cycle in one command: approved counts and moves on; declined fails it and
// moves to the retry date; the same cycle again is a duplicate; a new card
// from FAILED makes it ACTIVE without charging.
func TestChargeCycleInOneCommand(t *testing.T) {
	s := active(t, "2025-01-31", monthly(2))
	c := ChargeCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", Approved: false, Reason: "Declined",
		Payment: &Payment{InvoiceID: "I1"}, At: t0}
	s = mustApply(t, s, c)
	if s.Status != StatusFailed || s.FailReason != "Declined" || s.NextDate != "2025-02-28" || s.CompletedCycles != 0 || s.LastPayment.InvoiceID != "I1" {
		t.Fatalf("declined: %+v", s)
	}
	if _, err := Apply(s, c); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("same cycle again: %v", err)
	}
	s = mustApply(t, s, Activate{CardToken: "tok2", CardNetwork: "VISA", CardNumber: "400000******3220", At: t0})
	if s.Status != StatusActive || s.FailReason != "" || s.NextDate != "2025-02-28" {
		t.Fatalf("new card: %+v", s)
	}
	if _, err := Apply(s, ChargeCycle{Slot: 1, Date: "2025-02-28", Today: "2025-02-27", InvoiceID: "I2"}); !errors.Is(err, ErrStale) {
		t.Fatalf("charged early: %v", err)
	}
	s = mustApply(t, s, ChargeCycle{Slot: 1, Date: "2025-02-28", Today: "2025-02-28", InvoiceID: "I2", Approved: true, At: t0})
	s = mustApply(t, s, ChargeCycle{Slot: 2, Date: "2025-03-31", Today: "2025-03-31", InvoiceID: "I3", Approved: true, At: t0})
	if s.Status != StatusComplete || s.CompletedCycles != 2 || s.NextDate != "" {
		t.Fatalf("complete: %+v", s)
	}
}
