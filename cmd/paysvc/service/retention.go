package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/values/every"
	"paysvc/storage"
)

// Retention bounds the tables that would otherwise grow with every request
// (docs/retention.md). Each kind is pruned by the role that writes it; several
// instances pruning at once is harmless (skipped locks, idempotent deletes).
type Retention struct {
	// Interval is how often each kind is pruned.
	Interval time.Duration
	// CommandReplies is how long a processed command keeps its stored reply. The
	// command's row itself is kept forever: it is the dedupe set.
	CommandReplies time.Duration
	// WebhookEvents is how long a finished webhook delivery and its attempts stay
	// listable and replayable.
	WebhookEvents time.Duration
}

var retentionRows = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_retention_rows_total",
	Help: "Rows pruned by retention: idempotency_keys deleted, processed_commands replies emptied, webhook_deliveries deleted.",
}, []string{"table"})

// pruneBatch is how many rows one statement prunes: small enough not to hold locks
// or bloat one transaction, repeated until a run finds fewer.
const pruneBatch = 1000

// prune runs f every interval as the job of the table, each time repeating it
// until it prunes less than a whole batch, so a backlog clears in one round
// without one huge statement.
func prune(ctx context.Context, interval time.Duration, job, table string, log *slog.Logger, f func(ctx context.Context) (int64, error)) error {
	counter := retentionRows.WithLabelValues(table)
	return every.Run(ctx, log, every.Job{Name: job, Interval: interval, Run: func(ctx context.Context) error {
		var total int64
		defer func() {
			if total > 0 {
				log.Info("retention", "table", table, "pruned", total)
			}
		}()
		for ctx.Err() == nil {
			n, err := f(ctx)
			if err != nil {
				return fmt.Errorf("retention of %s: %w", table, err)
			}
			total += n
			counter.Add(float64(n))
			if n < pruneBatch {
				break
			}
		}
		return nil
	}})
}

func pruneIdempotency(ctx context.Context, db *sqlx.DB, interval, ttl time.Duration, log *slog.Logger) error {
	return prune(ctx, interval, every.RetentionIdempotency, "idempotency_keys", log, func(ctx context.Context) (int64, error) {
		return storage.PruneIdempotency(ctx, db, ttl, pruneBatch)
	})
}

func trimCommandReplies(ctx context.Context, db *sqlx.DB, r Retention, log *slog.Logger) error {
	return prune(ctx, r.Interval, every.RetentionReplies, "processed_commands", log, func(ctx context.Context) (int64, error) {
		return storage.TrimProcessedReplies(ctx, db, r.CommandReplies, pruneBatch)
	})
}

func pruneWebhookEvents(ctx context.Context, db *sqlx.DB, r Retention, log *slog.Logger) error {
	return prune(ctx, r.Interval, every.RetentionWebhooks, "webhook_deliveries", log, func(ctx context.Context) (int64, error) {
		return storage.PruneWebhookEvents(ctx, db, r.WebhookEvents, pruneBatch)
	})
}
