// Package dispatch is the webhook dispatcher role: a Kafka consumer group over the
// event topics that records, for each event, one delivery per subscribed webhook
// (the exact signed bytes, kept for replay), and a delivery loop that sends due
// deliveries, records every attempt, retries with jittered exponential backoff
// (honouring Retry-After), and disables an endpoint that keeps failing. Deliveries
// are leased in Postgres, so several dispatchers share the work and one dying loses
// nothing: its leased deliveries come due again.
package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/mail"
	"paysvc/actors/webhooks"
	"paysvc/actors/webhooks/outbound"
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
)

// Config tunes the dispatcher.
type Config struct {
	MaxAttempts int           // per delivery; then FAILED (default 8)
	RetryBase   time.Duration // first retry delay, doubled each time, jittered (default 10s)
	RetryMax    time.Duration // cap of one delay (default 1h)
	Threshold   int           // consecutive failures that disable a webhook (default 20; warning email at half)
	Workers     int           // concurrent deliveries (default 16)
	Lease       time.Duration // how long a claimed delivery is ours (default 1m)
	Poll        time.Duration // how often due deliveries are looked for (default 100ms)
	MailFrom    string
	// SessionTimeout is how soon a dead dispatcher's event partitions move (default 10s).
	SessionTimeout time.Duration
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
}

// New makes a dispatcher sending with client; mailer (may be nil) sends the warning
// at half the failure threshold.
func New(cfg Config, db *sqlx.DB, client *outbound.Client, mailer mail.Sender, log *slog.Logger) *Dispatcher {
	cfg.defaults()
	return &Dispatcher{cfg: cfg, db: db, client: client, mailer: mailer, log: log.With("component", "dispatcher")}
}

// Run ingests events and delivers until ctx ends.
func (d *Dispatcher) Run(ctx context.Context, brokers []string) error {
	var wg sync.WaitGroup
	wg.Go(func() { d.deliverLoop(ctx) })
	err := d.ingest(ctx, brokers)
	wg.Wait()
	return err
}

// ingest records one delivery per subscribed webhook for every event; offsets are
// committed after the records are (a redelivered event is ignored by key).
func (d *Dispatcher) ingest(ctx context.Context, brokers []string) error {
	var ts []string
	for _, t := range topics.EventTopics {
		ts = append(ts, t)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("paysvc-dispatcher"), kgo.ConsumeTopics(ts...),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("paysvc-dispatcher"),
		kgo.SessionTimeout(d.cfg.SessionTimeout), kgo.HeartbeatInterval(d.cfg.SessionTimeout/5))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		// A record that cannot be recorded (database down) stops its partition here:
		// the consumer is sought back to it, so it and what follows come again.
		failed := map[string]map[int32]kgo.EpochOffset{}
		fetches.EachRecord(func(r *kgo.Record) {
			if _, stopped := failed[r.Topic][r.Partition]; stopped {
				return
			}
			if d.record(ctx, r) != nil {
				if failed[r.Topic] == nil {
					failed[r.Topic] = map[int32]kgo.EpochOffset{}
				}
				failed[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
			}
		})
		if len(failed) > 0 {
			cl.SetOffsets(failed)
			time.Sleep(time.Second)
			continue
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("commit event offsets", "err", err)
		}
	}
}

func (d *Dispatcher) record(ctx context.Context, r *kgo.Record) error {
	var ev topics.Event
	if err := json.Unmarshal(r.Value, &ev); err != nil || ev.ID == "" {
		d.log.Error("undecodable event skipped", "topic", r.Topic, "offset", r.Offset)
		return nil
	}
	hooks, err := storage.SubscribedWebhooks(ctx, d.db, ev.MerchantID, ev.Type)
	if err != nil {
		d.log.Warn("find webhooks", "err", err)
		return err
	}
	for _, w := range hooks {
		body, err := webhooks.Body(ev.Type, ev.Payload, w.Challenge)
		if err != nil {
			return err
		}
		if err := storage.InsertDelivery(ctx, d.db, ev.ID, w.WebhookID, ev.MerchantID, ev.Type, body); err != nil {
			d.log.Warn("record delivery", "err", err)
			return err
		}
	}
	return nil
}

func (d *Dispatcher) deliverLoop(ctx context.Context) {
	sem := make(chan struct{}, d.cfg.Workers)
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, err := storage.ClaimDeliveries(ctx, d.db, d.cfg.Lease, d.cfg.Workers*4)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("claim deliveries", "err", err)
			}
			continue
		}
		var wg sync.WaitGroup
		for _, dl := range due {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				d.deliver(ctx, dl)
			})
		}
		wg.Wait()
	}
}

// deliver makes one attempt and schedules what follows. A slow receiver holds one
// worker for at most the client's timeout; other merchants' deliveries go on.
func (d *Dispatcher) deliver(ctx context.Context, dl storage.Delivery) {
	if !dl.IsActive {
		msg := "webhook is disabled"
		d.finish(ctx, dl, "FAILED", time.Now(), nil, &msg)
		return
	}
	resp, err := d.client.Post(ctx, dl.Endpoint, webhooks.Headers(dl.Challenge, dl.EventID, time.Now(), dl.Body), dl.Body)
	status, errText := outcome(resp, err)
	_ = storage.RecordAttempt(context.WithoutCancel(ctx), d.db, dl.EventID, dl.WebhookID, status, resp.Latency, errText, false)
	if err == nil && resp.Status == 200 {
		attempts.WithLabelValues("delivered").Inc()
		deliverSeconds.Observe(time.Since(dl.CreatedAt).Seconds())
		d.finish(ctx, dl, "DELIVERED", time.Now(), status, nil)
		return
	}
	if err != nil {
		attempts.WithLabelValues("failed_transport").Inc()
	} else {
		attempts.WithLabelValues("failed_http").Inc()
		msg := fmt.Sprintf("endpoint answered HTTP %d", resp.Status)
		errText = &msg
	}
	if dl.Attempts+1 >= d.cfg.MaxAttempts {
		d.finish(ctx, dl, "FAILED", time.Now(), status, errText)
		return
	}
	delay := min(d.cfg.RetryBase<<min(dl.Attempts, 20), d.cfg.RetryMax)
	delay = delay/2 + rand.N(delay/2+1) // full jitter on the upper half
	delay = max(delay, resp.RetryAfter)
	d.finish(ctx, dl, "PENDING", time.Now().Add(delay), status, errText)
}

func (d *Dispatcher) finish(ctx context.Context, dl storage.Delivery, status string, next time.Time, httpStatus *int, errText *string) {
	ctx = context.WithoutCancel(ctx)
	failures, err := storage.FinishDelivery(ctx, d.db, dl, status, next, httpStatus, errText)
	if err != nil {
		d.log.Warn("finish delivery", "event_id", dl.EventID, "err", err)
		return
	}
	if status == "DELIVERED" || !dl.IsActive {
		return
	}
	if failures == d.cfg.Threshold/2 && d.mailer != nil {
		if err := d.warn(ctx, dl, failures); err != nil {
			d.log.Warn("webhook warning email", "webhook_id", dl.WebhookID, "err", err)
		}
	}
	if failures >= d.cfg.Threshold {
		if err := storage.DisableWebhook(ctx, d.db, dl.WebhookID); err == nil {
			disabled.Inc()
			d.log.Warn("webhook disabled after consecutive failures", "webhook_id", dl.WebhookID, "failures", failures)
		}
	}
}

// warn emails the merchant's webhook owner at half the threshold. Merchants have no
// contact address yet, so it goes to the configured operator address (MailFrom) with
// the merchant named; the sandbox sink shows it.
func (d *Dispatcher) warn(ctx context.Context, dl storage.Delivery, failures int) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return d.mailer.Send(sctx, mail.Message{From: d.cfg.MailFrom, To: d.cfg.MailFrom,
		Subject: fmt.Sprintf("Webhook %s is failing (%d of %d)", dl.WebhookID, failures, d.cfg.Threshold),
		Text: fmt.Sprintf("Webhook %s (%s) of merchant %s failed %d times in a row; it is disabled at %d.\n",
			dl.WebhookID, dl.Endpoint, dl.MerchantID, failures, d.cfg.Threshold),
		Headers: map[string]string{"X-Paysvc-Merchant": dl.MerchantID}})
}

// Replay sends a stored delivery's exact bytes again now (fresh timestamp headers),
// records the attempt, and creates no new event record.
func Replay(ctx context.Context, db *sqlx.DB, client *outbound.Client, dl storage.Delivery) (outbound.Response, error) {
	resp, err := client.Post(ctx, dl.Endpoint, webhooks.Headers(dl.Challenge, dl.EventID, time.Now(), dl.Body), dl.Body)
	status, errText := outcome(resp, err)
	if rerr := storage.RecordAttempt(ctx, db, dl.EventID, dl.WebhookID, status, resp.Latency, errText, true); rerr != nil {
		return resp, rerr
	}
	return resp, err
}

// outcome is what an attempt records: the HTTP status if one came back, and the
// transport error (the dispatcher's own words, not a receiver's body).
func outcome(resp outbound.Response, err error) (*int, *string) {
	var status *int
	var errText *string
	if resp.Status != 0 {
		s := resp.Status
		status = &s
	}
	if err != nil {
		e := err.Error()
		errText = &e
	}
	return status, errText
}
