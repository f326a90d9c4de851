// Package callback delivers the callback_url notifications of payment files: the
// engine queues each change of a file (its header and the transactions that
// changed) on paysvc.callbacks.v1, and this consumer, run by the dispatcher role,
// signs it like a webhook and POSTs it. The signing key is the file's callback
// secret (webhooks.CallbackSecret: 256 bits derived from a service secret and the
// file id), which only the merchant who created the file has seen, in the
// initiation answer (docs/payouts.md); it is derived when delivering and never
// travels in a record. It is not the file's 8-character nonce: 40 bits, which one
// observed callback's signature would let anyone search offline.
//
// Callbacks are a courtesy next to webhooks, which carry the tracked, replayable
// send_money_event: a callback is tried a few times over about half a minute and
// then dropped (counted and logged), and one file's callbacks go out in order.
package callback

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
)

var delivered = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_payout_callbacks_total",
	Help: "Payment-file callbacks by outcome: delivered (HTTP 200), dropped (every attempt failed), skipped (file unknown).",
}, []string{"outcome"})

func init() {
	for _, o := range []string{"delivered", "dropped", "skipped"} {
		delivered.WithLabelValues(o) // at 0 from the start: panels read 0, not "No data"
	}
}

// Backoff is the wait before each retry of a callback; its length is the number of
// retries.
var Backoff = []time.Duration{time.Second, 5 * time.Second, 25 * time.Second}

// Poster sends one signed request (outbound.Client).
type Poster interface {
	Post(ctx context.Context, rawURL string, headers map[string]string, body []byte) (outbound.Response, error)
}

// maxPending bounds the callbacks taken from Kafka but not yet delivered or dropped;
// past it the consumer stops fetching until lanes catch up.
const maxPending = 10000

// Run consumes callbacks until ctx ends. Each file has its own lane, a goroutine
// that delivers the file's callbacks in order, retries included, so a slow or
// failing receiver holds back only its own file's later callbacks, never another
// merchant's. An offset is committed once every callback up to it, in its partition,
// was delivered or dropped: a dispatcher that dies sends the unfinished ones again
// after a restart (at least once, with the same webhook-id). The topic and the
// group are namespace ns's (topics.Namespace).
func Run(ctx context.Context, brokers []string, ns topics.Namespace, db *sqlx.DB, client Poster, log *slog.Logger) error {
	log = log.With("component", "callbacks")
	c := &consumer{db: db, client: client, log: log, lanes: map[string]*lane{}, parts: map[int32]*watermark{}}
	c.cond = sync.NewCond(&c.mu)
	topic := ns.Topic(topics.CallbackTopic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.Dialer(inproc.Dial), kgo.ConsumerGroup(ns.Group("paysvc-callbacks")),
		kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.ClientID("paysvc-callbacks"),
		// Partitions change hands only between an iteration's take and commit (see
		// AllowRebalance below): a record is never taken, nor an offset committed,
		// for a partition this consumer has just lost. Committing for a partition
		// another member now owns could move its offset past callbacks not sent.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			c.commit(ctx, cl)
			c.forget(revoked[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			c.forget(lost[topic])
		}))
	if err != nil {
		return err
	}
	defer func() {
		// The loop may have stopped between a poll and its AllowRebalance: with
		// rebalances blocked, an unbounded leave waited for a revoke that never
		// ran, and a SIGTERMed dispatcher hung here (docs/cluster.md).
		if err := topics.CloseGroupClient(cl); err != nil {
			log.Warn("leave the callbacks group", "err", err)
		}
	}()
	defer c.wait()
	// Wake the loop below if it is waiting for room when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for {
		c.mu.Lock()
		for c.pending >= maxPending && ctx.Err() == nil {
			c.cond.Wait()
		}
		c.mu.Unlock()
		// A bounded poll, so finished callbacks are committed while nothing new comes.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			cl.AllowRebalance() // else Close, leaving the group, waits for it forever
			return nil
		}
		fetches.EachRecord(func(r *kgo.Record) { c.take(ctx, r) })
		c.commit(ctx, cl)
		cl.AllowRebalance()
	}
}

// consumer is Run's state: the lanes of files with callbacks in flight, and per
// partition the offsets taken and which of them are finished.
type consumer struct {
	db     *sqlx.DB
	client Poster
	log    *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond // signalled when pending drops
	lanes   map[string]*lane
	parts   map[int32]*watermark
	pending int
	wg      sync.WaitGroup
}

// lane holds one file's callbacks waiting behind the one being delivered.
type lane struct{ queue []item }

// item is a taken callback and the tracking of the partition it was taken under.
type item struct {
	r *kgo.Record
	w *watermark
}

// watermark tracks one partition while this consumer owns it: the records taken, in
// order, which of them are finished, and the last record of the finished prefix
// (committed as its offset + 1).
type watermark struct {
	recs      []*kgo.Record
	done      map[int64]bool
	last      *kgo.Record
	committed *kgo.Record // last as of the latest commit: no commit while it is unchanged
}

func (c *consumer) take(ctx context.Context, r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.parts[r.Partition]
	if w == nil {
		w = &watermark{done: map[int64]bool{}}
		c.parts[r.Partition] = w
	}
	w.recs = append(w.recs, r)
	c.pending++
	key := string(r.Key)
	if l := c.lanes[key]; l != nil {
		l.queue = append(l.queue, item{r, w})
		return
	}
	l := &lane{queue: []item{{r, w}}}
	c.lanes[key] = l
	c.wg.Go(func() { c.run(ctx, key, l) })
}

// run delivers a lane's callbacks in order until it is empty.
func (c *consumer) run(ctx context.Context, key string, l *lane) {
	for {
		c.mu.Lock()
		if len(l.queue) == 0 {
			delete(c.lanes, key)
			c.mu.Unlock()
			return
		}
		it := l.queue[0]
		l.queue = l.queue[1:]
		c.mu.Unlock()
		Deliver(ctx, c.db, c.client, it.r.Value, c.log)
		if ctx.Err() != nil {
			return // not finished: sent again after a restart
		}
		c.finish(it)
	}
}

func (c *consumer) finish(it item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[it.r.Partition] != it.w {
		return // taken under an ownership that has ended; forget settled its count
	}
	c.pending--
	c.cond.Broadcast()
	w := it.w
	w.done[it.r.Offset] = true
	for len(w.recs) > 0 && w.done[w.recs[0].Offset] {
		delete(w.done, w.recs[0].Offset)
		w.last = w.recs[0]
		w.recs = w.recs[1:]
	}
}

// commit commits every partition's finished prefix.
func (c *consumer) commit(ctx context.Context, cl *kgo.Client) {
	c.mu.Lock()
	var recs []*kgo.Record
	var ws []*watermark
	for _, w := range c.parts {
		if w.last != nil && w.last != w.committed {
			recs, ws = append(recs, w.last), append(ws, w)
		}
	}
	c.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("commit offsets", "err", err)
		}
		return // tried again at the next commit
	}
	c.mu.Lock()
	for i, w := range ws {
		w.committed = recs[i]
	}
	c.mu.Unlock()
}

// forget drops the tracking of partitions this consumer no longer owns; their
// callbacks still in lanes finish, and the new owner may send them again.
func (c *consumer) forget(parts []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		if w := c.parts[p]; w != nil {
			c.pending -= len(w.recs) - len(w.done)
			delete(c.parts, p)
		}
	}
	c.cond.Broadcast()
}

// wait lets the lanes end (ctx is done, so each stops after its current attempt).
func (c *consumer) wait() {
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
}

// Deliver signs and posts one callback record, retrying on Backoff. It reports
// whether the receiver took it (HTTP 200).
func Deliver(ctx context.Context, db *sqlx.DB, client Poster, value []byte, log *slog.Logger) bool {
	var cb topics.Callback
	if err := json.Unmarshal(value, &cb); err != nil {
		log.Error("undecodable callback skipped", "err", err)
		delivered.WithLabelValues("skipped").Inc()
		return false
	}
	var secret string
	readSecret := func() error {
		var fileID string
		if err := db.GetContext(ctx, &fileID, `SELECT file_id FROM payout_files WHERE file_id = $1 AND merchant_id = $2`,
			cb.FileID, cb.MerchantID); err != nil {
			return err
		}
		key, err := storage.ServiceSecret(ctx, db, webhooks.CallbackSecretName)
		if err != nil {
			return err
		}
		secret = webhooks.CallbackSecret(key, fileID)
		return nil
	}
	err := readSecret()
	if errors.Is(err, sql.ErrNoRows) {
		log.Error("callback of an unknown file skipped", "file_id", cb.FileID)
		delivered.WithLabelValues("skipped").Inc()
		return false
	}
	for attempt := 0; ; attempt++ {
		if err == nil {
			// Signed per attempt: webhook-timestamp is the time of sending.
			resp, perr := client.Post(ctx, cb.URL, webhooks.Headers(secret, cb.ID, time.Now(), cb.Body), cb.Body)
			if perr == nil && resp.Status == 200 {
				delivered.WithLabelValues("delivered").Inc()
				return true
			}
			log.Warn("callback not delivered", "file_id", cb.FileID, "attempt", attempt+1, "status", resp.Status, "err", perr)
		} else {
			log.Warn("callback: derive the file's callback secret", "file_id", cb.FileID, "err", err)
		}
		if attempt >= len(Backoff) || ctx.Err() != nil {
			delivered.WithLabelValues("dropped").Inc()
			log.Error("callback dropped after every attempt failed", "file_id", cb.FileID, "callback_id", cb.ID)
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(Backoff[attempt]):
		}
		if err != nil {
			err = readSecret()
		}
	}
}
