// Package invoicekind registers the invoice (collection) aggregate
// (actors/aggregates/invoice) with the engine (docs/adr/0007-one-aggregate-contract.md): an
// STK push, card or PesaLink payment opens an invoice, converted to KES and priced
// here from what the customer asked (invoice.Quote), and queues its rail's request; the rail's
// outcomes move it, and completion credits its wallet in the same command (the
// engine's Tx money API); a card clearing releases the funds. Invoices commit as the core's column arrays
// (migration 0039).
package invoicekind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/ledger"
	"paysvc/storage"
	"paysvc/topics"
)

// Name is the invoices' kind.
const Name = storage.InvoiceKind

// CodeWalletNotKES refuses a collection into a wallet that is not a KES one.
const CodeWalletNotKES = "wallet_not_kes"

// StageSent is the provider-result stage that records the rail's reference for a
// prompt without a state change. The rails role now sends ACCEPTED when Daraja takes
// a prompt (PENDING -> PROCESSING, as in the sandbox); SENT is still applied for
// commands produced before that change.
const StageSent = "SENT"

// StageUnknown is the provider-result stage of a prompt whose fate the rail could
// not learn (a timeout after the request was written, an unreadable answer): the
// invoice waits in PROCESSING for its callback or status query.
const StageUnknown = "UNKNOWN"

// StageAccepted (the prompt reached the payer) and StageFinal (the payment's
// outcome) are the rails' other stages (mpesa.StageAccepted, mpesa.StageFinal).
const (
	StageAccepted = "ACCEPTED"
	StageFinal    = "FINAL"
)

var (
	collectionsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_collections_total",
		Help: "Collections (invoices) reaching a state in a committed batch, by rail (mpesa, card, pesalink) and state " +
			"(PENDING when opened, PROCESSING, COMPLETE, FAILED).",
	}, []string{"rail", "state"})
	collectionOutcomeSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "paysvc_collections_outcome_seconds",
		Help: "From a collection being opened to its final state (COMPLETE or FAILED), in the engine's batch time, by rail and state: " +
			"for M-Pesa the STK prompt's outcome latency.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14), // 50 ms .. ~7 min (an unanswered prompt times out)
	}, []string{"rail", "state"})
	contradictedOutcomes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_engine_contradicted_outcomes_total",
		Help: "Rail reports of a payment for a collection that had already FAILED: refused (a final state does not move) and logged; each needs an operator (ops/runbooks.md#contradicted-outcomes).",
	})
)

// collectionRails names an invoice's provider as the rail label.
var collectionRails = map[string]string{"M-PESA": "mpesa", "CARD": "card", "PESALINK": "pesalink"}

func collectionRail(provider string) string {
	if r, ok := collectionRails[provider]; ok {
		return r
	}
	return strings.ToLower(provider)
}

func init() {
	// Every series a dashboard shows exists from the start, at 0, so an idle
	// service's panels read 0 rather than "No data".
	for _, rail := range collectionRails {
		for _, st := range []string{invoice.StatePending, invoice.StateProcessing, invoice.StateComplete, invoice.StateFailed} {
			collectionsTotal.WithLabelValues(rail, st)
		}
		collectionOutcomeSeconds.WithLabelValues(rail, invoice.StateComplete)
		collectionOutcomeSeconds.WithLabelValues(rail, invoice.StateFailed)
	}
}

// Invoices is the invoice kind as commands use it through a Tx.
const Invoices = engine.Of[invoice.State](Name)

// Kind is the invoice aggregate's registration. fees prices the collections it
// opens and rates converts what the customer asked into KES first (nil:
// tariff.DefaultSchedule, tariff.DefaultRates).
func Kind(fees *tariff.Schedule, rates *tariff.Rates) engine.Kind {
	if fees == nil {
		fees = tariff.DefaultSchedule()
	}
	if rates == nil {
		rates = tariff.DefaultRates()
	}
	open := func(tx *engine.Tx, c *topics.Command, in *topics.InvoiceSTKPush) (topics.Reply, error) {
		return stkPush(tx, c, in, fees, rates)
	}
	return engine.Define[invoice.State](aggregate{},
		engine.On[invoice.State](topics.CmdInvoiceSTKPush, engine.Guard{},
			func(p *topics.InvoiceSTKPush) []string { return []string{p.InvoiceID} }, open,
			engine.Needs(needs), engine.Creates(creates)),
		// A rail's outcome and a clearing complete money already in motion.
		engine.On[invoice.State](topics.CmdInvoiceProviderResult, engine.Guard{WhileDisabled: true},
			func(p *topics.ProviderResult) []string { return []string{p.InvoiceID} }, providerResult),
		engine.On[invoice.State](topics.CmdInvoiceClear, engine.Guard{WhileDisabled: true},
			func(p *topics.InvoiceClear) []string { return []string{p.InvoiceID} }, clearInvoice),
	)
}

// aggregate is the invoice's definition: hosted (its pure Step), loaded by id
// and by merchant, its ids claimed across merchants, written by the core's
// column arrays.
type aggregate struct{}

// The parts the engine discovers: a method whose signature drifted would be
// silently missed, so each is checked here.
var (
	_ engine.Hosting[invoice.State]      = aggregate{}
	_ engine.OwnedLoading[invoice.State] = aggregate{}
	_ engine.Referring[invoice.State]    = aggregate{}
	_ engine.Finishing[invoice.State]    = aggregate{}
	_ engine.Writing[invoice.State]      = aggregate{}
	_ engine.Claiming                    = aggregate{}
)

func (aggregate) Name() string                          { return Name }
func (aggregate) New(id string) invoice.State           { return invoice.State{InvoiceID: id} }
func (aggregate) Rows() engine.TypedRows[invoice.State] { return rows{storage.NewInvoiceWrites()} }

func (aggregate) Step(s invoice.State, msg any) (invoice.State, any, error) {
	return invoice.Step(s, msg)
}

func (aggregate) Taken(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]bool, error) {
	return invoicestore.TakenElsewhere(ctx, q, want)
}

// creates: a push opens its invoice, under an id drawn at the edge.
func creates(p *topics.InvoiceSTKPush) []string { return []string{p.InvoiceID} }

// needs: a push names its receiving wallet, or the merchant's KES settlement one.
func needs(p *topics.InvoiceSTKPush) []engine.Ref {
	if p.WalletID != "" {
		return []engine.Ref{{Kind: walletkind.Name, ID: p.WalletID}}
	}
	return []engine.Ref{{Kind: walletkind.Name, Key: walletkind.SettlementKey("KES")}}
}

// Refs: an invoice's wallet receives its money.
func (aggregate) Refs(s invoice.State) []engine.Ref {
	if s.WalletID != "" {
		return []engine.Ref{{Kind: walletkind.Name, ID: s.WalletID}}
	}
	return nil
}

// Final: a COMPLETE or FAILED invoice hardly moves again (its actor goes at commit).
func (aggregate) Final(s invoice.State) bool {
	return s.State == invoice.StateComplete || s.State == invoice.StateFailed
}

func stored(s invoice.State) engine.Stored[invoice.State] {
	return engine.Stored[invoice.State]{ID: s.InvoiceID, Version: s.Version, State: s}
}

func (aggregate) LoadOwned(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]engine.Stored[invoice.State], error) {
	found, err := invoicestore.LoadOwned(ctx, q, want)
	if err != nil {
		return nil, err
	}
	out := make(map[string]engine.Stored[invoice.State], len(found))
	for _, s := range found {
		out[engine.InstanceKey(s.MerchantID, s.InvoiceID)] = stored(s)
	}
	return out, nil
}

func (aggregate) Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, idList []string) ([]engine.Stored[invoice.State], error) {
	found, err := invoicestore.Load(ctx, q, merchantID, idList)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Stored[invoice.State], 0, len(found))
	for _, s := range found {
		out = append(out, stored(s))
	}
	return out, nil
}

// rows writes invoices as the core's column arrays (migration 0039).
type rows struct{ w *storage.InvoiceWrites }

func (r rows) Touch(_, _ string, before, after engine.Stored[invoice.State], _ []any) error {
	invoicestore.Touch(r.w, before.State, after.State)
	return nil
}

func (r rows) Writes() storage.AggregateRows { return r.w }

// counted books an invoice's state change for when its batch commits.
func counted(tx *engine.Tx, before, after invoice.State) {
	if f := collectionCount(before, after); f != nil {
		tx.AfterCommit(f)
	}
}

// collectionCount is the count of an invoice's state change (nil: no change).
func collectionCount(before, after invoice.State) func() {
	if after.State == before.State {
		return nil
	}
	rail, st := collectionRail(after.Provider), after.State
	var took time.Duration
	fin := st == invoice.StateComplete || st == invoice.StateFailed
	if fin {
		took = after.UpdatedAt.Sub(after.CreatedAt)
	}
	return func() {
		collectionsTotal.WithLabelValues(rail, st).Inc()
		if fin {
			collectionOutcomeSeconds.WithLabelValues(rail, st).Observe(took.Seconds())
		}
	}
}

// clearInvoice makes a completed card collection's funds available.
func clearInvoice(tx *engine.Tx, c *topics.Command, in *topics.InvoiceClear) (topics.Reply, error) {
	if _, ok := Invoices.Find(tx, in.InvoiceID); !ok {
		return engine.Refuse(engine.CodeNotFound, "Invoice not found.", "invoice_id"), nil
	}
	r, err := Invoices.Ask(tx, in.InvoiceID, invoice.Clear{At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(r.Err, invoice.ErrDuplicate) {
		return topics.Reply{Result: mustJSON(r.After)}, nil
	}
	if r.Err != nil {
		return engine.Refuse(engine.CodeInvalid, r.Err.Error(), ""), nil
	}
	inv := r.After
	// The funds were credited uncleared: a refusal here is a broken invariant,
	// which fails the batch rather than answer the clearing.
	if err := tx.Release(inv.WalletID, inv.NetAmount); err != nil {
		return topics.Reply{}, walletGone(err, "engine: wallet of invoice "+inv.InvoiceID+" is gone")
	}
	counted(tx, r.Before, inv)
	return topics.Reply{Result: mustJSON(inv)}, nil
}

// stkPush opens a PENDING invoice, and in the same command queues the prompt for
// the rails role and emits the collection_event.
func stkPush(tx *engine.Tx, c *topics.Command, in *topics.InvoiceSTKPush, fees *tariff.Schedule, rates *tariff.Rates) (topics.Reply, error) {
	// Invoice ids are drawn at the edge and are the invoices' primary key across
	// merchants: an id in use (this merchant's or another's) is refused before
	// anything is written, so the edge draws another (docs/api-decisions.md, "Ids").
	if tx.Live(Name, in.InvoiceID) || tx.TakenElsewhere(in.InvoiceID) {
		return engine.Refuse(engine.CodeIDTaken, "Invoice id is already in use; retry the request.", ""), nil
	}
	provider := invoice.MethodOf(in.Provider)
	// Converted and priced here, behind the log, from what the customer asked: the
	// refusal is the one a quote of the same request answers with.
	q, err := invoice.Quote(fees, rates, provider, in.Tariff, in.Currency, in.Amount)
	var pe *invoice.PriceError
	if errors.As(err, &pe) {
		return engine.Refuse(engine.CodeInvalid, pe.Detail, pe.Attr), nil
	}
	if err != nil {
		return topics.Reply{}, err
	}
	walletID := in.WalletID
	if walletID == "" {
		id, ok := tx.Lookup(walletkind.Name, walletkind.SettlementKey("KES"))
		if !ok {
			return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
		}
		walletID = id
	}
	tw, ok := walletkind.Wallets.Find(tx, walletID)
	if !ok {
		return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	if tw.MerchantID != c.MerchantID || !tw.Exists() {
		return engine.Refuse(engine.CodeNotFound, "Wallet not found.", "wallet_id"), nil
	}
	if tw.Currency != "KES" {
		return engine.Refuse(CodeWalletNotKES, "M-Pesa collections settle in KES: wallet_id must be a KES wallet.", "wallet_id"), nil
	}
	r, err := Invoices.Create(tx, in.InvoiceID, invoice.Create{
		InvoiceID: in.InvoiceID, MerchantID: c.MerchantID, WalletID: tw.WalletID, Provider: provider,
		Currency: "KES", Tariff: invoice.TariffOrDefault(in.Tariff), Value: q.Value, Charges: q.Charges, NetAmount: q.NetAmount,
		Account: in.Phone, APIRef: in.APIRef, CheckoutID: in.CheckoutID, Email: in.Email,
		CardLast4: in.CardLast4, CardNetwork: in.CardNetwork, Customer: in.Customer, Host: in.Host,
		Narrative: in.Narrative, PaymentLinkID: in.PaymentLinkID, At: tx.At(),
	})
	if err != nil {
		return topics.Reply{}, err
	}
	if errors.Is(r.Err, invoice.ErrExists) {
		// Another command of this batch opened the id first (another merchant's
		// too: the engine names actors by id within a partition).
		return engine.Refuse(engine.CodeIDTaken, "Invoice id is already in use; retry the request.", ""), nil
	}
	if r.Err != nil {
		return engine.Refuse(engine.CodeInvalid, "Invalid invoice: "+r.Err.Error(), ""), nil
	}
	after := r.After
	counted(tx, r.Before, after)
	collectionEvent(tx, after)
	if provider == "CARD" || provider == "PESALINK" {
		topic := topics.RailsCardTopic
		if provider == "PESALINK" {
			topic = topics.RailsPesalinkTopic
		}
		req := topics.CardRequest{InvoiceID: in.InvoiceID, MerchantID: c.MerchantID, Amount: after.Value, Currency: "KES",
			Last4: in.CardLast4, Network: in.CardNetwork, TestOutcome: in.TestOutcome}
		tx.Emit(storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "rail"), Topic: topic,
			Key: c.MerchantID, MerchantID: c.MerchantID, Body: mustJSON(req)})
	} else {
		req := topics.STKRequest{InvoiceID: in.InvoiceID, MerchantID: c.MerchantID, Phone: in.Phone, Amount: after.Value, AccountRef: in.APIRef}
		tx.Emit(storage.OutboxEvent{EventID: ids.DeriveUUID(c.ID, "stk"), Topic: topics.RailsMpesaSTKTopic,
			Key: c.MerchantID, MerchantID: c.MerchantID, Body: mustJSON(req)})
	}
	return topics.Reply{Result: mustJSON(after)}, nil
}

// providerResult applies a rail's outcome. Completion credits the receiving wallet
// in the same command; a repeated or late outcome changes nothing.
func providerResult(tx *engine.Tx, c *topics.Command, in *topics.ProviderResult) (topics.Reply, error) {
	cur, ok := Invoices.Find(tx, in.InvoiceID)
	if !ok {
		return engine.Refuse(engine.CodeNotFound, "Invoice not found.", "invoice_id"), nil
	}
	var cmd any
	settle := false // the rail says the payer paid
	switch {
	case in.Stage != StageFinal && in.Stage != StageSent && in.Stage != StageUnknown && in.Stage != StageAccepted:
		// Only a FINAL outcome settles or fails an invoice: a missing or unknown
		// stage is never read as one (fail closed).
		return engine.Refuse(engine.CodeInvalid, "Unknown outcome stage.", "stage"), nil
	case in.Stage == StageSent:
		cmd = invoice.Sent{CheckoutRequestID: in.CheckoutRequestID, At: tx.At()}
	case in.Stage == StageUnknown:
		cmd = invoice.Unknown{CheckoutRequestID: in.CheckoutRequestID, Reason: in.Description, At: tx.At()}
	case in.Stage == StageAccepted:
		cmd = invoice.Accept{CheckoutRequestID: in.CheckoutRequestID, At: tx.At()}
	case in.Code == 0:
		// M-Pesa funds clear at once; card funds when the acquirer settles (invoice.clear).
		// The paid amount, when the provider reports one, is checked by Apply.
		cmd, settle = invoice.Settle{Receipt: in.Receipt, CheckoutRequestID: in.CheckoutRequestID, Cleared: cur.Provider != "CARD",
			Paid: in.PaidAmount, At: tx.At()}, true
	default:
		cmd = invoice.Fail{Code: strconv.Itoa(in.Code), Reason: in.Description, CheckoutRequestID: in.CheckoutRequestID, At: tx.At()}
	}
	r, err := Invoices.Ask(tx, in.InvoiceID, cmd)
	if err != nil {
		return topics.Reply{}, err
	}
	before := r.Before
	if errors.Is(r.Err, invoice.ErrDuplicate) || errors.Is(r.Err, invoice.ErrHeld) {
		return resultAck(r.After), nil
	}
	if r.Err != nil {
		if settle && before.State == invoice.StateFailed {
			// The rail says the payer paid an invoice the service had failed: the
			// money may be with the merchant's paybill and not in any wallet. It
			// is refused (a final state does not move), but never silently.
			tx.AfterCommitAnyway(contradictedOutcomes.Inc)
			tx.Log().ErrorContext(tx.Context(), "payment reported for a FAILED collection: refused, needs an operator",
				"invoice_id", before.InvoiceID, "merchant_id", before.MerchantID, "receipt", in.Receipt,
				"command_id", c.ID)
		}
		return engine.Refuse(engine.CodeInvalid, r.Err.Error(), ""), nil
	}
	inv := r.After
	if inv.Held && !before.Held {
		// Not credited: the amount M-Pesa reports differs from what was asked
		// (docs/security.md). The API counted the callback; this is the decision.
		tx.Log().ErrorContext(tx.Context(), "collection held: paid amount differs from the invoice; nothing credited",
			"invoice_id", inv.InvoiceID, "merchant_id", inv.MerchantID, "value", inv.Value.String(),
			"paid", inv.PaidAmount.String(), "receipt", inv.MpesaReference)
	}
	if in.Stage == StageSent || before.State == inv.State {
		return resultAck(inv), nil // no state change (a reference, a hold): no collection_event
	}
	if inv.State == invoice.StateComplete {
		if err := creditCollection(tx, inv); err != nil {
			if errors.Is(err, wallet.ErrBalanceLimit) {
				// Retrying cannot make it fit: a refusal, not a failed batch. The invoice
				// keeps its previous state for an operator (docs/api-decisions.md).
				tx.Log().ErrorContext(tx.Context(), "collection refused: receiving wallet at its maximum balance", "invoice_id", inv.InvoiceID, "wallet_id", inv.WalletID)
				return engine.WalletRefusal(err), nil
			}
			return topics.Reply{}, err
		}
	}
	counted(tx, before, inv)
	collectionEvent(tx, inv)
	return resultAck(inv), nil
}

// resultAck answers a provider result with the invoice's id, state and version,
// not the whole invoice. Nobody waits for that answer (a rail's result carries no
// reply-to); it is stored only so that a repeated result is recognised and
// answered alike. The whole invoice, in two of a collection's three replies, was
// ~1 kB of what each collection's commits sent and stored (docs/benchmarks-history.md).
func resultAck(inv invoice.State) topics.Reply {
	return topics.Reply{Result: mustJSON(struct {
		InvoiceID string `json:"invoice_id"`
		State     string `json:"state"`
		Version   int64  `json:"version"`
	}{inv.InvoiceID, inv.State, inv.Version})}
}

// creditCollection moves a completed invoice's money into its wallet.
func creditCollection(tx *engine.Tx, inv invoice.State) error {
	clearing, narrative := ledger.MpesaClearing, "M-Pesa payment "+inv.MpesaReference+" "+inv.APIRef
	switch inv.Provider {
	case "CARD":
		clearing, narrative = ledger.CardClearing, "Card payment "+inv.CardNetwork+" "+inv.CardLast4+" "+inv.APIRef
	case "PESALINK":
		clearing, narrative = ledger.PesalinkClearing, "PesaLink payment "+inv.MpesaReference+" "+inv.APIRef
	}
	err := tx.Credit(inv.WalletID, wallet.Collect{
		TransactionID: ids.Derive(10, inv.InvoiceID, "collect"), Value: inv.Value,
		Charges: inv.Charges, NetAmount: inv.NetAmount, Clearing: clearing, Narrative: narrative,
		Uncleared: !inv.Cleared,
	})
	return walletGone(err, "engine: receiving wallet of invoice "+inv.InvoiceID+" is gone")
}

// walletGone names a money refusal that says the invoice's wallet no longer
// exists; any other error is returned as it is.
func walletGone(err error, gone string) error {
	if errors.Is(err, wallet.ErrNotFound) {
		return errors.New(gone)
	}
	return err
}

func collectionEvent(tx *engine.Tx, s invoice.State) {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	tx.Event(topics.CollectionEvent, s.InvoiceID, topics.Collection{ID: s.InvoiceID, InvoiceID: s.InvoiceID, State: s.State,
		Provider: topics.CollectionProvider(s.Provider),
		Value:    s.Value.String(), Charges: s.Charges.String(), NetAmount: s.NetAmount.String(), Currency: s.Currency,
		Account: opt(s.Account), APIRef: s.APIRef, MpesaReference: opt(s.MpesaReference), FailedReason: opt(s.FailedReason),
		FailedCode: opt(s.FailedCode), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("invoicekind: marshal %T: %v", v, err)) // only our own types reach here
	}
	return b
}
