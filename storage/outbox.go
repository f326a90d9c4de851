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
	err := sqlx.SelectContext(ctx, q, &out, fetchOutboxSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("fetch outbox: %w", err)
	}
	return out, nil
}

const (
	fetchOutboxSQL   = `SELECT outbox_id, event_id, topic, record_key, merchant_id, body FROM outbox ORDER BY outbox_id LIMIT $1`
	markPublishedSQL = `DELETE FROM outbox WHERE outbox_id = ANY($1)`
)

// OutboxStatements are FetchOutbox and MarkPublished prepared on the relay's own
// connection, which runs them on every wake-up: one round trip each, parsed and
// planned once (prepared.go says why).
type OutboxStatements struct {
	fetch, mark *sqlx.Stmt
}

// PrepareOutbox prepares the relay's statements on conn; Close releases them.
func PrepareOutbox(ctx context.Context, conn *sqlx.Conn) (*OutboxStatements, error) {
	fetch, err := conn.PreparexContext(ctx, fetchOutboxSQL)
	if err != nil {
		return nil, fmt.Errorf("prepare outbox fetch: %w", err)
	}
	mark, err := conn.PreparexContext(ctx, markPublishedSQL)
	if err != nil {
		fetch.Close()
		return nil, fmt.Errorf("prepare outbox delete: %w", err)
	}
	return &OutboxStatements{fetch: fetch, mark: mark}, nil
}

// Fetch is FetchOutbox.
func (s *OutboxStatements) Fetch(ctx context.Context, limit int) ([]OutboxRecord, error) {
	var out []OutboxRecord
	if err := s.fetch.SelectContext(ctx, &out, limit); err != nil {
		return nil, fmt.Errorf("fetch outbox: %w", err)
	}
	return out, nil
}

// MarkPublished is MarkPublished.
func (s *OutboxStatements) MarkPublished(ctx context.Context, ids []int64) error {
	if _, err := s.mark.ExecContext(ctx, pq.Int64Array(ids)); err != nil {
		return fmt.Errorf("mark published: %w", err)
	}
	return nil
}

// Close releases the prepared statements.
func (s *OutboxStatements) Close() {
	s.fetch.Close()
	s.mark.Close()
}

// MarkPublished removes events that reached Kafka from the outbox.
func MarkPublished(ctx context.Context, ext Execer, ids []int64) error {
	_, err := ext.ExecContext(ctx, markPublishedSQL, pq.Int64Array(ids))
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
