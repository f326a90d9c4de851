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
		n := s
		n.CheckoutRequestID = c.CheckoutRequestID
		n.Version++
		n.UpdatedAt = c.At
		return n, nil
	case Accept:
		n, err := move(s, StateProcessing, c.At)
		if err != nil {
			return s, err
		}
		n.CheckoutRequestID = first(c.CheckoutRequestID, s.CheckoutRequestID)
		return n, nil
	case Settle:
		if s.Held {
			return s, ErrHeld
		}
		if c.Paid != nil && !c.Paid.Equal(s.Value) {
			return hold(s, c)
		}
		n, err := move(s, StateComplete, c.At)
		if err != nil {
			return s, err
		}
		n.MpesaReference = c.Receipt
		n.CheckoutRequestID = first(c.CheckoutRequestID, s.CheckoutRequestID)
		n.Cleared = c.Cleared
		return n, nil
	case Clear:
		if !s.Exists() {
			return s, ErrNotFound
		}
		if s.State != StateComplete || s.Cleared {
			return s, ErrDuplicate
		}
		n := s
		n.Cleared = true
		n.Version++
		n.UpdatedAt = c.At
		return n, nil
	case Unknown:
		if s.Held {
			return s, ErrHeld
		}
		n, err := move(s, StateProcessing, c.At)
		if err != nil {
			return s, err
		}
		n.OutcomeUnknown = true
		n.CheckoutRequestID = first(c.CheckoutRequestID, s.CheckoutRequestID)
		return n, nil
	case Fail:
		if s.Held {
			return s, ErrHeld
		}
		n, err := move(s, StateFailed, c.At)
		if err != nil {
			return s, err
		}
		n.FailedCode, n.FailedReason = c.Code, c.Reason
		n.CheckoutRequestID = first(c.CheckoutRequestID, s.CheckoutRequestID)
		return n, nil
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
	n := s
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
	n.Version++
	n.UpdatedAt = c.At
	return n, nil
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
	n := s
	n.State = to
	n.Version++
	n.UpdatedAt = at
	return n, nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
