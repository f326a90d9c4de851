// Package refundkind plugs the refund aggregate (actors/refund) into the engine's
// registry (docs/adr/0004-engine-aggregate-registry.md): its commands, hydration,
// handlers and sandbox rail. The engine does not know refunds by name.
package refundkind

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/engine"
	"paysvc/actors/ids"
	"paysvc/actors/invoice"
	"paysvc/actors/ledger"
	"paysvc/actors/money"
	"paysvc/actors/refund"
	"paysvc/actors/wallet"
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
	Help: "Refunds reaching a status (PENDING when created, then COMPLETED, CANCELLED, DISPUTED, OVERDUE), counted once committed.",
}, []string{"status"})

// Kind is the refund aggregate's registration.
func Kind() engine.Kind {
	return engine.Kind{
		Name: storage.RefundKind,
		Commands: map[string]func() any{
			refund.CmdCreate: func() any { return &refund.Create{} },
			refund.CmdSettle: func() any { return &refund.Settle{} },
		},
		IDs:      ids_,
		Load:     load,
		Apply:    apply,
		Simulate: Simulate,
	}
}

// ids_ names the refund book (by invoice) a command works on.
func ids_(payload any) []string {
	switch p := payload.(type) {
	case *refund.Create:
		return []string{p.InvoiceID}
	case *refund.Settle:
		return []string{p.InvoiceID}
	}
	return nil
}

func load(ctx context.Context, q sqlx.QueryerContext, merchantID string, invoiceIDs []string) ([]engine.Snapshot, error) {
	found, err := storage.LoadRefundBooks(ctx, q, merchantID, invoiceIDs)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Snapshot, 0, len(found))
	for id, b := range found {
		out = append(out, engine.Snapshot{ID: id, Version: b.Version, State: b.Book})
	}
	return out, nil
}

func apply(tx *engine.Tx, c *topics.Command, payload any) (topics.Reply, error) {
	switch in := payload.(type) {
	case *refund.Create:
		return create(tx, *in)
	case *refund.Settle:
		return settle(tx, *in)
	}
	return engine.Refuse(engine.CodeInvalid, "malformed "+c.Type+" payload", ""), nil
}

func book(tx *engine.Tx, invoiceID string) refund.Book {
	if s, ok := tx.Get(invoiceID); ok {
		return s.(refund.Book)
	}
	return refund.Book{}
}

func create(tx *engine.Tx, in refund.Create) (topics.Reply, error) {
	inv, err := tx.Invoice(in.InvoiceID)
	if errors.Is(err, engine.ErrNotFound) {
		return engine.Refuse(engine.CodeNotFound, "Invoice not found.", "invoice"), nil
	}
	if err != nil {
		return topics.Reply{}, err
	}
	b, r, err := refund.Open(book(tx, in.InvoiceID), invoiceOf(inv), tx.Merchant(), in.RefundID, in.Amount, in.Reason,
		in.ReasonDetails, tx.At())
	switch {
	case errors.Is(err, refund.ErrNotRefundable):
		return engine.Refuse(CodeNotRefundable, "Only COMPLETE invoices can be refunded; this one is "+inv.State+".", "invoice"), nil
	case errors.Is(err, refund.ErrExceeds):
		left := inv.Value.Sub(book(tx, in.InvoiceID).Committed())
		return engine.Refuse(CodeExceeds, "Refunds of an invoice cannot exceed its value "+inv.Value.String()+
			"; at most "+left.String()+" is left to refund.", "amount"), nil
	case errors.Is(err, refund.ErrTooMany):
		return engine.Refuse(engine.CodeInvalid, "An invoice can have at most "+strconv.Itoa(refund.MaxPerInvoice)+" refunds.", "invoice"), nil
	case err != nil:
		return engine.Refuse(engine.CodeInvalid, "Invalid refund request.", ""), nil
	}
	// The amount leaves the merchant's available balance now: a refund is only
	// accepted while the wallet that received the money still holds it.
	if err := tx.Hold(r.WalletID, r.Amount); err != nil {
		var we engine.WalletError
		if errors.As(err, &we) {
			return engine.WalletRefusal(we.Err), nil
		}
		return topics.Reply{}, err
	}
	tx.Put(b.InvoiceID, b)
	changed(tx, r)
	return topics.Reply{Result: mustJSON(r.View())}, nil
}

func settle(tx *engine.Tx, in refund.Settle) (topics.Reply, error) {
	b := book(tx, in.InvoiceID)
	i := b.Find(in.RefundID)
	if i < 0 {
		return engine.Refuse(engine.CodeNotFound, "Refund not found.", ""), nil
	}
	cur := b.Refunds[i]
	if in.From != "" && cur.Status != in.From {
		return engine.Refuse(CodeNotCancellable, "The refund is "+cur.Status+" now, not "+in.From+".", ""), nil
	}
	if !refund.CanMove(cur.Status, in.Status) {
		return engine.Refuse(CodeNotCancellable, "A "+cur.Status+" refund cannot become "+in.Status+".", ""), nil
	}
	var txn string
	var werr error
	switch in.Status {
	case refund.StatusCompleted:
		// Out of the held funds, to the payer's rail. The collection's fees are
		// not returned (docs/fees.md): the merchant refunds the value it chose.
		txn = tx.TransactionID("refund", strconv.FormatInt(cur.ID, 10))
		werr = tx.Debit(cur.WalletID, ledger.RefundsClearing, wallet.TransTypeRefund, []wallet.Disbursement{{
			TransactionID: txn, Amount: cur.Amount, Charge: money.Zero(),
			Narrative: "Refund " + strconv.FormatInt(cur.ID, 10) + " of invoice " + cur.InvoiceID}})
	case refund.StatusCancelled:
		werr = tx.Release(cur.WalletID, cur.Amount)
	}
	if werr != nil {
		// The hold is the refund's own: a wallet refusing it is a broken invariant,
		// not a merchant's mistake; the batch fails and says so.
		return topics.Reply{}, werr
	}
	nb, _, after, err := refund.Move(b, in.RefundID, in.Status, in.Resolution, txn, tx.At())
	if err != nil {
		return engine.Refuse(CodeNotCancellable, "The refund cannot change status.", ""), nil
	}
	tx.Put(nb.InvoiceID, nb)
	changed(tx, after)
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

// outcome is what the sandbox rail reports for a waiting refund.
func outcome(r refund.Refund) (status, resolution string) {
	if r.Status == refund.StatusOverdue {
		return refund.StatusCompleted, "Confirmed late by the payer's rail"
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

// SettleCommand is the command the rail sends for a refund's outcome. Its id is
// derived from the refund and the status it leaves, so however often a scan
// finds it, the refund moves once.
func SettleCommand(r refund.Refund, to, resolution string) topics.Command {
	p := refund.Settle{RefundID: r.ID, InvoiceID: r.InvoiceID, Status: to, From: r.Status, Resolution: resolution}
	return topics.Command{ID: ids.DeriveUUID("refund-settle", strconv.FormatInt(r.ID, 10), r.Status), Type: refund.CmdSettle,
		Version: 1, MerchantID: r.MerchantID, IssuedAt: time.Now().UTC(), Payload: mustJSON(p)}
}

// Simulate is the sandbox refund rail: every so often it scans the refunds that
// have waited longer than d.Delay (PENDING, then OVERDUE) and reports their
// outcome. It keeps nothing in memory: a restart finds the same refunds again.
func Simulate(ctx context.Context, d engine.SimDeps) error {
	log := d.Log.With("component", "refund-sim")
	t := time.NewTicker(max(d.Delay/4, 20*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, status := range []string{refund.StatusPending, refund.StatusOverdue} {
			due, err := storage.WaitingRefunds(ctx, d.DB, status, time.Now().Add(-d.Delay), 200)
			if err != nil {
				log.Warn("list waiting refunds", "err", err)
				continue
			}
			for _, r := range due {
				to, why := outcome(r)
				if err := d.Produce(ctx, SettleCommand(r, to, why)); err != nil {
					log.Warn("produce refund outcome", "refund_id", r.ID, "err", err)
				}
			}
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types
	}
	return b
}
