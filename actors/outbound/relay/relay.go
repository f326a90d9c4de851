// Package relay publishes the outbox: events that the engine wrote in its batch
// transactions go to their Kafka event topics after the commit, at least once, in
// commit order. One relay is active at a time (a Postgres advisory lock elects it),
// so order holds even with several relay instances running; the others wait.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"paysvc/actors/values/every"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
	"paysvc/topics/tracing"
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
	deadLetters = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_relay_dead_letters_total",
		Help: "Events Kafka refused for good, moved to outbox_dead (each one needs an operator).",
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
	ns    topics.Namespace
	log   *slog.Logger
	wake  chan struct{}
	batch int // outbox rows per fetch; an engine commit's row holds all its events
	poll  time.Duration
}

// DefaultPoll is how often the relay looks at the outbox when nothing woke it. An
// engine in the same process wakes it at each commit; an engine in another process
// (the compose deployment) cannot, so this bounds the delay its events wait before
// publishing. An empty-outbox look is one index probe.
const DefaultPoll = 25 * time.Millisecond

// BatchMaxBytes bounds the record batches the relay's client builds: kgo's default,
// under Kafka's default max.message.bytes (1,048,588), which the event and rail
// topics keep (topics.EnsureTopics raises it only for commands and replies).
//
// Why its own client: the service's command producer batches up to
// topics.MaxRecordBytes (16 MiB), because one payment file is one command of a few
// megabytes. Publishing with that client, the events of one fetch that share a
// partition (a payment file's ~60 kB rail requests, all keyed by the file) went as
// one batch of more than 1 MiB, which the broker refused whole: every event in it,
// each one within the limit, was dead-lettered. Compression had hidden it for
// events that compress well (docs/benchmarks-history.md). Within this bound a
// batch is split before it reaches the limit, and only a single event over it is
// refused (kgo fails it locally with MESSAGE_TOO_LARGE) and dead-lettered alone.
const BatchMaxBytes = 1_000_012

// NewClient makes the relay's Kafka client: batches within BatchMaxBytes, no
// linger (a relay cycle produces all it fetched at once, then waits for it), and
// retries without limit (New). opts come last and may override (tests).
func NewClient(brokers []string, clientID string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.Dialer(inproc.Dial), inproc.Compression(brokers),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(BatchMaxBytes), kgo.ProduceRequestTimeout(5 * time.Second),
		kgo.ClientID(clientID)}, opts...)...)
}

// New makes a relay producing with cl, made by NewClient. The client must retry retriable errors
// without limit (kgo's default: no RecordRetries limit, no RecordDeliveryTimeout):
// a client that gives up on a record can fail a partition's first batch and deliver
// its next, and the republished events would land out of order.
// The outbox keeps the logical topic names; records go to their topics in
// namespace ns (topics.Namespace). poll <= 0 means DefaultPoll.
func New(db *sqlx.DB, cl *kgo.Client, ns topics.Namespace, log *slog.Logger, poll time.Duration) *Relay {
	if poll <= 0 {
		poll = DefaultPoll
	}
	return &Relay{db: db, cl: cl, ns: ns, log: log.With("component", "relay"), wake: make(chan struct{}, 1), batch: 100, poll: poll}
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
	// The outbox is small but churns: the planner's sequential scan reads every dead
	// row until autovacuum, while the primary-key scan skips them once marked dead.
	if _, err := conn.ExecContext(ctx, `SET enable_seqscan = off`); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), `RESET enable_seqscan`) //nolint:errcheck // the pool reuses this connection
	// Its deletes need not wait for the WAL flush: one lost to a database crash only
	// publishes its events again, which the relay does anyway (at least once,
	// deduped by event_id). Under load a relay cycle follows each engine commit, so
	// this halves the synchronous flushes PostgreSQL makes (docs/benchmarks-history.md).
	// The engine's commits stay synchronous: they are what a reply promises.
	if _, err := conn.ExecContext(ctx, `SET synchronous_commit = off`); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), `RESET synchronous_commit`) //nolint:errcheck // the pool reuses this connection
	stmts, err := storage.PrepareOutbox(ctx, conn)
	if err != nil {
		return err
	}
	defer stmts.Close()
	leader.Set(1)
	idle := time.NewTicker(r.poll)
	defer idle.Stop()
	for {
		n, err := r.publishOnce(ctx, conn, stmts)
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

func (r *Relay) publishOnce(ctx context.Context, conn *sqlx.Conn, stmts *storage.OutboxStatements) (int, error) {
	recs, rows, err := stmts.Fetch(ctx, r.batch)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	krecs := make([]*kgo.Record, len(recs))
	index := make(map[*kgo.Record]int, len(recs)) // results come back in completion order
	var spans []trace.Span                        // by event; nil when no event of the fetch is traced
	for i, o := range recs {
		krecs[i] = &kgo.Record{Topic: r.ns.Topic(o.Topic), Key: []byte(o.RecordKey), Value: o.Body,
			Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(o.EventID)}, {Key: "merchant_id", Value: []byte(o.MerchantID)}}}
		index[krecs[i]] = i
		if o.TraceParent != "" {
			spans = r.tracePublish(ctx, o, krecs[i], i, len(recs), spans)
		}
	}
	defer func() { // those a return below left open (End is once: ended ones ignore it)
		for _, s := range spans {
			if s != nil {
				s.End()
			}
		}
	}()
	results := r.cl.ProduceSync(ctx, krecs...)
	var retry error
	for _, res := range results {
		i := index[res.Record]
		if spans != nil && spans[i] != nil {
			if res.Err != nil {
				spans[i].SetStatus(codes.Error, res.Err.Error())
			}
			spans[i].End()
		}
		switch {
		case res.Err == nil:
		case refusedForGood(res.Err):
			r.log.Error("event refused by Kafka for good; moved to outbox_dead", "event_id", recs[i].EventID,
				"topic", recs[i].Topic, "bytes", len(recs[i].Body), "err", res.Err)
			if err := storage.DeadLetter(ctx, conn, recs[i], res.Err.Error()); err != nil {
				return 0, err
			}
			deadLetters.Inc()
		default:
			retry = res.Err
		}
	}
	if retry != nil {
		// Delivered ones go again with the rest: consumers dedupe on event_id.
		return 0, fmt.Errorf("produce events: %w", retry)
	}
	// Every event of every fetched row is now in Kafka or in outbox_dead.
	ids := make([]int64, 0, len(recs))
	for i, o := range recs {
		if i == 0 || o.OutboxID != recs[i-1].OutboxID {
			ids = append(ids, o.OutboxID)
		}
	}
	if err := stmts.MarkPublished(ctx, ids); err != nil {
		return 0, err // published but not marked: they go again, consumers dedupe on event_id
	}
	for _, o := range recs {
		published.WithLabelValues(o.Topic).Inc()
	}
	return rows, nil
}

// tracePublish continues the trace of a traced event (the command span that wrote
// it, from the outbox) with a producer span, put in the record's traceparent
// header for the webhook dispatcher. With tracing off here the stored context goes
// into the header unchanged, so the trace still reaches the dispatcher.
func (r *Relay) tracePublish(ctx context.Context, o storage.OutboxRecord, rec *kgo.Record, i, n int, spans []trace.Span) []trace.Span {
	if !tracing.On() {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: tracing.Header, Value: []byte(o.TraceParent)})
		return spans
	}
	if spans == nil {
		spans = make([]trace.Span, n)
	}
	ctx, span := tracing.Tracer().Start(tracing.WithTraceParent(ctx, o.TraceParent), "publish "+o.Topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"), attribute.String("messaging.destination.name", o.Topic),
			attribute.String("paysvc.event.id", o.EventID), attribute.Int64("paysvc.outbox.id", o.OutboxID)))
	spans[i] = span
	if h, ok := tracing.RecordHeader(ctx); ok {
		rec.Headers = append(rec.Headers, h)
	}
	return spans
}

// refusedForGood reports errors that no retry can fix: the record itself is
// unacceptable to the broker.
func refusedForGood(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) ||
		errors.Is(err, kerr.RecordListTooLarge) || errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.CorruptMessage)
}

// watchBacklog refreshes the backlog gauge at once and then every 5 s (the job
// every.OutboxBacklog), on every relay instance, leading or not.
func (r *Relay) watchBacklog(ctx context.Context) {
	_ = every.Run(ctx, r.log, every.Job{Name: every.OutboxBacklog, Interval: 5 * time.Second, AtStart: true, Run: func(ctx context.Context) error {
		n, err := storage.OutboxBacklog(ctx, r.db)
		if err != nil {
			return fmt.Errorf("outbox backlog: %w", err)
		}
		backlog.Set(float64(n))
		return nil
	}}) // a catalogued job with an interval: it runs until ctx ends
}
