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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/ids"
	"paysvc/actors/rails/mpesa"
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

// Run consumes STK requests and sends them to the rail until ctx ends. Offsets are
// committed after the rail took each request (at least once: a redelivered request
// is sent again, and its outcome still applies once).
func Run(ctx context.Context, brokers []string, rail mpesa.Rail, log *slog.Logger) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("paysvc-rails"),
		kgo.ConsumeTopics(topics.RailsMpesaSTKTopic), kgo.DisableAutoCommit(), kgo.ClientID("paysvc-rails"))
	if err != nil {
		return err
	}
	defer cl.Close()
	log = log.With("component", "rails")
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			var req topics.STKRequest
			if err := json.Unmarshal(rec.Value, &req); err != nil {
				log.Error("undecodable rail request skipped", "offset", rec.Offset, "err", err)
				return
			}
			for attempt := 0; ctx.Err() == nil; attempt++ {
				_, err := rail.Push(ctx, mpesa.STKRequest{InvoiceID: req.InvoiceID, MerchantID: req.MerchantID,
					Phone: req.Phone, Amount: req.Amount, AccountRef: req.AccountRef, Description: "Payment"})
				switch {
				case err == nil:
					requests.WithLabelValues("mpesa_stk", "ok").Inc()
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
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			log.Warn("commit rail offsets", "err", err)
		}
	}
}
