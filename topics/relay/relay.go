// Package relay publishes the outbox: events that the engine wrote in its batch
// transactions go to their Kafka event topics after the commit, at least once, in
// commit order. One relay is active at a time (a Postgres advisory lock elects it),
// so order holds even with several relay instances running; the others wait.
package relay

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/storage"
)

// leaderLock is the advisory-lock class of the relay; the schema is the second key,
// since advisory locks span the database and each schema has its own outbox.
const leaderLock = 7_316_420

var (
	published = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_relay_events_published_total",
		Help: "Outbox events published to Kafka, by topic.",
	}, []string{"topic"})
	backlog = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_relay_outbox_backlog_events",
		Help: "Outbox events committed but not yet published.",
	})
	leader = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_relay_leader",
		Help: "1 while this instance is the active relay.",
	})
)

// Relay moves outbox rows to Kafka.
type Relay struct {
	db    *sqlx.DB
	cl    *kgo.Client
	log   *slog.Logger
	wake  chan struct{}
	batch int
}

// New makes a relay producing with cl.
func New(db *sqlx.DB, cl *kgo.Client, log *slog.Logger) *Relay {
	return &Relay{db: db, cl: cl, log: log.With("component", "relay"), wake: make(chan struct{}, 1), batch: 500}
}

// Wake tells the relay that new events were committed; it never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	go r.watchBacklog(ctx)
	for ctx.Err() == nil {
		if err := r.lead(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("relay stopped leading, retrying", "err", err)
		}
		leader.Set(0)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// lead holds the advisory lock on one connection for as long as it publishes; the
// lock goes with the connection if this process dies.
func (r *Relay) lead(ctx context.Context) error {
	conn, err := r.db.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var got bool
	if err := conn.QueryRowxContext(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema()))`, leaderLock).Scan(&got); err != nil {
		return err
	}
	if !got {
		return nil
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, leaderLock) //nolint:errcheck // released with the connection anyway
	leader.Set(1)
	idle := time.NewTicker(200 * time.Millisecond)
	defer idle.Stop()
	for {
		n, err := r.publishOnce(ctx, conn)
		if err != nil {
			return err // a dead connection surfaces here, and the lock went with it
		}
		if n == r.batch {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
			// Let a few more batches commit: one fetch per coalesce window, not one
			// per engine batch.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(coalesce):
			}
		case <-idle.C:
		}
	}
}

// coalesce bounds how often the relay reads the outbox under load.
const coalesce = 5 * time.Millisecond

func (r *Relay) publishOnce(ctx context.Context, conn *sqlx.Conn) (int, error) {
	recs, err := storage.FetchOutbox(ctx, conn, r.batch)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	krecs := make([]*kgo.Record, len(recs))
	ids := make([]int64, len(recs))
	for i, o := range recs {
		krecs[i] = &kgo.Record{Topic: o.Topic, Key: []byte(o.RecordKey), Value: o.Body,
			Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(o.EventID)}, {Key: "merchant_id", Value: []byte(o.MerchantID)}}}
		ids[i] = o.OutboxID
	}
	if err := r.cl.ProduceSync(ctx, krecs...).FirstErr(); err != nil {
		return 0, fmt.Errorf("produce events: %w", err)
	}
	if err := storage.MarkPublished(ctx, conn, ids); err != nil {
		return 0, err // published but not marked: they go again, consumers dedupe on event_id
	}
	for _, o := range recs {
		published.WithLabelValues(o.Topic).Inc()
	}
	return len(recs), nil
}

func (r *Relay) watchBacklog(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if n, err := storage.OutboxBacklog(ctx, r.db); err == nil {
			backlog.Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
