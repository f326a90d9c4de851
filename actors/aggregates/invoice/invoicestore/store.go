package invoicestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/invoice"
	"paysvc/storage"
)

// Touch records an invoice's new state in a batch's writes as its row: the
// columns, and the state encoded as JSON now, while the engine applies the batch,
// not when the batch commits, while the database waits (docs/benchmarks-history.md).
func Touch(w *storage.InvoiceWrites, before, after invoice.State) {
	data, err := json.Marshal(after)
	if err != nil {
		w.Fail(fmt.Errorf("invoice %s: %w", after.InvoiceID, err))
	}
	w.Touch(before.Version, storage.InvoiceRow{InvoiceID: after.InvoiceID, MerchantID: after.MerchantID, State: after.State,
		APIRef: after.APIRef, CheckoutRequestID: after.CheckoutRequestID, Version: after.Version,
		CreatedAt: after.CreatedAt, UpdatedAt: after.UpdatedAt, Data: data})
}

// Get reads one of the merchant's invoices; another merchant's is storage.ErrNotFound.
func Get(ctx context.Context, q sqlx.QueryerContext, merchantID, invoiceID string) (invoice.State, error) {
	return one(ctx, q, "get invoice", invoiceID, `SELECT data FROM invoices WHERE merchant_id = $1 AND invoice_id = $2`, merchantID, invoiceID)
}

// one reads the invoice a query finds (storage.ErrNotFound when none); what names
// the read in its error.
func one(ctx context.Context, q sqlx.QueryerContext, what, invoiceID, query string, args ...any) (invoice.State, error) {
	var data []byte
	err := sqlx.GetContext(ctx, q, &data, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return invoice.State{}, storage.ErrNotFound
	}
	if err != nil {
		return invoice.State{}, fmt.Errorf("%s: %w", what, err)
	}
	var s invoice.State
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("decode invoice %s: %w", invoiceID, err)
	}
	return s, nil
}

// Load reads the snapshots of the given invoices of one merchant, for the
// engine to hydrate actors.
func Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) (map[string]invoice.State, error) {
	var o storage.Owned
	for _, id := range ids {
		o.Add(merchantID, id)
	}
	return LoadOwned(ctx, q, o)
}

// LoadOwned reads the snapshots of invoices of several merchants in one
// query: the engine hydrates a poll's invoices with one round trip per partition,
// not one per merchant (docs/benchmarks-history.md). An id is read only with the
// merchant it is named with; another merchant's invoice of that id is not found.
func LoadOwned(ctx context.Context, q sqlx.QueryerContext, o storage.Owned) (map[string]invoice.State, error) {
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

// TakenElsewhere reports which of the (merchant, id) pairs name an invoice id that
// another merchant's invoice holds (storage.TakenElsewhere): the invoice id is
// the table's primary key.
func TakenElsewhere(ctx context.Context, q sqlx.QueryerContext, o storage.Owned) (map[string]bool, error) {
	return storage.TakenElsewhere(ctx, q, "invoices", "invoice_id", o)
}

// ForCallback reads an invoice by id alone, for a rail's callback: the rail
// is not a merchant, its URL (with a secret token) names the invoice. Never for a
// merchant's request, which must go through Get.
func ForCallback(ctx context.Context, q sqlx.QueryerContext, invoiceID string) (invoice.State, error) {
	return one(ctx, q, "invoice for callback", invoiceID, `SELECT data FROM invoices WHERE invoice_id = $1`, invoiceID)
}

const (
	customerInvoicesWhere = `FROM invoices WHERE merchant_id = $1 AND data ? 'email' AND lower(data ->> 'email') = lower($2)`
	// A customer's subscription cycle charges (subscription_invoices, migration
	// 0027) are payments too: they are listed with the invoices, by customer id.
	customerCyclesWhere   = `FROM subscription_invoices WHERE merchant_id = $1 AND customer_id = $5`
	customerInvoicesQuery = `SELECT data FROM (SELECT data, created_at, invoice_id ` + customerInvoicesWhere +
		` UNION ALL SELECT data, created_at, invoice_id ` + customerCyclesWhere + `) x
		ORDER BY created_at DESC, invoice_id DESC LIMIT $3 OFFSET $4`
)

// ByCustomer returns one page of the merchant's invoices paid with that email
// (whatever its case), newest first, and the total: a customer's payments. The
// predicate matches the index invoices_email_lower.
func ByCustomer(ctx context.Context, q sqlx.QueryerContext, merchantID, customerID, email string, limit, offset int) ([]invoice.State, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT (SELECT count(*) `+customerInvoicesWhere+`) + (SELECT count(*) `+
		`FROM subscription_invoices WHERE merchant_id = $1 AND customer_id = $3)`, merchantID, email, customerID); err != nil {
		return nil, 0, fmt.Errorf("count customer invoices: %w", err)
	}
	var rows [][]byte
	if err := sqlx.SelectContext(ctx, q, &rows, customerInvoicesQuery, merchantID, email, limit, offset, customerID); err != nil {
		return nil, 0, fmt.Errorf("customer invoices: %w", err)
	}
	out := make([]invoice.State, len(rows))
	for i, d := range rows {
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, 0, fmt.Errorf("decode invoice: %w", err)
		}
	}
	return out, total, nil
}
