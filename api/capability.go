package api

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription"
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

// resource is a capability with what it opens: load reads the resource the path
// names (storage.ErrNotFound, or the capability's 404, when it names nothing).
// The hosted pages (package api/pages) and the JSON routes under their paths
// (a link's session, a plan's subscribe POST) get their resource from open.
type resource[T any] struct {
	*capability
	load     func(s *Server, c echo.Context) (T, error)
	merchant func(T) string
}

// newResource declares a capability by the resource it opens: bindCapability
// finds the capability's owner with the same load the handler's open reads by.
func newResource[T any](name, missing string, load func(*Server, echo.Context) (T, error), merchant func(T) string) resource[T] {
	cp := &capability{name: name, missing: missing, owner: func(s *Server, c echo.Context) (string, error) {
		v, err := load(s, c)
		return merchant(v), err
	}}
	return resource[T]{capability: cp, load: load, merchant: merchant}
}

var (
	checkouts = newResource("checkout id", "Checkout session not found.",
		func(s *Server, c echo.Context) (storage.Checkout, error) {
			return storage.CheckoutByID(c.Request().Context(), s.db, c.Param("checkout_id"))
		}, func(co storage.Checkout) string { return co.MerchantID })
	paymentLinks = newResource("payment link id", "Payment link not found.",
		func(s *Server, c echo.Context) (storage.PaymentLink, error) {
			return storage.PaymentLinkByID(c.Request().Context(), s.db, c.Param("link_id"))
		}, func(l storage.PaymentLink) string { return l.MerchantID })
	plans = newResource("plan id (plan_url)", "Plan not found.",
		func(s *Server, c echo.Context) (storage.Plan, error) {
			id := c.Param("plan_id")
			if !planIDPattern.MatchString(id) {
				return storage.Plan{}, storage.ErrNotFound
			}
			return storage.PlanByID(c.Request().Context(), s.db, id)
		}, func(p storage.Plan) string { return p.MerchantID })
	// setupSubscription answers the capability's own 404 for a token that opens nothing.
	setups = newResource("subscription setup token (setup_url)", "Subscription setup not found.",
		(*Server).setupSubscription, func(st subscription.State) string { return st.MerchantID })

	capCheckout, capPaymentLink, capPlan, capSetupToken = checkouts.capability, paymentLinks.capability, plans.capability,
		setups.capability
)

// open is the resource the request's path names, with the merchant bindCapability
// admitted for it: the capability's 404 when it names nothing or was not admitted.
func (r resource[T]) open(s *Server, c echo.Context) (T, storage.Merchant, error) {
	v, err := r.load(s, c)
	if errors.Is(err, storage.ErrNotFound) {
		return v, storage.Merchant{}, edge.NotFound(r.missing)
	}
	if err != nil {
		return v, storage.Merchant{}, err
	}
	m, err := capabilityOwner(c, r.merchant(v), r.capability)
	return v, m, err
}

// opener is open for s, as package api/pages is given it.
func (r resource[T]) opener(s *Server) func(echo.Context) (T, storage.Merchant, error) {
	return func(c echo.Context) (T, storage.Merchant, error) { return r.open(s, c) }
}

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
	m, ok := admittedMerchant(c)
	if !ok || merchantID == "" || m.MerchantID != merchantID {
		return storage.Merchant{}, edge.NotFound(cp.missing)
	}
	return m, nil
}

// admittedMerchant is the merchant bindCapability admitted for this request, if any.
func admittedMerchant(c echo.Context) (storage.Merchant, bool) {
	m, ok := c.Get(ctxCapabilityMerchant).(storage.Merchant)
	return m, ok
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
