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
	var n State
	var err error
	switch c := cmd.(type) {
	case Create:
		n, err = applyCreate(s, c)
	case Activate:
		n, err = applyActivate(s, c)
	case StartCycle:
		n, err = applyStartCycle(s, c)
	case ChargeCycle:
		n, err = applyChargeCycle(s, c)
	case CycleCharged:
		n, err = applyCycleCharged(s, c)
	case CycleFailed:
		n, err = applyCycleFailed(s, c)
	case Unsubscribe:
		n, err = applyUnsubscribe(s, c)
	case ChangePlan:
		n, err = applyChangePlan(s, c)
	case SetNextDate:
		n, err = applySetNextDate(s, c)
	default:
		return s, fmt.Errorf("%w: unknown command %T", ErrInvalid, cmd)
	}
	if err != nil {
		return s, err
	}
	if !CanMove(s.Status, n.Status) {
		return s, fmt.Errorf("%w: %s -> %s", ErrState, s.Status, n.Status)
	}
	n.Version = s.Version + 1
	at := atOf(cmd)
	n.UpdatedAt = at
	return n, nil
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

// applyStartCycle records that a due cycle went to the rail.
func applyStartCycle(s State, c StartCycle) (State, error) {
	n := s
	if s.Attempt != nil && s.Attempt.Slot == c.Slot && s.Attempt.Date == c.Date {
		return s, ErrDuplicate
	}
	if !s.Billing() || c.Slot != s.Slot || c.Date != s.NextDate || c.Generation != s.Generation {
		return s, ErrStale
	}
	if c.Date > c.Today {
		return s, ErrStale // not due yet: a scheduler ahead of its clock
	}
	if c.Date <= s.LastChargeDate {
		return s, ErrCharged
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
	if !s.Billing() || c.Slot != s.Slot || c.Date != s.NextDate || c.Generation != s.Generation {
		return s, ErrStale
	}
	if c.Date > c.Today {
		return s, ErrStale
	}
	if c.Date <= s.LastChargeDate {
		return s, ErrCharged
	}
	if c.Approved && s.CardOutcome != CardApproves {
		return s, ErrCardOutcome // only the approving test card approves a cycle
	}
	if c.Terms != (Terms{}) {
		n.Terms = c.Terms
	}
	n.LastPayment = c.Payment
	n.LastChargeDate = c.Date
	if c.Approved {
		n.CompletedCycles++
		n.Failures, n.FailReason = 0, ""
	} else {
		n.Failures++
		n.Status, n.FailReason = StatusFailed, c.Reason
	}
	if err := advance(&n); err != nil {
		return s, err
	}
	return n, nil
}

// applyCycleCharged records the rail's success for the cycle in flight.
func applyCycleCharged(s State, c CycleCharged) (State, error) {
	n := s
	if s.Attempt == nil || s.Attempt.InvoiceID != c.InvoiceID {
		return s, ErrDuplicate
	}
	n.Attempt = nil
	n.CompletedCycles++
	n.Failures, n.FailReason = 0, ""
	if err := advance(&n); err != nil {
		return s, err
	}
	return n, nil
}

// applyCycleFailed records the rail's failure for the cycle in flight.
func applyCycleFailed(s State, c CycleFailed) (State, error) {
	n := s
	if s.Attempt == nil || s.Attempt.InvoiceID != c.InvoiceID {
		return s, ErrDuplicate
	}
	n.Attempt = nil
	n.Failures++
	if s.Status != StatusCanceled {
		n.Status, n.FailReason = StatusFailed, c.Reason
	}
	if err := advance(&n); err != nil {
		return s, err
	}
	return n, nil
}

// applyUnsubscribe cancels.
func applyUnsubscribe(s State, c Unsubscribe) (State, error) {
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

func atOf(cmd any) (at time.Time) {
	switch c := cmd.(type) {
	case Create:
		at = c.At
	case Activate:
		at = c.At
	case StartCycle:
		at = c.At
	case CycleCharged:
		at = c.At
	case CycleFailed:
		at = c.At
	case Unsubscribe:
		at = c.At
	case ChangePlan:
		at = c.At
	case ChargeCycle:
		at = c.At
	case SetNextDate:
		at = c.At
	}
	return at
}
