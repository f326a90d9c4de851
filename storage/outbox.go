package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// OutboxRecord is an unpublished event. The events of one engine commit share
// one outbox row (migration 0036), so several records can have one OutboxID.
type OutboxRecord struct {
	OutboxID   int64
	EventID    string
	Topic      string
	RecordKey  string
	MerchantID string
	Body       []byte
}

// outboxRow is either shape of an outbox row: one event in the single columns, or
// a commit's events in the arrays.
type outboxRow struct {
	OutboxID    int64          `db:"outbox_id"`
	EventID     sql.NullString `db:"event_id"`
	Topic       sql.NullString `db:"topic"`
	RecordKey   sql.NullString `db:"record_key"`
	MerchantID  sql.NullString `db:"merchant_id"`
	Body        []byte         `db:"body"`
	EventIDs    pq.StringArray `db:"event_ids"`
	Topics      pq.StringArray `db:"topics"`
	RecordKeys  pq.StringArray `db:"record_keys"`
	MerchantIDs pq.StringArray `db:"merchant_ids"`
	Bodies      pq.StringArray `db:"bodies"`
}

// expand lists the rows' events in publishing order: rows by outbox_id, a row's
// events in the order the commit wrote them.
func expand(rows []outboxRow) []OutboxRecord {
	var out []OutboxRecord
	for _, r := range rows {
		if r.EventIDs == nil {
			out = append(out, OutboxRecord{OutboxID: r.OutboxID, EventID: r.EventID.String, Topic: r.Topic.String,
				RecordKey: r.RecordKey.String, MerchantID: r.MerchantID.String, Body: r.Body})
			continue
		}
		for i, id := range r.EventIDs {
			out = append(out, OutboxRecord{OutboxID: r.OutboxID, EventID: id, Topic: r.Topics[i],
				RecordKey: r.RecordKeys[i], MerchantID: r.MerchantIDs[i], Body: []byte(r.Bodies[i])})
		}
	}
	return out
}

// FetchOutbox returns the events of up to limit unpublished outbox rows in
// insertion order (which, for the events of one partition, and so of one
// aggregate, is commit order).
func FetchOutbox(ctx context.Context, q sqlx.QueryerContext, limit int) ([]OutboxRecord, error) {
	var rows []outboxRow
	if err := sqlx.SelectContext(ctx, q, &rows, fetchOutboxSQL, limit); err != nil {
		return nil, fmt.Errorf("fetch outbox: %w", err)
	}
	return expand(rows), nil
}

const (
	fetchOutboxSQL = `SELECT outbox_id, event_id, topic, record_key, merchant_id, body,
		event_ids, topics, record_keys, merchant_ids, bodies FROM outbox ORDER BY outbox_id LIMIT $1`
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

// Fetch is FetchOutbox, and says how many rows the events came from (limit
// means there may be more).
func (s *OutboxStatements) Fetch(ctx context.Context, limit int) ([]OutboxRecord, int, error) {
	var rows []outboxRow
	if err := s.fetch.SelectContext(ctx, &rows, limit); err != nil {
		return nil, 0, fmt.Errorf("fetch outbox: %w", err)
	}
	return expand(rows), len(rows), nil
}

// MarkPublished deletes outbox rows whose every event reached Kafka or was set
// aside (DeadLetter).
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

// OutboxBacklog counts unpublished events (not rows: a commit's row holds many).
func OutboxBacklog(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var n int64
	err := sqlx.GetContext(ctx, q, &n, `SELECT coalesce(sum(coalesce(cardinality(event_ids), 1)), 0) FROM outbox`)
	return n, err
}

// Execer is the part of a connection, transaction or pool that runs a statement.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// DeadLetter sets aside an event Kafka refused for good, with why. Its outbox row
// is deleted with the published ones (MarkPublished), so the other events of the
// row still go out; a relay that dies in between refuses the event again, and the
// second copy is not stored.
func DeadLetter(ctx context.Context, ext Execer, rec OutboxRecord, reason string) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO outbox_dead (outbox_id, event_id, topic, record_key, merchant_id, body, created_at, error)
		SELECT $1, $2, $3, $4, $5, $6, coalesce((SELECT created_at FROM outbox WHERE outbox_id = $1), now()), $7
		ON CONFLICT (outbox_id, event_id) DO NOTHING`,
		rec.OutboxID, rec.EventID, rec.Topic, rec.RecordKey, rec.MerchantID, rec.Body, reason)
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
