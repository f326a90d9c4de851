// Package mpesa is the M-Pesa Express (STK push) rail: the engine asks for a
// payment prompt on a customer's phone, and the outcome arrives later.
//
// Two implementations of Rail live here:
//
//   - Simulator, for the sandbox environment: no network, realistic delays,
//     outcomes chosen by the magic phone numbers documented in docs/sandbox.md,
//     delivered through a Sink.
//   - Daraja, for the live environment: Safaricom's Daraja API (OAuth token,
//     STK push, STK query). Its outcomes arrive as HTTP callbacks that the API
//     decodes with ParseCallback, or through Query when a callback never came.
//
// B2C (b2c.go) is the live payout side: Daraja's B2C payment request, one per
// payout transaction, whose result the API decodes with ParseB2CResult.
//
// Tests drive the Daraja adapter with real HTTP against mpesatest.FakeDaraja,
// a local server speaking Daraja's wire format (package mpesatest, which only
// tests import).
package mpesa

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"paysvc/actors/values/money"
)

// STKRequest is what the engine asks for. The caller guarantees whole
// shillings and a 254XXXXXXXXX phone; both rails check again and refuse
// anything else with ErrInvalidRequest.
type STKRequest struct {
	InvoiceID, MerchantID, Phone string
	Amount                       money.Amount
	// AccountRef is shown to the customer on the prompt. Daraja allows 12
	// characters and Description 13: longer values are cut (they are labels,
	// not money). An empty AccountRef becomes the InvoiceID, an empty
	// Description "Payment".
	AccountRef, Description string
}

// Stages of an outcome.
const (
	// StageAccepted: the customer answered the prompt with their PIN and
	// M-Pesa is processing the payment. Not every outcome has this stage: a
	// cancelled, unanswered or undeliverable prompt goes straight to FINAL.
	StageAccepted = "ACCEPTED"
	// StageFinal: M-Pesa's last word, with its ResultCode.
	StageFinal = "FINAL"
)

// M-Pesa ResultCodes of STK push outcomes (the ones the sandbox produces and
// the ones most often seen live).
const (
	CodeSuccess           = 0
	CodeInsufficientFunds = 1
	CodeSubscriberBusy    = 1001 // unable to lock subscriber: another transaction in progress
	CodeExpired           = 1019
	CodeCancelled         = 1032
	CodeUnreachable       = 1037 // DS timeout: the phone could not be reached / no answer
	CodeWrongPIN          = 2001 // "initiator information is invalid": wrong PIN
)

// resultDescs are the ResultDesc texts M-Pesa sends with each code.
var resultDescs = map[int]string{
	CodeSuccess:           "The service request is processed successfully.",
	CodeInsufficientFunds: "The balance is insufficient for the transaction.",
	CodeSubscriberBusy:    "Unable to lock subscriber, a transaction is already in process for the current subscriber",
	CodeExpired:           "Transaction has expired",
	CodeCancelled:         "Request cancelled by user",
	CodeUnreachable:       "DS timeout user cannot be reached",
	CodeWrongPIN:          "The initiator information is invalid.",
}

// ResultDesc returns M-Pesa's description text for a ResultCode, or a generic
// text for codes this package does not know.
func ResultDesc(code int) string {
	if d, ok := resultDescs[code]; ok {
		return d
	}
	return "M-Pesa result code " + strconv.Itoa(code)
}

// Result is one outcome of a prompt.
type Result struct {
	InvoiceID  string // empty from ParseCallback and Query: map CheckoutRequestID to the invoice
	MerchantID string // likewise
	Stage      string // StageAccepted or StageFinal
	// Code is the M-Pesa ResultCode (final stage); 0 = success.
	Code int
	// Description is M-Pesa's ResultDesc.
	Description string
	// Receipt is the MpesaReceiptNumber on success. It is empty on failure,
	// and also on a success learned through Query (Daraja's STK query does
	// not return the receipt).
	Receipt           string
	CheckoutRequestID string
	// Amount is the amount M-Pesa reports as paid (final success from the
	// simulator or a callback); zero otherwise. Compare it with the invoice.
	Amount money.Amount
	// Phone is the paying number (254XXXXXXXXX) when M-Pesa reports it.
	Phone string
}

// Success reports whether r is a final, successful payment.
func (r Result) Success() bool { return r.Stage == StageFinal && r.Code == CodeSuccess }

// Sink receives outcomes; it may be called more than once for the same stage
// (the receiver dedupes by InvoiceID+Stage) and must be safe for concurrent
// use. An error makes the sender try again later.
type Sink func(ctx context.Context, r Result) error

// Rail sends a prompt; the outcome arrives later through the Sink (simulator)
// or the callback (Daraja). An ErrUnavailable without ErrNotSent is an unknown
// outcome (the prompt may have been sent): it must not be sent again nor failed;
// checkoutRequestID is then set when the unusable answer still named the prompt.
type Rail interface {
	Push(ctx context.Context, req STKRequest) (checkoutRequestID string, err error)
}

// Errors. Every error of Push and Query wraps one of them.
var (
	// ErrInvalidRequest: the request was refused before anything was sent.
	ErrInvalidRequest = errors.New("mpesa: invalid request")
	// ErrRejected: M-Pesa answered and refused; no prompt was sent, so the
	// request can be corrected and sent again.
	ErrRejected = errors.New("mpesa: rejected")
	// ErrUnavailable: no usable answer (network error, timeout, unreadable
	// response). A prompt may or may not have been sent.
	ErrUnavailable = errors.New("mpesa: unavailable")
	// ErrAuth: the OAuth token could not be obtained (credentials refused
	// or the token endpoint failed). Nothing was sent.
	ErrAuth = errors.New("mpesa: authentication failed")
	// ErrBusy: the simulator's in-flight limit is reached and ctx ended
	// before a slot freed. Nothing was sent.
	ErrBusy = errors.New("mpesa: too many prompts in flight")
	// ErrClosed: the rail was closed.
	ErrClosed = errors.New("mpesa: closed")
)

const (
	maxAccountRef  = 12
	maxDescription = 13
)

var phoneRE = regexp.MustCompile(`^254\d{9}$`)

// prepared is a validated request with the fields Daraja receives.
type prepared struct {
	STKRequest
	shillings int64 // whole shillings
}

// prepare validates req and fills the defaults both rails share.
func prepare(req STKRequest) (prepared, error) {
	if req.InvoiceID == "" {
		return prepared{}, fmt.Errorf("%w: empty InvoiceID", ErrInvalidRequest)
	}
	if !phoneRE.MatchString(req.Phone) {
		return prepared{}, fmt.Errorf("%w: phone %s is not 254 followed by 9 digits", ErrInvalidRequest, clip(req.Phone))
	}
	cents, err := req.Amount.Cents()
	if err != nil || cents <= 0 {
		return prepared{}, fmt.Errorf("%w: amount %s must be positive", ErrInvalidRequest, req.Amount)
	}
	if cents%100 != 0 {
		return prepared{}, fmt.Errorf("%w: amount %s is not whole shillings", ErrInvalidRequest, req.Amount)
	}
	if req.AccountRef == "" {
		req.AccountRef = req.InvoiceID
	}
	if req.Description == "" {
		req.Description = "Payment"
	}
	req.AccountRef = cut(req.AccountRef, maxAccountRef)
	req.Description = cut(req.Description, maxDescription)
	return prepared{STKRequest: req, shillings: cents / 100}, nil
}

// cut keeps at most n runes of s.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// eat is East Africa Time, UTC+3 all year (no daylight saving), so a fixed
// zone needs no tz database.
var eat = time.FixedZone("EAT", 3*60*60)

// TimestampLayout is Daraja's Timestamp format (in EAT).
const TimestampLayout = "20060102150405"

// Timestamp returns t as Daraja's Timestamp: YYYYMMDDHHmmss in EAT.
func Timestamp(t time.Time) string { return t.In(eat).Format(TimestampLayout) }

// Password returns Daraja's STK password: base64(shortcode+passkey+timestamp).
func Password(shortCode, passkey, timestamp string) string {
	return base64.StdEncoding.EncodeToString([]byte(shortCode + passkey + timestamp))
}

// clip quotes at most 64 bytes of untrusted text for an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + "..."
}
