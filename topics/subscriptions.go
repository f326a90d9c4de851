package topics

import (
	"time"

	"paysvc/actors/values/money"
)

// Subscription command types on paysvc.commands.v1.
const (
	CmdSubscriptionCreate      = "subscription.create"
	CmdSubscriptionActivate    = "subscription.activate"
	CmdSubscriptionCycle       = "subscription.cycle"
	CmdSubscriptionUnsubscribe = "subscription.unsubscribe"
	CmdSubscriptionUpdate      = "subscription.update"
)

// SubscriptionPlan is what a command carries of a plan, read by the API (or the
// scheduler) from the plans table when the command is issued.
type SubscriptionPlan struct {
	PlanID        string `json:"plan_id"`
	Frequency     int    `json:"frequency"`
	FrequencyUnit string `json:"frequency_unit"`
	BillingCycles int    `json:"billing_cycles"`
}

// SubscriptionCreate opens a PENDING subscription.
type SubscriptionCreate struct {
	SubscriptionID string           `json:"subscription_id"`
	CustomerID     string           `json:"customer_id"`
	Plan           SubscriptionPlan `json:"plan"`
	StartDate      string           `json:"start_date"`
	Reference      string           `json:"reference,omitempty"`
	RedirectURL    string           `json:"redirect_url,omitempty"`
	TestClockID    string           `json:"test_clock_id,omitempty"`
	SetupTokenHash string           `json:"setup_token_hash"`
	// WalletID is the merchant's KES settlement wallet, which every cycle credits.
	WalletID string               `json:"wallet_id"`
	Terms    SubscriptionTerms    `json:"terms"`
	Customer SubscriptionCustomer `json:"customer"`
}

// SubscriptionTerms are a plan's name, amount and currency as read by the issuer.
type SubscriptionTerms struct {
	Name     string `json:"name"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// SubscriptionCustomer is the customer record's identity at creation.
type SubscriptionCustomer struct {
	Email     string `json:"email"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
}

// SubscriptionActivate records the card set up on the hosted page: the rail's
// token, the network and the masked number, never the number or the CVC.
type SubscriptionActivate struct {
	SubscriptionID string `json:"subscription_id"`
	CardToken      string `json:"card_token"`
	CardNetwork    string `json:"card_network"`
	CardNumber     string `json:"card_number"`
	// CardOutcome is the sandbox test card's outcome for its charges
	// (rails/card.TestOutcome); never the number.
	CardOutcome string `json:"card_outcome,omitempty"`
}

// SubscriptionCycle is the scheduler's charge of one due cycle; its command id is
// subscription.CycleCommandID(SubscriptionID, Slot, Date, Generation).
type SubscriptionCycle struct {
	SubscriptionID string `json:"subscription_id"`
	Slot           int    `json:"slot"`
	Date           string `json:"date"`
	Generation     int    `json:"generation"`
	// Today is the date (EAT) the scheduler found the cycle due by: the wall
	// clock's, or the subscription's test clock's.
	Today string `json:"today"`
	// The plan's terms when the cycle was issued: what is owed, in the plan's
	// amount and currency. The subscription kind prices the charge from them when
	// it applies the cycle: converted to KES (PAYSVC_FX_RATES) as card
	// collections are, the card fee (PAYSVC_FEES, BUSINESS-PAYS) taken from it.
	Terms SubscriptionTerms `json:"terms"`
	// The charge as its issuer priced it, on a command the log may hold from an
	// issuer that priced before it issued; such a command applies as it was
	// priced. Value, Charges, NetAmount and Rate are the KES charge, the card fee,
	// the wallet's credit and the rate; PriceError, when set, fails the cycle with
	// that reason (e.g. a fee above the amount). The scheduler leaves them empty.
	Value      money.Amount `json:"value,omitzero"`
	Charges    money.Amount `json:"charges,omitzero"`
	NetAmount  money.Amount `json:"net_amount,omitzero"`
	Rate       string       `json:"rate,omitempty"`
	PriceError string       `json:"price_error,omitempty"`
}

// SubscriptionUnsubscribe cancels a subscription.
type SubscriptionUnsubscribe struct {
	SubscriptionID string `json:"subscription_id"`
}

// SubscriptionUpdate changes the plan (from the next cycle) and/or the next date.
type SubscriptionUpdate struct {
	SubscriptionID string             `json:"subscription_id"`
	Plan           *SubscriptionPlan  `json:"plan,omitempty"`
	Terms          *SubscriptionTerms `json:"terms,omitempty"`
	NextDate       string             `json:"next_date,omitempty"`
	Today          string             `json:"today,omitempty"`
}

// SubscriptionEventPlan is the plan object of a subscription_event.
type SubscriptionEventPlan struct {
	PlanID        string `json:"plan_id"`
	Name          string `json:"name"`
	Amount        string `json:"amount"`
	Currency      string `json:"currency"`
	Frequency     int    `json:"frequency"`
	FrequencyUnit string `json:"frequency_unit"`
}

// SubscriptionEventCustomer is the customer object of a subscription_event.
type SubscriptionEventCustomer struct {
	CustomerID string `json:"customer_id"`
	Email      string `json:"email"`
	FirstName  string `json:"first_name"`
	LastName   string `json:"last_name"`
}

// Subscription is the payload of a subscription_event (spec "Events"): the spec's
// fields, with plan_id and customer_id added to their objects so a consumer can
// fetch either.
type Subscription struct {
	ID              string                    `json:"id"`
	Status          string                    `json:"status"`
	Plan            SubscriptionEventPlan     `json:"plan"`
	Customer        SubscriptionEventCustomer `json:"customer"`
	CompletedCycles int                       `json:"completed_cycles"`
	NextDate        *string                   `json:"next_date"`
	FailReason      *string                   `json:"fail_reason"`
	CreatedAt       time.Time                 `json:"created_at"`
	UpdatedAt       time.Time                 `json:"updated_at"`
}
