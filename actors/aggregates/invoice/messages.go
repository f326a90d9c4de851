package invoice

import (
	"errors"
	"fmt"
	"time"

	"paysvc/actors/values/money"
)

// Create opens an invoice in PENDING with its priced amounts.
type Create struct {
	InvoiceID, MerchantID, WalletID string
	Provider, Currency, Tariff      string
	Value, Charges, NetAmount       money.Amount
	Account, APIRef                 string
	CheckoutID, Email               string
	CardLast4, CardNetwork          string
	Customer                        Customer
	Host, Narrative                 string
	PaymentLinkID                   string
	At                              time.Time
}

// Clear records that a completed collection's funds cleared.
type Clear struct {
	At time.Time
}

// Sent records the rail's reference for the prompt (Daraja's CheckoutRequestID), so
// its callback and status query can find the invoice. The state does not change.
type Sent struct {
	CheckoutRequestID string
	At                time.Time
}

// Accept records that the prompt was accepted (PENDING -> PROCESSING): the sandbox
// customer entered the PIN, or live Daraja accepted the request for processing.
type Accept struct {
	CheckoutRequestID string
	At                time.Time
}

// Settle records the provider's success (-> COMPLETE). Cleared says whether the
// funds are available at once. Paid is the amount the provider reports as paid
// (an M-Pesa callback's Amount), nil when the provider does not say (Daraja's
// status query): a Paid that differs from the invoice's Value does not complete
// the invoice but holds it (see Held).
type Settle struct {
	Receipt, CheckoutRequestID string
	Cleared                    bool
	Paid                       *money.Amount
	At                         time.Time
}

// Unknown records that the rail may or may not have sent the prompt (a timeout
// after the request was written, an unreadable answer, an answer without a
// CheckoutRequestID): the invoice waits in PROCESSING for the true outcome
// (callback or status query) instead of failing, since a customer may be paying.
// CheckoutRequestID is set when an unusable answer still named the prompt.
type Unknown struct {
	CheckoutRequestID, Reason string
	At                        time.Time
}

// Fail records the provider's failure (-> FAILED).
type Fail struct {
	Code, Reason, CheckoutRequestID string
	At                              time.Time
}

// Errors of Apply.
var (
	ErrExists    = errors.New("invoice already exists")
	ErrNotFound  = errors.New("invoice not found")
	ErrInvalid   = errors.New("invalid invoice")
	ErrDuplicate = errors.New("outcome already recorded") // a late or repeated provider result: no change
	// ErrHeld: the invoice is held for review (a paid amount that differs from its
	// value); no provider result moves it any more, only an operator.
	ErrHeld = errors.New("invoice is held for review")
)

// TransitionError is a move the state machine does not allow.
type TransitionError struct{ From, To string }

func (e TransitionError) Error() string {
	return fmt.Sprintf("invoice cannot move from %s to %s", e.From, e.To)
}
