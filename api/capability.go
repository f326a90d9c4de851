package api

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription/subscriptionstore"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Capabilities (docs/security.md, "Capabilities"): a random id or token that opens
// one merchant's resource to whoever holds it, with no key. Sandbox and live servers
// may share one database, so a capability found in the database is not yet one this
// server may honour: its merchant must be of this server's environment and enabled.
// A sandbox server would otherwise take test cards and simulator payments for a
// live merchant and credit real wallets with test money.
//
// Each open route whose path names a capability declares it in the route table
// (access.capability); handle puts bindCapability in front of the handler, so no
// such route can reach its handler for a merchant it must not serve. Signatures
// (checkout and invoice status tokens) are checked by verifySignature, the one
// place they are verified.

// capability is what an open route's path parameter opens.
type capability struct {
	// name says what the capability is, for docs and tests.
	name string
	// owner is the merchant the path's capability belongs to; storage.ErrNotFound
	// when it names nothing.
	owner func(s *Server, c echo.Context) (string, error)
	// missing is the 404's detail, the same for an unknown capability and for one
	// this server must not honour, so neither answer tells them apart.
	missing string
}

const ctxCapabilityMerchant = "paysvc.capability_merchant"

var (
	capCheckout = &capability{name: "checkout id", missing: "Checkout session not found.",
		owner: func(s *Server, c echo.Context) (string, error) {
			co, err := storage.CheckoutByID(c.Request().Context(), s.db, c.Param("checkout_id"))
			return co.MerchantID, err
		}}
	capPaymentLink = &capability{name: "payment link id", missing: "Payment link not found.",
		owner: func(s *Server, c echo.Context) (string, error) {
			l, err := storage.PaymentLinkByID(c.Request().Context(), s.db, c.Param("link_id"))
			return l.MerchantID, err
		}}
	capPlan = &capability{name: "plan id (plan_url)", missing: "Plan not found.",
		owner: func(s *Server, c echo.Context) (string, error) {
			id := c.Param("plan_id")
			if !planIDPattern.MatchString(id) {
				return "", storage.ErrNotFound
			}
			p, err := storage.PlanByID(c.Request().Context(), s.db, id)
			return p.MerchantID, err
		}}
	capSetupToken = &capability{name: "subscription setup token (setup_url)", missing: "Subscription setup not found.",
		owner: func(s *Server, c echo.Context) (string, error) {
			tok := c.Param("token")
			if !setupTokenPattern.MatchString(tok) {
				return "", storage.ErrNotFound
			}
			st, err := subscriptionstore.BySetupToken(c.Request().Context(), s.db, tokenHash(tok))
			return st.MerchantID, err
		}}
)

// bindCapability refuses, before the handler runs, a capability that names
// nothing, or whose merchant this server must not serve (capabilityMerchant): the
// same 404 for both, and nothing is read further or written. The merchant is kept
// on the request for the handler (capabilityOwner).
func (s *Server) bindCapability(cp *capability) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := c.Request().Context()
			id, err := cp.owner(s, c)
			if errors.Is(err, storage.ErrNotFound) {
				return edge.NotFound(cp.missing)
			}
			if err != nil {
				return err
			}
			m, ok, err := s.capabilityMerchant(ctx, id)
			if err != nil {
				return err
			}
			if !ok {
				return edge.NotFound(cp.missing)
			}
			c.Set(ctxCapabilityMerchant, m)
			return next(c)
		}
	}
}

// capabilityOwner is the merchant bindCapability admitted for this request, when it
// is merchantID's: a handler reached without it (a route that forgot to declare its
// capability) serves nothing, with the capability's 404.
func capabilityOwner(c echo.Context, merchantID string, cp *capability) (storage.Merchant, error) {
	m, ok := c.Get(ctxCapabilityMerchant).(storage.Merchant)
	if !ok || merchantID == "" || m.MerchantID != merchantID {
		return storage.Merchant{}, edge.NotFound(cp.missing)
	}
	return m, nil
}

// capabilityMerchant is the merchant a capability belongs to, and whether this
// server may honour it: the merchant exists, is of this server's environment and
// is enabled. Anything else (unknown, other environment, disabled) is false, never
// an error the caller could tell apart; only a database fault is an error.
func (s *Server) capabilityMerchant(ctx context.Context, merchantID string) (storage.Merchant, bool, error) {
	if merchantID == "" {
		return storage.Merchant{}, false, nil
	}
	m, err := storage.GetMerchant(ctx, s.db, merchantID)
	if errors.Is(err, storage.ErrNotFound) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	return m, m.Enabled && m.Environment == s.cfg.Environment, nil
}
