package api

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/storage"
	"paysvc/topics"
)

// amountMismatches counts M-Pesa success callbacks whose paid Amount differs from
// their open invoice's value: the engine holds such an invoice and credits nothing
// (docs/security.md), and an operator must look (ops/runbooks.md).
var amountMismatches = promauto.NewCounter(prometheus.CounterOpts{
	Name: "paysvc_mpesa_callback_amount_mismatch_total",
	Help: "M-Pesa STK success callbacks whose paid amount differs from the open invoice's value (held, nothing credited).",
})

// callbackInvoiceRE is the shape of an invoice id in a callback URL; anything else
// is not ours.
var callbackInvoiceRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// mpesaCallback receives Daraja's STK result. Daraja cannot authenticate, so the
// URL carries a secret token; the body is validated strictly and matched to an
// invoice: by the invoice id the prompt's callback URL ends with (so a prompt whose
// answer was lost, and whose CheckoutRequestID was therefore never recorded, still
// finds its invoice), else by its CheckoutRequestID. The outcome becomes the same
// command the simulator's would (its id derived from invoice and stage), so a
// repeated callback applies once. Daraja only needs to hear that the callback was
// received.
func (s *Server) mpesaCallback(c echo.Context) error {
	tok := s.cfg.DarajaCallbackToken
	if tok == "" || subtle.ConstantTimeCompare([]byte(c.Param("token")), []byte(tok)) != 1 {
		return notFound("Not found.")
	}
	named := c.Param("invoice")
	if named != "" && !callbackInvoiceRE.MatchString(named) {
		return notFound("Not found.")
	}
	raw, err := rawBody(c)
	if err != nil {
		return err
	}
	res, err := mpesa.ParseCallback(raw)
	if err != nil {
		return invalid("Body", "Not a valid M-Pesa STK callback.")
	}
	ctx := c.Request().Context()
	accepted := func() error { return c.JSON(http.StatusOK, map[string]any{"ResultCode": 0, "ResultDesc": "Accepted"}) }
	byRef, err := storage.InvoiceByCheckoutRequest(ctx, s.db, res.CheckoutRequestID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	known := err == nil
	var inv invoice.State
	switch {
	case named != "":
		inv, err = invoicestore.ForCallback(ctx, s.db, named)
		if errors.Is(err, storage.ErrNotFound) {
			s.log.Warn("M-Pesa callback for an unknown invoice", "invoice_id", named, "checkout_request_id", res.CheckoutRequestID)
			return accepted()
		}
		if err != nil {
			return err
		}
		// The URL and the body must agree: a CheckoutRequestID recorded for another
		// invoice, or another prompt recorded for this one, is not this prompt's result.
		if (known && byRef.InvoiceID != inv.InvoiceID) || (inv.CheckoutRequestID != "" && inv.CheckoutRequestID != res.CheckoutRequestID) {
			s.log.Warn("M-Pesa callback whose invoice and CheckoutRequestID disagree; ignored",
				"invoice_id", named, "checkout_request_id", res.CheckoutRequestID)
			return accepted()
		}
	case known:
		inv, err = invoicestore.Get(ctx, s.db, byRef.MerchantID, byRef.InvoiceID)
		if err != nil {
			return err
		}
	default:
		// Not recorded yet (the ACCEPTED command races the callback) or not ours: the
		// status query of the rails role finds the outcome later if it is ours.
		s.log.Warn("M-Pesa callback for an unknown CheckoutRequestID", "checkout_request_id", res.CheckoutRequestID)
		return accepted()
	}
	open := inv.State == invoice.StatePending || inv.State == invoice.StateProcessing
	if res.Success() && open && !inv.Held && !res.Amount.Equal(inv.Value) {
		amountMismatches.Inc()
		s.log.Error("M-Pesa callback paid amount differs from the invoice: the invoice is held, nothing is credited",
			"invoice_id", inv.InvoiceID, "merchant_id", inv.MerchantID, "value", inv.Value.String(),
			"paid", res.Amount.String(), "receipt", res.Receipt)
	}
	res.InvoiceID, res.MerchantID = inv.InvoiceID, inv.MerchantID
	value, err := rails.ResultRecord(res, rails.Origin{Environment: s.cfg.Environment})
	if err != nil {
		return err
	}
	if err := s.kafka.ProduceSync(ctx, &kgo.Record{Topic: s.ns.Topic(topics.CommandsTopic), Key: topics.CommandKey(inv.MerchantID), Value: value}).FirstErr(); err != nil {
		s.log.Error("produce M-Pesa callback outcome", "invoice_id", inv.InvoiceID, "err", err)
		return unavailable() // Daraja retries a callback that is not acknowledged
	}
	return accepted()
}
