// Package rails is the role that talks to payment rails. It consumes the rail
// requests the engine queued through its outbox (paysvc.rails.mpesa_stk.v1), sends
// each to the rail (the sandbox simulator, or a live adapter), and feeds every
// outcome back as a command on paysvc.commands.v1 whose id is derived from the
// invoice and the stage: however often a rail repeats an outcome, and however often
// a request is redelivered, the invoice moves once.
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

	"paysvc/actors/ids"
	"paysvc/actors/rails/mpesa"
	"paysvc/storage"
	"paysvc/topics"
)

var (
	requests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_rails_requests_total",
		Help: "Requests sent to a rail, by rail and result (ok, refused, error).",
	}, []string{"rail", "result"})
	outcomes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_rails_outcomes_total",
		Help: "Outcomes received from a rail and fed back as commands, by rail, stage and code.",
	}, []string{"rail", "stage", "code"})
)

// StageSent records the rail's reference for a prompt (see Options.RecordSent).
const StageSent = "SENT"

// ResultCommand is the command that carries a rail outcome back to the engine.
func ResultCommand(r mpesa.Result) (topics.Command, error) {
	payload, err := json.Marshal(topics.ProviderResult{InvoiceID: r.InvoiceID, Stage: r.Stage, Code: r.Code,
		Description: r.Description, Receipt: r.Receipt, CheckoutRequestID: r.CheckoutRequestID})
	if err != nil {
		return topics.Command{}, err
	}
	return topics.Command{ID: ids.DeriveUUID("provider-result", r.InvoiceID, r.Stage), Type: topics.CmdInvoiceProviderResult,
		Version: 1, MerchantID: r.MerchantID, IssuedAt: time.Now().UTC(), Payload: payload}, nil
}

// Sink produces outcomes as commands, synchronously, so an error reaches the rail
// (which retries) and nothing acknowledged to the rail is lost.
func Sink(cl *kgo.Client) mpesa.Sink {
	return func(ctx context.Context, r mpesa.Result) error {
		if r.InvoiceID == "" || r.MerchantID == "" {
			return errors.New("rails: outcome without invoice or merchant")
		}
		cmd, err := ResultCommand(r)
		if err != nil {
			return err
		}
		b, err := topics.EncodeCommand(cmd)
		if err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.CommandsTopic, Key: topics.CommandKey(r.MerchantID), Value: b}).FirstErr(); err != nil {
			return fmt.Errorf("rails: produce outcome: %w", err)
		}
		outcomes.WithLabelValues("mpesa_stk", r.Stage, fmt.Sprint(r.Code)).Inc()
		return nil
	}
}

// Options say how a rail behaves.
type Options struct {
	// RecordSent feeds the rail's reference (CheckoutRequestID) back as a SENT result,
	// for rails whose callbacks carry only that reference (Daraja).
	RecordSent bool
	// RetryUnavailable sends a prompt again when the rail gave no usable answer. Only
	// for the simulator: against live M-Pesa a retry could prompt the customer twice,
	// so there the invoice fails instead.
	RetryUnavailable bool
}

// Run consumes STK requests and sends them to the rail until ctx ends. Offsets are
// committed after the rail took each request (at least once: a redelivered request
// is sent again, and its outcome still applies once).
func Run(ctx context.Context, brokers []string, rail mpesa.Rail, opt Options, log *slog.Logger) error {
	log = log.With("component", "rails")
	return consume(ctx, brokers, "paysvc-rails", topics.RailsMpesaSTKTopic, log, func(cl *kgo.Client, rec *kgo.Record) {
		var req topics.STKRequest
		if err := json.Unmarshal(rec.Value, &req); err != nil {
			log.Error("undecodable rail request skipped", "offset", rec.Offset, "err", err)
			return
		}
		for attempt := 0; ctx.Err() == nil; attempt++ {
			ref, err := rail.Push(ctx, mpesa.STKRequest{InvoiceID: req.InvoiceID, MerchantID: req.MerchantID,
				Phone: req.Phone, Amount: req.Amount, AccountRef: req.AccountRef, Description: "Payment"})
			if err != nil && errors.Is(err, mpesa.ErrUnavailable) && !opt.RetryUnavailable {
				err = fmt.Errorf("%w (not retried: the prompt may have been sent)", mpesa.ErrRejected)
			}
			switch {
			case err == nil:
				requests.WithLabelValues("mpesa_stk", "ok").Inc()
				if opt.RecordSent && ref != "" {
					sent := mpesa.Result{InvoiceID: req.InvoiceID, MerchantID: req.MerchantID, Stage: StageSent, CheckoutRequestID: ref}
					for ctx.Err() == nil {
						if err := Sink(cl)(ctx, sent); err == nil {
							break
						}
						time.Sleep(time.Second)
					}
				}
				return
			case errors.Is(err, mpesa.ErrInvalidRequest) || errors.Is(err, mpesa.ErrRejected):
				// The rail refused: the invoice fails, as M-Pesa would report it.
				requests.WithLabelValues("mpesa_stk", "refused").Inc()
				if err := Sink(cl)(ctx, mpesa.Result{InvoiceID: req.InvoiceID, MerchantID: req.MerchantID,
					Stage: mpesa.StageFinal, Code: -1, Description: "The payment request was refused by M-Pesa."}); err != nil {
					log.Error("record refused prompt", "invoice_id", req.InvoiceID, "err", err)
					continue
				}
				return
			default:
				requests.WithLabelValues("mpesa_stk", "error").Inc()
				log.Warn("rail unavailable, retrying", "invoice_id", req.InvoiceID, "attempt", attempt+1, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(min(time.Second<<min(attempt, 5), 30*time.Second)):
				}
			}
		}
	})
}

// Recover asks the rail about prompts whose outcome never came (a lost callback),
// every interval, for invoices waiting longer than after, and feeds final answers
// back like callbacks.
func Recover(ctx context.Context, db *sqlx.DB, q Querier, sink mpesa.Sink, after, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "rails-recover")
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		stale, err := storage.StalePrompts(ctx, db, time.Now().Add(-after), 100)
		if err != nil {
			log.Warn("list stale prompts", "err", err)
			continue
		}
		for _, inv := range stale {
			r, pending, err := q.Query(ctx, inv.CheckoutRequestID)
			if err != nil || pending {
				if err != nil {
					log.Warn("query prompt", "invoice_id", inv.InvoiceID, "err", err)
				}
				continue
			}
			r.InvoiceID, r.MerchantID, r.Stage = inv.InvoiceID, inv.MerchantID, mpesa.StageFinal
			if err := sink(ctx, r); err != nil {
				log.Warn("record queried outcome", "invoice_id", inv.InvoiceID, "err", err)
			}
		}
	}
}

// Querier asks a rail for a prompt's outcome (Daraja's STK query).
type Querier interface {
	Query(ctx context.Context, checkoutRequestID string) (mpesa.Result, bool, error)
}

// CardRail charges cards (the sandbox simulator).
type CardRail interface {
	Charge(ctx context.Context, req topics.CardRequest) error
}

// RunCards consumes charges of a push rail (card or PesaLink: topic) and hands them
// to the rail until ctx ends.
func RunCards(ctx context.Context, brokers []string, topic string, rail CardRail, log *slog.Logger) error {
	log = log.With("component", "rails-card")
	return consume(ctx, brokers, "paysvc-rails-"+topic, topic, log, func(_ *kgo.Client, rec *kgo.Record) {
		var req topics.CardRequest
		if err := json.Unmarshal(rec.Value, &req); err != nil {
			log.Error("undecodable card charge skipped", "offset", rec.Offset, "err", err)
			return
		}
		for ctx.Err() == nil {
			if err := rail.Charge(ctx, req); err == nil {
				requests.WithLabelValues("card", "ok").Inc()
				return
			} else {
				requests.WithLabelValues("card", "error").Inc()
				log.Warn("card rail refused, retrying", "invoice_id", req.InvoiceID, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	})
}

// ClearCards releases completed card collections to the available balance once
// they have cleared (after delay), by producing invoice.clear commands whose ids are
// derived from the invoice: however often this runs, an invoice clears once.
func ClearCards(ctx context.Context, db *sqlx.DB, cl *kgo.Client, delay, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "card-clearing")
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due, err := storage.UnclearedCardInvoices(ctx, db, time.Now().Add(-delay), 500)
		if err != nil {
			log.Warn("list uncleared card collections", "err", err)
			continue
		}
		for _, inv := range due {
			payload, _ := json.Marshal(topics.InvoiceClear{InvoiceID: inv.InvoiceID})
			b, err := topics.EncodeCommand(topics.Command{ID: ids.DeriveUUID("clear", inv.InvoiceID), Type: topics.CmdInvoiceClear,
				Version: 1, MerchantID: inv.MerchantID, IssuedAt: time.Now().UTC(), Payload: payload})
			if err != nil {
				continue
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.CommandsTopic, Key: topics.CommandKey(inv.MerchantID), Value: b}).FirstErr(); err != nil {
				log.Warn("produce invoice.clear", "invoice_id", inv.InvoiceID, "err", err)
			}
		}
	}
}

// consume runs handle over every record of topic in a consumer group until ctx ends,
// committing offsets after each poll's records were handled (at least once).
func consume(ctx context.Context, brokers []string, group, topic string, log *slog.Logger, handle func(*kgo.Client, *kgo.Record)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ClientID(group))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachRecord(func(rec *kgo.Record) { handle(cl, rec) })
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			log.Warn("commit offsets", "topic", topic, "err", err)
		}
	}
}
