package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/values/money"
)

// InvoiceRef names an invoice and its merchant.
type InvoiceRef struct {
	InvoiceID         string `db:"invoice_id"`
	MerchantID        string `db:"merchant_id"`
	CheckoutRequestID string `db:"checkout_request_id"`
}

// InvoiceByCheckoutRequest finds the invoice of a rail reference (a Daraja
// callback carries only that).
func InvoiceByCheckoutRequest(ctx context.Context, q sqlx.QueryerContext, checkoutRequestID string) (InvoiceRef, error) {
	return getOne[InvoiceRef](ctx, q, `SELECT invoice_id, merchant_id, checkout_request_id FROM invoices
		WHERE checkout_request_id = $1`, checkoutRequestID)
}

// StalePrompts lists invoices still waiting for their rail's outcome since before
// olderThan: their callback may have been lost, so the rail is asked. Held
// invoices (a paid amount that differs) wait for an operator, not the rail.
func StalePrompts(ctx context.Context, q sqlx.QueryerContext, environment string, olderThan time.Time, limit int) ([]InvoiceRef, error) {
	var out []InvoiceRef
	err := sqlx.SelectContext(ctx, q, &out, `SELECT invoice_id, merchant_id, checkout_request_id FROM (
		SELECT i.invoice_id, i.merchant_id, i.checkout_request_id, i.updated_at,
		       row_number() OVER (PARTITION BY i.merchant_id ORDER BY i.updated_at) AS turn
		  FROM invoices i JOIN merchants m ON m.merchant_id = i.merchant_id
		 WHERE i.state IN ('PENDING', 'PROCESSING') AND i.checkout_request_id IS NOT NULL AND i.updated_at < $1
		   AND NOT coalesce((i.data ->> 'held')::boolean, false) AND m.environment = $3) x
		ORDER BY `+fairTurn+`, updated_at LIMIT $2`, olderThan, limit, environment)
	return out, err
}

// fairTurn orders a scan's rows by each merchant's turn: every merchant's
// oldest rows (10 of them) come before any merchant's next ones, so one
// merchant with thousands of waiting rows cannot starve the others of a
// bounded scan. The query numbers each merchant's rows as "turn".
const fairTurn = `(turn - 1) / 10`

// STKInvoice is what the sandbox needs of a stored M-Pesa invoice to send its
// prompt again: the fields of its state (invoice.State, stored as the row's data)
// under the same JSON names. The rails read it; they may not import an aggregate.
type STKInvoice struct {
	InvoiceID  string       `json:"invoice_id"`
	MerchantID string       `json:"merchant_id"`
	State      string       `json:"state"`
	Value      money.Amount `json:"value"`
	Account    string       `json:"account"`
	APIRef     string       `json:"api_ref"`
	UpdatedAt  time.Time    `json:"updated_at"`
}

// StaleSTKInvoices lists M-Pesa invoices still PENDING or PROCESSING since before
// olderThan (the sandbox sends their prompts again: rails.RecoverSandbox).
// Held invoices (a paid amount that differs) wait for an operator, not the rail.
func StaleSTKInvoices(ctx context.Context, q sqlx.QueryerContext, environment string, olderThan time.Time, limit int) ([]STKInvoice, error) {
	var rows [][]byte
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT data FROM (
		SELECT i.data, i.updated_at, row_number() OVER (PARTITION BY i.merchant_id ORDER BY i.updated_at) AS turn
		  FROM invoices i JOIN merchants m ON m.merchant_id = i.merchant_id
		 WHERE i.state IN ('PENDING', 'PROCESSING') AND i.updated_at < $1 AND i.data ->> 'provider' = 'M-PESA'
		   AND NOT coalesce((i.data ->> 'held')::boolean, false) AND m.environment = $3) x
		ORDER BY `+fairTurn+`, updated_at LIMIT $2`, olderThan, limit, environment); err != nil {
		return nil, fmt.Errorf("stale STK invoices: %w", err)
	}
	out := make([]STKInvoice, 0, len(rows))
	for _, d := range rows {
		var s STKInvoice
		if err := json.Unmarshal(d, &s); err != nil {
			return nil, fmt.Errorf("decode invoice: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// UnclearedCardInvoices lists completed card collections whose funds are not
// available yet and that completed before completedBefore.
func UnclearedCardInvoices(ctx context.Context, q sqlx.QueryerContext, environment string, completedBefore time.Time, limit int) ([]InvoiceRef, error) {
	var out []InvoiceRef
	err := sqlx.SelectContext(ctx, q, &out, `SELECT invoice_id, merchant_id, checkout_request_id FROM (
		SELECT i.invoice_id, i.merchant_id, coalesce(i.checkout_request_id, '') AS checkout_request_id, i.updated_at,
		       row_number() OVER (PARTITION BY i.merchant_id ORDER BY i.updated_at) AS turn
		  FROM invoices i JOIN merchants m ON m.merchant_id = i.merchant_id
		 WHERE i.state = 'COMPLETE' AND i.data ->> 'provider' = 'CARD'
		   AND coalesce((i.data ->> 'cleared')::boolean, false) = false AND i.updated_at < $1 AND m.environment = $3) x
		ORDER BY `+fairTurn+`, updated_at LIMIT $2`, completedBefore, limit, environment)
	return out, err
}

// InvoiceKind is the invoices' kind in the batch commit (paysvc_apply_invoice).
const InvoiceKind = "invoice"

// InvoiceWrites collects the invoices a batch changed: for each, the version it had
// when the batch first touched it (0: new, inserted) and its last state. The commit
// sends them as column arrays (invoiceCols, migration 0039); as an AggregateRows
// (Rows) they are paysvc_apply_invoice's jsonb rows, which the commit no longer
// uses for them.
//
// Each state is encoded when it is touched, not when the batch commits: Touch runs
// while the engine applies the batch, beside the commit before it, whereas the
// commit's arguments are laid out between two commits, while the database waits
// (docs/benchmarks-history.md).
type InvoiceWrites struct {
	rows  map[string]invoiceRow // each invoice's last row, with the version before the batch
	order []string
	err   error // the first state that could not be encoded (reported by the commit)
}

// InvoiceRow is an invoice's row in the commit: the columns of the invoices table,
// and Data, its whole state as JSON. The invoice aggregate fills it
// (invoicestore.Touch); storage names no aggregate.
type InvoiceRow struct {
	InvoiceID, MerchantID, State, APIRef, CheckoutRequestID string
	Version                                                 int64
	CreatedAt, UpdatedAt                                    time.Time
	Data                                                    []byte
}

type invoiceRow struct {
	s    InvoiceRow
	prev int64
}

// NewInvoiceWrites returns an empty collector.
func NewInvoiceWrites() *InvoiceWrites {
	return &InvoiceWrites{rows: map[string]invoiceRow{}}
}

// Touch records an invoice's new row; the update stays conditional on the version
// it had before the batch's first change (prev, the version of the state the
// first change started from).
func (w *InvoiceWrites) Touch(prev int64, after InvoiceRow) {
	if r, ok := w.rows[after.InvoiceID]; ok {
		prev = r.prev
	} else {
		w.order = append(w.order, after.InvoiceID)
	}
	w.rows[after.InvoiceID] = invoiceRow{s: after, prev: prev}
}

// Fail records that a state could not be encoded: the commit reports the first
// such error and writes nothing.
func (w *InvoiceWrites) Fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Kind implements AggregateRows.
func (w *InvoiceWrites) Kind() string { return InvoiceKind }

// invoiceRowHead is a row of paysvc_apply_invoice without its data, which Rows
// appends: inside a struct, json.Marshal would validate and compact the already
// encoded state a second time.
type invoiceRowHead struct {
	InvoiceID         string    `json:"invoice_id"`
	MerchantID        string    `json:"merchant_id"`
	State             string    `json:"state"`
	APIRef            string    `json:"api_ref"`
	CheckoutRequestID string    `json:"checkout_request_id"`
	Version           int64     `json:"version"`
	Prev              int64     `json:"prev"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// Rows implements AggregateRows: the rows of paysvc_apply_invoice, in the order the
// batch first touched each invoice.
func (w *InvoiceWrites) Rows() (json.RawMessage, error) {
	if w.err != nil {
		return nil, w.err
	}
	if len(w.order) == 0 {
		return nil, nil
	}
	out := []byte{'['}
	for i, id := range w.order {
		r := w.rows[id]
		s := r.s
		head, err := json.Marshal(invoiceRowHead{InvoiceID: s.InvoiceID, MerchantID: s.MerchantID, State: s.State, APIRef: s.APIRef,
			CheckoutRequestID: s.CheckoutRequestID, Version: s.Version, Prev: r.prev,
			CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()})
		if err != nil {
			return nil, fmt.Errorf("invoice %s: %w", id, err)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, head[:len(head)-1]...) // an object: it ends in '}'
		out = append(out, `,"data":`...)
		out = append(out, s.Data...)
		out = append(out, '}')
	}
	return append(out, ']'), nil
}

// invoiceCols are the invoice arguments of paysvc_commit_batches_v3: one array per
// column, never nil (a nil slice would be sent as NULL).
type invoiceCols struct {
	ids, merchants, states, apiRefs, checkoutRequests, created, updated stringArray
	versions, prevs                                                     pq.Int64Array
	data                                                                textArray
}

func newInvoiceCols() invoiceCols {
	return invoiceCols{ids: stringArray{}, merchants: stringArray{}, states: stringArray{}, apiRefs: stringArray{},
		checkoutRequests: stringArray{}, created: stringArray{}, updated: stringArray{},
		versions: pq.Int64Array{}, prevs: pq.Int64Array{}, data: textArray{}}
}

// add appends a batch's invoices, in the order it first touched each.
func (c *invoiceCols) add(w *InvoiceWrites) error {
	if w.err != nil {
		return w.err
	}
	for _, id := range w.order {
		r := w.rows[id]
		s := r.s
		c.ids = append(c.ids, s.InvoiceID)
		c.merchants = append(c.merchants, s.MerchantID)
		c.states = append(c.states, s.State)
		c.apiRefs = append(c.apiRefs, s.APIRef)
		c.checkoutRequests = append(c.checkoutRequests, s.CheckoutRequestID)
		c.versions = append(c.versions, s.Version)
		c.prevs = append(c.prevs, r.prev)
		c.data = append(c.data, s.Data)
		c.created = append(c.created, s.CreatedAt.UTC().Format(time.RFC3339Nano))
		c.updated = append(c.updated, s.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
