package subscriptionstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/subscription"
	"paysvc/storage"
)

func decode(d []byte) (subscription.State, error) {
	var s subscription.State
	if err := json.Unmarshal(d, &s); err != nil {
		return s, fmt.Errorf("decode subscription: %w", err)
	}
	return s, nil
}

// Get reads one of the merchant's subscriptions; another merchant's is
// storage.ErrNotFound.
func Get(ctx context.Context, q sqlx.QueryerContext, merchantID, id string) (subscription.State, error) {
	return one(ctx, q, "get subscription", `SELECT data FROM subscriptions WHERE merchant_id = $1 AND subscription_id = $2`, merchantID, id)
}

// BySetupToken finds the subscription a setup_url's token opens (by
// the token's hash). The token is the capability: no merchant key is involved.
func BySetupToken(ctx context.Context, q sqlx.QueryerContext, tokenHash string) (subscription.State, error) {
	return one(ctx, q, "subscription by setup token", `SELECT data FROM subscriptions WHERE setup_token_hash = $1`, tokenHash)
}

// one reads the subscription a query finds (none: storage.ErrNotFound); what
// names the read in its error.
func one(ctx context.Context, q sqlx.QueryerContext, what, query string, args ...any) (subscription.State, error) {
	var data []byte
	err := sqlx.GetContext(ctx, q, &data, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return subscription.State{}, storage.ErrNotFound
	}
	if err != nil {
		return subscription.State{}, fmt.Errorf("%s: %w", what, err)
	}
	return decode(data)
}

// Stored is a subscription's snapshot with its row version (the
// engine's optimistic check).
type Stored struct {
	Version int64
	State   subscription.State
}

// Load reads the snapshots of the given subscriptions of one merchant,
// for the engine's hydration.
func Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) (map[string]Stored, error) {
	var rows []struct {
		Version int64  `db:"version"`
		Data    []byte `db:"data"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT version, data FROM subscriptions WHERE merchant_id = $1 AND subscription_id = ANY($2)`,
		merchantID, pq.StringArray(ids)); err != nil {
		return nil, fmt.Errorf("load subscriptions: %w", err)
	}
	out := make(map[string]Stored, len(rows))
	for _, r := range rows {
		s, err := decode(r.Data)
		if err != nil {
			return nil, err
		}
		out[s.SubscriptionID] = Stored{Version: r.Version, State: s}
	}
	return out, nil
}

// List returns one page of the merchant's subscriptions, newest
// first, and the total.
func List(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]subscription.State, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM subscriptions WHERE merchant_id = $1`, merchantID); err != nil {
		return nil, 0, fmt.Errorf("count subscriptions: %w", err)
	}
	var rows [][]byte
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT data FROM subscriptions WHERE merchant_id = $1
		ORDER BY created_at DESC, subscription_id DESC LIMIT $2 OFFSET $3`, merchantID, limit, offset); err != nil {
		return nil, 0, fmt.Errorf("list subscriptions: %w", err)
	}
	out := make([]subscription.State, len(rows))
	for i, d := range rows {
		s, err := decode(d)
		if err != nil {
			return nil, 0, err
		}
		out[i] = s
	}
	return out, total, nil
}

// Payment is one cycle's charge with its invoice-shaped record.
type Payment struct {
	Slot      int
	CycleDate string
	Invoice   invoice.State
}

// Payments returns one page of a subscription's cycle charges,
// oldest first, and their total; another merchant's subscription lists nothing.
// The page is cut in SQL (subscription_invoices_sub), never in memory.
func Payments(ctx context.Context, q sqlx.QueryerContext, merchantID, subscriptionID string, limit, offset int) ([]Payment, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM subscription_invoices WHERE merchant_id = $1 AND subscription_id = $2`,
		merchantID, subscriptionID); err != nil {
		return nil, 0, fmt.Errorf("count subscription payments: %w", err)
	}
	var rows []struct {
		Slot      int    `db:"slot"`
		CycleDate string `db:"cycle_date"`
		Data      []byte `db:"data"`
	}
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT slot, to_char(cycle_date, 'YYYY-MM-DD') AS cycle_date, data
		FROM subscription_invoices WHERE merchant_id = $1 AND subscription_id = $2 ORDER BY created_at, slot, invoice_id
		LIMIT $3 OFFSET $4`, merchantID, subscriptionID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("subscription payments: %w", err)
	}
	out := make([]Payment, len(rows))
	for i, r := range rows {
		out[i] = Payment{Slot: r.Slot, CycleDate: r.CycleDate}
		if err := json.Unmarshal(r.Data, &out[i].Invoice); err != nil {
			return nil, 0, fmt.Errorf("decode subscription invoice: %w", err)
		}
	}
	return out, total, nil
}
