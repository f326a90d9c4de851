// Package refundkind plugs the refund aggregate (actors/aggregates/refund) into the engine's
// registry (docs/adr/0007-one-aggregate-contract.md): its commands, hydration,
// handlers and sandbox rail. The engine does not know refunds by name.
package refundkind

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
	"paysvc/actors/aggregates/invoice/invoicekind"
	"paysvc/actors/aggregates/refund"
	"paysvc/actors/aggregates/refund/refundstore"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
	"paysvc/actors/values/every"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// Reply codes beyond the engine's.
const (
	CodeExceeds        = "refund_exceeds_invoice"
	CodeNotRefundable  = "invoice_not_refundable"
	CodeNotCancellable = "not_cancellable"
)

var refundsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_refunds_total",
	Help: "Refunds reaching a status (PENDING when created, then COMPLETED, CANCELLED, DISPUTED, OVERDUE), counted once committed; the rail taking a refund is no status change.",
}, []string{"status"})

func init() {
	// Every status exists from the start, at 0 (a dashboard shows 0, not "No data").
	for _, st := range []string{refund.StatusPending, refund.StatusCompleted, refund.StatusCancelled, refund.StatusDisputed, refund.StatusOverdue} {
		refundsTotal.WithLabelValues(st)
	}
}

// Books is the refund kind (a book of refunds per invoice) as its commands use
// it through a Tx.
const Books = engine.Of[refund.Book](storage.RefundKind)

// Kind is the refund aggregate's registration. Each command names the refund
// book (by invoice) it works on. The engine's guards (docs/security.md): the
// merchant's create and cancel, and the rail's take (it is about to send money:
// not for a disabled merchant), need an enabled merchant of the producer's
// environment; the rail's outcome completes money already in motion. None is
// sandbox only (a live refund rail sends the same), but a simulator's
// (Simulated) is refused for a live merchant.
func Kind() engine.Kind {
	return engine.Define[refund.Book](aggregate{},
		engine.On[refund.Book](refund.CmdCreate, engine.Guard{},
			func(p *refund.Create) []string { return []string{p.InvoiceID} }, create,
			engine.Needs(needs)),
		engine.On[refund.Book](refund.CmdCancel, engine.Guard{},
			func(p *refund.Cancel) []string { return []string{p.InvoiceID} }, cancel),
		engine.On[refund.Book](refund.CmdTake, engine.Guard{},
			func(p *refund.Take) []string { return []string{p.InvoiceID} }, take),
		engine.On[refund.Book](refund.CmdSettle, engine.Guard{WhileDisabled: true},
			func(p *refund.Settle) []string { return []string{p.InvoiceID} }, settle),
	)
}

// aggregate is the refund's definition: hosted (the book's pure Step), loaded by
// invoice id, with a sandbox rail.
type aggregate struct{}

// The parts the engine discovers: a method whose signature drifted would be
// silently missed, so each is checked here.
var (
	_ engine.Hosting[refund.Book]   = aggregate{}
	_ engine.Referring[refund.Book] = aggregate{}
	_ engine.Simulating             = aggregate{}
)

func (aggregate) Name() string { return storage.RefundKind }

// New: a book is empty before its first refund (which opens it for its invoice).
func (aggregate) New(string) refund.Book { return refund.Book{} }

func (aggregate) Step(b refund.Book, msg any) (refund.Book, any, error) { return refund.Step(b, msg) }

func (aggregate) Simulate(ctx context.Context, d engine.SimDeps) error { return Simulate(ctx, d) }

// needs: a refund is opened against its invoice (whose wallet holds the money).
func needs(p *refund.Create) []engine.Ref {
	return []engine.Ref{{Kind: invoicekind.Name, ID: p.InvoiceID}}
}

// Refs: a book's refunds hold and pay from their invoice's wallet.
func (aggregate) Refs(b refund.Book) []engine.Ref {
	var out []engine.Ref
	seen := map[string]bool{}
	for _, r := range b.Refunds {
		if r.WalletID != "" && !seen[r.WalletID] {
			seen[r.WalletID] = true
			out = append(out, engine.Ref{Kind: walletkind.Name, ID: r.WalletID})
		}
	}
	return out
}

func (aggregate) Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, invoiceIDs []string) ([]engine.Stored[refund.Book], error) {
	found, err := refundstore.LoadBooks(ctx, q, merchantID, invoiceIDs)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Stored[refund.Book], 0, len(found))
	for id, b := range found {
		out = append(out, engine.Stored[refund.Book]{ID: id, Version: b.Version, State: b.Book})
	}
	return out, nil
}

func cancel(tx *engine.Tx, c *topics.Command, in *refund.Cancel) (topics.Reply, error) {
	return move(tx, refund.PrincipalOf(c.Type), in.InvoiceID, in.RefundID, refund.CmdCancel, "", "", "Cancelled by the merchant")
}

func take(tx *engine.Tx, c *topics.Command, in *refund.Take) (topics.Reply, error) {
	return move(tx, refund.PrincipalOf(c.Type), in.InvoiceID, in.RefundID, refund.CmdTake, "", "", "")
}

func settle(tx *engine.Tx, c *topics.Command, in *refund.Settle) (topics.Reply, error) {
	if c.ReplyTo != "" {
		// Before refund.cancel existed, the API sent the merchant's cancel as a
		// refund.settle to CANCELLED, and only the API waits for replies (a rail
		// never sets ReplyTo). Such a command still in the log is the merchant's
		// cancel: taken for the rail's decline, it would release the hold of a
		// refund the rail may already have paid.
		return move(tx, refund.ByMerchant, in.InvoiceID, in.RefundID, refund.CmdCancel, "", "", "Cancelled by the merchant")
	}
	return move(tx, refund.PrincipalOf(c.Type), in.InvoiceID, in.RefundID, refund.CmdSettle, in.Status, in.From, in.Resolution)
}

func create(tx *engine.Tx, c *topics.Command, in *refund.Create) (topics.Reply, error) {
	inv, ok := invoicekind.Invoices.Find(tx, in.InvoiceID)
	if !ok || inv.MerchantID != tx.Merchant() || !inv.Exists() {
		return engine.Refuse(engine.CodeNotFound, "Invoice not found.", "invoice"), nil
	}
	o, err := Books.Create(tx, in.InvoiceID, refund.AddRefund{Invoice: invoiceOf(inv), By: refund.PrincipalOf(c.Type),
		MerchantID: tx.Merchant(), RefundID: in.RefundID, Amount: in.Amount, Reason: in.Reason, ReasonDetails: in.ReasonDetails,
		At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	switch {
	case errors.Is(o.Err, refund.ErrExists):
		return engine.Refuse(engine.CodeInvalid, "The refund id is already used.", ""), nil
	case errors.Is(o.Err, refund.ErrNotRefundable):
		return engine.Refuse(CodeNotRefundable, "Only COMPLETE invoices can be refunded; this one is "+inv.State+".", "invoice"), nil
	case errors.Is(o.Err, refund.ErrExceeds):
		left := inv.Value.Sub(o.Before.Committed())
		return engine.Refuse(CodeExceeds, "Refunds of an invoice cannot exceed its value "+inv.Value.String()+
			"; at most "+left.String()+" is left to refund.", "amount"), nil
	case errors.Is(o.Err, refund.ErrTooMany):
		return engine.Refuse(engine.CodeInvalid, "An invoice can have at most "+strconv.Itoa(refund.MaxPerInvoice)+" refunds.", "invoice"), nil
	case o.Err != nil:
		return engine.Refuse(engine.CodeInvalid, "Invalid refund request.", ""), nil
	}
	r, _ := engine.OutOf[refund.Refund](o.Out)
	// The amount leaves the merchant's available balance now: a refund is only
	// accepted while the wallet that received the money still holds it (a
	// refusal undoes the book's step too).
	if err := tx.Hold(r.WalletID, r.Amount); err != nil {
		var we engine.WalletError
		if errors.As(err, &we) {
			return engine.WalletRefusal(we.Err), nil
		}
		return topics.Reply{}, err
	}
	changed(tx, r)
	return topics.Reply{Result: mustJSON(r.View())}, nil
}

// move runs a cancel, take or settle (report: the status a settle reports; from:
// the status the rail saw, if it said) through the book's step (the table,
// refund.Move), then carries out the rule's money: the release or the debit of
// the refund's hold.
func move(tx *engine.Tx, by, invoiceID string, id int64, cmd, report, from, resolution string) (topics.Reply, error) {
	b, _ := Books.Find(tx, invoiceID)
	i := b.Find(id)
	if i < 0 {
		return engine.Refuse(engine.CodeNotFound, "Refund not found.", ""), nil
	}
	cur := b.Refunds[i]
	if from != "" && cur.Status != from {
		return engine.Refuse(engine.CodeInvalid, "The refund is "+cur.Status+" now, not "+from+".", ""), nil
	}
	// The debit's ledger transaction, derived from the command (stable across
	// retries of the batch); Move keeps it only when the rule debits.
	txn := tx.TransactionID("refund", strconv.FormatInt(cur.ID, 10))
	o, err := Books.Ask(tx, invoiceID, refund.MoveRefund{RefundID: id, Cmd: cmd, Report: report, By: by, Resolution: resolution,
		Txn: txn, At: tx.At()})
	if err != nil {
		return topics.Reply{}, err
	}
	switch {
	case errors.Is(o.Err, refund.ErrUnchanged):
		return topics.Reply{Result: mustJSON(cur.View())}, nil
	case errors.Is(o.Err, refund.ErrWithRail):
		where := cur.Status
		if cur.State() == refund.StateTaken {
			where = "PENDING, taken by the rail"
		}
		return engine.Refuse(CodeNotCancellable, "The refund is with the payer's rail ("+where+"): the money may "+
			"already have left, so it can no longer be cancelled; the rail's outcome will settle it.", ""), nil
	case errors.Is(o.Err, refund.ErrNotCancellable):
		return engine.Refuse(CodeNotCancellable, "A "+cur.Status+" refund cannot be cancelled.", ""), nil
	case o.Err != nil:
		return engine.Refuse(engine.CodeInvalid, "A "+cur.Status+" refund cannot take "+cmd+" "+report+".", ""), nil
	}
	m, _ := engine.OutOf[refund.Moved](o.Out)
	before, after := m.Before, m.After
	var werr error
	switch m.Rule.Money {
	case refund.MoneyDebit:
		// Out of the held funds, to the payer's rail. The collection's fees are
		// not returned (docs/fees.md): the merchant refunds the value it chose.
		werr = tx.Debit(before.WalletID, ledger.RefundsClearing, wallet.TransTypeRefund, []wallet.Disbursement{{
			TransactionID: txn, Amount: before.Amount, Charge: money.Zero(),
			Narrative: "Refund " + strconv.FormatInt(before.ID, 10) + " of invoice " + before.InvoiceID}})
	case refund.MoneyRelease:
		werr = tx.Release(before.WalletID, before.Amount)
	}
	if werr != nil {
		// The hold is the refund's own: a wallet refusing it is a broken invariant,
		// not a merchant's mistake; the batch fails and says so.
		return topics.Reply{}, werr
	}
	if after.Status != before.Status {
		// Only a public status change is an event and a count: the rail's take
		// (PENDING, taken) shows merchants nothing new.
		changed(tx, after)
	}
	return topics.Reply{Result: mustJSON(after.View())}, nil
}

// changed emits the reversal_event and counts the status once committed.
func changed(tx *engine.Tx, r refund.Refund) {
	tx.Event(topics.ReversalEvent, strconv.FormatInt(r.ID, 10), r.Event())
	status := r.Status
	tx.AfterCommit(func() { refundsTotal.WithLabelValues(status).Inc() })
}

func invoiceOf(s invoice.State) refund.Invoice {
	return refund.Invoice{InvoiceID: s.InvoiceID, State: s.State, Provider: s.Provider, Currency: s.Currency, Value: s.Value,
		NetAmount: s.NetAmount, Account: s.Account, APIRef: s.APIRef, CheckoutID: s.CheckoutID, WalletID: s.WalletID,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// Sandbox magic in reason_details (docs/sandbox.md): what the simulated rail does.
const (
	MagicDeclined = "[sandbox:declined]"
	MagicDisputed = "[sandbox:disputed]"
	MagicOverdue  = "[sandbox:overdue]"
)

// outcome is what the sandbox rail reports for a refund it has: a taken PENDING
// one by its reason_details, an OVERDUE one confirmed late, a DISPUTED one
// closed without payment (the hold goes back to the merchant).
func outcome(r refund.Refund) (status, resolution string) {
	switch r.Status {
	case refund.StatusOverdue:
		return refund.StatusCompleted, "Confirmed late by the payer's rail"
	case refund.StatusDisputed:
		return refund.StatusCancelled, "Dispute closed by the payer's rail without payment"
	}
	switch d := r.ReasonDetails; {
	case strings.Contains(d, MagicDeclined):
		return refund.StatusCancelled, "Declined by the payer's rail"
	case strings.Contains(d, MagicDisputed):
		return refund.StatusDisputed, "Disputed by the payer"
	case strings.Contains(d, MagicOverdue):
		return refund.StatusOverdue, "Not confirmed by the payer's rail in time"
	}
	return refund.StatusCompleted, "Refunded to the payer"
}

// TakeCommand is the rail's take of a PENDING refund, before it sends anything.
// Its id is derived from the refund, so however often a scan finds the refund
// untaken (the take not applied yet), it is taken once. The caller sets the
// envelope's Environment (and Simulated, for a simulator).
func TakeCommand(r refund.Refund) topics.Command {
	p := refund.Take{RefundID: r.ID, InvoiceID: r.InvoiceID}
	return topics.Command{ID: ids.DeriveUUID("refund-take", strconv.FormatInt(r.ID, 10)), Type: refund.CmdTake,
		Version: 1, MerchantID: r.MerchantID, IssuedAt: time.Now().UTC(), Payload: mustJSON(p)}
}

// SettleCommand is the command the rail sends for a refund's outcome. Its id is
// derived from the refund and the status it leaves, so however often a scan
// finds it, the refund moves once. The caller sets the envelope's Environment
// (and Simulated, for a simulator).
func SettleCommand(r refund.Refund, to, resolution string) topics.Command {
	p := refund.Settle{RefundID: r.ID, InvoiceID: r.InvoiceID, Status: to, From: r.Status, Resolution: resolution}
	return topics.Command{ID: ids.DeriveUUID("refund-settle", strconv.FormatInt(r.ID, 10), r.Status), Type: refund.CmdSettle,
		Version: 1, MerchantID: r.MerchantID, IssuedAt: time.Now().UTC(), Payload: mustJSON(p)}
}

// Scan bounds of the sandbox rail: per merchant, so that no merchant starves
// another, and in all.
const (
	simPerMerchant = 20
	simScanLimit   = 500
)

// railCommand is what the sandbox rail sends for a refund refundstore.RailDue listed: it
// takes an untaken PENDING refund first, and reports the outcome of one it has
// (taken PENDING, DISPUTED, OVERDUE) on a later scan, after the take committed.
// So a merchant's cancel and the rail are ordered by the merchant's partition:
// cancel first, the take is refused and the rail never pays; take first, the
// cancel is refused.
func railCommand(r refund.Refund) topics.Command {
	if r.State() == refund.StatusPending {
		return TakeCommand(r)
	}
	to, why := outcome(r)
	return SettleCommand(r, to, why)
}

// Simulate is the sandbox refund rail: every so often it scans the refunds of
// its environment's enabled merchants that are due (refundstore.RailDue) and
// takes them, then reports their outcome. It keeps nothing in memory: a restart
// finds the same refunds again. It runs only in a sandbox process, and every
// command it sends says so (Environment, Simulated), for the engine to refuse
// it for any merchant that is not a sandbox one.
func Simulate(ctx context.Context, d engine.SimDeps) error {
	if d.Environment != topics.Sandbox {
		return errors.New("refund simulator: environment " + strconv.Quote(d.Environment) + " is not sandbox; not started")
	}
	log := d.Log.With("component", "refund-sim")
	return every.Run(ctx, log, every.Job{Name: every.RefundSandboxRail, Interval: max(d.Delay/4, 20*time.Millisecond), Run: func(ctx context.Context) error {
		due, err := refundstore.RailDue(ctx, d.DB, d.Environment, time.Now().Add(-d.Delay), simPerMerchant, simScanLimit)
		if err != nil {
			return fmt.Errorf("list refunds due: %w", err)
		}
		var failed error
		for _, r := range due {
			c := railCommand(r)
			c.Environment, c.Simulated = d.Environment, true
			if err := d.Produce(ctx, c); err != nil {
				failed = err
				log.Warn("produce refund rail command", "refund_id", r.ID, "type", c.Type, "err", err)
			}
		}
		return failed // the last one; each was logged, and is sent again next scan
	}})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types
	}
	return b
}
