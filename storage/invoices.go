package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/invoice"
)

// GetInvoice reads one of the merchant's invoices; another merchant's is ErrNotFound.
func GetInvoice(ctx context.Context, q sqlx.QueryerContext, merchantID, invoiceID string) (invoice.State, error) {
	var data []byte
	err := sqlx.GetContext(ctx, q, &data, `SELECT data FROM invoices WHERE merchant_id = $1 AND invoice_id = $2`, merchantID, invoiceID)
	if errors.Is(err, sql.ErrNoRows) {
		return invoice.State{}, ErrNotFound
	}
	if err != nil {
		return invoice.State{}, fmt.Errorf("get invoice: %w", err)
	}
	var s invoice.State
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("decode invoice %s: %w", invoiceID, err)
	}
	return s, nil
}

// LoadInvoices reads the snapshots of the given invoices of one merchant, for the
// engine to hydrate actors.
func LoadInvoices(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) (map[string]invoice.State, error) {
	var o Owned
	for _, id := range ids {
		o.Add(merchantID, id)
	}
	return LoadOwnedInvoices(ctx, q, o)
}

// LoadOwnedInvoices reads the snapshots of invoices of several merchants in one
// query: the engine hydrates a poll's invoices with one round trip per partition,
// not one per merchant (docs/benchmarks.md, session 7). An id is read only with the
// merchant it is named with; another merchant's invoice of that id is not found.
func LoadOwnedInvoices(ctx context.Context, q sqlx.QueryerContext, o Owned) (map[string]invoice.State, error) {
	if len(o.IDs) == 0 {
		return map[string]invoice.State{}, nil
	}
	var rows [][]byte
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT data FROM unnest($1::text[], $2::text[]) AS k(m, id)
		JOIN invoices ON invoice_id = k.id AND merchant_id = k.m`,
		pq.StringArray(o.Merchants), pq.StringArray(o.IDs)); err != nil {
		return nil, fmt.Errorf("load invoices: %w", err)
	}
	out := make(map[string]invoice.State, len(rows))
	for _, d := range rows {
		var s invoice.State
		if err := json.Unmarshal(d, &s); err != nil {
			return nil, fmt.Errorf("decode invoice: %w", err)
		}
		out[s.InvoiceID] = s
	}
	return out, nil
}

// InvoiceRef names an invoice and its merchant.
type InvoiceRef struct {
	InvoiceID         string `db:"invoice_id"`
	MerchantID        string `db:"merchant_id"`
	CheckoutRequestID string `db:"checkout_request_id"`
}

// InvoiceByCheckoutRequest finds the invoice of a rail reference (a Daraja
// callback carries only that).
func InvoiceByCheckoutRequest(ctx context.Context, q sqlx.QueryerContext, checkoutRequestID string) (InvoiceRef, error) {
	var r InvoiceRef
	err := sqlx.GetContext(ctx, q, &r, `SELECT invoice_id, merchant_id, checkout_request_id FROM invoices
		WHERE checkout_request_id = $1`, checkoutRequestID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// InvoiceForCallback reads an invoice by id alone, for a rail's callback: the rail
// is not a merchant, its URL (with a secret token) names the invoice. Never for a
// merchant's request, which must go through GetInvoice.
func InvoiceForCallback(ctx context.Context, q sqlx.QueryerContext, invoiceID string) (invoice.State, error) {
	var data []byte
	err := sqlx.GetContext(ctx, q, &data, `SELECT data FROM invoices WHERE invoice_id = $1`, invoiceID)
	if errors.Is(err, sql.ErrNoRows) {
		return invoice.State{}, ErrNotFound
	}
	if err != nil {
		return invoice.State{}, fmt.Errorf("invoice for callback: %w", err)
	}
	var s invoice.State
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("decode invoice %s: %w", invoiceID, err)
	}
	return s, nil
}

// StalePrompts lists invoices still waiting for their rail's outcome since before
// olderThan: their callback may have been lost, so the rail is asked. Held
// invoices (a paid amount that differs) wait for an operator, not the rail.
func StalePrompts(ctx context.Context, q sqlx.QueryerContext, olderThan time.Time, limit int) ([]InvoiceRef, error) {
	var out []InvoiceRef
	err := sqlx.SelectContext(ctx, q, &out, `SELECT invoice_id, merchant_id, checkout_request_id FROM invoices
		WHERE state IN ('PENDING', 'PROCESSING') AND checkout_request_id IS NOT NULL AND updated_at < $1
		AND NOT coalesce((data ->> 'held')::boolean, false)
		ORDER BY updated_at LIMIT $2`, olderThan, limit)
	return out, err
}

// UnclearedCardInvoices lists completed card collections whose funds are not
// available yet and that completed before completedBefore.
func UnclearedCardInvoices(ctx context.Context, q sqlx.QueryerContext, completedBefore time.Time, limit int) ([]InvoiceRef, error) {
	var out []InvoiceRef
	err := sqlx.SelectContext(ctx, q, &out, `SELECT invoice_id, merchant_id, coalesce(checkout_request_id, '') AS checkout_request_id
		FROM invoices WHERE state = 'COMPLETE' AND data ->> 'provider' = 'CARD'
		AND coalesce((data ->> 'cleared')::boolean, false) = false AND updated_at < $1
		ORDER BY updated_at LIMIT $2`, completedBefore, limit)
	return out, err
}

// InvoiceKind is the invoices' kind in the batch commit (paysvc_apply_invoice).
const InvoiceKind = "invoice"

// InvoiceWrites collects the invoices a batch changed: for each, the version it had
// when the batch first touched it (0: new, inserted) and its last state. It is the
// invoices' AggregateRows.
//
// Each row is encoded when it is touched, not when the batch commits: Touch runs
// while the engine applies the batch, beside the commit before it, whereas Rows runs
// between two commits, while the database waits. Encoding there was ~0.9 ms of
// every STK commit's preparation (docs/benchmarks.md, session 7).
type InvoiceWrites struct {
	prev  map[string]int64
	rows  map[string][]byte // each invoice's row of its last state
	order []string
	err   error // the first row that could not be encoded (Rows reports it)
}

// NewInvoiceWrites returns an empty collector.
func NewInvoiceWrites() *InvoiceWrites {
	return &InvoiceWrites{prev: map[string]int64{}, rows: map[string][]byte{}}
}

// Touch records an invoice's new state; the update stays conditional on the version
// it had before the batch's first change.
func (w *InvoiceWrites) Touch(before, after invoice.State) {
	prev, ok := w.prev[after.InvoiceID]
	if !ok {
		prev = before.Version
		w.prev[after.InvoiceID] = prev
		w.order = append(w.order, after.InvoiceID)
	}
	row, err := encodeInvoiceRow(after, prev)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("invoice %s: %w", after.InvoiceID, err)
	}
	w.rows[after.InvoiceID] = row
}

// Kind implements AggregateRows.
func (w *InvoiceWrites) Kind() string { return InvoiceKind }

// Joinable implements JoinableRows: paysvc_apply_invoice takes a flat array of
// invoices, each in its merchant's partition, so several batches' go in one call.
func (w *InvoiceWrites) Joinable() {}

// invoiceRowHead is a row of paysvc_apply_invoice without its data, which
// encodeInvoiceRow appends: inside a struct, json.Marshal would validate and
// compact the already encoded state a second time.
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

// encodeInvoiceRow is one JSON object of paysvc_apply_invoice's rows.
func encodeInvoiceRow(s invoice.State, prev int64) ([]byte, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	head, err := json.Marshal(invoiceRowHead{InvoiceID: s.InvoiceID, MerchantID: s.MerchantID, State: s.State, APIRef: s.APIRef,
		CheckoutRequestID: s.CheckoutRequestID, Version: s.Version, Prev: prev,
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()})
	if err != nil {
		return nil, err
	}
	row := make([]byte, 0, len(head)+len(data)+9)
	row = append(row, head[:len(head)-1]...) // an object: it ends in '}'
	row = append(row, `,"data":`...)
	row = append(row, data...)
	return append(row, '}'), nil
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
	n := 1
	for _, id := range w.order {
		n += len(w.rows[id]) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, id := range w.order {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, w.rows[id]...)
	}
	return append(out, ']'), nil
}
