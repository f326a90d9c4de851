package rails

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/rails/payout"
	"paysvc/actors/values/every"
	"paysvc/storage"
	"paysvc/topics"
)

// PayoutRail pays out a chunk of a file's transactions; outcomes follow
// asynchronously through the rail's sink (PayoutSink).
type PayoutRail interface {
	Submit(ctx context.Context, req topics.PayoutRailRequest) error
}

// PayoutResultsCommand is the command that carries a group of payout outcomes back
// to the payer's file.
func PayoutResultsCommand(merchantID string, r topics.PayoutResults, o Origin) (topics.Command, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return topics.Command{}, err
	}
	c := topics.Command{ID: topics.PayoutResultCommandID(r.FileID, r.Stage, r.Batch), Type: topics.CmdPayoutResults,
		Version: 1, MerchantID: merchantID, IssuedAt: time.Now().UTC(), Payload: payload}
	o.stamp(&c)
	return c, nil
}

// PayoutSink produces payout outcomes as commands, synchronously, so an error
// reaches the rail (which retries). The commands go to namespace ns's command topic.
func PayoutSink(cl *kgo.Client, ns topics.Namespace, o Origin) func(ctx context.Context, r topics.PayoutResults) error {
	topic := ns.Topic(topics.CommandsTopic)
	return func(ctx context.Context, r topics.PayoutResults) error {
		merchant := r.MerchantID
		if r.FileID == "" || merchant == "" {
			return errors.New("rails: payout outcome without file or merchant")
		}
		cmd, err := PayoutResultsCommand(merchant, r, o)
		if err != nil {
			return err
		}
		b, err := topics.EncodeCommand(cmd)
		if err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: topics.CommandKey(merchant), Value: b}).FirstErr(); err != nil {
			return fmt.Errorf("rails: produce payout outcome: %w", err)
		}
		for _, x := range r.Results {
			code := "ok"
			if r.Stage == topics.PayoutStageFinal && !x.Success {
				code = "failed"
			}
			outcomes.WithLabelValues("payout", r.Stage, code).Inc()
		}
		return nil
	}
}

// RunPayouts consumes payout requests and submits each to the rail until ctx ends
// (at least once: a redelivered chunk is submitted again, and each transaction's
// outcome still applies once).
func RunPayouts(ctx context.Context, brokers []string, db *sqlx.DB, scope *Scope, rail PayoutRail, sink func(context.Context, topics.PayoutResults) error, log *slog.Logger) error {
	log = log.With("component", "rails-payout")
	return consume(ctx, brokers, scope, "paysvc-rails-payout", topics.RailsPayoutTopic, log, func(_ *kgo.Client, rec *kgo.Record) {
		var all topics.PayoutRailRequest
		if err := json.Unmarshal(rec.Value, &all); err != nil {
			log.Error("undecodable payout request skipped", "offset", rec.Offset, "err", err)
			return
		}
		if !scope.serves(ctx, all.MerchantID, "payout") {
			return // the other environment's rails role pays it
		}
		for attempt := 0; ctx.Err() == nil; attempt++ {
			req, err := stillDue(ctx, db, scope.Environment, all, log)
			if err == nil && len(req.Transactions) == 0 {
				return // nothing may be sent now: each has its outcome, or waits (disabled merchant, held file)
			}
			if err == nil {
				err = rail.Submit(ctx, req)
			}
			if err == nil {
				requests.WithLabelValues("payout", "ok").Inc()
				return
			}
			if errors.Is(err, payout.ErrInvalidRequest) {
				// Retrying cannot help: the transactions fail (releasing their hold)
				// instead of blocking the partition behind them.
				requests.WithLabelValues("payout", "refused").Inc()
				log.Error("payout request refused by the rail", "file_id", req.FileID, "chunk", req.Chunk, "err", err)
				refused := Unconfigured{Sink: sink}
				refused.reason = "The payout was refused by " + req.Provider + " as invalid."
				if err := refused.Submit(ctx, req); err == nil {
					return
				}
				continue
			}
			requests.WithLabelValues("payout", "error").Inc()
			log.Warn("payout rail refused, retrying", "file_id", req.FileID, "chunk", req.Chunk, "attempt", attempt+1, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(min(100*time.Millisecond<<min(attempt, 7), 10*time.Second)):
			}
		}
	})
}

// Unconfigured is the payout rail of a server with no live adapter for a provider:
// every transaction fails at once with a clear reason, and no money leaves (the
// failures release the hold). Never a silent success.
type Unconfigured struct {
	Sink   func(ctx context.Context, r topics.PayoutResults) error
	reason string
}

// Submit fails every transaction of the chunk. The rails role is the rail here, and
// reports the submission first: a file takes a FINAL outcome only for a
// transaction submitted to a rail (the payout aggregate's Results).
func (u Unconfigured) Submit(ctx context.Context, req topics.PayoutRailRequest) error {
	sub := topics.PayoutResults{FileID: req.FileID, MerchantID: req.MerchantID, Stage: topics.PayoutStageSubmitted, Batch: fmt.Sprintf("c%d", req.Chunk)}
	res := topics.PayoutResults{FileID: req.FileID, MerchantID: req.MerchantID, Stage: topics.PayoutStageFinal, Batch: fmt.Sprintf("c%d", req.Chunk)}
	reason := u.reason
	if reason == "" {
		reason = req.Provider + " is not configured on this server: the payout was not sent."
	}
	for _, t := range req.Transactions {
		sub.Results = append(sub.Results, topics.PayoutTxnResult{TransactionID: t.TransactionID})
		res.Results = append(res.Results, topics.PayoutTxnResult{TransactionID: t.TransactionID, Description: reason})
	}
	if err := u.Sink(ctx, sub); err != nil {
		return err
	}
	return u.Sink(ctx, res)
}

// stillDue keeps the transactions of req that may be sent now
// (storage.DuePayoutTxns), read just before the chunk goes to its rail: a
// redelivered or resubmitted chunk never sends again what a result finished, and
// nothing is handed to a rail for a merchant an operator disabled, or of a file an
// operator holds, whenever the file was approved. What is skipped so waits in
// PostgreSQL: RecoverPayouts sends it once the merchant is enabled again, and an
// operator's release queues it again at once.
func stillDue(ctx context.Context, db *sqlx.DB, environment string, req topics.PayoutRailRequest, log *slog.Logger) (topics.PayoutRailRequest, error) {
	if db == nil || len(req.Transactions) == 0 {
		return req, nil
	}
	idsOf := make([]string, len(req.Transactions))
	for i, t := range req.Transactions {
		idsOf[i] = t.TransactionID
	}
	due, err := storage.DuePayoutTxns(ctx, db, environment, idsOf)
	if err != nil {
		return req, err
	}
	kept := req
	kept.Transactions = nil
	for _, t := range req.Transactions {
		if due[t.TransactionID] != "" {
			kept.Transactions = append(kept.Transactions, t)
		}
	}
	if n := len(req.Transactions) - len(kept.Transactions); n > 0 {
		log.Info("payout transactions not due (outcome known, file held or not being paid, or merchant disabled): not submitted",
			"file_id", req.FileID, "chunk", req.Chunk, "skipped", n)
	}
	return kept, nil
}

// RecoverPayouts submits again, every interval, the transactions of files being
// paid that have had no outcome for longer than after: a rails process that died
// between taking a request and reporting its outcome loses nothing. A transaction's
// outcome applies once however often it is reported, so a resubmission of one
// whose outcome was only slow changes nothing (the sandbox answers the same; a live
// rail must be asked, not paid again, before this is used with it). The chunks of a
// resubmission are numbered from the time, so their result commands are new ones.
func RecoverPayouts(ctx context.Context, db *sqlx.DB, scope *Scope, rail PayoutRail, after, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "rails-payout-recover")
	return every.Run(ctx, log, every.Job{Name: every.PayoutResubmit, Interval: interval, Run: func(ctx context.Context) error {
		return recoverPayoutsOnce(ctx, db, scope, rail, after, log)
	}})
}

// recoverPayoutsOnce is one pass of RecoverPayouts. A file it could not submit
// again is logged and tried next pass; the pass then fails, with the count.
func recoverPayoutsOnce(ctx context.Context, db *sqlx.DB, scope *Scope, rail PayoutRail, after time.Duration, log *slog.Logger) error {
	stale, err := storage.StalePayouts(ctx, db, scope.Environment, time.Now().Add(-after), 5000)
	if err != nil {
		return fmt.Errorf("list stale payouts: %w", err)
	}
	base := int(time.Now().Unix()%1_000_000) * 1000
	n, failed := 0, 0
	for i := 0; i < len(stale); {
		j := i
		for j < len(stale) && stale[j].FileID == stale[i].FileID && j-i < topics.PayoutChunk {
			j++
		}
		head := stale[i]
		req := topics.PayoutRailRequest{FileID: head.FileID, MerchantID: head.MerchantID, Provider: head.Provider,
			Currency: head.Currency, Chunk: base + n}
		for _, x := range stale[i:j] {
			req.Transactions = append(req.Transactions, x.Txn)
		}
		n++
		req, err := stillDue(ctx, db, scope.Environment, req, log)
		if err == nil && len(req.Transactions) == 0 {
			i = j
			continue
		}
		if err == nil {
			err = rail.Submit(ctx, req)
		}
		if errors.Is(err, errPaused) {
			// Expected while a rail waits out an unknown outcome; retried next pass.
			log.Debug("resubmit stale payouts: rail paused", "file_id", head.FileID)
		} else if err != nil {
			failed++
			log.Warn("resubmit stale payouts", "file_id", head.FileID, "err", err)
		} else {
			recovered.Add(float64(len(req.Transactions)))
			log.Info("stale payouts submitted again", "file_id", head.FileID, "transactions", len(req.Transactions))
		}
		i = j
	}
	return failedOf(failed, n, "resubmitted chunks")
}

var recovered = promauto.NewCounter(prometheus.CounterOpts{
	Name: "paysvc_payouts_resubmitted_total",
	Help: "Payout transactions submitted to their rail again because their outcome did not come in time.",
})
