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
	return mustApply(t, created(t, start, p), Activate{CardToken: "tok", CardNetwork: "VISA", CardNumber: "424242******4242", CardOutcome: CardApproves, At: t0})
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
	s = mustApply(t, s, Activate{CardToken: "tok", CardNetwork: "VISA", CardNumber: "424242******4242", CardOutcome: CardApproves, At: t0})
	if s.Status != StatusActive || s.CardToken != "tok" {
		t.Fatalf("activated: %+v", s)
	}
	if _, err := Apply(s, Activate{CardToken: "other", CardOutcome: CardApproves}); !errors.Is(err, ErrState) {
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
	s = mustApply(t, s, Activate{CardToken: "tok2", CardNetwork: "VISA", CardNumber: "400000******3220", CardOutcome: CardApproves, At: t0})
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

// A date is charged once: after a charge, no next_date override, plan change or
// retry can charge that date (or an earlier one) again, whatever the command id.
func TestChargedDateIsChargedOnce(t *testing.T) {
	s := active(t, "2025-01-31", monthly(12))
	s = mustApply(t, s, ChargeCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", Approved: true, At: t0})
	if s.LastChargeDate != "2025-01-31" || s.CompletedCycles != 1 {
		t.Fatalf("charged: %+v", s)
	}
	// PUT next_date=<today>: refused, the schedule unchanged.
	if _, err := Apply(s, SetNextDate{Date: "2025-01-31", Today: "2025-01-31", At: t0}); !errors.Is(err, ErrCharged) {
		t.Fatalf("next_date on the charged date: %v", err)
	}
	// A plan change then the override: still refused.
	s = mustApply(t, s, ChangePlan{Plan: Plan{PlanID: "P2", Frequency: 1, FrequencyUnit: UnitDay, BillingCycles: 12}, At: t0})
	if _, err := Apply(s, SetNextDate{Date: "2025-01-31", Today: "2025-01-31", At: t0}); !errors.Is(err, ErrCharged) {
		t.Fatalf("next_date on the charged date after a plan change: %v", err)
	}
	// Whatever moved the schedule there (a state written before the rule, say),
	// a charge on the charged date is refused, with any generation and invoice.
	back := s
	back.NextDate, back.Generation = "2025-01-31", s.Generation+1
	for _, c := range []ChargeCycle{
		{Slot: back.Slot, Date: "2025-01-31", Generation: back.Generation, Today: "2025-01-31", InvoiceID: "I2", Approved: true, At: t0},
		{Slot: back.Slot, Date: "2025-01-31", Generation: back.Generation, Today: "2025-02-01", InvoiceID: "I3", At: t0},
	} {
		if _, err := Apply(back, c); !errors.Is(err, ErrCharged) {
			t.Fatalf("charged date charged again: %v", err)
		}
	}
	if _, err := Apply(back, StartCycle{Slot: back.Slot, Date: "2025-01-31", Generation: back.Generation, Today: "2025-01-31", InvoiceID: "I4"}); !errors.Is(err, ErrCharged) {
		t.Fatalf("charged date opened again: %v", err)
	}
	// A declined charge also takes its date: the retry is on a later one.
	f := active(t, "2025-01-31", monthly(12))
	f = mustApply(t, f, ChargeCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", Reason: "Declined", At: t0})
	if _, err := Apply(f, SetNextDate{Date: "2025-01-31", Today: "2025-01-31"}); !errors.Is(err, ErrCharged) {
		t.Fatalf("a retry on the failed date: %v", err)
	}
	f = mustApply(t, f, SetNextDate{Date: "2025-02-01", Today: "2025-01-31", At: t0})
	f = mustApply(t, f, ChargeCycle{Slot: f.Slot, Date: "2025-02-01", Generation: f.Generation, Today: "2025-02-01", InvoiceID: "I5", Approved: true, At: t0})
	if f.CompletedCycles != 1 || f.LastChargeDate != "2025-02-01" || f.Status != StatusActive {
		t.Fatalf("the next day charged: %+v", f)
	}
}

// Retries are bounded: the MaxFailedCharges-th failure in a row cancels with a
// fail_reason; a success in between, or a new card, starts the count again.
func TestRetriesEndCanceled(t *testing.T) {
	daily := Plan{PlanID: "P1", Frequency: 1, FrequencyUnit: UnitDay, BillingCycles: 30}
	s := active(t, "2025-01-01", daily)
	decline := func(s State) State {
		return mustApply(t, s, ChargeCycle{Slot: s.Slot, Date: s.NextDate, Generation: s.Generation, Today: s.NextDate,
			InvoiceID: "I" + s.NextDate, Reason: "Insufficient funds on the card.", At: t0})
	}
	for i := 1; i < MaxFailedCharges; i++ {
		s = decline(s)
		if s.Status != StatusFailed || s.Failures != i || !s.Billing() {
			t.Fatalf("failure %d: %+v", i, s)
		}
	}
	// A new card resets the count.
	s = mustApply(t, s, Activate{CardToken: "tok2", CardOutcome: CardApproves, At: t0})
	if s.Failures != 0 || s.Status != StatusActive {
		t.Fatalf("new card: %+v", s)
	}
	for i := 1; i <= MaxFailedCharges; i++ {
		s = decline(s)
	}
	if s.Status != StatusCanceled || s.NextDate != "" || s.Billing() || !s.ShowsFailReason() ||
		s.FailReason != "Canceled after 4 failed charges in a row. Last: Insufficient funds on the card." {
		t.Fatalf("after %d failures: %+v", MaxFailedCharges, s)
	}
	if _, err := Apply(s, Activate{CardToken: "tok3", CardOutcome: CardApproves}); !errors.Is(err, ErrState) {
		t.Fatalf("a canceled subscription took a card: %v", err)
	}
	if _, err := Apply(s, Unsubscribe{}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("unsubscribe after the policy canceled: %v", err)
	}
	// Through the two-step rail too.
	s = active(t, "2025-01-01", daily)
	for range MaxFailedCharges {
		s = charge(t, s, false)
	}
	if s.Status != StatusCanceled || s.Billing() {
		t.Fatalf("two-step: %+v", s)
	}
}

// An absent or unknown card outcome never approves: setup is refused, and an
// approval on a card whose outcome is not the approving one is refused.
func TestCardOutcomeFailsClosed(t *testing.T) {
	for _, o := range []string{"", "approved", "SUCCESS", "expired"} {
		if _, err := Apply(created(t, "2025-01-31", monthly(3)), Activate{CardToken: "t", CardOutcome: o}); !errors.Is(err, ErrCardOutcome) {
			t.Fatalf("outcome %q set up: %v", o, err)
		}
	}
	for _, o := range []string{CardDeclines, CardInsufficientFunds} {
		s := mustApply(t, created(t, "2025-01-31", monthly(3)), Activate{CardToken: "t", CardOutcome: o, At: t0})
		if _, err := Apply(s, ChargeCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", Approved: true}); !errors.Is(err, ErrCardOutcome) {
			t.Fatalf("a %s card approved: %v", o, err)
		}
	}
	legacy := active(t, "2025-01-31", monthly(3))
	legacy.CardOutcome = "" // a card stored with no outcome
	if _, err := Apply(legacy, ChargeCycle{Slot: 0, Date: "2025-01-31", Today: "2025-01-31", InvoiceID: "I1", Approved: true}); !errors.Is(err, ErrCardOutcome) {
		t.Fatalf("a card with no outcome approved: %v", err)
	}
}
