package refundstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/refund"
	"paysvc/storage"
)

// Book is a stored book with its version.
type Book struct {
	Book    refund.Book
	Version int64
}

// LoadBooks reads the merchant's refund books of the given invoices with
// their refunds (for the engine's hydration); missing ones are absent.
func LoadBooks(ctx context.Context, q sqlx.QueryerContext, merchantID string, invoiceIDs []string) (map[string]Book, error) {
	out := map[string]Book{}
	rows, err := q.QueryxContext(ctx, `SELECT invoice_id, version, data FROM refund_books
		WHERE merchant_id = $1 AND invoice_id = ANY($2)`, merchantID, pq.Array(invoiceIDs))
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var v int64
		var data []byte
		if err := rows.Scan(&id, &v, &data); err != nil {
			rows.Close()
			return nil, err
		}
		var b refund.Book
		if err := json.Unmarshal(data, &b); err != nil {
			rows.Close()
			return nil, fmt.Errorf("refund book %s: %w", id, err)
		}
		b.Refunds = nil
		out[id] = Book{Book: b, Version: v}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(out) == 0 {
		return out, err
	}
	rs, err := scanRefunds(q.QueryxContext(ctx, `SELECT data FROM refunds WHERE merchant_id = $1 AND invoice_id = ANY($2)
		ORDER BY invoice_id, id`, merchantID, pq.Array(invoiceIDs)))
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		b := out[r.InvoiceID]
		b.Book.Refunds = append(b.Book.Refunds, r)
		out[r.InvoiceID] = b
	}
	return out, nil
}

func scanRefunds(rows *sqlx.Rows, err error) ([]refund.Refund, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []refund.Refund
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var r refund.Refund
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("refund: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Get reads one of the merchant's refunds (storage.ErrNotFound for another's).
func Get(ctx context.Context, q sqlx.QueryerContext, merchantID string, id int64) (refund.Refund, error) {
	rs, err := scanRefunds(q.QueryxContext(ctx, `SELECT data FROM refunds WHERE merchant_id = $1 AND id = $2`, merchantID, id))
	if err != nil {
		return refund.Refund{}, err
	}
	if len(rs) == 0 {
		return refund.Refund{}, storage.ErrNotFound
	}
	return rs[0], nil
}

// List pages through the merchant's refunds, newest first.
func List(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]refund.Refund, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM refunds WHERE merchant_id = $1`, merchantID); err != nil {
		return nil, 0, err
	}
	rs, err := scanRefunds(q.QueryxContext(ctx, `SELECT data FROM refunds WHERE merchant_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`, merchantID, limit, offset))
	return rs, total, err
}

// RailDue lists what the sandbox refund rail has to do (refundkind.Simulate):
// refunds of enabled merchants of environment that are with it or waiting for it.
// A PENDING refund the rail has not taken and a DISPUTED or OVERDUE one are due
// once their last change is older than before; a PENDING refund the rail has
// taken (data's taken_at) is due at once: its outcome follows the take on the
// next scan. The read is fair: at most perMerchant refunds of one merchant, and
// every merchant's oldest before anyone's second (row_number per merchant), so a
// merchant with thousands of refunds cannot starve the others; limit bounds the
// scan. Environment is required: an empty one matches nobody.
func RailDue(ctx context.Context, q sqlx.QueryerContext, environment string, before time.Time, perMerchant, limit int) ([]refund.Refund, error) {
	return scanRefunds(q.QueryxContext(ctx, `SELECT data FROM (
		SELECT r.data, r.updated_at, r.id,
		       row_number() OVER (PARTITION BY r.merchant_id ORDER BY r.updated_at, r.id) AS n
		  FROM refunds r JOIN merchants m ON m.merchant_id = r.merchant_id
		 WHERE m.environment = $1 AND m.enabled
		   AND r.status IN ('PENDING', 'DISPUTED', 'OVERDUE')
		   AND (r.updated_at < $2 OR (r.status = 'PENDING' AND r.data ? 'taken_at'))
		) due WHERE n <= $3 ORDER BY n, updated_at, id LIMIT $4`, environment, before, perMerchant, limit))
}
