package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
	var rows [][]byte
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT data FROM invoices WHERE merchant_id = $1 AND invoice_id = ANY($2)`,
		merchantID, pq.StringArray(ids)); err != nil {
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
