// Package card is the sandbox card rail: it charges a test card asynchronously, as
// an acquirer answers, with the outcome its test number stands for (docs/sandbox.md).
// The rail never sees a card number: the API keeps only the last four digits and the
// network, and maps the sandbox's test numbers to outcomes before anything is queued.
package card

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/ids"
	"paysvc/topics"
)

// Outcomes the sandbox's test card numbers stand for.
const (
	OutcomeSuccess           = "success"
	OutcomeDeclined          = "declined"
	OutcomeInsufficientFunds = "insufficient_funds"
	OutcomeExpired           = "expired" // PesaLink: the customer did not complete the transfer in time
)

// Result codes, as ISO 8583 response codes.
const (
	CodeApproved          = 0
	CodeDoNotHonour       = 5
	CodeInsufficientFunds = 51
	CodeExpired           = 91
)

// TestOutcome maps a sandbox test card number to its outcome; any other valid
// number is approved, as a real card with funds would be.
func TestOutcome(pan string) string {
	switch pan {
	case "4000000000000002":
		return OutcomeDeclined
	case "4000000000009995":
		return OutcomeInsufficientFunds
	}
	return OutcomeSuccess
}

// Simulator charges asynchronously after Delay and reports through the sink, which
// it retries until it takes the result (or Close).
type Simulator struct {
	sink  mpesa.Sink
	delay time.Duration
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	slots chan struct{}

	receiptPrefix string
}

// NewSimulator makes a card rail answering after delay (realistic: about a second).
func NewSimulator(sink mpesa.Sink, delay time.Duration) *Simulator {
	return newSimulator(sink, delay, "CRD")
}

// NewPesalinkSimulator makes the sandbox PesaLink rail: the same asynchronous
// behaviour, for bank transfers (outcomes by phone number, docs/sandbox.md).
func NewPesalinkSimulator(sink mpesa.Sink, delay time.Duration) *Simulator {
	return newSimulator(sink, delay, "PSL")
}

func newSimulator(sink mpesa.Sink, delay time.Duration, receiptPrefix string) *Simulator {
	if delay <= 0 {
		delay = time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Simulator{sink: sink, delay: delay, ctx: ctx, stop: stop, slots: make(chan struct{}, 1024), receiptPrefix: receiptPrefix}
}

// PesalinkTestOutcome maps a sandbox phone number to a PesaLink outcome.
func PesalinkTestOutcome(phone string) string {
	switch {
	case strings.HasSuffix(phone, "0003"):
		return OutcomeInsufficientFunds
	case strings.HasSuffix(phone, "0002"):
		return OutcomeExpired
	}
	return OutcomeSuccess
}

// Charge accepts a charge; the outcome follows through the sink.
func (s *Simulator) Charge(ctx context.Context, req topics.CardRequest) error {
	if req.InvoiceID == "" || req.MerchantID == "" || req.Amount.Sign() <= 0 {
		return fmt.Errorf("card: invalid charge for invoice %q", req.InvoiceID)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.delay):
		}
		r := mpesa.Result{InvoiceID: req.InvoiceID, MerchantID: req.MerchantID, Stage: mpesa.StageFinal}
		switch req.TestOutcome {
		case OutcomeDeclined:
			r.Code, r.Description = CodeDoNotHonour, "Card declined by the issuer (do not honour)"
		case OutcomeInsufficientFunds:
			r.Code, r.Description = CodeInsufficientFunds, "Insufficient funds"
		case OutcomeExpired:
			r.Code, r.Description = CodeExpired, "The payment was not completed in time"
		case OutcomeSuccess:
			r.Code, r.Description, r.Receipt = CodeApproved, "Approved", s.receiptPrefix+ids.Alias(9)
		default:
			// An absent or unknown outcome is never an approval: a
			// charge queued without one (an older producer, a bug) is declined.
			r.Code, r.Description = CodeDoNotHonour, "Card declined: the charge carried no outcome the sandbox knows"
		}
		for backoff := 100 * time.Millisecond; s.sink(s.ctx, r) != nil; backoff = min(2*backoff, 10*time.Second) {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()
	return nil
}

// Close stops pending charges and waits for them.
func (s *Simulator) Close() {
	s.stop()
	s.wg.Wait()
}
