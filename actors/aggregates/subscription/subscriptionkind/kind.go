// Package subscriptionkind plugs the subscription aggregate (actors/aggregates/subscription)
// into the engine's registry (docs/adr/0007-one-aggregate-contract.md): its
// commands, hydration and handlers. The engine does not know subscriptions by name.
//
// A cycle is one command (topics.CmdSubscriptionCycle, id subscription.CycleCommandID):
// the kind prices it from the plan's terms the command carries (subscription.PriceCycle:
// converted to KES, card fee BUSINESS-PAYS, by the fees and rates it was made with);
// the sandbox card rail's answer is the stored test card's outcome, so the command
// decides it, credits the merchant's KES settlement wallet through balanced ledger
// entries (card fee, BUSINESS-PAYS), records the cycle's invoice-shaped payment and
// moves the schedule, all in one batch or not at all.
package subscriptionkind

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/subscription/subscriptionstore"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// CodeStatus refuses a change the subscription's status does not allow (400).
const CodeStatus = "subscription_status"

var cyclesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_subscription_cycles_total",
	Help: "Subscription cycles charged, by outcome (approved, failed), counted once committed.",
}, []string{"outcome"})

// cycleRetries counts the cycles of cyclesTotal that retried a FAILED
// subscription (the retry policy's next date, or a new card), by outcome.
var cycleRetries = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_subscription_cycle_retries_total",
	Help: "Subscription cycles that retried a FAILED subscription (also counted in paysvc_subscription_cycles_total), by outcome (approved, failed), counted once committed.",
}, []string{"outcome"})

func init() {
	// Both outcomes exist from the start, at 0: a dashboard's ratio and an
	// alert's rate read 0 on a quiet service rather than nothing.
	for _, o := range []string{"approved", "failed"} {
		cyclesTotal.WithLabelValues(o)
		cycleRetries.WithLabelValues(o)
	}
}

// Subscriptions is the subscription kind as its commands use it through a Tx.
const Subscriptions = engine.Of[subscription.State](storage.SubscriptionKind)

// Kind is the subscription aggregate's registration. The engine's guards
// (docs/security.md): a card set up or charged through the sandbox's test cards
// is sandbox only (no live acquirer is connected: a live activation or cycle
// would invent money); an unsubscribe only stops billing, so a disabled
// merchant's is taken. fees and rates price each cycle when it is applied, as a
// card collection is priced (nil: tariff.DefaultSchedule, tariff.DefaultRates).
func Kind(fees *tariff.Schedule, rates *tariff.Rates) engine.Kind {
	p := pricing{fees: fees, rates: rates}
	return engine.Define[subscription.State](aggregate{},
		engine.On[subscription.State](topics.CmdSubscriptionCreate, engine.Guard{},
			func(p *topics.SubscriptionCreate) []string { return idOf(p.SubscriptionID) }, create,
			engine.Creates(creates)),
		engine.On[subscription.State](topics.CmdSubscriptionActivate, engine.Guard{SandboxOnly: true},
			func(p *topics.SubscriptionActivate) []string { return idOf(p.SubscriptionID) }, activate),
		engine.On[subscription.State](topics.CmdSubscriptionCycle, engine.Guard{SandboxOnly: true},
			func(p *topics.SubscriptionCycle) []string { return idOf(p.SubscriptionID) }, p.cycle),
		engine.On[subscription.State](topics.CmdSubscriptionUnsubscribe, engine.Guard{WhileDisabled: true},
			func(p *topics.SubscriptionUnsubscribe) []string { return idOf(p.SubscriptionID) }, unsubscribe),
		engine.On[subscription.State](topics.CmdSubscriptionUpdate, engine.Guard{},
			func(p *topics.SubscriptionUpdate) []string { return idOf(p.SubscriptionID) }, update),
	)
}

// aggregate is the subscription's definition: hosted (its pure Step), loaded by
// id, its ids claimed across merchants.
type aggregate struct{}

// The parts the engine discovers: a method whose signature drifted would be
// silently missed, so each is checked here.
var (
	_ engine.Hosting[subscription.State]   = aggregate{}
	_ engine.Referring[subscription.State] = aggregate{}
	_ engine.Claiming                      = aggregate{}
)

func (aggregate) Name() string { return storage.SubscriptionKind }

// New: a subscription does not exist before its create (Version 0).
func (aggregate) New(string) subscription.State { return subscription.State{} }

func (aggregate) Step(s subscription.State, msg any) (subscription.State, any, error) {
	return subscription.Step(s, msg)
}

// idOf is the one instance a command names; none when the payload names none.
func idOf(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

// creates: a create opens its subscription, under an id drawn at the edge.
func creates(p *topics.SubscriptionCreate) []string { return []string{p.SubscriptionID} }

// Taken: subscription ids are the subscriptions table's primary key across merchants.
func (aggregate) Taken(ctx context.Context, q sqlx.QueryerContext, o storage.Owned) (map[string]bool, error) {
	return storage.TakenElsewhere(ctx, q, "subscriptions", "subscription_id", o)
}

// Refs: a subscription's payments go to its wallet.
func (aggregate) Refs(s subscription.State) []engine.Ref {
	if s.WalletID != "" {
		return []engine.Ref{{Kind: walletkind.Name, ID: s.WalletID}}
	}
	return nil
}

func (aggregate) Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, idList []string) ([]engine.Stored[subscription.State], error) {
	found, err := subscriptionstore.Load(ctx, q, merchantID, idList)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Stored[subscription.State], 0, len(found))
	for id, s := range found {
		out = append(out, engine.Stored[subscription.State]{ID: id, Version: s.Version, State: s.State})
	}
	return out, nil
}

// get is the merchant's subscription id (not found: none, or another merchant's).
func get(tx *engine.Tx, id string) (subscription.State, bool) {
	if s, ok := Subscriptions.Find(tx, id); ok {
		return s, s.Exists() && s.MerchantID == tx.Merchant()
	}
	return subscription.State{}, false
}

func notFound() topics.Reply {
	return engine.Refuse(engine.CodeNotFound, "Subscription not found.", "subscription_id")
}

func terms(t topics.SubscriptionTerms) subscription.Terms {
	return subscription.Terms{Name: t.Name, Amount: t.Amount, Currency: t.Currency}
}

func plan(p topics.SubscriptionPlan) subscription.Plan {
	return subscription.Plan{PlanID: p.PlanID, Frequency: p.Frequency, FrequencyUnit: p.FrequencyUnit, BillingCycles: p.BillingCycles}
}

// ask steps the merchant's subscription id with cmd as by gives it.
func ask(tx *engine.Tx, id string, by subscription.Principal, cmd any) (engine.Outcome[subscription.State], error) {
	return Subscriptions.Ask(tx, id, subscription.Given{By: by, Cmd: cmd})
}

// stepped is a command that steps the merchant's subscription id once, with cmd
// as by gives it. Its answer: not found; the state as it was for a repeated
// command (ErrDuplicate); refused(the state as it was, why) for another refusal;
// else the new state, with its subscription_event.
func stepped(tx *engine.Tx, id string, by subscription.Principal, cmd any,
	refused func(s subscription.State, err error) topics.Reply) (topics.Reply, error) {
	s, ok := get(tx, id)
	if !ok {
		return notFound(), nil
	}
	o, err := ask(tx, id, by, cmd)
	switch {
	case err != nil:
		return topics.Reply{}, err
	case errors.Is(o.Err, subscription.ErrDuplicate):
		return current(s), nil
	case o.Err != nil:
		return refused(s, o.Err), nil
	}
	return changed(tx, o.After), nil
}

// changed emits the new state's subscription_event and answers it.
func changed(tx *engine.Tx, n subscription.State) topics.Reply {
	tx.Event(topics.SubscriptionEvent, n.SubscriptionID, Event(n))
	return current(n)
}

// current answers the state without changing it (a repeated or overtaken command).
func current(s subscription.State) topics.Reply { return topics.Reply{Result: mustJSON(s)} }

func create(tx *engine.Tx, _ *topics.Command, in *topics.SubscriptionCreate) (topics.Reply, error) {
	if _, ok := Subscriptions.Find(tx, in.SubscriptionID); ok || tx.TakenElsewhere(in.SubscriptionID) {
		return engine.Refuse(engine.CodeIDTaken, "Subscription id is already in use; retry the request.", ""), nil
	}
	if in.WalletID == "" {
		return engine.Refuse(engine.CodeInvalid, "The merchant has no KES settlement wallet to receive the payments.", ""), nil
	}
	o, err := Subscriptions.Create(tx, in.SubscriptionID, subscription.Given{By: subscription.ByMerchant, Cmd: subscription.Create{
		SubscriptionID: in.SubscriptionID, MerchantID: tx.Merchant(),
		CustomerID: in.CustomerID, Plan: plan(in.Plan), StartDate: in.StartDate, Reference: in.Reference, RedirectURL: in.RedirectURL,
		TestClockID: in.TestClockID, SetupTokenHash: in.SetupTokenHash, WalletID: in.WalletID, Terms: terms(in.Terms),
		Customer: subscription.Customer{Email: in.Customer.Email, FirstName: in.Customer.FirstName, LastName: in.Customer.LastName},
		At:       tx.At()}})
	if err != nil {
		return topics.Reply{}, err
	}
	if o.Err != nil {
		return engine.Refuse(engine.CodeInvalid, "Invalid subscription: "+o.Err.Error(), ""), nil
	}
	return changed(tx, o.After), nil
}

func activate(tx *engine.Tx, _ *topics.Command, in *topics.SubscriptionActivate) (topics.Reply, error) {
	return stepped(tx, in.SubscriptionID, subscription.ByCustomer, subscription.Activate{CardToken: in.CardToken,
		CardNetwork: in.CardNetwork, CardNumber: in.CardNumber, CardOutcome: in.CardOutcome, At: tx.At()},
		func(s subscription.State, err error) topics.Reply {
			if errors.Is(err, subscription.ErrCardOutcome) {
				return engine.Refuse(engine.CodeInvalid, "The card cannot be set up: its outcome is unknown.", "card_number")
			}
			return engine.Refuse(CodeStatus, "A card can be set up only while the subscription is PENDING or FAILED; it is "+s.Status+".", "")
		})
}

// declineReason is the sandbox rail's answer for a stored test card: "" approves,
// and only the approving test card's outcome does. An absent or unknown outcome
// declines (fail closed: nobody said this card pays).
func declineReason(outcome string) string {
	switch outcome {
	case subscription.CardApproves:
		return ""
	case subscription.CardDeclines:
		return "The card was declined (do not honour)."
	case subscription.CardInsufficientFunds:
		return "Insufficient funds on the card."
	}
	return "The card was declined: its outcome is unknown."
}

// pricing is the fee schedule and FX table the kind prices its cycles by.
type pricing struct {
	fees  *tariff.Schedule
	rates *tariff.Rates
}

// charge is the cycle's card charge, or why it cannot be charged. A command the
// scheduler priced before it issued it (one already in the log) carries its
// price, or the reason, and applies as it was priced; any other is priced now
// from the terms it carries. A priced command never carries a zero value: the
// card fee refuses a zero amount.
func (p pricing) charge(in *topics.SubscriptionCycle) (subscription.Charge, string) {
	if in.PriceError != "" || !in.Value.IsZero() {
		return subscription.Charge{Value: in.Value, Charges: in.Charges, NetAmount: in.NetAmount, Rate: in.Rate}, in.PriceError
	}
	return subscription.PriceCycle(p.fees, p.rates, terms(in.Terms))
}

func (p pricing) cycle(tx *engine.Tx, _ *topics.Command, in *topics.SubscriptionCycle) (topics.Reply, error) {
	s, ok := get(tx, in.SubscriptionID)
	if !ok {
		return notFound(), nil
	}
	invoiceID := subscription.CycleInvoiceID(subscription.CycleCommandID(in.SubscriptionID, in.Slot, in.Date, in.Generation))
	charge := subscription.ChargeCycle{Slot: in.Slot, Date: in.Date, Generation: in.Generation, Today: in.Today,
		InvoiceID: invoiceID, Terms: terms(in.Terms), At: tx.At()}
	// Is this cycle still the one due? A repeated or overtaken cycle, or one on a
	// date already charged, changes nothing. Asked of the pure step, not the
	// instance: the charge's outcome is known only once the wallet took the credit.
	if _, _, err := subscription.Step(s, subscription.Given{By: subscription.ByScheduler, Cmd: charge}); err != nil {
		if errors.Is(err, subscription.ErrDuplicate) || errors.Is(err, subscription.ErrStale) || errors.Is(err, subscription.ErrCharged) {
			return current(s), nil
		}
		return engine.Refuse(engine.CodeInvalid, "The cycle cannot be charged: "+err.Error(), ""), nil
	}
	priced, reason := p.charge(in)
	if reason == "" {
		reason = declineReason(s.CardOutcome)
	}
	narrative := "Subscription " + s.SubscriptionID + " cycle " + strconv.Itoa(s.CompletedCycles+1) + " " + s.CardNetwork + " " + last4(s.CardNumber)
	if reason == "" {
		err := tx.Credit(s.WalletID, wallet.Collect{TransactionID: ids.Derive(10, invoiceID, "collect"), Value: priced.Value,
			Charges: priced.Charges, NetAmount: priced.NetAmount, Clearing: ledger.CardClearing, Narrative: narrative})
		var we engine.WalletError
		if errors.As(err, &we) {
			// The card would be charged for money the wallet cannot take (e.g. a
			// balance limit): fail the cycle rather than charge it.
			reason = "The merchant's wallet cannot receive this payment."
		} else if err != nil {
			return topics.Reply{}, err
		}
	}
	charge.Approved, charge.Reason = reason == "", reason
	charge.Payment = payment(s, *in, priced, invoiceID, reason, narrative, tx)
	o, err := ask(tx, in.SubscriptionID, subscription.ByScheduler, charge)
	if err == nil {
		err = o.Err // validated above: a broken invariant fails the batch (and undoes the credit)
	}
	if err != nil {
		return topics.Reply{}, err
	}
	outcome := "approved"
	if reason != "" {
		outcome = "failed"
	}
	retry := s.Status == subscription.StatusFailed
	tx.AfterCommit(func() {
		cyclesTotal.WithLabelValues(outcome).Inc()
		if retry {
			cycleRetries.WithLabelValues(outcome).Inc()
		}
	})
	return changed(tx, o.After), nil
}

func last4(masked string) string {
	if len(masked) < 4 {
		return masked
	}
	return masked[len(masked)-4:]
}

// payment is the cycle's invoice-shaped record: what GET .../transactions/ and
// the customer's payments show, in the Payment session form of every invoice.
func payment(s subscription.State, in topics.SubscriptionCycle, c subscription.Charge, invoiceID, reason, narrative string, tx *engine.Tx) *subscription.Payment {
	st := invoice.StateComplete
	if reason != "" {
		st = invoice.StateFailed
	}
	zero := func(a money.Amount) money.Amount {
		if a.IsZero() {
			return money.Zero()
		}
		return a
	}
	inv := invoice.State{InvoiceID: invoiceID, MerchantID: s.MerchantID, WalletID: s.WalletID, State: st, Provider: "CARD",
		Currency: "KES", Value: zero(c.Value), Charges: zero(c.Charges), NetAmount: zero(c.NetAmount), Tariff: tariff.BusinessPays,
		APIRef: s.Reference, FailedReason: reason, CardLast4: last4(s.CardNumber), CardNetwork: s.CardNetwork, Cleared: reason == "",
		Email: s.Customer.Email, Customer: invoice.Customer{CustomerID: s.CustomerID, FirstName: s.Customer.FirstName,
			LastName: s.Customer.LastName}, Narrative: narrative, Version: 1, CreatedAt: tx.At(), UpdatedAt: tx.At()}
	if reason != "" {
		inv.FailedCode = "card_declined"
	}
	return &subscription.Payment{InvoiceID: invoiceID, Slot: in.Slot, Date: in.Date, Status: st, Invoice: mustJSON(inv)}
}

func unsubscribe(tx *engine.Tx, _ *topics.Command, in *topics.SubscriptionUnsubscribe) (topics.Reply, error) {
	return stepped(tx, in.SubscriptionID, subscription.ByMerchant, subscription.Unsubscribe{At: tx.At()},
		func(s subscription.State, _ error) topics.Reply {
			return engine.Refuse(CodeStatus, "A "+s.Status+" subscription cannot be canceled.", "")
		})
}

func update(tx *engine.Tx, _ *topics.Command, in *topics.SubscriptionUpdate) (topics.Reply, error) {
	s, ok := get(tx, in.SubscriptionID)
	if !ok {
		return notFound(), nil
	}
	// Both changes step the subscription in turn; a refusal of the second undoes
	// the first (the engine rolls a refused command's steps back).
	n := s
	if in.Plan != nil {
		cp := subscription.ChangePlan{Plan: plan(*in.Plan), At: tx.At()}
		if in.Terms != nil {
			cp.Terms = terms(*in.Terms)
		}
		o, err := ask(tx, in.SubscriptionID, subscription.ByMerchant, cp)
		switch {
		case err != nil:
			return topics.Reply{}, err
		case errors.Is(o.Err, subscription.ErrDuplicate):
		case errors.Is(o.Err, subscription.ErrInvalid):
			return engine.Refuse(engine.CodeInvalid, "The plan cannot be used: "+o.Err.Error(), "plan_id"), nil
		case o.Err != nil:
			return engine.Refuse(CodeStatus, "A "+s.Status+" subscription cannot change.", ""), nil
		default:
			n = o.After
		}
	}
	if in.NextDate != "" {
		o, err := ask(tx, in.SubscriptionID, subscription.ByMerchant, subscription.SetNextDate{Date: in.NextDate, Today: in.Today, At: tx.At()})
		switch {
		case err != nil:
			return topics.Reply{}, err
		case errors.Is(o.Err, subscription.ErrDuplicate):
		case errors.Is(o.Err, subscription.ErrCharged):
			return engine.Refuse(engine.CodeInvalid, "next_date must be after "+n.LastChargeDate+
				", the date of the last charge: a date is charged once.", "next_date"), nil
		case errors.Is(o.Err, subscription.ErrInvalid):
			return engine.Refuse(engine.CodeInvalid, "next_date must be a date today or later (YYYY-MM-DD).", "next_date"), nil
		case o.Err != nil:
			return engine.Refuse(CodeStatus, "The next date of a "+s.Status+" subscription cannot change now.", ""), nil
		default:
			n = o.After
		}
	}
	if n.Version == s.Version {
		return current(s), nil
	}
	return changed(tx, n), nil
}

// Event is the subscription_event payload of a state (spec "Events").
func Event(s subscription.State) topics.Subscription {
	ev := topics.Subscription{ID: s.SubscriptionID, Status: s.Status,
		Plan: topics.SubscriptionEventPlan{PlanID: s.Plan.PlanID, Name: s.Terms.Name, Amount: s.Terms.Amount, Currency: s.Terms.Currency,
			Frequency: s.Plan.Frequency, FrequencyUnit: s.Plan.FrequencyUnit},
		Customer: topics.SubscriptionEventCustomer{CustomerID: s.CustomerID, Email: s.Customer.Email, FirstName: s.Customer.FirstName,
			LastName: s.Customer.LastName},
		CompletedCycles: s.CompletedCycles, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
	if s.NextDate != "" {
		d := s.NextDate
		ev.NextDate = &d
	}
	if s.ShowsFailReason() {
		r := s.FailReason
		ev.FailReason = &r
	}
	return ev
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types
	}
	return b
}
