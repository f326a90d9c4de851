package storage

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// Processing is what ProcessingCollections found.
type Processing struct {
	// Invoices waiting in PROCESSING for their rail's outcome.
	Invoices int64
	// Oldest is how long the oldest of them has waited (0 when there is none).
	Oldest time.Duration
}

// ProcessingCollections counts environment's collections waiting in PROCESSING
// for an outcome that the service itself is expected to bring (a callback, a
// status query, a simulator). Left out: held invoices (a paid amount that
// differs: they wait for an operator, ops/runbooks.md#stk-amount-mismatch) and
// prompts whose answer was lost with no reference to query
// (ops/runbooks.md#stk-unknown-outcomes): each has its own alert, and they stay
// PROCESSING until an operator acts.
func ProcessingCollections(ctx context.Context, q sqlx.QueryerContext, environment string) (Processing, error) {
	var r struct {
		N      int64   `db:"n"`
		Oldest float64 `db:"oldest"` // seconds, a duration, not money
	}
	err := sqlx.GetContext(ctx, q, &r, `SELECT count(*) AS n,
		       coalesce(extract(epoch FROM now() - min(i.updated_at)), 0)::float8 AS oldest
		  FROM invoices i JOIN merchants m ON m.merchant_id = i.merchant_id
		 WHERE i.state = 'PROCESSING' AND m.environment = $1
		   AND NOT coalesce((i.data ->> 'held')::boolean, false)
		   AND NOT (coalesce((i.data ->> 'outcome_unknown')::boolean, false) AND i.checkout_request_id IS NULL)`, environment)
	return Processing{Invoices: r.N, Oldest: time.Duration(r.Oldest * float64(time.Second))}, err
}
