package storage

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/money"
)

// The reads behind the dashboards' database gauges (cmd/paysvc/service, gauges.go).
// Each is scoped to one environment's merchants, and cheap: a partial index of
// only the rows counted (migration 0049), or a count bounded by BacklogCap. The
// wallet totals are the exception, a scan of wallets, which is why the gauges
// are refreshed at most every PAYSVC_DB_GAUGES_EVERY (docs/metrics.md).

// The counted reads, each with the partial index that answers it (a test asks
// the planner whether each index fits its query).
const (
	awaitingSQL = `SELECT count(*), coalesce(extract(epoch FROM now() - min(f.created_at))::float8, 0)
		  FROM payout_files f JOIN merchants m ON m.merchant_id = f.merchant_id
		 WHERE f.status = 'PREVIEW-AND-APPROVE' AND m.environment = $1`
	disabledHooksSQL = `SELECT count(*) FROM webhooks w JOIN merchants m ON m.merchant_id = w.merchant_id
		 WHERE NOT w.is_active AND m.environment = $1`
	backlogSQL = `SELECT count(*) FROM (
		SELECT 1 FROM webhook_deliveries d JOIN merchants m ON m.merchant_id = d.merchant_id
		 WHERE d.status IN ('PENDING', 'PROCESSING') AND m.environment = $1 LIMIT $2) x`
)

// BacklogCap bounds the webhook backlog's count: a backlog of this size already
// says everything; counting further would read a table that grows without bound.
const BacklogCap = 100000

// FilesAwaitingApproval counts the environment's payment files waiting in
// PREVIEW-AND-APPROVE, and the age in seconds of the oldest (0 when none).
func FilesAwaitingApproval(ctx context.Context, q sqlx.QueryerContext, environment string) (n int64, oldest float64, err error) {
	err = q.QueryRowxContext(ctx, awaitingSQL, environment).Scan(&n, &oldest)
	if err != nil {
		return 0, 0, fmt.Errorf("files awaiting approval: %w", err)
	}
	return n, oldest, nil
}

// DisabledWebhooks counts the environment's webhooks that are not active
// (disabled at the failure threshold, or by their merchant).
func DisabledWebhooks(ctx context.Context, q sqlx.QueryerContext, environment string) (int64, error) {
	var n int64
	if err := q.QueryRowxContext(ctx, disabledHooksSQL, environment).Scan(&n); err != nil {
		return 0, fmt.Errorf("disabled webhooks: %w", err)
	}
	return n, nil
}

// WebhookBacklog counts the environment's deliveries not yet DELIVERED or FAILED
// (PENDING or PROCESSING, retries included), up to BacklogCap, through the partial
// index webhook_deliveries_due.
func WebhookBacklog(ctx context.Context, q sqlx.QueryerContext, environment string) (int64, error) {
	var n int64
	if err := q.QueryRowxContext(ctx, backlogSQL, environment, BacklogCap).Scan(&n); err != nil {
		return 0, fmt.Errorf("webhook backlog: %w", err)
	}
	return n, nil
}

// WalletTotal is the sum of one currency's wallet balances.
type WalletTotal struct {
	Currency  string
	Current   money.Amount
	Available money.Amount
}

// WalletTotals sums the environment's wallet balances per currency, exactly
// (numeric in the database, money.Amount here). It reads every wallet of the
// environment: callers refresh it at a bounded rate.
func WalletTotals(ctx context.Context, q sqlx.QueryerContext, environment string) ([]WalletTotal, error) {
	rows, err := q.QueryxContext(ctx, `SELECT w.currency, coalesce(sum(w.current_balance), 0)::text, coalesce(sum(w.available_balance), 0)::text
		  FROM wallets w JOIN merchants m ON m.merchant_id = w.merchant_id
		 WHERE m.environment = $1 GROUP BY 1 ORDER BY 1`, environment)
	if err != nil {
		return nil, fmt.Errorf("wallet totals: %w", err)
	}
	defer rows.Close()
	var out []WalletTotal
	for rows.Next() {
		var t WalletTotal
		var cur, avail string
		if err := rows.Scan(&t.Currency, &cur, &avail); err != nil {
			return nil, err
		}
		if t.Current, err = money.Parse(cur); err != nil {
			return nil, fmt.Errorf("wallet totals: %s current %q: %w", t.Currency, cur, err)
		}
		if t.Available, err = money.Parse(avail); err != nil {
			return nil, fmt.Errorf("wallet totals: %s available %q: %w", t.Currency, avail, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
