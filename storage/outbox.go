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
	// TraceParent is the W3C context of the command that wrote the event ("" if
	// it was not traced): the relay's publish span continues it.
	TraceParent string
}

// outboxEvent is one event of an outbox row as fetchOutboxSQL lists it: a row of
// the single shape gives one, with its body in Body; a commit's row (the arrays)
// gives one per element, in array order (ord), with its body in BodyText.
type outboxEvent struct {
	OutboxID   int64  `db:"outbox_id"`
	Ord        int64  `db:"ord"`
	EventID    string `db:"event_id"`
	Topic      string `db:"topic"`
	RecordKey  string `db:"record_key"`
	MerchantID string `db:"merchant_id"`
	Body       []byte `db:"body"`
	BodyText   []byte `db:"body_text"`
	Trace      string `db:"traceparent"`
}

// records are the events in publishing order (the query's), and how many outbox
// rows they came from.
func records(evs []outboxEvent) ([]OutboxRecord, int) {
	out := make([]OutboxRecord, len(evs))
	rows := 0
	for i, e := range evs {
		if i == 0 || e.OutboxID != evs[i-1].OutboxID {
			rows++
		}
		body := e.Body
		if body == nil {
			body = e.BodyText
		}
		out[i] = OutboxRecord{OutboxID: e.OutboxID, EventID: e.EventID, Topic: e.Topic, RecordKey: e.RecordKey,
			MerchantID: e.MerchantID, Body: body, TraceParent: e.Trace}
	}
	return out, rows
}

// FetchOutbox returns the events of up to limit unpublished outbox rows in
// insertion order (which, for the events of one partition, and so of one
// aggregate, is commit order).
func FetchOutbox(ctx context.Context, q sqlx.QueryerContext, limit int) ([]OutboxRecord, error) {
	var evs []outboxEvent
	if err := sqlx.SelectContext(ctx, q, &evs, fetchOutboxSQL, limit); err != nil {
		return nil, fmt.Errorf("fetch outbox: %w", err)
	}
	out, _ := records(evs)
	return out, nil
}

const (
	// fetchOutboxSQL takes a commit's row apart in the database (unnest), so each
	// event arrives as plain columns: read as text arrays, every body was escaped
	// into an array literal by PostgreSQL and unescaped again byte by byte by lib/pq
	// (parseArray: 3% of the service's CPU under STK load, docs/benchmarks-history.md).
	// The limit still counts outbox rows, and the order is the rows' and then
	// each row's arrays'.
	fetchOutboxSQL = `WITH r AS (SELECT * FROM outbox ORDER BY outbox_id LIMIT $1)
		SELECT r.outbox_id, 0::bigint AS ord, r.event_id, r.topic, r.record_key, r.merchant_id, r.body, NULL::text AS body_text,
		       '' AS traceparent
		  FROM r WHERE r.event_ids IS NULL
		UNION ALL
		SELECT r.outbox_id, e.ord, e.event_id, e.topic, e.record_key, e.merchant_id, NULL::bytea, e.body, coalesce(e.trace, '')
		  FROM r, unnest(r.event_ids, r.topics, r.record_keys, r.merchant_ids, r.bodies, r.traceparents) WITH ORDINALITY
		       AS e(event_id, topic, record_key, merchant_id, body, trace, ord)
		 WHERE r.event_ids IS NOT NULL
		ORDER BY 1, 2`
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
	var evs []outboxEvent
	if err := s.fetch.SelectContext(ctx, &evs, limit); err != nil {
		return nil, 0, fmt.Errorf("fetch outbox: %w", err)
	}
	out, rows := records(evs)
	return out, rows, nil
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
