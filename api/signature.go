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

	"paysvc/actors/aggregates/invoice"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// signatureTTL is how long a client-side status token stays valid.
const signatureTTL = 24 * time.Hour

// signer makes and checks the `signature` tokens that let a browser poll the
// status of one invoice, or pay one checkout session, without a secret key: an
// HMAC-SHA256 over the merchant, the invoice or checkout, the environment of the
// server that signed it and an expiry, with a key the service keeps in its
// database (shared by every instance).
//
// The key is shared by sandbox and live servers on one database, so the claims
// name the environment and a server honours only its own (verify): a live
// checkout's signature taken to a sandbox server would otherwise be paid there by
// the simulator. A token without an environment (signed before the claim existed)
// is refused: fail closed; the hosted page gets a fresh one when it is reloaded.
type signer struct {
	db  *sqlx.DB
	env string // sandbox or live: what this server signs and accepts
	mu  sync.Mutex
	key []byte
}

type signatureClaims struct {
	Merchant    string `json:"m"`
	Invoice     string `json:"i"`
	Checkout    string `json:"c,omitempty"`
	Environment string `json:"env"`
	Expires     int64  `json:"e"`
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

// sign makes a token of c, in this server's environment.
func (s *signer) sign(ctx context.Context, c signatureClaims) (string, error) {
	key, err := s.secret(ctx)
	if err != nil {
		return "", err
	}
	c.Environment = s.env
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
	if c.Environment == "" || c.Environment != s.env {
		return c, errBadSignature
	}
	return c, nil
}

// verifySignature is the one check of a signature presented to this server: a
// valid, unexpired token of this environment (signer.verify) whose merchant this
// server serves (capabilityMerchant: of this environment and enabled). Anything
// else is errBadSignature, the answer of a forged token, so a caller cannot tell
// a disabled or other-environment merchant from a bad signature.
func (s *Server) verifySignature(ctx context.Context, token string) (signatureClaims, error) {
	claims, err := s.sig.verify(ctx, token, time.Now())
	if err != nil {
		return claims, err
	}
	_, ok, err := s.capabilityMerchant(ctx, claims.Merchant)
	if err != nil {
		return claims, err
	}
	if !ok {
		return claims, errBadSignature
	}
	return claims, nil
}

// signInvoice makes the status token of an invoice.
func (s *Server) signInvoice(ctx context.Context, inv invoice.State) (string, error) {
	return s.sig.sign(ctx, signatureClaims{Merchant: inv.MerchantID, Invoice: inv.InvoiceID,
		Expires: time.Now().Add(signatureTTL).Unix()})
}

// openInvoice issues an invoice-opening command and returns the opened invoice with
// its status token.
func (s *Server) openInvoice(c echo.Context, cmd topics.InvoiceSTKPush) (inv invoice.State, sig string, err error) {
	// A payment the invoice kind would refuse to price changes nothing: it is
	// refused here, with the kind's own function and words, before a payment
	// link's use is held or the payer saved. The price the invoice keeps is still
	// the kind's, computed when it applies the command.
	if err := s.priceable(cmd); err != nil {
		return inv, "", err
	}
	// The invoice id is drawn here, again for each draw the engine finds taken.
	err = s.freshIDs(c, func() error {
		cmd.InvoiceID = s.newID()
		var err error
		inv, sig, err = s.openInvoiceOnce(c, cmd)
		return err
	})
	return inv, sig, err
}

// priceable is invoice.Quote's refusal of cmd, as the 400 the kind's refusal
// would give.
func (s *Server) priceable(cmd topics.InvoiceSTKPush) error {
	_, err := invoice.Quote(s.cfg.Fees, s.cfg.Rates, invoice.MethodOf(cmd.Provider), cmd.Tariff, cmd.Currency, cmd.Amount)
	var pe *invoice.PriceError
	if errors.As(err, &pe) {
		return edge.Invalid(pe.Attr, pe.Detail)
	}
	return nil // any other failure is the kind's to report
}

func (s *Server) openInvoiceOnce(c echo.Context, cmd topics.InvoiceSTKPush) (invoice.State, string, error) {
	// A payment through a payment link holds one of its uses first (paymentlinks.go).
	use, err := s.reserveLinkUse(c, cmd)
	if err != nil {
		return invoice.State{}, "", err
	}
	if cmd.Email != "" {
		id, err := s.linkPayer(c, cmd)
		if err != nil {
			use.refused() // nothing was produced
			return invoice.State{}, "", err
		}
		cmd.Customer.CustomerID = id
	}
	r, err := s.issue(c, topics.CmdInvoiceSTKPush, cmd)
	if err != nil {
		// Outcome unknown: the use stays held (Config.LinkHolds.Send).
		return invoice.State{}, "", err
	}
	if r.Error != nil {
		use.refused()
		return invoice.State{}, "", refusal(r.Error)
	}
	var inv invoice.State
	if err := json.Unmarshal(r.Result, &inv); err != nil {
		return inv, "", err
	}
	use.settled(inv)
	sig, err := s.signInvoice(c.Request().Context(), inv)
	return inv, sig, err
}
