package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
)

// idempotencyLock is how long a request holds its key; a holder that died lets a
// retry take the key over after this.
const idempotencyLock = 30 * time.Second

// idempotent gives a mutating POST Stripe's Idempotency-Key semantics, per merchant
// and principal kind: the same key and body get the stored response again
// (Idempotent-Replayed: true); the same key with another method, path or body gets
// 422; a key still in flight gets 409. The command id is derived from the key, so
// even a retry after an unknown outcome takes effect at most once (the engine
// deduplicates command ids).
//
// Both the record and the command id are scoped so that a key cannot reach another
// operation: the record by principal kind (a public key is published in web pages,
// so its holders must not be able to pre-claim the keys of the merchant's server),
// and the command id also by method, route pattern, path values and body hash (once
// the record has expired, the same key on another endpoint or with another body is a
// new operation, never the old one's reply).
//
// A route whose body carries card data (cardBody) is fingerprinted without it
// (cardFingerprintBody): the record must not keep a hash of the card number or the
// security code.
func (s *Server) idempotent(cardBody bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return s.idempotentHandler(next, cardBody)
	}
}

func (s *Server) idempotentHandler(next echo.HandlerFunc, cardBody bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get("Idempotency-Key")
		if key == "" {
			return next(c)
		}
		if len(key) > 255 {
			return edge.Invalid("Idempotency-Key", "Idempotency-Key must be at most 255 characters.")
		}
		if strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) || !utf8.ValidString(key) {
			// Control characters never occur in a sane key, and "\n" separates the
			// scope from the key in the stored record.
			return edge.Invalid("Idempotency-Key", "Idempotency-Key must be printable text.")
		}
		p := edge.PrincipalOf(c)
		raw, err := edge.RawBody(c)
		if err != nil {
			return err
		}
		if cardBody {
			raw = cardFingerprintBody(raw)
		}
		h := sha256.New()
		h.Write([]byte(c.Request().Method + " " + c.Request().URL.Path + "\n"))
		h.Write(bytes.TrimSpace(raw))
		hash := h.Sum(nil)
		ctx := c.Request().Context()
		recordKey, commandID := p.Kind+"\n"+key, idempotentCommandID(c, p, key, hash)
		// Records written before keys were scoped (kept at most IdempotencyTTL after
		// the deploy) keep their own command id, so a retry that spans the deploy is
		// still applied once. Remove one TTL after every instance runs this code.
		legacy, err := storage.IdempotencyKeyHeld(ctx, s.idemDB, p.MerchantID, key, s.cfg.IdempotencyTTL)
		if err != nil {
			s.log.Error("idempotency lookup", "request_id", edge.RequestID(c), "err", err)
			return edge.Unavailable()
		}
		if legacy {
			recordKey, commandID = key, ids.DeriveUUID("idem", p.MerchantID, key)
		}
		outcome, rec, err := storage.BeginIdempotent(ctx, s.idemDB, p.MerchantID, recordKey, hash, commandID, idempotencyLock, s.cfg.IdempotencyTTL)
		if err != nil {
			s.log.Error("idempotency begin", "request_id", edge.RequestID(c), "err", err)
			return edge.Unavailable()
		}
		switch outcome {
		case storage.IdemMismatch:
			return errKeyReused
		case storage.IdemInFlight:
			return &edge.Error{Status: http.StatusConflict, Type: "client_error", Code: "idempotency_key_in_use",
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
			if err := storage.CompleteIdempotent(bg, s.idemDB, p.MerchantID, recordKey, status, capture.buf.Bytes()); err != nil {
				s.log.Error("idempotency complete", "request_id", edge.RequestID(c), "err", err)
			}
		} else if err := storage.ReleaseIdempotent(bg, s.idemDB, p.MerchantID, recordKey); err != nil {
			s.log.Error("idempotency release", "request_id", edge.RequestID(c), "err", err)
		}
		return nil
	}
}

// cardFields are the body fields of a card route that no record may keep in any
// form, matched without regard to case: the security code (PCI DSS forbids keeping
// it after authorisation, even hashed), the expiry, and the card number, of which
// only the last four digits are kept, as the invoice keeps them.
var cardFields = map[string]bool{"cvv": true, "cvc": true, "cvv2": true, "expiry": true, "card_number": true}

// cardFingerprintBody is what a card route's Idempotency-Key record fingerprints
// instead of the body: the body's object without cardFields, plus the card
// number's last four digits, re-encoded with sorted keys. An unkeyed hash of the
// whole body would let anyone who reads the table recover the CVV (10,000
// candidates) and check guesses of the number; a keyed hash would only move the
// problem to its key, which would live in the same database. What is left apart
// still tells two different requests apart: amount, currency, references, and the
// card's last four digits. A body that is not a JSON object is fingerprinted as
// one constant: the handler refuses it (400) whatever it holds.
func cardFingerprintBody(raw []byte) []byte {
	b, err := edge.ParseBody(raw)
	if err != nil {
		return []byte("card route: unparsable body")
	}
	last4 := ""
	for k, v := range b {
		if !cardFields[strings.ToLower(k)] {
			continue
		}
		var pan string
		if k == "card_number" && json.Unmarshal(v, &pan) == nil {
			if pan = strings.ReplaceAll(pan, " ", ""); len(pan) >= 4 {
				last4 = pan[len(pan)-4:]
			}
		}
		delete(b, k)
	}
	out, err := json.Marshal(map[string]any{"body": b, "card_last4": last4})
	if err != nil {
		return []byte("card route: unencodable body")
	}
	return out
}

// idempotentCommandID derives a keyed request's command id from everything that
// makes it one operation: who (merchant and principal kind), what (method, route
// pattern, path values), the key, and the request's hash (method, path and edge.Body).
// Two requests share an id only if they are the same request with the same key.
func idempotentCommandID(c echo.Context, p *edge.Principal, key string, hash []byte) string {
	return ids.DeriveUUID("idem/v2", p.MerchantID, p.Kind, c.Request().Method, c.Path(),
		strings.Join(c.ParamValues(), "/"), key, hex.EncodeToString(hash))
}

// The engine refuses a command id already applied as another type of command with
// this code (actors/engine/reused.go); it is the same client mistake as above.
func init() { replyStatus["idempotency_key_reused"] = http.StatusUnprocessableEntity }

var errKeyReused = &edge.Error{Status: http.StatusUnprocessableEntity, Type: "client_error", Code: "idempotency_key_reused",
	Detail: "This Idempotency-Key was already used with a different request."}

// captureWriter keeps a copy of the response body for the idempotency record.
type captureWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}
