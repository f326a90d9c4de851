package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/ids"
	"paysvc/storage"
)

// idempotencyLock is how long a request holds its key; a holder that died lets a
// retry take the key over after this.
const idempotencyLock = 30 * time.Second

// idempotent gives a mutating POST Stripe's Idempotency-Key semantics, per merchant:
// the same key and body get the stored response again (Idempotent-Replayed: true);
// the same key with another body gets 422; a key still in flight gets 409. The
// command id is derived from the key, so even a retry after an unknown outcome
// takes effect at most once (the engine deduplicates command ids).
func (s *Server) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get("Idempotency-Key")
		if key == "" {
			return next(c)
		}
		if len(key) > 255 {
			return invalid("Idempotency-Key", "Idempotency-Key must be at most 255 characters.")
		}
		if !storableText(key) {
			// Stored as text: PostgreSQL would refuse it, and the refusal would read as an outage.
			return invalid("Idempotency-Key", "Idempotency-Key must be valid UTF-8 text without NUL characters.")
		}
		p := principal(c)
		raw, err := rawBody(c)
		if err != nil {
			return err
		}
		h := sha256.New()
		h.Write([]byte(c.Request().Method + " " + c.Request().URL.Path + "\n"))
		h.Write(bytes.TrimSpace(raw))
		hash := h.Sum(nil)
		commandID := ids.DeriveUUID("idem", p.MerchantID, key)
		ctx := c.Request().Context()
		outcome, rec, err := storage.BeginIdempotent(ctx, s.idemDB, p.MerchantID, key, hash, commandID, idempotencyLock, s.cfg.IdempotencyTTL)
		if err != nil {
			s.log.Error("idempotency begin", "request_id", requestID(c), "err", err)
			return unavailable()
		}
		switch outcome {
		case storage.IdemMismatch:
			return &Error{Status: http.StatusUnprocessableEntity, Type: "client_error", Code: "idempotency_key_reused",
				Detail: "This Idempotency-Key was already used with a different request."}
		case storage.IdemInFlight:
			return &Error{Status: http.StatusConflict, Type: "client_error", Code: "idempotency_key_in_use",
				Detail: "A request with this Idempotency-Key is still being processed.", RetryAfter: 1}
		case storage.IdemReplay:
			idempotentReplays.Inc()
			c.Response().Header().Set("Idempotent-Replayed", "true")
			return c.Blob(*rec.ResponseStatus, echo.MIMEApplicationJSON, rec.ResponseBody) // as c.JSON sent it first
		}
		c.Set(ctxCommandID, rec.CommandID)
		capture := &captureWriter{ResponseWriter: c.Response().Writer}
		c.Response().Writer = capture
		err = next(c)
		if err != nil {
			s.handleError(err, c) // render now so the stored body is the one sent
		}
		// Store what the command decided (2xx and 4xx); a 5xx is an unknown outcome,
		// so the key is released for a retry instead.
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// 499 (the client went away while waiting) is an unknown outcome too.
		if status := c.Response().Status; status < 500 && status != 499 {
			if err := storage.CompleteIdempotent(bg, s.idemDB, p.MerchantID, key, status, capture.buf.Bytes()); err != nil {
				s.log.Error("idempotency complete", "request_id", requestID(c), "err", err)
			}
		} else if err := storage.ReleaseIdempotent(bg, s.idemDB, p.MerchantID, key); err != nil {
			s.log.Error("idempotency release", "request_id", requestID(c), "err", err)
		}
		return nil
	}
}

// captureWriter keeps a copy of the response body for the idempotency record.
type captureWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func unavailable() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
		Detail: "The service is temporarily unavailable; retry with the same Idempotency-Key.", RetryAfter: 1}
}
