package subscription

import (
	"errors"
	"strconv"
	"time"

	"paysvc/actors/values/ids"
)

// Refusals of Apply. ErrDuplicate and ErrStale are not faults: a repeated or
// overtaken command changes nothing and is answered with the current state.
var (
	ErrDuplicate = errors.New("subscription: already applied")
	ErrStale     = errors.New("subscription: the cycle is no longer the one due")
	ErrState     = errors.New("subscription: not allowed in this status")
	ErrCharging  = errors.New("subscription: a cycle charge is in progress")
	ErrInvalid   = errors.New("subscription: invalid")
	// ErrCharged refuses a charge, or a next_date, on or before the date of the
	// last charge: a date is charged once, whatever moved the schedule.
	ErrCharged = errors.New("subscription: a cycle was already charged on or after that date")
	// ErrCardOutcome refuses a card whose sandbox outcome is absent or unknown
	// (never an approval), and an approval the stored card does not allow.
	ErrCardOutcome = errors.New("subscription: the card's outcome is absent or unknown")
	// ErrPrincipal refuses a command its issuer may not give (ApplyBy).
	ErrPrincipal = errors.New("subscription: not a command this principal may issue")
)

// Card outcomes of the sandbox's test cards (rails/card.Outcome*, checked equal by
// a subscriptionkind test), as Activate records them. CardApproves is the only one
// that approves a charge: an absent or unknown outcome is refused at setup and can
// never approve a cycle.
const (
	CardApproves          = "success"
	CardDeclines          = "declined"
	CardInsufficientFunds = "insufficient_funds"
)

// KnownCardOutcome reports whether an outcome is one a card may be set up with.
func KnownCardOutcome(outcome string) bool {
	return outcome == CardApproves || outcome == CardDeclines || outcome == CardInsufficientFunds
}

// MaxFailedCharges is the retry policy's bound: a failed cycle is retried at the
// next scheduled dates (spec "Subscription status"), and the MaxFailedCharges-th
// failed charge in a row (the first attempt and three retries) ends the
// subscription: CANCELED, with fail_reason saying why (docs/state-machines.md).
// A successful charge, or a new card set up, starts the count again.
const MaxFailedCharges = 4

// Principal is who issues a command: the table of docs/state-machines.md
// ("Subscription: who may cause each transition") is ApplyBy's.
type Principal string

// The principals of a subscription.
const (
	// ByMerchant: the merchant's secret key (the API), or its published plan_url
	// page creating a subscription on its behalf.
	ByMerchant Principal = "merchant"
	// ByCustomer: the holder of the setup_url capability (the customer).
	ByCustomer Principal = "customer"
	// ByScheduler: the scheduler and the card rail (cycles and their outcomes).
	ByScheduler Principal = "scheduler"
)

// Principals lists every principal, in the table's order.
var Principals = []Principal{ByMerchant, ByCustomer, ByScheduler}

// IssuerOf is the one principal that may give a command (empty: unknown command).
func IssuerOf(cmd any) Principal {
	switch cmd.(type) {
	case Create, Unsubscribe, ChangePlan, SetNextDate:
		return ByMerchant
	case Activate:
		return ByCustomer
	case ChargeCycle, StartCycle, CycleCharged, CycleFailed:
		return ByScheduler
	}
	return ""
}

// Create opens a PENDING subscription; its first cycle falls on StartDate.
type Create struct {
	SubscriptionID, MerchantID, CustomerID string
	Plan                                   Plan
	StartDate                              string
	Reference, RedirectURL, TestClockID    string
	SetupTokenHash                         string
	WalletID                               string
	Terms                                  Terms
	Customer                               Customer
	At                                     time.Time
}

// Activate records the card the customer set up (PENDING -> ACTIVE). From FAILED
// it replaces the failing card (FAILED -> ACTIVE; the missed cycle is retried at
// next_date, docs/state-machines.md). CardOutcome must be a KnownCardOutcome.
type Activate struct {
	CardToken, CardNetwork, CardNumber string
	CardOutcome                        string
	At                                 time.Time
}

// ChargeCycle is one due cycle charged in one step: the sandbox rail's answer is
// known inside the command (the stored test card's outcome), so the cycle is
// opened and settled together. Approved false fails it with Reason. Payment is the
// record of the charge (kept as LastPayment).
type ChargeCycle struct {
	Slot       int
	Date       string
	Generation int
	Today      string
	InvoiceID  string
	Approved   bool
	Reason     string
	Terms      Terms
	Payment    *Payment
	At         time.Time
}

// StartCycle opens the charge of the slot due on Date: the scheduler's command,
// named by CycleCommandID(Slot, Date, Generation). Today is the date it is due by
// (EAT, or the test clock's).
type StartCycle struct {
	Slot       int
	Date       string
	Generation int
	Today      string
	InvoiceID  string
	At         time.Time
}

// CycleCharged records the card rail's approval of the attempt's invoice.
type CycleCharged struct {
	InvoiceID string
	At        time.Time
}

// CycleFailed records the card rail's refusal of the attempt's invoice.
type CycleFailed struct {
	InvoiceID, Reason string
	At                time.Time
}

// Unsubscribe cancels at once (PENDING, ACTIVE or FAILED -> CANCELED).
type Unsubscribe struct{ At time.Time }

// ChangePlan moves the subscription to another plan from its next cycle.
type ChangePlan struct {
	Plan  Plan
	Terms Terms
	At    time.Time
}

// SetNextDate overrides the next billing date (today or later); later cycles
// follow from it.
type SetNextDate struct {
	Date, Today string
	At          time.Time
}

// CycleCommandID is the command id of a cycle's charge: derived, so every
// scheduler instance (and a restarted one) issues the same id for the same cycle
// and the engine's processed-command dedupe makes all but the first a no-op.
// Generation changes when the schedule is re-anchored, so a cycle moved to another
// date is a new command rather than the stored answer of an overtaken one.
func CycleCommandID(subscriptionID string, slot int, date string, generation int) string {
	return ids.DeriveUUID("subscription-cycle", subscriptionID, strconv.Itoa(slot), date, strconv.Itoa(generation))
}

// CycleInvoiceID is the invoice of a cycle's charge, derived from its command id.
func CycleInvoiceID(commandID string) string {
	return ids.Derive(10, commandID, "subscription-invoice")
}
