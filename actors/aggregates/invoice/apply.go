package invoice

import (
	"fmt"
	"time"
)

// Apply decides one command against an invoice's state. It is pure.
func Apply(s State, cmd any) (State, error) {
	switch c := cmd.(type) {
	case Create:
		if s.Exists() {
			return s, ErrExists
		}
		if c.InvoiceID == "" || c.MerchantID == "" || c.WalletID == "" || c.Value.Sign() <= 0 || c.NetAmount.Sign() <= 0 ||
			c.Charges.Sign() < 0 || !c.Value.Equal(c.NetAmount.Add(c.Charges)) {
			return s, ErrInvalid
		}
		return State{
			InvoiceID: c.InvoiceID, MerchantID: c.MerchantID, WalletID: c.WalletID, State: StatePending,
			Provider: c.Provider, Currency: c.Currency, Value: c.Value, Charges: c.Charges, NetAmount: c.NetAmount,
			Tariff: c.Tariff, Account: c.Account, APIRef: c.APIRef, CheckoutID: c.CheckoutID, Email: c.Email,
			CardLast4: c.CardLast4, CardNetwork: c.CardNetwork, Customer: c.Customer, Host: c.Host, Narrative: c.Narrative,
			PaymentLinkID: c.PaymentLinkID, Version: 1, CreatedAt: c.At, UpdatedAt: c.At,
		}, nil
	case Sent:
		if !s.Exists() {
			return s, ErrNotFound
		}
		if s.CheckoutRequestID != "" || c.CheckoutRequestID == "" {
			return s, ErrDuplicate
		}
		n := s.next(c.At)
		n.CheckoutRequestID = c.CheckoutRequestID
		return n, nil
	case Accept:
		return advance(s, StateProcessing, c.At, c.CheckoutRequestID, nil)
	case Settle:
		if !s.Held && c.Paid != nil && !c.Paid.Equal(s.Value) {
			return hold(s, c)
		}
		return unlessHeld(s, StateComplete, c.At, c.CheckoutRequestID, func(n *State) {
			n.MpesaReference, n.Cleared = c.Receipt, c.Cleared
		})
	case Clear:
		if !s.Exists() {
			return s, ErrNotFound
		}
		if s.State != StateComplete || s.Cleared {
			return s, ErrDuplicate
		}
		n := s.next(c.At)
		n.Cleared = true
		return n, nil
	case Unknown:
		return unlessHeld(s, StateProcessing, c.At, c.CheckoutRequestID, func(n *State) { n.OutcomeUnknown = true })
	case Fail:
		return unlessHeld(s, StateFailed, c.At, c.CheckoutRequestID, func(n *State) { n.FailedCode, n.FailedReason = c.Code, c.Reason })
	default:
		return s, fmt.Errorf("invoice: unknown command %T", cmd)
	}
}

// hold records a success whose paid amount differs from the invoice: nothing is
// credited (crediting the invoice's value would invent or lose money against what
// the customer paid), the invoice stays (or goes) PROCESSING and is marked held,
// and no later provider result moves it.
func hold(s State, c Settle) (State, error) {
	if !s.Exists() {
		return s, ErrNotFound
	}
	switch s.State {
	case StateComplete:
		return s, ErrDuplicate // already paid and credited: a late, different report changes nothing
	case StateFailed:
		return s, TransitionError{From: s.State, To: StateComplete}
	}
	n := s.next(c.At)
	if n.State != StateProcessing {
		if !CanMove(n.State, StateProcessing) {
			return s, TransitionError{From: s.State, To: StateProcessing}
		}
		n.State = StateProcessing
	}
	paid := *c.Paid
	n.Held, n.PaidAmount = true, &paid
	n.MpesaReference = c.Receipt
	n.CheckoutRequestID = first(c.CheckoutRequestID, s.CheckoutRequestID)
	return n, nil
}

// advance applies a rail's outcome: the state change (move), the rail's reference
// when the outcome names one, and what else the outcome records (set, if any).
func advance(s State, to string, at time.Time, ref string, set func(*State)) (State, error) {
	n, err := move(s, to, at)
	if err != nil {
		return s, err
	}
	n.CheckoutRequestID = first(ref, s.CheckoutRequestID)
	if set != nil {
		set(&n)
	}
	return n, nil
}

// unlessHeld is advance for the outcomes a held invoice takes no more (ErrHeld):
// only an operator moves it. An acceptance is no outcome of the payment, so it is
// not one of them.
func unlessHeld(s State, to string, at time.Time, ref string, set func(*State)) (State, error) {
	if s.Held {
		return s, ErrHeld
	}
	return advance(s, to, at, ref, set)
}

// move applies a state change. A provider result that arrives after the outcome is
// final (a late acceptance, a repeated callback) is ErrDuplicate: nothing changes.
func move(s State, to string, at time.Time) (State, error) {
	if !s.Exists() {
		return s, ErrNotFound
	}
	if s.State == to || s.State == StateComplete || s.State == StateFailed {
		if s.State == to || to == StateProcessing {
			return s, ErrDuplicate
		}
		return s, TransitionError{From: s.State, To: to}
	}
	if !CanMove(s.State, to) {
		return s, TransitionError{From: s.State, To: to}
	}
	n := s.next(at)
	n.State = to
	return n, nil
}

// next is s as a change at at makes it: its next version.
func (s State) next(at time.Time) State {
	s.Version++
	s.UpdatedAt = at
	return s
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
