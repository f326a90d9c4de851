package rails

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/payout"
	"paysvc/actors/values/ids"
	"paysvc/storage"
	"paysvc/topics"
)

// B2CPayer sends one M-Pesa B2C payment (mpesa.B2C).
type B2CPayer interface {
	Pay(ctx context.Context, req mpesa.B2CRequest) (mpesa.B2CAccepted, error)
}

// DarajaB2C is the live payout rail of MPESA-B2C through Safaricom Daraja. Each
// transaction of a chunk is one B2C request whose OriginatorConversationID is the
// transaction id; Daraja's result comes back to the API's result URL, which turns
// it into the transaction's FINAL outcome.
//
// Only a transaction still due is sent: just before each send its status is read
// again from PostgreSQL, and one that has its outcome, whose file is not being paid
// or is held by an operator, or whose merchant is disabled or not of Environment,
// is skipped. Then its submission is reported (SUBMITTED, the transaction is
// PROCESSING), and the request leaves only once the engine applied it: Daraja's
// result always follows it in the command log, a result for a transaction never
// submitted finishes nothing, and the engine has the last word. It refuses the
// submission of a disabled merchant or a held file, and an operator's fail of the
// file's unsent transactions, applied first, leaves nothing to submit: a
// transaction an operator failed (its hold released) is never paid as well.
//
// No transaction is ever sent twice. Before a request leaves, the transaction is
// claimed in payout_sends (one row per transaction, in Postgres, so the claim
// survives restarts and is shared by every rails process); a transaction already
// claimed is never sent again, whoever resubmits it (a redelivered chunk,
// RecoverPayouts, another process). What comes of a send:
//
//   - accepted (ResponseCode "0"): the transaction stays PROCESSING until the
//     result callback, whose ConversationID must be the one Daraja answered.
//   - refused (HTTP 4xx with Daraja's error, a non-zero ResponseCode, or a request
//     M-Pesa cannot take): FINAL failure with Daraja's description; the hold is
//     released. A resubmission reports the same refusal.
//   - not sent (Daraja unreachable, no OAuth token): the claim is dropped and the
//     chunk stops with an error, so RunPayouts tries it again later.
//   - unknown (a timeout, a dropped connection, a 5xx, an unreadable answer):
//     M-Pesa may pay it. It stays PROCESSING and is never sent again: its result callback, if M-Pesa took it, finishes it; otherwise an
//     operator reconciles it with the M-Pesa portal. The chunk stops with an error
//     and the rail sends nothing for Pause, so an outage costs at most one
//     transaction per Pause rather than a whole chunk.
//
// Transactions of other providers go to Others (nil: Unconfigured).
type DarajaB2C struct {
	Payer B2CPayer
	DB    *sqlx.DB
	Sink  func(ctx context.Context, r topics.PayoutResults) error
	// Others pays the transactions of every other provider.
	Others PayoutRail
	// Pause is how long nothing is sent after an unknown outcome. Default 30s.
	Pause time.Duration
	// Now is the clock the pause is timed by (nil: time.Now), so a test can let
	// a pause run out without waiting for it.
	Now func() time.Time
	// Environment is the rails process's (Scope.Environment): only its
	// merchants' transactions are sent.
	Environment string
	// SubmitWait bounds the wait for the engine to apply a submission before the
	// request is sent; past it the chunk stops and is tried again. Default 10s.
	SubmitWait time.Duration
	Log        *slog.Logger

	mu          sync.Mutex
	pausedUntil time.Time
}

var _ PayoutRail = (*DarajaB2C)(nil)

// errPaused: the rail is waiting after an unknown outcome; nothing was sent.
var errPaused = errors.New("rails: b2c paused after an unknown outcome")

// Submit sends the chunk's transactions one by one (see DarajaB2C).
func (r *DarajaB2C) Submit(ctx context.Context, req topics.PayoutRailRequest) error {
	if req.Provider != payout.ProviderMpesaB2C {
		others := r.Others
		if others == nil {
			others = Unconfigured{Sink: r.Sink}
		}
		return others.Submit(ctx, req)
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("file_id", req.FileID, "chunk", req.Chunk)
	var refused []topics.PayoutTxnResult
	var stop error
	for _, t := range req.Transactions {
		if stop = r.ready(ctx); stop != nil {
			break
		}
		// Just before the send: a transaction a result finished meanwhile (a forged
		// or early failure that released its hold, an operator's finish or fail) is
		// not paid, nor one of a held file or a disabled merchant.
		status, err := r.due(ctx, t.TransactionID)
		if err != nil {
			stop = err
			break
		}
		if status == "PENDING" {
			// The file records the submission before the request leaves, so a result
			// Daraja sends for it always comes after it in the command log; a result
			// for a transaction not yet submitted is ignored (the payout aggregate's Results).
			// Each attempt is its own command: a submission the engine refused (the
			// merchant was disabled) is not the stored answer of the next attempt.
			salt := strconv.FormatInt(time.Now().UnixNano(), 36)
			batch, err := r.report(ctx, req, topics.PayoutStageSubmitted, "b2c-sub-", []topics.PayoutTxnResult{{TransactionID: t.TransactionID}}, salt)
			if err != nil {
				stop = err
				break
			}
			cmdID := topics.PayoutResultCommandID(req.FileID, topics.PayoutStageSubmitted, batch)
			if status, err = r.awaitSubmitted(ctx, req.MerchantID, cmdID, t.TransactionID); err != nil {
				stop = err
				break
			}
		}
		if status != "PROCESSING" {
			log.Warn("B2C payout not due (it has its outcome, its file is held or not being paid, or its merchant is disabled): not sent",
				"transaction_id", t.TransactionID)
			continue
		}
		prior, claimed, err := storage.ClaimPayoutSend(ctx, r.DB, t.TransactionID, req.Provider)
		if err != nil {
			stop = err
			break
		}
		if !claimed {
			if prior.State == storage.PayoutSendRefused {
				refused = append(refused, topics.PayoutTxnResult{TransactionID: t.TransactionID, Description: prior.Description})
				continue
			}
			// Sent before, or maybe sent: never again. Its result callback finishes it.
			log.Warn("B2C payout already sent or maybe sent: not sent again", "transaction_id", t.TransactionID,
				"send_state", prior.State, "sent_at", prior.CreatedAt)
			continue
		}
		acc, err := r.Payer.Pay(ctx, mpesa.B2CRequest{TransactionID: t.TransactionID, Phone: t.Account, Amount: t.Amount,
			Remarks: t.Narrative, Occasion: t.TransactionID})
		var state, reference, desc string
		switch {
		case err == nil:
			requests.WithLabelValues("mpesa-b2c", "ok").Inc()
			state, reference = storage.PayoutSendAccepted, acc.ConversationID
		case errors.Is(err, mpesa.ErrRejected), errors.Is(err, mpesa.ErrInvalidRequest):
			requests.WithLabelValues("mpesa-b2c", "refused").Inc()
			state, desc = storage.PayoutSendRefused, refusal(err)
			refused = append(refused, topics.PayoutTxnResult{TransactionID: t.TransactionID, Description: desc})
			log.Warn("B2C payout refused", "transaction_id", t.TransactionID, "err", err)
		case errors.Is(err, mpesa.ErrAuth), errors.Is(err, mpesa.ErrNotSent):
			requests.WithLabelValues("mpesa-b2c", "error").Inc()
			if rerr := storage.ReleasePayoutSend(context.WithoutCancel(ctx), r.DB, t.TransactionID); rerr != nil {
				// The claim stays: the transaction is never sent and waits for an operator.
				log.Error("B2C payout not sent, and its claim could not be released", "transaction_id", t.TransactionID, "err", rerr)
			}
			stop = fmt.Errorf("b2c %s not sent: %w", t.TransactionID, err)
		default:
			requests.WithLabelValues("mpesa-b2c", "error").Inc()
			state, desc = storage.PayoutSendUnknown, err.Error()
			log.Error("B2C payout outcome unknown: it is not sent again; its result callback or an operator finishes it",
				"transaction_id", t.TransactionID, "err", err)
			r.pause()
			stop = fmt.Errorf("b2c %s outcome unknown: %w", t.TransactionID, err)
		}
		if state != "" {
			if err := storage.SetPayoutSend(context.WithoutCancel(ctx), r.DB, t.TransactionID, state, reference, desc); err != nil {
				// The claim stays SENDING, which is treated as unknown: never sent again.
				log.Error("record B2C payout send", "transaction_id", t.TransactionID, "state", state, "err", err)
			}
		}
		if stop != nil {
			break
		}
	}
	if _, err := r.report(ctx, req, topics.PayoutStageFinal, "b2c-ref-", refused, ""); err != nil {
		// Submitted again, the chunk sends nothing twice and reports the same.
		return fmt.Errorf("rails: report b2c outcomes: %w", err)
	}
	if stop != nil {
		return fmt.Errorf("rails: b2c chunk stopped: %w", stop)
	}
	return nil
}

// report sends a group of outcomes of req's file. The labels derive from the
// transactions they carry (and salt, if any), so a chunk submitted again with the
// same outcomes is the same commands, and different groups differ.
func (r *DarajaB2C) report(ctx context.Context, req topics.PayoutRailRequest, stage, prefix string, results []topics.PayoutTxnResult, salt string) (batch string, err error) {
	if len(results) == 0 {
		return "", nil
	}
	idsOf := make([]string, len(results), len(results)+1)
	for i, x := range results {
		idsOf[i] = x.TransactionID
	}
	if salt != "" {
		idsOf = append(idsOf, "attempt:"+salt)
	}
	batch = prefix + ids.Derive(16, idsOf...)
	return batch, r.Sink(ctx, topics.PayoutResults{FileID: req.FileID, MerchantID: req.MerchantID, Stage: stage,
		Batch: batch, Results: results})
}

// due is the transaction's status if it may be sent now (PENDING or
// PROCESSING), else "" (storage.DuePayoutTxns).
func (r *DarajaB2C) due(ctx context.Context, transactionID string) (string, error) {
	due, err := storage.DuePayoutTxns(ctx, r.DB, r.Environment, []string{transactionID})
	if err != nil {
		return "", err
	}
	return due[transactionID], nil
}

// errNotSubmitted: the engine did not apply a submission in time; nothing was sent.
var errNotSubmitted = errors.New("rails: b2c submission not applied in time")

// awaitSubmitted waits until the engine applied the transaction's submission
// (command cmdID): PROCESSING; or "" when it stopped being due or the engine
// refused the submission (the merchant is disabled, the file held; or an
// operator failed it first). Nothing is sent then; a later pass tries again.
func (r *DarajaB2C) awaitSubmitted(ctx context.Context, merchantID, cmdID, transactionID string) (string, error) {
	wait := r.SubmitWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	deadline := time.Now().Add(wait)
	for delay := 2 * time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		status, err := r.due(ctx, transactionID)
		if err != nil || status != "PENDING" {
			return status, err
		}
		raw, done, err := storage.ProcessedReply(ctx, r.DB, merchantID, cmdID)
		if err != nil {
			return "", err
		}
		var reply topics.Reply
		if done && json.Unmarshal(raw, &reply) == nil && reply.Error != nil {
			if r.Log != nil {
				r.Log.Info("B2C payout submission refused by the engine: not sent", "transaction_id", transactionID,
					"code", reply.Error.Code)
			}
			return "", nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%w: %s", errNotSubmitted, transactionID)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(delay):
		}
	}
}

// ready returns an error when nothing may be sent now.
func (r *DarajaB2C) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Before(r.pausedUntil) {
		return errPaused
	}
	return nil
}

func (r *DarajaB2C) pause() {
	d := r.Pause
	if d <= 0 {
		d = 30 * time.Second
	}
	r.mu.Lock()
	r.pausedUntil = r.now().Add(d)
	r.mu.Unlock()
}

func (r *DarajaB2C) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// refusal is the failure description of a refused payout, fit for the merchant.
func refusal(err error) string {
	var ae *mpesa.APIError
	if errors.As(err, &ae) && ae.Message != "" {
		return "M-Pesa refused the payout: " + ae.Message
	}
	if errors.Is(err, mpesa.ErrInvalidRequest) {
		return "M-Pesa cannot take this payout: " + err.Error()
	}
	return "M-Pesa refused the payout."
}
