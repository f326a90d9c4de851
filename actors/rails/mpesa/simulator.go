package mpesa

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"paysvc/actors/rails/retry"
)

// SimOptions tune the simulator. Zero values take realistic defaults; tests
// set milliseconds.
type SimOptions struct {
	// AcceptDelay is the time from the prompt to the customer's answer:
	// entering the PIN (ACCEPTED), pressing Cancel (1032), or the prompt
	// failing to lock the subscriber (1001). Default 1s.
	AcceptDelay time.Duration
	// FinalDelay is the time from ACCEPTED to the FINAL result. Default 2s.
	FinalDelay time.Duration
	// TimeoutDelay is the time from the prompt to a timeout outcome (1037,
	// 1019), when nobody answers. Default 3*(AcceptDelay+FinalDelay), so it
	// scales with the other two.
	TimeoutDelay time.Duration
	// MaxInFlight bounds the prompts being simulated at once (each holds one
	// goroutine until its FINAL result is delivered). Push waits for a free
	// slot until its ctx ends (then ErrBusy). Default 1024.
	MaxInFlight int
	// RetryMin and RetryMax bound the backoff between attempts to deliver a
	// result to a failing Sink. Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// Now is the clock used for CheckoutRequestIDs. Default time.Now.
	Now func() time.Time
}

func (o SimOptions) withDefaults() SimOptions {
	if o.AcceptDelay <= 0 {
		o.AcceptDelay = time.Second
	}
	if o.FinalDelay <= 0 {
		o.FinalDelay = 2 * time.Second
	}
	if o.TimeoutDelay <= 0 {
		o.TimeoutDelay = 3 * (o.AcceptDelay + o.FinalDelay)
	}
	o.MaxInFlight, o.RetryMin, o.RetryMax = retry.Limits(o.MaxInFlight, o.RetryMin, o.RetryMax)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Simulator is the sandbox M-Pesa STK rail. It answers Push at once and
// delivers the outcome later, from its own goroutine, through the Sink: the
// outcome is chosen by the phone number (see SimOutcome and docs/sandbox.md).
type Simulator struct {
	sink Sink
	opt  SimOptions
	pool *retry.Pool
}

var _ Rail = (*Simulator)(nil)

// NewSimulator returns a running simulator delivering to sink. Call Close to
// stop it.
func NewSimulator(sink Sink, opt SimOptions) *Simulator {
	if sink == nil {
		panic("mpesa: NewSimulator with a nil Sink")
	}
	opt = opt.withDefaults()
	return &Simulator{sink: sink, opt: opt, pool: retry.NewPool(opt.MaxInFlight)}
}

// SimOutcome describes what the simulator does for one phone number.
type SimOutcome struct {
	Code int
	// Accepted: the customer enters their PIN, so an ACCEPTED result comes
	// first (after AcceptDelay) and the FINAL one FinalDelay later.
	Accepted bool
	// TimesOut: nobody answers; FINAL comes after TimeoutDelay. Otherwise a
	// non-accepted outcome is FINAL after AcceptDelay.
	TimesOut bool
}

// simMagic maps the last four digits of the phone to an outcome. Keep
// docs/sandbox.md in step.
var simMagic = map[string]SimOutcome{
	"0001": {Code: CodeCancelled},
	"0002": {Code: CodeUnreachable, TimesOut: true},
	"0003": {Code: CodeInsufficientFunds, Accepted: true},
	"0004": {Code: CodeWrongPIN, Accepted: true},
	"0005": {Code: CodeSubscriberBusy},
	"0006": {Code: CodeExpired, TimesOut: true},
}

// SimOutcomeFor returns the outcome the simulator produces for phone: a
// magic suffix's, or success with the customer approving the prompt.
func SimOutcomeFor(phone string) SimOutcome {
	if len(phone) >= 4 {
		if o, ok := simMagic[phone[len(phone)-4:]]; ok {
			return o
		}
	}
	return SimOutcome{Code: CodeSuccess, Accepted: true}
}

// Push validates req, answers with a new CheckoutRequestID, and schedules the
// outcome. It waits for a slot while MaxInFlight prompts are in flight, until
// ctx ends (ErrBusy). ctx only bounds that wait: the outcome is delivered
// with a context that keeps ctx's values but is cancelled only by Close.
func (s *Simulator) Push(ctx context.Context, req STKRequest) (string, error) {
	p, err := prepare(req)
	if err != nil {
		return "", err
	}
	if err := s.pool.Admit(ctx, ErrClosed, ErrBusy); err != nil {
		return "", err
	}
	id := NewCheckoutRequestID(s.opt.Now())
	// The delivery context keeps the caller's values (trace ids) but not its
	// deadline; Close cancels it.
	s.pool.Start(ctx, func(jobCtx context.Context) { s.run(jobCtx, p, id) })
	return id, nil
}

// run plays one prompt to its end.
func (s *Simulator) run(ctx context.Context, p prepared, id string) {
	o := SimOutcomeFor(p.Phone)
	base := Result{InvoiceID: p.InvoiceID, MerchantID: p.MerchantID, CheckoutRequestID: id}
	if o.Accepted {
		if !retry.Sleep(ctx, s.opt.AcceptDelay) {
			return
		}
		acc := base
		acc.Stage = StageAccepted
		acc.Description = "The customer entered the PIN; the payment is processing."
		if !s.deliver(ctx, acc) {
			return
		}
		if !retry.Sleep(ctx, s.opt.FinalDelay) {
			return
		}
	} else {
		d := s.opt.AcceptDelay
		if o.TimesOut {
			d = s.opt.TimeoutDelay
		}
		if !retry.Sleep(ctx, d) {
			return
		}
	}
	fin := base
	fin.Stage = StageFinal
	fin.Code = o.Code
	fin.Description = ResultDesc(o.Code)
	if o.Code == CodeSuccess {
		fin.Receipt = newSimReceipt()
		fin.Amount = p.Amount
		fin.Phone = p.Phone
	}
	s.deliver(ctx, fin)
}

// deliver calls the sink until it succeeds or ctx ends (Close). It reports
// whether the result was delivered.
func (s *Simulator) deliver(ctx context.Context, r Result) bool {
	return retry.Deliver(ctx, s.sink, r, s.opt.RetryMin, s.opt.RetryMax)
}

// Close stops the simulator: Push fails with ErrClosed, pending deliveries
// are abandoned (their sink contexts are cancelled), and Close returns once
// every simulator goroutine has ended. Safe to call more than once.
func (s *Simulator) Close() error {
	s.pool.Close()
	return nil
}

const (
	digits   = "0123456789"
	receipts = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// randomString returns n characters of alphabet from crypto/rand.
func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("mpesa: crypto/rand failed: %v", err))
	}
	// 256 is not a multiple of 36: the bias is negligible for labels.
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// NewCheckoutRequestID returns an id shaped like Daraja's:
// "ws_CO_" + DDMMYYYYHHmmss + milliseconds (EAT) + 9 digits (Daraja puts the
// customer's number there). The digits count up from a random start, so two ids of
// one process never collide (random digits alone did, about once in 10^4 runs of
// 500 prompts in one millisecond), and two processes are unlikely to meet. It is
// exported for mpesatest's fake, so that the fake and the simulator of one test
// process draw from this one sequence.
func NewCheckoutRequestID(now time.Time) string {
	t := now.In(eat)
	var b strings.Builder
	b.WriteString("ws_CO_")
	b.WriteString(t.Format("02012006150405"))
	fmt.Fprintf(&b, "%03d", t.Nanosecond()/int(time.Millisecond))
	fmt.Fprintf(&b, "%09d", checkoutSeq.Add(1)%1_000_000_000)
	return b.String()
}

// checkoutSeq numbers checkout request ids; it starts at a random point.
var checkoutSeq = func() *atomic.Uint64 {
	var v atomic.Uint64
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("mpesa: crypto/rand failed: %v", err))
	}
	v.Store(binary.BigEndian.Uint64(b[:]) % 1_000_000_000)
	return &v
}()

// newSimReceipt returns a receipt shaped like an M-Pesa one (10 upper-case
// alphanumerics) that cannot be mistaken for a real one: "SIM" + 7.
func newSimReceipt() string { return "SIM" + randomString(7, receipts) }
