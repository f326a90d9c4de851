// Package callback delivers the callback_url notifications of payment files: the
// engine queues each change of a file (its header and the transactions that
// changed) on paysvc.callbacks.v1, and this consumer, run by the dispatcher role,
// signs it like a webhook and POSTs it. The signing key is the file's nonce, which
// only the merchant who created the file has seen (docs/payouts.md); it is read from
// the file when delivering and never travels in a record.
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

	"paysvc/actors/webhooks"
	"paysvc/actors/webhooks/outbound"
	"paysvc/topics"
)

var delivered = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_payout_callbacks_total",
	Help: "Payment-file callbacks by outcome: delivered (HTTP 200), dropped (every attempt failed), skipped (file unknown).",
}, []string{"outcome"})

// Backoff is the wait before each retry of a callback; its length is the number of
// retries.
var Backoff = []time.Duration{time.Second, 5 * time.Second, 25 * time.Second}

// Poster sends one signed request (outbound.Client).
type Poster interface {
	Post(ctx context.Context, rawURL string, headers map[string]string, body []byte) (outbound.Response, error)
}

// Run consumes callbacks until ctx ends. Offsets are committed after each poll's
// callbacks were delivered or dropped.
func Run(ctx context.Context, brokers []string, db *sqlx.DB, client Poster, log *slog.Logger) error {
	log = log.With("component", "callbacks")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("paysvc-callbacks"),
		kgo.ConsumeTopics(topics.CallbackTopic), kgo.DisableAutoCommit(), kgo.ClientID("paysvc-callbacks"))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		// One file's callbacks in order; files in parallel.
		byKey := map[string][]*kgo.Record{}
		fetches.EachRecord(func(r *kgo.Record) { byKey[string(r.Key)] = append(byKey[string(r.Key)], r) })
		var wg sync.WaitGroup
		for _, recs := range byKey {
			wg.Go(func() {
				for _, r := range recs {
					Deliver(ctx, db, client, r.Value, log)
				}
			})
		}
		wg.Wait()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			log.Warn("commit offsets", "err", err)
		}
	}
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
	var nonce string
	readNonce := func() error {
		return db.GetContext(ctx, &nonce, `SELECT data ->> 'nonce' FROM payout_files WHERE file_id = $1 AND merchant_id = $2`,
			cb.FileID, cb.MerchantID)
	}
	err := readNonce()
	if errors.Is(err, sql.ErrNoRows) || (err == nil && nonce == "") {
		log.Error("callback of an unknown file skipped", "file_id", cb.FileID)
		delivered.WithLabelValues("skipped").Inc()
		return false
	}
	for attempt := 0; ; attempt++ {
		if err == nil {
			// Signed per attempt: webhook-timestamp is the time of sending.
			resp, perr := client.Post(ctx, cb.URL, webhooks.Headers(nonce, cb.ID, time.Now(), cb.Body), cb.Body)
			if perr == nil && resp.Status == 200 {
				delivered.WithLabelValues("delivered").Inc()
				return true
			}
			log.Warn("callback not delivered", "file_id", cb.FileID, "attempt", attempt+1, "status", resp.Status, "err", perr)
		} else {
			log.Warn("callback: read file nonce", "file_id", cb.FileID, "err", err)
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
			err = readNonce()
		}
	}
}
