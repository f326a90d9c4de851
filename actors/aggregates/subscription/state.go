package subscription

import (
	"encoding/json"
	"time"
)

// Statuses of the interface (spec "Subscription status").
const (
	StatusPending  = "PENDING"
	StatusActive   = "ACTIVE"
	StatusComplete = "COMPLETE"
	StatusCanceled = "CANCELED"
	StatusFailed   = "FAILED"
)

// allowedTransitions is the machine of docs/state-machines.md; a test walks it.
// FAILED -> ACTIVE is the retry at the next scheduled date succeeding; PENDING and
// FAILED may be canceled as ACTIVE may (a subscription nobody will pay for, or one
// whose card keeps failing, must be stoppable); FAILED -> CANCELED is also the
// retry policy's end (MaxFailedCharges).
var allowedTransitions = map[string][]string{
	"": {StatusPending},
	// PENDING -> PENDING: the merchant changes the plan or the first date while
	// the customer has not set a card up yet.
	StatusPending:  {StatusPending, StatusActive, StatusCanceled},
	StatusActive:   {StatusActive, StatusComplete, StatusFailed, StatusCanceled},
	StatusFailed:   {StatusActive, StatusComplete, StatusFailed, StatusCanceled},
	StatusComplete: {},
	// A charge already with the rail when the subscription was canceled still
	// records its outcome (CANCELED -> CANCELED).
	StatusCanceled: {StatusCanceled},
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

// Plan is what a subscription needs of its plan to keep its schedule. The amount
// and currency are read at charge time (a plan's change applies from the next
// cycle), so they are not copied here.
type Plan struct {
	PlanID        string `json:"plan_id"`
	Frequency     int    `json:"frequency"`
	FrequencyUnit string `json:"frequency_unit"`
	BillingCycles int    `json:"billing_cycles"`
}

// Terms are the plan's name, amount and currency as last read (at creation, a
// plan change, or a cycle's charge): what subscription_event shows. The charge
// itself always uses the terms the scheduler read when it issued the cycle.
type Terms struct {
	Name     string `json:"name"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// Customer is the customer record's identity as read when the subscription was
// created (subscription_event shows it; the API reads the record itself).
type Customer struct {
	Email     string `json:"email"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
}

// Payment is one cycle's charge as recorded: an invoice-shaped record (JSON of
// invoice.State, built by the engine kind) with its slot and date. The state keeps
// only the latest: paysvc_apply_subscription records it in subscription_invoices
// when the batch commits (a batch holds at most one cycle of a subscription: the
// next one is issued only once this one is stored).
type Payment struct {
	InvoiceID string          `json:"invoice_id"`
	Slot      int             `json:"slot"`
	Date      string          `json:"date"`
	Status    string          `json:"status"`
	Invoice   json.RawMessage `json:"invoice"`
}

// Attempt is a cycle charge in flight: its invoice is with the card rail.
type Attempt struct {
	Slot      int    `json:"slot"`
	Date      string `json:"date"`
	InvoiceID string `json:"invoice_id"`
}

// State is one subscription's snapshot. It never holds a card number or CVC: only
// the rail's token, the network and the masked number.
type State struct {
	SubscriptionID  string `json:"subscription_id"`
	MerchantID      string `json:"merchant_id"`
	CustomerID      string `json:"customer_id"`
	Plan            Plan   `json:"plan"`
	Status          string `json:"status"`
	StartDate       string `json:"start_date"`
	NextDate        string `json:"next_date,omitempty"`
	CompletedCycles int    `json:"completed_cycles"`
	FailReason      string `json:"fail_reason,omitempty"`
	CardToken       string `json:"card_token,omitempty"`
	CardNetwork     string `json:"card_network,omitempty"`
	CardNumber      string `json:"card_number,omitempty"` // masked: first 6 and last 4 digits at most
	Reference       string `json:"reference,omitempty"`
	RedirectURL     string `json:"redirect_url,omitempty"`
	TestClockID     string `json:"test_clock_id,omitempty"`
	// WalletID is the merchant's KES settlement wallet: every cycle is converted to
	// KES and credited there, as card collections are (docs/api-decisions.md).
	WalletID string   `json:"wallet_id"`
	Terms    Terms    `json:"terms"`
	Customer Customer `json:"customer"`
	// CardOutcome is the sandbox test card's outcome for every charge
	// (rails/card.TestOutcome): the sandbox rail decides a cycle from it inside
	// the cycle's one command. Only CardApproves approves; anything else,
	// absent included, declines.
	CardOutcome string   `json:"card_outcome,omitempty"`
	LastPayment *Payment `json:"last_payment,omitempty"`
	// SetupTokenHash is the SHA-256 of the setup_url's token (the token itself is
	// only ever in the URL given to the merchant).
	SetupTokenHash string `json:"setup_token_hash,omitempty"`

	// The schedule: slot k falls on ScheduleDate(Anchor, unit, frequency,
	// k-AnchorSlot); Slot is the slot of NextDate. A success or a failure moves to
	// the next slot; a plan change or a date override re-anchors at the next slot,
	// and bumps Generation so the cycle's command id differs (CycleCommandID).
	Anchor     string   `json:"anchor,omitempty"`
	AnchorSlot int      `json:"anchor_slot"`
	Slot       int      `json:"slot"`
	Generation int      `json:"generation"`
	Attempt    *Attempt `json:"attempt,omitempty"`
	// Failures counts consecutive failed attempts (reset by a success or a new
	// card); the MaxFailedCharges-th cancels the subscription.
	Failures int `json:"failures,omitempty"`
	// LastChargeDate is the date of the last cycle charge (approved, declined or
	// opened with the rail). No cycle is charged on or before it, and no
	// next_date may be set there: a date is charged once, whatever re-anchored
	// the schedule (a generation bump gives a new command id, so the engine's
	// dedupe alone cannot stop it).
	LastChargeDate string `json:"last_charge_date,omitempty"`

	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Exists reports whether the snapshot is of a created subscription.
func (s State) Exists() bool { return s.Version > 0 }

// Billing reports whether the scheduler should charge it when due.
func (s State) Billing() bool {
	return (s.Status == StatusActive || s.Status == StatusFailed) && s.NextDate != "" && s.Attempt == nil
}

// ShowsFailReason: fail_reason is shown while FAILED, and on a subscription the
// retry policy canceled (MaxFailedCharges), so the merchant sees why it ended; a
// merchant's own unsubscribe has none.
func (s State) ShowsFailReason() bool {
	return (s.Status == StatusFailed || s.Status == StatusCanceled) && s.FailReason != ""
}
