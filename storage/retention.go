package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// TrimProcessedReplies empties the stored replies of up to limit commands processed
// before now-retain, and says how many it emptied. The rows stay: they are what keeps
// a redelivered or retried command from applying twice. Rows locked by a concurrent
// trimmer are skipped, so several engines may run this at once.
func TrimProcessedReplies(ctx context.Context, ext sqlx.ExtContext, retain time.Duration, limit int) (int64, error) {
	res, err := ext.ExecContext(ctx, `UPDATE processed_commands SET reply = ''::bytea WHERE command_id IN (
			SELECT command_id FROM processed_commands
			WHERE octet_length(reply) > 0 AND processed_at < now() - $1 * interval '1 millisecond'
			ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, retain.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("trim processed replies: %w", err)
	}
	return res.RowsAffected()
}

// PruneWebhookEvents deletes up to limit finished webhook deliveries (DELIVERED or
// FAILED) created before now-retain, with their attempts, and says how many
// deliveries it deleted. Unfinished ones are never touched, however old: they still
// hold their queue's place.
func PruneWebhookEvents(ctx context.Context, ext sqlx.ExtContext, retain time.Duration, limit int) (int64, error) {
	// Old rows sit near the start of an append-mostly table, so the scan that fills
	// LIMIT stops early without an index on created_at (which would cost one more
	// index write per delivery on the dispatcher's hot path).
	res, err := ext.ExecContext(ctx, `WITH gone AS (
			DELETE FROM webhook_deliveries WHERE ctid IN (
				SELECT ctid FROM webhook_deliveries
				WHERE status IN ('DELIVERED', 'FAILED') AND created_at < now() - $1 * interval '1 millisecond'
				LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING event_id, webhook_id),
		attempts AS (
			DELETE FROM webhook_attempts a USING gone g WHERE a.event_id = g.event_id AND a.webhook_id = g.webhook_id)
		SELECT 1 FROM gone`, retain.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", err)
	}
	return res.RowsAffected()
}
