package payout

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"paysvc/actors/rails/retry"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// Magic account suffixes: the last four characters of a transaction's account
// choose its sandbox outcome, for every provider. Keep docs/sandbox.md in step.
const (
	// SuffixInvalidAccount: the recipient does not exist. FINAL failed,
	// "Invalid recipient account"; Validate answers INVALID_ACCOUNT.
	SuffixInvalidAccount = "0011"
	// SuffixLimitExceeded: FINAL failed, "Transaction limit exceeded for the recipient".
	SuffixLimitExceeded = "0012"
	// SuffixProviderDown: FINAL failed, "Provider unavailable: <provider> did not
	// accept the transaction".
	SuffixProviderDown = "0013"
	// SuffixLate: the provider answers late: FINAL success in the batch
	// "c<chunk>-late", 3*Delay after submission instead of Delay.
	SuffixLate = "0014"
)

// Descriptions of failed FINAL results.
const (
	DescInvalidAccount = "Invalid recipient account"
	DescLimitExceeded  = "Transaction limit exceeded for the recipient"
	DescAirtimeLimit   = "Airtime amount above the provider limit"
	descProviderDown   = "Provider unavailable: %s did not accept the transaction"
)

// airtimeLimit is the largest AIRTIME transaction the provider takes (KES).
var airtimeLimit = money.MustParse("10000.00")

// Errors. Every error of Submit wraps one of them.
var (
	// ErrInvalidRequest: the request is malformed or names a provider the rail
	// does not serve; redelivering it cannot succeed.
	ErrInvalidRequest = errors.New("payout: invalid request")
	// ErrBusy: MaxInFlight requests are being played and ctx ended first.
	ErrBusy = errors.New("payout: too many requests in flight")
	// ErrClosed: the simulator is closed.
	ErrClosed = errors.New("payout: closed")
)

// Sink takes the rail's results, producing them as a payout.results command. An
// error makes the simulator retry the same results later.
type Sink func(ctx context.Context, r topics.PayoutResults) error

// Options tune the simulator. Zero values take realistic defaults; tests set
// milliseconds.
type Options struct {
	// Delay is the time from submission to the FINAL results (with at most
	// +-10% jitter); late transactions (SuffixLate) are final after 3*Delay.
	// Default 2s.
	Delay time.Duration
	// MaxInFlight bounds the requests being played at once (each holds one
	// goroutine until its last result is delivered). Submit waits for a free
	// slot until its ctx ends (then ErrBusy). Default 1024.
	MaxInFlight int
	// RetryMin and RetryMax bound the backoff between attempts to deliver
	// results to a failing Sink. Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
}

func (o Options) withDefaults() Options {
	if o.Delay <= 0 {
		o.Delay = 2 * time.Second
	}
	o.MaxInFlight, o.RetryMin, o.RetryMax = retry.Limits(o.MaxInFlight, o.RetryMin, o.RetryMax)
	return o
}

// Simulator is the sandbox payout rail. Submit accepts a chunk of a payment file
// at once; the results follow from the simulator's own goroutines through the
// Sink (see the package documentation for their order and grouping).
type Simulator struct {
	sink Sink
	opt  Options
	pool *retry.Pool
}

// NewSimulator returns a running simulator delivering to sink. Call Close to
// stop it.
func NewSimulator(sink Sink, opt Options) *Simulator {
	if sink == nil {
		panic("payout: NewSimulator with a nil Sink")
	}
	opt = opt.withDefaults()
	return &Simulator{sink: sink, opt: opt, pool: retry.NewPool(opt.MaxInFlight)}
}

// Submit validates req and schedules its results: SUBMITTED for every
// transaction at once, FINAL after Delay (late ones after 3*Delay). It waits for
// a slot while MaxInFlight requests are in flight, until ctx ends (ErrBusy). ctx
// only bounds that wait: results are delivered with a context that keeps ctx's
// values but is cancelled only by Close.
func (s *Simulator) Submit(ctx context.Context, req topics.PayoutRailRequest) error {
	if err := checkRequest(req); err != nil {
		return err
	}
	if err := s.pool.Admit(ctx, ErrClosed, ErrBusy); err != nil {
		return err
	}
	start := time.Now()
	s.pool.Start(ctx, func(jobCtx context.Context) { s.run(jobCtx, req, start) })
	return nil
}

// checkRequest refuses what no provider would take.
func checkRequest(req topics.PayoutRailRequest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: file %q chunk %d: %s", ErrInvalidRequest, req.FileID, req.Chunk, fmt.Sprintf(format, args...))
	}
	switch {
	case req.FileID == "":
		return bad("no file_id")
	case req.MerchantID == "":
		return bad("no merchant_id")
	case !IsProvider(req.Provider):
		return bad("provider %q is not a payout rail", req.Provider)
	case req.Chunk < 0:
		return bad("negative chunk")
	case len(req.Transactions) == 0:
		return bad("no transactions")
	case len(req.Transactions) > topics.PayoutChunk:
		return bad("%d transactions, more than %d", len(req.Transactions), topics.PayoutChunk)
	}
	seen := make(map[string]bool, len(req.Transactions))
	for i, t := range req.Transactions {
		switch {
		case t.TransactionID == "":
			return bad("transaction %d has no transaction_id", i)
		case seen[t.TransactionID]:
			return bad("transaction %q appears twice", t.TransactionID)
		case t.Amount.Sign() <= 0:
			return bad("transaction %q has amount %s, not positive", t.TransactionID, t.Amount)
		}
		seen[t.TransactionID] = true
	}
	return nil
}

// run plays one request to its end.
func (s *Simulator) run(ctx context.Context, req topics.PayoutRailRequest, start time.Time) {
	batch := fmt.Sprintf("c%d", req.Chunk)
	sub := topics.PayoutResults{FileID: req.FileID, MerchantID: req.MerchantID, Stage: topics.PayoutStageSubmitted, Batch: batch,
		Results: make([]topics.PayoutTxnResult, len(req.Transactions))}
	for i, t := range req.Transactions {
		sub.Results[i] = topics.PayoutTxnResult{TransactionID: t.TransactionID}
	}
	if !s.deliver(ctx, sub) {
		return
	}
	final := topics.PayoutResults{FileID: req.FileID, MerchantID: req.MerchantID, Stage: topics.PayoutStageFinal, Batch: batch}
	late := topics.PayoutResults{FileID: req.FileID, MerchantID: req.MerchantID, Stage: topics.PayoutStageFinal, Batch: batch + "-late"}
	for _, t := range req.Transactions {
		r, isLate := outcome(req.FileID, req.Provider, t)
		if isLate {
			late.Results = append(late.Results, r)
		} else {
			final.Results = append(final.Results, r)
		}
	}
	if len(final.Results) > 0 {
		if !retry.Sleep(ctx, time.Until(start.Add(jitter10(s.opt.Delay)))) || !s.deliver(ctx, final) {
			return
		}
	}
	if len(late.Results) > 0 {
		if !retry.Sleep(ctx, time.Until(start.Add(jitter10(3*s.opt.Delay)))) {
			return
		}
		s.deliver(ctx, late)
	}
}

// outcome is the FINAL result of one transaction, and whether the provider
// answers late. It depends only on its arguments.
func outcome(fileID, provider string, t topics.PayoutRailTxn) (topics.PayoutTxnResult, bool) {
	r := topics.PayoutTxnResult{TransactionID: t.TransactionID}
	if provider == ProviderAirtime && t.Amount.Cmp(airtimeLimit) > 0 {
		r.Description = DescAirtimeLimit
		return r, false
	}
	switch last4(t.Account) {
	case SuffixInvalidAccount:
		r.Description = DescInvalidAccount
		return r, false
	case SuffixLimitExceeded:
		r.Description = DescLimitExceeded
		return r, false
	case SuffixProviderDown:
		r.Description = fmt.Sprintf(descProviderDown, provider)
		return r, false
	}
	r.Success = true
	r.ProviderReference = reference(fileID, provider, t.TransactionID)
	r.ProviderAccountName = registeredName(provider, t.Account)
	return r, strings.HasSuffix(t.Account, SuffixLate)
}

const (
	upper        = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alphanumeric = "0123456789" + upper
	decimal      = "0123456789"
)

// reference is the provider's reference for a successful transaction, derived
// from the file and the transaction so a redelivered request reports the same
// one: M-Pesa style (a letter and 9 upper-case alphanumerics) for MPESA-*,
// "PSL", "RTGS" or "AIR" and 10 digits for the others.
func reference(fileID, provider, transactionID string) string {
	sum := sha256.Sum256([]byte(fileID + "\x00" + provider + "\x00" + transactionID))
	pick := func(alphabet string, from, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[int(sum[from+i])%len(alphabet)]
		}
		return string(b)
	}
	switch provider {
	case ProviderPesalink:
		return "PSL" + pick(decimal, 0, 10)
	case ProviderRTGS:
		return "RTGS" + pick(decimal, 0, 10)
	case ProviderAirtime:
		return "AIR" + pick(decimal, 0, 10)
	default: // MPESA-B2C, MPESA-B2B
		return pick(upper, 0, 1) + pick(alphanumeric, 1, 9)
	}
}

// deliver calls the sink until it succeeds or ctx ends (Close). It reports
// whether the results were delivered.
func (s *Simulator) deliver(ctx context.Context, r topics.PayoutResults) bool {
	return retry.Deliver(ctx, s.sink, r, s.opt.RetryMin, s.opt.RetryMax)
}

// Close stops the simulator: Submit fails with ErrClosed, pending results are
// abandoned (their sink contexts are cancelled), and Close returns once every
// simulator goroutine has ended. Safe to call more than once.
func (s *Simulator) Close() error {
	s.pool.Close()
	return nil
}

// jitter10 returns d moved by at most 10% either way.
func jitter10(d time.Duration) time.Duration {
	spread := int64(d / 10)
	if spread <= 0 {
		return d
	}
	return d + time.Duration(rand.Int64N(2*spread+1)-spread)
}
