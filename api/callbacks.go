package api

import (
	"crypto/subtle"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/storage"
	"paysvc/topics"
)

// mpesaCallback receives Daraja's STK result. Daraja cannot authenticate, so the
// URL carries a secret token; the body is validated strictly and matched to an
// invoice by its CheckoutRequestID. The outcome becomes the same command the
// simulator's would (its id derived from invoice and stage), so a repeated callback
// applies once. Daraja only needs to hear that the callback was received.
func (s *Server) mpesaCallback(c echo.Context) error {
	tok := s.cfg.DarajaCallbackToken
	if tok == "" || subtle.ConstantTimeCompare([]byte(c.Param("token")), []byte(tok)) != 1 {
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
	inv, err := storage.InvoiceByCheckoutRequest(ctx, s.db, res.CheckoutRequestID)
	if errors.Is(err, storage.ErrNotFound) {
		// Not recorded yet (the SENT command races the callback) or not ours: the
		// status query of the rails role finds the outcome later if it is ours.
		s.log.Warn("M-Pesa callback for an unknown CheckoutRequestID", "checkout_request_id", res.CheckoutRequestID)
		return c.JSON(http.StatusOK, map[string]any{"ResultCode": 0, "ResultDesc": "Accepted"})
	}
	if err != nil {
		return err
	}
	res.InvoiceID, res.MerchantID = inv.InvoiceID, inv.MerchantID
	cmd, err := rails.ResultCommand(res)
	if err != nil {
		return err
	}
	value, err := topics.EncodeCommand(cmd)
	if err != nil {
		return err
	}
	if err := s.kafka.ProduceSync(ctx, &kgo.Record{Topic: topics.CommandsTopic, Key: topics.CommandKey(inv.MerchantID), Value: value}).FirstErr(); err != nil {
		s.log.Error("produce M-Pesa callback outcome", "invoice_id", inv.InvoiceID, "err", err)
		return unavailable() // Daraja retries a callback that is not acknowledged
	}
	return c.JSON(http.StatusOK, map[string]any{"ResultCode": 0, "ResultDesc": "Accepted"})
}
