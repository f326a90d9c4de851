// Package dispatch is the webhook dispatcher role: a Kafka consumer group over the
// event topics that records, for each event, one delivery per subscribed webhook
// (the exact signed bytes, kept for replay), and a delivery pipeline that sends due
// deliveries, records every attempt, retries with jittered exponential backoff
// (honouring Retry-After), and disables an endpoint that keeps failing.
//
// Deliveries to one webhook keep the order of one aggregate's events (the event
// record key): they wait in a queue per webhook and aggregate, which is leased in
// Postgres as a whole and sent oldest first, one delivery at a time, so a delivery
// being retried holds back the later events of its aggregate to that webhook and is
// never overtaken. Several dispatchers share the queues; one dying loses nothing: its
// leases run out and its queues come due again.
//
// Ingestion commits a partition's Kafka offset only after the deliveries of the
// records before it are in Postgres, and a record that cannot be recorded is read
// again; a redelivered event is ignored by its id.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/outbound/mail"
	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/storage"
	"paysvc/topics"
)

var (
	attempts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_webhooks_attempts_total",
		Help: "Webhook delivery attempts, by result (delivered, failed_http, failed_transport).",
	}, []string{"result"})
	deliverSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_webhooks_event_to_delivered_seconds",
		Help:    "From the delivery being recorded to the endpoint answering 200.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	disabled = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_webhooks_disabled_total",
		Help: "Webhooks disabled after reaching the failure threshold.",
	})
	failures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_webhooks_failures_total",
		Help: "Webhook delivery attempts that failed, by reason (http_4xx, http_5xx, http_other, timeout, connection, dns, tls, forbidden_address, other).",
	}, []string{"reason"})
	leasesLost = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_webhooks_leases_lost_total",
		Help: "Delivery queues whose lease ran out before this dispatcher wrote their outcomes (it was slow): another dispatcher had claimed them, and sends what was left.",
	})
	deferred = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_webhooks_deferred_total",
		Help: "Delivery queues put back because their webhook already had its share of workers (a slow or busy receiver).",
	})
)

func init() {
	// Every result and reason exists from the start, at 0: panels and alert
	// ratios read 0 on a quiet service rather than "No data".
	for _, r := range []string{"delivered", "failed_http", "failed_transport"} {
		attempts.WithLabelValues(r)
	}
	for _, r := range outbound.Reasons {
		failures.WithLabelValues(r)
	}
}

// Config tunes the dispatcher.
type Config struct {
	MaxAttempts int           // per delivery; then FAILED (default 8)
	RetryBase   time.Duration // first retry delay, doubled each time, jittered (default 10s)
	RetryMax    time.Duration // cap of one delay (default 1h)
	Threshold   int           // consecutive failures that disable a webhook (default 20; warning email at half)
	Workers     int           // queues sent concurrently, each one delivery at a time (default 16)
	PerQueue    int           // deliveries of one queue taken per claim, sent in order (default 32)
	// PerWebhook bounds the workers sending to one webhook at once (default a quarter
	// of Workers, at least 1): a slow or hostile receiver holds at most that many,
	// and the others keep delivering to every other merchant.
	PerWebhook int
	Lease      time.Duration // how long a claimed queue is ours (default 1m); a claim stops sending at half of it
	Poll       time.Duration // how often due queues are looked for when nothing woke the dispatcher (default 100ms)
	MailFrom   string
	// SessionTimeout is how soon a dead dispatcher's event partitions move (default 10s).
	SessionTimeout time.Duration
	// Namespace prefixes the event topics and the dispatchers' group on the
	// cluster (topics.Namespace); deliveries keep the webhook topics.
	Namespace topics.Namespace
}

func (c *Config) defaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 10 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Hour
	}
	if c.Threshold <= 0 {
		c.Threshold = 20
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.PerQueue <= 0 {
		c.PerQueue = 32
	}
	if c.PerWebhook <= 0 {
		c.PerWebhook = max(1, c.Workers/4)
	}
	if c.Lease <= 0 {
		c.Lease = time.Minute
	}
	if c.Poll <= 0 {
		c.Poll = 100 * time.Millisecond
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
}

// Dispatcher is one instance of the role.
type Dispatcher struct {
	cfg    Config
	db     *sqlx.DB
	client *outbound.Client
	mailer mail.Sender
	log    *slog.Logger
	wakeCh chan struct{} // new deliveries recorded or queues finished: look for due queues now

	// The delivery pipeline (deliver.go): leased queues go to work; inflight counts
	// those not yet written back, and bounds them to capacity() so work never blocks.
	work        chan claim
	workMu      sync.Mutex // guards sending on work against its close
	workClosed  bool
	inflight    atomic.Int64
	starved     atomic.Bool // the claimer last found no room
	ingestEnded chan struct{}

	busyMu sync.Mutex
	busy   map[string]int // workers sending to each webhook now (at most PerWebhook)

	marks chan markReq // deliveries to mark PROCESSING before their first attempt (markLoop)
}

// New makes a dispatcher sending with client; mailer (may be nil) sends the warning
// at half the failure threshold.
func New(cfg Config, db *sqlx.DB, client *outbound.Client, mailer mail.Sender, log *slog.Logger) *Dispatcher {
	cfg.defaults()
	return &Dispatcher{cfg: cfg, db: db, client: client, mailer: mailer, log: log.With("component", "dispatcher"),
		wakeCh: make(chan struct{}, 1), work: make(chan claim, pipeline*cfg.Workers), ingestEnded: make(chan struct{}),
		busy: map[string]int{}, marks: make(chan markReq, cfg.Workers)}
}

// Run ingests events and delivers until ctx ends. A Dispatcher runs once.
func (d *Dispatcher) Run(ctx context.Context, brokers []string) error {
	var wg sync.WaitGroup
	wg.Go(func() { d.deliverLoop(ctx) })
	err := d.ingest(ctx, brokers)
	close(d.ingestEnded)
	wg.Wait()
	return err
}

// pipeline is how many leased queues per worker may be in the pipeline: waiting for
// a worker, being sent, or waiting for their outcomes to be written.
const pipeline = 4

func (d *Dispatcher) capacity() int { return pipeline * d.cfg.Workers }

// reserve takes up to want places in the pipeline; unreserve gives back unused ones.
func (d *Dispatcher) reserve(want int) int {
	for {
		cur := d.inflight.Load()
		n := min(int64(want), int64(d.capacity())-cur)
		if n <= 0 {
			return 0
		}
		if d.inflight.CompareAndSwap(cur, cur+n) {
			return int(n)
		}
	}
}

func (d *Dispatcher) unreserve(n int) { d.inflight.Add(-int64(n)) }

func (d *Dispatcher) wake() {
	select {
	case d.wakeCh <- struct{}{}:
	default:
	}
}

// warn emails the merchant at half the threshold: the merchant's own address
// (`paysvc merchant create --email`, `merchant email`), or, when it has none, the
// operator's (MailFrom), so the warning still reaches someone who can act.
func (d *Dispatcher) warn(ctx context.Context, dl storage.Delivery, failures int) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	to, err := storage.MerchantEmail(sctx, d.db, dl.MerchantID)
	if err != nil {
		return err
	}
	if to == "" {
		to = d.cfg.MailFrom
	}
	return d.mailer.Send(sctx, mail.Message{From: d.cfg.MailFrom, To: to,
		Subject: fmt.Sprintf("Webhook %s is failing (%d of %d)", dl.WebhookID, failures, d.cfg.Threshold),
		Text: fmt.Sprintf("Webhook %s (%s) of merchant %s failed %d times in a row; it is disabled at %d.\n",
			dl.WebhookID, dl.Endpoint, dl.MerchantID, failures, d.cfg.Threshold),
		Headers: map[string]string{"X-Paysvc-Merchant": dl.MerchantID}})
}

// ErrDeliveryGone: the delivery to replay no longer exists (pruned, or its webhook
// deleted meanwhile).
var ErrDeliveryGone = errors.New("dispatch: delivery gone")

// Replay sends a stored delivery's exact bytes again now (fresh timestamp headers,
// signed with the webhook's current secrets), records the attempt with the
// signature headers it sent, and creates no new event record. The record shows
// PROCESSING while the request is out (a lease a little longer than the client's
// timeout, so a replay whose process dies cannot hold it there), then DELIVERED or
// FAILED as storage.RecordReplay says. The caller checks that the webhook is active
// and that the body may be sent (webhooks.EchoesWithdrawnChallenge).
func Replay(ctx context.Context, db *sqlx.DB, client *outbound.Client, dl storage.Delivery) (outbound.Response, error) {
	ok, err := storage.StartReplay(ctx, db, dl.EventID, dl.WebhookID, client.Timeout()+5*time.Second)
	if err != nil {
		return outbound.Response{}, err
	}
	if !ok {
		return outbound.Response{}, ErrDeliveryGone
	}
	headers := webhooks.SignDelivery(dl.Challenge, signingKeys(dl), dl.EventID, time.Now(), dl.Body)
	resp, err := client.Post(ctx, dl.Endpoint, headers, dl.Body)
	status, errText := outcome(resp, err)
	delivered := err == nil && resp.Status == 200
	// Recorded even if the caller went away meanwhile: the request was sent.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := storage.RecordReplay(rctx, db, dl.EventID, dl.WebhookID, status, resp.Latency, errText, delivered,
		storage.SignedOf(headers)); rerr != nil {
		return resp, rerr
	}
	return resp, err
}

// outcome is what an attempt records: the HTTP status if one came back, and what
// kind of transport failure it was (outbound.Describe: merchants read it in the
// events API, so never the raw error, which can name internal addresses).
func outcome(resp outbound.Response, err error) (*int, *string) {
	var status *int
	var errText *string
	if resp.Status != 0 {
		s := resp.Status
		status = &s
	}
	if err != nil {
		e := outbound.Describe(err)
		errText = &e
	}
	return status, errText
}
