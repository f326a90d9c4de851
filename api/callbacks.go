package api

import (
	"context"
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
	"paysvc/api/edge"
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
		return edge.NotFound("Not found.")
	}
	named := c.Param("invoice")
	if named != "" && !callbackInvoiceRE.MatchString(named) {
		return edge.NotFound("Not found.")
	}
	raw, err := edge.RawBody(c)
	if err != nil {
		return err
	}
	res, err := mpesa.ParseCallback(raw)
	if err != nil {
		return edge.Invalid("Body", "Not a valid M-Pesa STK callback.")
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
	// The path token says only that the caller knows the token. The outcome applies
	// once it is proven to be Daraja's answer to our prompt: the prompt's own MAC in
	// the URL, or else Daraja's status query agreeing (docs/security.md, "STK
	// callbacks prove themselves").
	if proven, err := s.provenSTK(ctx, named, c.Param("mac"), inv, res); err != nil {
		return edge.Unavailable() // the query could not be asked: Daraja retries, nothing applied
	} else if !proven {
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
		return edge.Unavailable() // Daraja retries a callback that is not acknowledged
	}
	return accepted()
}

// STKQuerier asks Daraja for a prompt's outcome (mpesa.Daraja.Query).
type STKQuerier interface {
	Query(ctx context.Context, checkoutRequestID string) (mpesa.Result, bool, error)
}

// stkCallbackProofs counts STK callbacks by how their outcome was proven.
var stkCallbackProofs = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_mpesa_callback_proofs_total",
	Help: "M-Pesa STK callbacks with a valid path token, by proof: mac (the prompt's MAC), query_agreed (no valid MAC, Daraja's status query agreed), " +
		"refused (no valid MAC and the query did not agree: nothing applied), query_failed (the query could not be asked: answered 503, nothing applied).",
}, []string{"proof"})

func init() {
	for _, p := range []string{"mac", "query_agreed", "refused", "query_failed"} {
		stkCallbackProofs.WithLabelValues(p)
	}
}

// provenSTK reports whether a callback's outcome may apply to inv. The prompt's
// callback URL carries a MAC of its invoice (mpesa.CallbackMAC) that only the
// rails role, holding the service secret, can make: with it, the callback is the
// answer to the URL we gave Daraja. Without it (a prompt sent before MACs, a
// callback to the bare token URL, or a forgery by someone who learned the token),
// Daraja's STK query decides: the outcome applies only when Daraja reports the
// same final outcome (both a success or both a failure) for the callback's
// CheckoutRequestID, which the caller already checked is not another invoice's.
// A pending, refused or disagreeing answer applies nothing; a query that could not
// be asked is an error (Daraja retries the callback). Fail closed: no querier,
// no proof.
func (s *Server) provenSTK(ctx context.Context, named, mac string, inv invoice.State, res mpesa.Result) (bool, error) {
	if named != "" && mac != "" {
		key, err := s.stkMACKey(ctx)
		if err != nil {
			return false, err
		}
		if mpesa.ValidCallbackMAC(key, inv.InvoiceID, mac) {
			stkCallbackProofs.WithLabelValues("mac").Inc()
			return true, nil
		}
	}
	if s.stkQuery == nil {
		stkCallbackProofs.WithLabelValues("refused").Inc()
		s.log.Warn("M-Pesa callback without a valid MAC and no status query configured: ignored",
			"invoice_id", inv.InvoiceID, "checkout_request_id", res.CheckoutRequestID)
		return false, nil
	}
	q, pending, err := s.stkQuery.Query(ctx, res.CheckoutRequestID)
	switch {
	case err != nil && !errors.Is(err, mpesa.ErrRejected) && !errors.Is(err, mpesa.ErrInvalidRequest):
		stkCallbackProofs.WithLabelValues("query_failed").Inc()
		s.log.Warn("M-Pesa callback without a valid MAC: the status query failed; nothing applied",
			"invoice_id", inv.InvoiceID, "checkout_request_id", res.CheckoutRequestID, "err", err)
		return false, err
	case err == nil && !pending && q.Stage == mpesa.StageFinal && q.Success() == res.Success():
		stkCallbackProofs.WithLabelValues("query_agreed").Inc()
		return true, nil
	}
	stkCallbackProofs.WithLabelValues("refused").Inc()
	s.log.Warn("M-Pesa callback without a valid MAC that Daraja's status query does not confirm: ignored",
		"invoice_id", inv.InvoiceID, "checkout_request_id", res.CheckoutRequestID, "callback_code", res.Code,
		"query_pending", pending, "query_code", q.Code, "err", err)
	return false, nil
}

// stkMACKey is the key of the prompts' callback MACs, read once from the database.
func (s *Server) stkMACKey(ctx context.Context) ([]byte, error) {
	k := &s.stkKey
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key == nil {
		key, err := storage.ServiceSecret(ctx, s.db, mpesa.CallbackMACSecret)
		if err != nil {
			return nil, err
		}
		k.key = key
	}
	return k.key, nil
}
