package subscription

import (
	"errors"
	"strconv"
	"time"

	"paysvc/actors/ids"
)

// Refusals of Apply. ErrDuplicate and ErrStale are not faults: a repeated or
// overtaken command changes nothing and is answered with the current state.
var (
	ErrDuplicate = errors.New("subscription: already applied")
	ErrStale     = errors.New("subscription: the cycle is no longer the one due")
	ErrState     = errors.New("subscription: not allowed in this status")
	ErrCharging  = errors.New("subscription: a cycle charge is in progress")
	ErrInvalid   = errors.New("subscription: invalid")
)

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
// next_date, docs/state-machines.md).
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
