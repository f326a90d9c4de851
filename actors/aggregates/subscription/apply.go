package subscription

import (
	"fmt"
	"time"
)

// ApplyBy is Apply for a command given by a principal: a command that is not the
// principal's to give (IssuerOf) is refused in every state, whatever it asks.
func ApplyBy(s State, by Principal, cmd any) (State, error) {
	if issuer := IssuerOf(cmd); issuer == "" || issuer != by {
		return s, fmt.Errorf("%w: %s may not give %T", ErrPrincipal, by, cmd)
	}
	return Apply(s, cmd)
}

// Apply is the pure transition function: the new state for a command, or a
// refusal with the state unchanged. Version and UpdatedAt move on every change.
func Apply(s State, cmd any) (State, error) {
	if _, ok := cmd.(Create); !ok && !s.Exists() {
		return s, fmt.Errorf("%w: no such subscription", ErrState)
	}
	switch c := cmd.(type) {
	case Create:
		return finish(s, c.At)(applyCreate(s, c))
	case Activate:
		return finish(s, c.At)(applyActivate(s, c))
	case StartCycle:
		return finish(s, c.At)(applyStartCycle(s, c))
	case ChargeCycle:
		return finish(s, c.At)(applyChargeCycle(s, c))
	case CycleCharged:
		return finish(s, c.At)(applyAttemptOutcome(s, c.InvoiceID, true, ""))
	case CycleFailed:
		return finish(s, c.At)(applyAttemptOutcome(s, c.InvoiceID, false, c.Reason))
	case Unsubscribe:
		return finish(s, c.At)(applyUnsubscribe(s))
	case ChangePlan:
		return finish(s, c.At)(applyChangePlan(s, c))
	case SetNextDate:
		return finish(s, c.At)(applySetNextDate(s, c))
	}
	return s, fmt.Errorf("%w: unknown command %T", ErrInvalid, cmd)
}

// finish completes a command given at on s with what its transition returned: a
// refusal leaves s as it was; a new state must be one the machine allows
// (CanMove), and its version and updated_at move.
func finish(s State, at time.Time) func(n State, err error) (State, error) {
	return func(n State, err error) (State, error) {
		if err != nil {
			return s, err
		}
		if !CanMove(s.Status, n.Status) {
			return s, fmt.Errorf("%w: %s -> %s", ErrState, s.Status, n.Status)
		}
		n.Version = s.Version + 1
		n.UpdatedAt = at
		return n, nil
	}
}

// applyCreate opens a PENDING subscription.
func applyCreate(s State, c Create) (State, error) {
	if s.Exists() {
		return s, fmt.Errorf("%w: the subscription already exists", ErrState) // ids are fresh: never a repeat
	}
	if c.Plan.Frequency < 1 || c.Plan.BillingCycles < 1 {
		return s, fmt.Errorf("%w: plan frequency and billing_cycles must be at least 1", ErrInvalid)
	}
	if _, err := ScheduleDate(c.StartDate, c.Plan.FrequencyUnit, c.Plan.Frequency, 0); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return State{SubscriptionID: c.SubscriptionID, MerchantID: c.MerchantID, CustomerID: c.CustomerID, Plan: c.Plan,
		Status: StatusPending, StartDate: c.StartDate, NextDate: c.StartDate, Anchor: c.StartDate,
		Reference: c.Reference, RedirectURL: c.RedirectURL, TestClockID: c.TestClockID,
		SetupTokenHash: c.SetupTokenHash, WalletID: c.WalletID, Terms: c.Terms, Customer: c.Customer, CreatedAt: c.At}, nil
}

// applyActivate sets the card up (a first setup, or after a failure).
func applyActivate(s State, c Activate) (State, error) {
	n := s
	if s.Status == StatusActive && s.CardToken == c.CardToken {
		return s, ErrDuplicate
	}
	if s.Status != StatusPending && s.Status != StatusFailed {
		return s, ErrState
	}
	if s.Attempt != nil {
		return s, ErrCharging
	}
	if !KnownCardOutcome(c.CardOutcome) {
		return s, ErrCardOutcome // fail closed: a card nobody knows the answer of is not set up
	}
	n.Status, n.CardToken, n.CardNetwork, n.CardNumber = StatusActive, c.CardToken, c.CardNetwork, c.CardNumber
	n.CardOutcome, n.FailReason, n.Failures = c.CardOutcome, "", 0
	return n, nil
}

// checkDue checks that the cycle of slot on date (in the schedule's generation) is the
// one due by today, and that no cycle was charged on or after its date.
func checkDue(s State, slot int, date string, generation int, today string) error {
	if !s.Billing() || slot != s.Slot || date != s.NextDate || generation != s.Generation {
		return ErrStale
	}
	if date > today {
		return ErrStale // not due yet: a scheduler ahead of its clock
	}
	if date <= s.LastChargeDate {
		return ErrCharged
	}
	return nil
}

// applyStartCycle records that a due cycle went to the rail.
func applyStartCycle(s State, c StartCycle) (State, error) {
	n := s
	if s.Attempt != nil && s.Attempt.Slot == c.Slot && s.Attempt.Date == c.Date {
		return s, ErrDuplicate
	}
	if err := checkDue(s, c.Slot, c.Date, c.Generation, c.Today); err != nil {
		return s, err
	}
	n.Attempt = &Attempt{Slot: c.Slot, Date: c.Date, InvoiceID: c.InvoiceID}
	n.LastChargeDate = c.Date
	return n, nil
}

// applyChargeCycle records a cycle charged in one step (its outcome known).
func applyChargeCycle(s State, c ChargeCycle) (State, error) {
	n := s
	if s.LastPayment != nil && s.LastPayment.InvoiceID == c.InvoiceID {
		return s, ErrDuplicate
	}
	if err := checkDue(s, c.Slot, c.Date, c.Generation, c.Today); err != nil {
		return s, err
	}
	if c.Approved && s.CardOutcome != CardApproves {
		return s, ErrCardOutcome // only the approving test card approves a cycle
	}
	if c.Terms != (Terms{}) {
		n.Terms = c.Terms
	}
	n.LastPayment = c.Payment
	n.LastChargeDate = c.Date
	return recordOutcome(s, n, c.Approved, c.Reason)
}

// applyAttemptOutcome records the rail's answer for the cycle in flight (its
// invoice): charged, or failed for reason.
func applyAttemptOutcome(s State, invoiceID string, charged bool, reason string) (State, error) {
	n := s
	if s.Attempt == nil || s.Attempt.InvoiceID != invoiceID {
		return s, ErrDuplicate
	}
	n.Attempt = nil
	return recordOutcome(s, n, charged, reason)
}

// recordOutcome records a cycle's outcome on n (s as it was) and moves to the next
// slot: a charge counts the cycle and clears the failures, a failure counts one
// more and says why (a subscription canceled while the charge was with the rail
// stays canceled).
func recordOutcome(s, n State, charged bool, reason string) (State, error) {
	if charged {
		n.CompletedCycles++
		n.Failures, n.FailReason = 0, ""
	} else {
		n.Failures++
		if n.Status != StatusCanceled {
			n.Status, n.FailReason = StatusFailed, reason
		}
	}
	if err := advance(&n); err != nil {
		return s, err
	}
	return n, nil
}

// applyUnsubscribe cancels.
func applyUnsubscribe(s State) (State, error) {
	n := s
	if s.Status == StatusCanceled {
		return s, ErrDuplicate
	}
	if !CanMove(s.Status, StatusCanceled) {
		return s, ErrState
	}
	n.Status, n.NextDate, n.FailReason = StatusCanceled, "", ""
	return n, nil
}

// applyChangePlan moves to another plan, or re-reads the terms of the same one.
func applyChangePlan(s State, c ChangePlan) (State, error) {
	n := s
	if !open(s.Status) {
		return s, ErrState
	}
	if c.Plan.Frequency < 1 || c.Plan.BillingCycles < 1 {
		return s, fmt.Errorf("%w: plan frequency and billing_cycles must be at least 1", ErrInvalid)
	}
	if c.Plan.BillingCycles <= s.CompletedCycles {
		return s, fmt.Errorf("%w: the new plan has %d billing cycles and %d are already completed", ErrInvalid,
			c.Plan.BillingCycles, s.CompletedCycles)
	}
	if c.Plan == s.Plan && (c.Terms == Terms{} || c.Terms == s.Terms) {
		return s, ErrDuplicate
	}
	if c.Terms != (Terms{}) {
		n.Terms = c.Terms
	}
	if c.Plan == s.Plan {
		return n, nil // the same plan re-read: its terms only
	}
	// The next date stays (it was announced); the new frequency counts from it.
	n.Plan = c.Plan
	n.Anchor, n.AnchorSlot = s.NextDate, s.Slot
	n.Generation++
	return n, nil
}

// applySetNextDate moves the next charge date.
func applySetNextDate(s State, c SetNextDate) (State, error) {
	n := s
	if !open(s.Status) {
		return s, ErrState
	}
	if s.Attempt != nil {
		return s, ErrCharging
	}
	if _, err := ParseDate(c.Date); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Date < c.Today {
		return s, fmt.Errorf("%w: next_date must be today or later", ErrInvalid)
	}
	if c.Date <= s.LastChargeDate {
		return s, fmt.Errorf("%w: next_date must be after %s", ErrCharged, s.LastChargeDate)
	}
	if c.Date == s.NextDate {
		return s, ErrDuplicate
	}
	n.NextDate, n.Anchor, n.AnchorSlot = c.Date, c.Date, s.Slot
	n.Generation++
	return n, nil
}

// open: the statuses a merchant can still change (PENDING, ACTIVE, FAILED).
func open(status string) bool {
	return status == StatusPending || status == StatusActive || status == StatusFailed
}

// advance moves to the next slot after an attempt, completing the subscription
// when every billing cycle is paid. A canceled one stays canceled with no date
// (a charge already with the rail when it was canceled is still recorded). The
// MaxFailedCharges-th failure in a row ends the retries: CANCELED, no date, and
// fail_reason says why.
func advance(n *State) error {
	n.Slot++
	if n.CompletedCycles >= n.Plan.BillingCycles {
		if n.Status != StatusCanceled {
			n.Status = StatusComplete
		}
		n.NextDate, n.FailReason = "", ""
		return nil
	}
	if n.Status == StatusCanceled {
		return nil
	}
	if n.Status == StatusFailed && n.Failures >= MaxFailedCharges {
		n.Status, n.NextDate = StatusCanceled, ""
		n.FailReason = fmt.Sprintf("Canceled after %d failed charges in a row. Last: %s", n.Failures, n.FailReason)
		return nil
	}
	d, err := ScheduleDate(n.Anchor, n.Plan.FrequencyUnit, n.Plan.Frequency, n.Slot-n.AnchorSlot)
	if err != nil {
		return err
	}
	n.NextDate = d
	if n.Status == StatusFailed && n.Attempt == nil && n.Failures == 0 {
		n.Status = StatusActive
	}
	return nil
}
