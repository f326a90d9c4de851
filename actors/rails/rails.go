// Package rails is the role that talks to payment rails. It consumes the rail
// requests the engine queued through its outbox (paysvc.rails.mpesa_stk.v1), sends
// each to the rail (the sandbox simulator, or a live adapter), and feeds every
// outcome back as a command on paysvc.commands.v1 whose id is derived from the
// invoice and the stage: however often a rail repeats an outcome, and however often
// a request is redelivered, the invoice moves once.
//
// It imports values, topics and storage, never an aggregate, the engine or outbound
// delivery: what it sends and answers travels as topics' commands and requests.
// Only cmd (the role) and api (the sandbox's simulated rails) import it.
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

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/every"
	"paysvc/actors/values/ids"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
)

var (
	requests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_rails_requests_total",
		Help: "Requests sent to a rail, by rail and result (ok, refused, error).",
	}, []string{"rail", "result"})
	promptsResent = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_rails_prompts_resent_total",
		Help: "Sandbox M-Pesa prompts sent again because their invoice waited longer than PAYSVC_SIM_RECOVER_AFTER for an outcome (the simulator's process stopped with them in flight).",
	})
	outcomes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_rails_outcomes_total",
		Help: "Outcomes received from a rail and fed back as commands, by rail, stage and code.",
	}, []string{"rail", "stage", "code"})
)

// StageSent records the rail's reference for a prompt without a state change. The
// rails role no longer sends it (Options.RecordAccepted sends ACCEPTED); the engine
// still applies one produced before that change.
const StageSent = "SENT"

// ResultCommand is the command that carries a rail outcome back to the engine.
func ResultCommand(r mpesa.Result, o Origin) (topics.Command, error) {
	c, pr := resultCommand(r, o)
	payload, err := json.Marshal(pr)
	if err != nil {
		return topics.Command{}, err
	}
	c.Payload = payload
	return c, nil
}

// ResultRecord is ResultCommand encoded as a command record. The payload is
// encoded once, inside the envelope (topics.EncodeCommandValue): encoded apart and
// handed over as a json.RawMessage, it was validated and copied again, ~3% of the
// service's CPU under STK load (docs/benchmarks-history.md).
func ResultRecord(r mpesa.Result, o Origin) ([]byte, error) {
	c, pr := resultCommand(r, o)
	return topics.EncodeCommandValue(c, pr)
}

// resultCommand is the outcome's command envelope (no payload) and its payload.
func resultCommand(r mpesa.Result, o Origin) (topics.Command, topics.ProviderResult) {
	pr := topics.ProviderResult{InvoiceID: r.InvoiceID, Stage: r.Stage, Code: r.Code,
		Description: r.Description, Receipt: r.Receipt, CheckoutRequestID: r.CheckoutRequestID}
	if r.Stage == mpesa.StageFinal && r.Amount.Sign() > 0 {
		paid := r.Amount
		pr.PaidAmount = &paid
	}
	c := topics.Command{ID: ids.DeriveUUID("provider-result", r.InvoiceID, r.Stage), Type: topics.CmdInvoiceProviderResult,
		Version: 1, MerchantID: r.MerchantID, IssuedAt: time.Now().UTC()}
	o.stamp(&c)
	return c, pr
}

// Sink produces outcomes as commands, synchronously, so an error reaches the rail
// (which retries) and nothing acknowledged to the rail is lost. Each command
// carries o: a simulator's sink says Simulated. The commands go to namespace
// ns's command topic.
func Sink(cl *kgo.Client, ns topics.Namespace, o Origin) mpesa.Sink {
	topic := ns.Topic(topics.CommandsTopic)
	return func(ctx context.Context, r mpesa.Result) error {
		if r.InvoiceID == "" || r.MerchantID == "" {
			return errors.New("rails: outcome without invoice or merchant")
		}
		b, err := ResultRecord(r, o)
		if err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: topics.CommandKey(r.MerchantID), Value: b}).FirstErr(); err != nil {
			return fmt.Errorf("rails: produce outcome: %w", err)
		}
		outcomes.WithLabelValues("mpesa_stk", r.Stage, fmt.Sprint(r.Code)).Inc()
		return nil
	}
}

// Options say how a rail behaves.
type Options struct {
	// RecordAccepted feeds the rail's acceptance of a prompt back as an ACCEPTED
	// result carrying its reference (CheckoutRequestID), for rails that say nothing
	// between taking the prompt and its final callback (Daraja, whose callbacks carry
	// only that reference). ACCEPTED is the stage at which the simulator's invoices
	// move PENDING -> PROCESSING (the customer entered the PIN); Daraja has no such
	// signal, and its ResponseCode 0 ("Success. Request accepted for processing") is
	// the network accepting the payment request, the spec's condition for PROCESSING.
	// So a live invoice shows PROCESSING from then on, as a sandbox one does after
	// ACCEPTED, and the same collection_event is emitted.
	RecordAccepted bool
	// RetryUnavailable sends a prompt again when the rail gave no usable answer. Only
	// for the simulator: against live M-Pesa a retry could prompt the customer twice,
	// so there an unknown outcome leaves the invoice PROCESSING (StageUnknown) until
	// its callback or status query tells the truth.
	RetryUnavailable bool
	// Scope is the environment served: requests of the other environment's
	// merchants are left alone, and outcomes carry the environment. Required.
	Scope *Scope
	// Simulated marks the outcomes as a simulator's (the engine refuses them
	// for live merchants).
	Simulated bool
	// MaxAttempts bounds the sends of a prompt that certainly did not leave (no
	// connection, no token, rate limited) on a live rail; then the invoice fails,
	// since no prompt was sent. Default 6. The simulator retries without bound.
	MaxAttempts int
	// Backoff is the first pause between those attempts; it doubles up to 30 s.
	// Default 1 s.
	Backoff time.Duration
}

// StageUnknown records that the rail could not say whether a prompt was sent.
const StageUnknown = "UNKNOWN"

// Run consumes STK requests and sends them to the rail until ctx ends. Offsets are
// committed after the rail took each request (at least once: a redelivered request
// is sent again, and its outcome still applies once).
//
// The merchant's enabled flag is read at the moment of each send: a prompt of a
// merchant disabled since it was queued is not sent, and its invoice fails
// (FINAL, code -1, DescMerchantDisabled).
//
// What a live rail's answer means decides what happens (docs/security.md):
//   - taken: the invoice moves to PROCESSING with the reference (ACCEPTED); the
//     callback or the query finishes it;
//   - refused (an error answer, a 4xx): nothing was sent, the invoice fails;
//   - certainly not sent (no connection, no token, 429): sent again with backoff,
//     MaxAttempts times, then the invoice fails;
//   - unknown (a timeout or a lost connection after the request was written, an
//     unreadable answer, an acceptance without a CheckoutRequestID): never sent
//     again (the customer may be paying) and never failed: the invoice waits in
//     PROCESSING (StageUnknown, with the reference when the answer named one).
func Run(ctx context.Context, brokers []string, rail mpesa.Rail, opt Options, log *slog.Logger) error {
	log = log.With("component", "rails")
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 6
	}
	if opt.Backoff <= 0 {
		opt.Backoff = time.Second
	}
	origin := opt.Scope.Origin(opt.Simulated)
	return consume(ctx, brokers, opt.Scope, "paysvc-rails", topics.RailsMpesaSTKTopic, log, func(cl *kgo.Client, rec *kgo.Record) {
		var req topics.STKRequest
		if err := json.Unmarshal(rec.Value, &req); err != nil {
			log.Error("undecodable rail request skipped", "offset", rec.Offset, "err", err)
			return
		}
		if !opt.Scope.serves(ctx, req.MerchantID, "mpesa_stk") {
			return // the other environment's rails role sends it
		}
		// record feeds an outcome back, retrying until it is produced: it must not
		// be lost once the rail took (or refused) the prompt.
		record := func(r mpesa.Result) {
			r.InvoiceID, r.MerchantID = req.InvoiceID, req.MerchantID
			for ctx.Err() == nil {
				err := Sink(cl, opt.Scope.Namespace, origin)(ctx, r)
				if err == nil {
					return
				}
				log.Error("record prompt outcome", "invoice_id", req.InvoiceID, "stage", r.Stage, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
		for attempt := 0; ctx.Err() == nil; attempt++ {
			if !opt.Scope.promptAllowed(ctx, req.MerchantID) {
				if ctx.Err() != nil {
					return // stopping: the request is redelivered, and checked again
				}
				// Disabled (or gone) since the prompt was queued: not sent, and the invoice
				// fails at once rather than wait for a prompt that will never come. The
				// engine applies a rail's outcome to a disabled merchant (it moves no money
				// here: a failure credits nothing).
				promptsOfDisabled.Inc()
				log.Warn("prompt of a disabled merchant not sent; its invoice fails", "invoice_id", req.InvoiceID, "merchant_id", req.MerchantID)
				record(mpesa.Result{Stage: mpesa.StageFinal, Code: -1, Description: DescMerchantDisabled})
				return
			}
			ref, err := rail.Push(ctx, mpesa.STKRequest{InvoiceID: req.InvoiceID, MerchantID: req.MerchantID,
				Phone: req.Phone, Amount: req.Amount, AccountRef: req.AccountRef, Description: "Payment"})
			unsent := errors.Is(err, mpesa.ErrNotSent) || errors.Is(err, mpesa.ErrAuth)
			switch {
			case err == nil:
				requests.WithLabelValues("mpesa_stk", "ok").Inc()
				if opt.RecordAccepted && ref != "" {
					record(mpesa.Result{Stage: mpesa.StageAccepted, CheckoutRequestID: ref,
						Description: "M-Pesa accepted the payment request; waiting for the customer."})
				}
				return
			case errors.Is(err, mpesa.ErrInvalidRequest) || errors.Is(err, mpesa.ErrRejected):
				// The rail refused: the invoice fails, as M-Pesa would report it.
				requests.WithLabelValues("mpesa_stk", "refused").Inc()
				log.Warn("prompt refused", "invoice_id", req.InvoiceID, "err", err)
				record(mpesa.Result{Stage: mpesa.StageFinal, Code: -1, Description: "The payment request was refused by M-Pesa."})
				return
			case errors.Is(err, mpesa.ErrUnavailable) && !unsent && !opt.RetryUnavailable:
				requests.WithLabelValues("mpesa_stk", "unknown").Inc()
				log.Error("prompt outcome unknown: the invoice waits in PROCESSING for its callback or status query",
					"invoice_id", req.InvoiceID, "checkout_request_id", ref, "err", err)
				record(mpesa.Result{Stage: StageUnknown, CheckoutRequestID: ref,
					Description: "M-Pesa's answer was lost or unreadable; waiting for the outcome."})
				return
			case !opt.RetryUnavailable && attempt+1 >= opt.MaxAttempts:
				// Certainly never sent, and M-Pesa stayed out of reach: fail it, so the
				// payer is not left waiting for a prompt that will never come.
				requests.WithLabelValues("mpesa_stk", "refused").Inc()
				log.Error("prompt not sent after retries", "invoice_id", req.InvoiceID, "attempts", attempt+1, "err", err)
				record(mpesa.Result{Stage: mpesa.StageFinal, Code: -1, Description: "M-Pesa could not be reached; no payment request was sent."})
				return
			default:
				requests.WithLabelValues("mpesa_stk", "error").Inc()
				log.Warn("rail unavailable, retrying", "invoice_id", req.InvoiceID, "attempt", attempt+1, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(min(opt.Backoff<<min(attempt, 5), 30*time.Second)):
				}
			}
		}
	})
}

// Recover asks the rail about prompts whose outcome never came (a lost callback),
// every interval, for invoices waiting longer than after, and feeds final answers
// back like callbacks.
func Recover(ctx context.Context, db *sqlx.DB, scope *Scope, q Querier, sink mpesa.Sink, after, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "rails-recover")
	return every.Run(ctx, log, every.Job{Name: every.STKQuery, Interval: interval, Run: func(ctx context.Context) error {
		return recoverOnce(ctx, db, scope, q, sink, after, log)
	}})
}

// recoverOnce is one pass of Recover. A prompt it could not ask about or record
// is logged and asked about again next pass; the pass then fails, with the count.
func recoverOnce(ctx context.Context, db *sqlx.DB, scope *Scope, q Querier, sink mpesa.Sink, after time.Duration, log *slog.Logger) error {
	stale, err := storage.StalePrompts(ctx, db, scope.Environment, time.Now().Add(-after), 100)
	if err != nil {
		return fmt.Errorf("list stale prompts: %w", err)
	}
	failed := 0
	for _, inv := range stale {
		r, pending, err := q.Query(ctx, inv.CheckoutRequestID)
		if err != nil || pending {
			if err != nil {
				failed++
				log.Warn("query prompt", "invoice_id", inv.InvoiceID, "err", err)
			}
			continue
		}
		r.InvoiceID, r.MerchantID, r.Stage = inv.InvoiceID, inv.MerchantID, mpesa.StageFinal
		if err := sink(ctx, r); err != nil {
			failed++
			log.Warn("record queried outcome", "invoice_id", inv.InvoiceID, "err", err)
		}
	}
	return failedOf(failed, len(stale), "stale prompts")
}

// failedOf is the error of a pass that failed n of its total items (each logged
// where it failed), nil for none.
func failedOf(n, total int, what string) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d %s failed (logged above)", n, total, what)
}

// RecoverSandbox sends again, every interval, the prompts of M-Pesa invoices that
// have waited longer than after for an outcome, in the sandbox. The simulator holds
// its prompts in memory until their outcome: a process that stops (a deploy, a crash)
// takes the prompts in flight with it, and their invoices, already acknowledged to
// the merchant, would stay PENDING or PROCESSING for ever (live, Daraja keeps the
// prompt and Recover asks it). Sending a prompt again is harmless there: no customer
// is prompted, the outcome is the phone's (docs/sandbox.md), and each stage's command
// id is derived from the invoice, so a stage that did arrive takes effect once. An
// invoice is sent again at most once per after, while its outcome is on its way.
func RecoverSandbox(ctx context.Context, db *sqlx.DB, scope *Scope, rail mpesa.Rail, after, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "rails-recover")
	resent := map[string]time.Time{}
	return every.Run(ctx, log, every.Job{Name: every.STKResend, Interval: interval, Run: func(ctx context.Context) error {
		return recoverSandboxOnce(ctx, db, scope, rail, after, resent, log)
	}})
}

// recoverSandboxOnce is one sweep of RecoverSandbox; resent remembers when each
// invoice was last sent again.
func recoverSandboxOnce(ctx context.Context, db *sqlx.DB, scope *Scope, rail mpesa.Rail, after time.Duration, resent map[string]time.Time, log *slog.Logger) error {
	now := time.Now()
	for id, at := range resent {
		if now.Sub(at) > after {
			delete(resent, id)
		}
	}
	stale, err := storage.StaleSTKInvoices(ctx, db, scope.Environment, now.Add(-after), 100)
	if err != nil {
		return fmt.Errorf("list stale STK invoices: %w", err)
	}
	failed := 0
	for _, inv := range stale {
		if _, ok := resent[inv.InvoiceID]; ok {
			continue
		}
		if !scope.promptAllowed(ctx, inv.MerchantID) {
			continue // a disabled merchant's prompt is not sent again
		}
		if _, err := rail.Push(ctx, mpesa.STKRequest{InvoiceID: inv.InvoiceID, MerchantID: inv.MerchantID, Phone: inv.Account,
			Amount: inv.Value, AccountRef: inv.APIRef, Description: "Payment"}); err != nil {
			failed++
			log.Warn("send a stale prompt again", "invoice_id", inv.InvoiceID, "err", err)
			continue
		}
		resent[inv.InvoiceID] = now
		promptsResent.Inc()
		log.Info("prompt sent again: its outcome never came", "invoice_id", inv.InvoiceID, "state", inv.State,
			"waiting_since", inv.UpdatedAt)
	}
	return failedOf(failed, len(stale), "stale prompts sent again")
}

// Querier asks a rail for a prompt's outcome (Daraja's STK query).
type Querier interface {
	Query(ctx context.Context, checkoutRequestID string) (mpesa.Result, bool, error)
}

// CardRail charges cards (the sandbox simulator).
type CardRail interface {
	Charge(ctx context.Context, req topics.CardRequest) error
}

// RunCards consumes charges of a push rail (card or PesaLink: topic, its logical
// name) and hands them to the rail until ctx ends.
func RunCards(ctx context.Context, brokers []string, scope *Scope, topic string, rail CardRail, log *slog.Logger) error {
	log = log.With("component", "rails-card")
	railName := "card"
	if topic == topics.RailsPesalinkTopic {
		railName = "pesalink"
	}
	return consume(ctx, brokers, scope, "paysvc-rails-"+topic, topic, log, func(_ *kgo.Client, rec *kgo.Record) {
		var req topics.CardRequest
		if err := json.Unmarshal(rec.Value, &req); err != nil {
			log.Error("undecodable card charge skipped", "offset", rec.Offset, "err", err)
			return
		}
		if !scope.serves(ctx, req.MerchantID, railName) {
			return // the other environment's rails role charges it
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
func ClearCards(ctx context.Context, db *sqlx.DB, scope *Scope, cl *kgo.Client, delay, interval time.Duration, log *slog.Logger) error {
	log = log.With("component", "card-clearing")
	return every.Run(ctx, log, every.Job{Name: every.CardClearing, Interval: interval, Run: func(ctx context.Context) error {
		due, err := storage.UnclearedCardInvoices(ctx, db, scope.Environment, time.Now().Add(-delay), 500)
		if err != nil {
			return fmt.Errorf("list uncleared card collections: %w", err)
		}
		failed := 0
		for _, inv := range due {
			payload, _ := json.Marshal(topics.InvoiceClear{InvoiceID: inv.InvoiceID})
			b, err := topics.EncodeCommand(topics.Command{ID: ids.DeriveUUID("clear", inv.InvoiceID), Type: topics.CmdInvoiceClear,
				Version: 1, MerchantID: inv.MerchantID, IssuedAt: time.Now().UTC(), Environment: scope.Environment, Payload: payload})
			if err != nil {
				continue
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: scope.Namespace.Topic(topics.CommandsTopic), Key: topics.CommandKey(inv.MerchantID), Value: b}).FirstErr(); err != nil {
				failed++
				log.Warn("produce invoice.clear", "invoice_id", inv.InvoiceID, "err", err)
			}
		}
		return failedOf(failed, len(due), "invoice.clear commands")
	}})
}

// consume runs handle over every record of topic in the scope's consumer group of
// base (Scope.Group) until ctx ends, committing offsets after each poll's records
// were handled (at least once). topic is logical: the scope's namespace names it
// on the cluster.
func consume(ctx context.Context, brokers []string, scope *Scope, base, topic string, log *slog.Logger, handle func(*kgo.Client, *kgo.Record)) error {
	group := scope.Group(base)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.Dialer(inproc.Dial), inproc.Compression(brokers), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(scope.Namespace.Topic(topic)),
		kgo.DisableAutoCommit(), kgo.ClientID(group))
	if err != nil {
		return err
	}
	defer func() { _ = topics.CloseGroupClient(cl) }() // a member that cannot leave is expired by the group
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
