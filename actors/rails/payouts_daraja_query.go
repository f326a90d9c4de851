package rails

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/rails/payout"
	"paysvc/actors/values/every"
	"paysvc/storage"
)

// B2CStatusQuerier asks M-Pesa for the outcome of a B2C payment (mpesa.B2C).
type B2CStatusQuerier interface {
	QueryStatus(ctx context.Context, transactionID string) error
}

// maxStatusQueries bounds the Transaction Status queries of one pass.
const maxStatusQueries = 50

// QueryB2CPayouts asks Daraja's Transaction Status API, every interval, about the
// MPESA-B2C transactions whose outcome has not come after after: a send SENDING or
// UNKNOWN (the request's answer was lost) or ACCEPTED (the result callback never
// came), whose transaction is still PENDING or PROCESSING. Each is asked at most
// once per after, and at most maxStatusQueries per pass. A query moves no money;
// Daraja POSTs its answer to the status URL, where a final answer becomes the
// transaction's FINAL outcome (the same command as its B2C result). It returns
// when ctx ends.
func QueryB2CPayouts(ctx context.Context, db *sqlx.DB, scope *Scope, q B2CStatusQuerier, after, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "rails-payout-status-query")
	asked := map[string]time.Time{} // transaction id -> last query
	return every.Run(ctx, log, every.Job{Name: every.PayoutStatusQuery, Interval: interval, Run: func(ctx context.Context) error {
		now := time.Now()
		for id, at := range asked {
			if now.Sub(at) >= after {
				delete(asked, id)
			}
		}
		ids, err := storage.UnsettledPayoutSends(ctx, db, scope.Environment, payout.ProviderMpesaB2C, now.Add(-after), 10*maxStatusQueries)
		if err != nil {
			return fmt.Errorf("list unsettled B2C payouts: %w", err)
		}
		n, failed := 0, 0
		for _, id := range ids {
			if n >= maxStatusQueries || ctx.Err() != nil {
				break
			}
			if _, ok := asked[id]; ok {
				continue
			}
			n++
			asked[id] = now
			if err := q.QueryStatus(ctx, id); err != nil {
				failed++
				requests.WithLabelValues("mpesa-b2c-status", "error").Inc()
				log.Warn("B2C transaction status query", "transaction_id", id, "err", err)
				continue
			}
			requests.WithLabelValues("mpesa-b2c-status", "ok").Inc()
			log.Info("B2C payout outcome asked of M-Pesa", "transaction_id", id)
		}
		return failedOf(failed, n, "B2C status queries")
	}})
}
