package invoice

import (
	"time"

	"paysvc/actors/values/money"
	"paysvc/topics"
)

// Invoice states of the interface.
const (
	StatePending    = "PENDING"
	StateProcessing = "PROCESSING"
	StateComplete   = "COMPLETE"
	StateFailed     = "FAILED"
)

// allowedTransitions is the state machine of docs/state-machines.md; a test walks
// it exhaustively.
var allowedTransitions = map[string][]string{
	"":              {StatePending},
	StatePending:    {StateProcessing, StateComplete, StateFailed},
	StateProcessing: {StateComplete, StateFailed},
	StateComplete:   {},
	StateFailed:     {},
}

// CanMove reports whether the machine allows from -> to.
func CanMove(from, to string) bool {
	for _, s := range allowedTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// State is one invoice's snapshot.
type State struct {
	InvoiceID         string       `json:"invoice_id"`
	MerchantID        string       `json:"merchant_id"`
	WalletID          string       `json:"wallet_id"`
	State             string       `json:"state"`
	Provider          string       `json:"provider"`
	Currency          string       `json:"currency"`
	Value             money.Amount `json:"value"`
	Charges           money.Amount `json:"charges"`
	NetAmount         money.Amount `json:"net_amount"`
	Tariff            string       `json:"tariff"`
	Account           string       `json:"account"`
	APIRef            string       `json:"api_ref"`
	MpesaReference    string       `json:"mpesa_reference,omitempty"`
	FailedReason      string       `json:"failed_reason,omitempty"`
	FailedCode        string       `json:"failed_code,omitempty"`
	CheckoutRequestID string       `json:"checkout_request_id,omitempty"`
	CheckoutID        string       `json:"checkout_id,omitempty"`
	CardLast4         string       `json:"card_last4,omitempty"`
	CardNetwork       string       `json:"card_network,omitempty"`
	// Cleared: the collected funds are in the wallet's available balance. M-Pesa
	// funds clear on completion; card funds later (docs/api-decisions.md).
	Cleared bool   `json:"cleared,omitempty"`
	Email   string `json:"email,omitempty"`
	// Customer: the payer's details as the request or its checkout session gave
	// them. Host: the payment's origin host. Narrative: the merchant's description.
	Customer  Customer `json:"customer,omitzero"`
	Host      string   `json:"host,omitempty"`
	Narrative string   `json:"narrative,omitempty"`
	// PaymentLinkID: the payment link the invoice pays through (the Payment
	// session's payment_link), "" for any other payment.
	PaymentLinkID string    `json:"payment_link_id,omitempty"`
	Version       int64     `json:"version"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`

	// OutcomeUnknown: the rail could not say whether the prompt was sent; the
	// invoice waits in PROCESSING for the callback or the status query.
	OutcomeUnknown bool `json:"outcome_unknown,omitempty"`
	// Held: the provider reported a payment of PaidAmount (receipt
	// MpesaReference) that differs from Value. Nothing was credited; the invoice
	// stays PROCESSING for an operator (ops/runbooks.md) and takes no further
	// provider result.
	Held       bool          `json:"held,omitempty"`
	PaidAmount *money.Amount `json:"paid_amount,omitempty"`
}

// Customer is the payer's identity and billing address (email and phone number
// are the invoice's Email and Account): the one shape a collection request carries
// them in, so the invoice keeps what the command said without a copy of its own.
type Customer = topics.PaymentCustomer

// Exists reports whether the invoice was created.
func (s State) Exists() bool { return s.Version > 0 }
