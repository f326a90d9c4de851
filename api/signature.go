package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/actors/invoice"
	"paysvc/storage"
	"paysvc/topics"
)

// signatureTTL is how long a client-side status token stays valid.
const signatureTTL = 24 * time.Hour

// signer makes and checks the `signature` tokens that let a browser poll the
// status of one invoice without a secret key: an HMAC-SHA256 over the merchant,
// the invoice, the checkout (if any) and an expiry, with a key the service keeps
// in its database (shared by every instance).
type signer struct {
	db  *sqlx.DB
	mu  sync.Mutex
	key []byte
}

type signatureClaims struct {
	Merchant string `json:"m"`
	Invoice  string `json:"i"`
	Checkout string `json:"c,omitempty"`
	Expires  int64  `json:"e"`
}

var errBadSignature = errors.New("invalid or expired signature")

func (s *signer) secret(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil {
		k, err := storage.ServiceSecret(ctx, s.db, "status_signature")
		if err != nil {
			return nil, err
		}
		s.key = k
	}
	return s.key, nil
}

func (s *signer) sign(ctx context.Context, c signatureClaims) (string, error) {
	key, err := s.secret(ctx)
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	body := "v1." + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// verify returns the claims of a valid, unexpired token.
func (s *signer) verify(ctx context.Context, token string, now time.Time) (signatureClaims, error) {
	var c signatureClaims
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != "v1" || len(token) > 1024 {
		return c, errBadSignature
	}
	key, err := s.secret(ctx)
	if err != nil {
		return c, err
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return c, errBadSignature
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return c, errBadSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &c) != nil || c.Merchant == "" || (c.Invoice == "" && c.Checkout == "") {
		return c, errBadSignature
	}
	if now.Unix() > c.Expires {
		return c, errBadSignature
	}
	return c, nil
}

// signInvoice makes the status token of an invoice.
func (s *Server) signInvoice(ctx context.Context, inv invoice.State) (string, error) {
	return s.sig.sign(ctx, signatureClaims{Merchant: inv.MerchantID, Invoice: inv.InvoiceID,
		Expires: time.Now().Add(signatureTTL).Unix()})
}

// openInvoice issues an invoice-opening command and returns the opened invoice with
// its status token.
func (s *Server) openInvoice(c echo.Context, cmd topics.InvoiceSTKPush) (invoice.State, string, error) {
	if cmd.Email != "" {
		id, err := s.linkPayer(c, cmd)
		if err != nil {
			return invoice.State{}, "", err
		}
		cmd.Customer.CustomerID = id
	}
	r, err := s.issue(c, topics.CmdInvoiceSTKPush, cmd)
	if err != nil {
		return invoice.State{}, "", err
	}
	if r.Error != nil {
		return invoice.State{}, "", refusal(r.Error)
	}
	var inv invoice.State
	if err := json.Unmarshal(r.Result, &inv); err != nil {
		return inv, "", err
	}
	sig, err := s.signInvoice(c.Request().Context(), inv)
	return inv, sig, err
}
