package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// OutboxRecord is an unpublished event.
type OutboxRecord struct {
	OutboxID   int64  `db:"outbox_id"`
	EventID    string `db:"event_id"`
	Topic      string `db:"topic"`
	RecordKey  string `db:"record_key"`
	MerchantID string `db:"merchant_id"`
	Body       []byte `db:"body"`
}

// FetchOutbox returns up to limit unpublished events in insertion order (which, for
// the events of one partition, and so of one aggregate, is commit order).
func FetchOutbox(ctx context.Context, q sqlx.QueryerContext, limit int) ([]OutboxRecord, error) {
	var out []OutboxRecord
	err := sqlx.SelectContext(ctx, q, &out, `SELECT outbox_id, event_id, topic, record_key, merchant_id, body
		FROM outbox ORDER BY outbox_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("fetch outbox: %w", err)
	}
	return out, nil
}

// MarkPublished removes events that reached Kafka from the outbox.
func MarkPublished(ctx context.Context, ext Execer, ids []int64) error {
	_, err := ext.ExecContext(ctx, `DELETE FROM outbox WHERE outbox_id = ANY($1)`, pq.Int64Array(ids))
	if err != nil {
		return fmt.Errorf("mark published: %w", err)
	}
	return nil
}

// OutboxBacklog counts unpublished events.
func OutboxBacklog(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var n int64
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM outbox`)
	return n, err
}

// Execer is the part of a connection, transaction or pool that runs a statement.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// DeadLetter moves an event Kafka refused for good out of the outbox, with why.
func DeadLetter(ctx context.Context, ext Execer, outboxID int64, reason string) error {
	_, err := ext.ExecContext(ctx, `WITH moved AS (DELETE FROM outbox WHERE outbox_id = $1 RETURNING *)
		INSERT INTO outbox_dead (outbox_id, event_id, topic, record_key, merchant_id, body, created_at, error)
		SELECT outbox_id, event_id, topic, record_key, merchant_id, body, created_at, $2 FROM moved`, outboxID, reason)
	if err != nil {
		return fmt.Errorf("dead-letter event: %w", err)
	}
	return nil
}

// InsertOutbox queues events outside an engine batch (the sandbox's sample events)
// in one statement; the relay publishes them like any other.
func InsertOutbox(ctx context.Context, ext Execer, events []OutboxEvent) error {
	n := len(events)
	id, topic, key, merchant, body := make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n),
		make(pq.StringArray, n), make(pq.ByteaArray, n)
	for i, o := range events {
		id[i], topic[i], key[i], merchant[i], body[i] = o.EventID, o.Topic, o.Key, o.MerchantID, o.Body
	}
	_, err := ext.ExecContext(ctx, `INSERT INTO outbox (event_id, topic, record_key, merchant_id, body)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, id, topic, key, merchant, body)
	if err != nil {
		return fmt.Errorf("insert outbox: %w", err)
	}
	return nil
}
