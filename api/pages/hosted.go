package pages

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Config is the hosted pages' part of the service configuration.
type Config struct {
	Environment string // sandbox or live: the sandbox banner, test cards, http redirects
	// ChallengeCode completes the sandbox card that asks for a challenge; the
	// setup page tells the customer (sandbox only).
	ChallengeCode string
}

// Deps are what the pages are given by the server that mounts them. Each page's
// resource comes already opened by the capability its path names, with the
// merchant the server admitted for it (a 404 otherwise): the pages never decide
// whom a capability serves.
type Deps struct {
	DB  *sqlx.DB // reads only: a session's pay request reason, a link's usage, a plan
	Log *slog.Logger
	// Checkout, Link, Plan and Setup are the checkout session, payment link, plan
	// and subscription the request's path opens.
	Checkout func(c echo.Context) (storage.Checkout, storage.Merchant, error)
	Link     func(c echo.Context) (storage.PaymentLink, storage.Merchant, error)
	Plan     func(c echo.Context) (storage.Plan, storage.Merchant, error)
	Setup    func(c echo.Context) (subscription.State, storage.Merchant, error)
	// Admitted is the merchant a capability was admitted for on this request, if any.
	Admitted func(c echo.Context) (storage.Merchant, bool)
	// Sign makes the signature the checkout page pays and polls a session with.
	Sign func(ctx context.Context, merchantID, checkoutID string) (string, error)
	// MaskedPayer is a session's returning payer's phone, masked ("" for none).
	MaskedPayer func(ctx context.Context, co storage.Checkout) (string, error)
	// LinkRefusal says why a link takes no payment now, nil when it does.
	LinkRefusal func(l storage.PaymentLink, u storage.LinkUsage) *edge.Error
	// LinkURL is a payment link's address, the content of its QR code.
	LinkURL func(id string) string
}

// Pages are the hosted customer pages' handlers, mounted by the server's route
// table, each route declaring the capability its path names.
type Pages struct {
	cfg Config
	d   Deps
}

// New builds the pages.
func New(cfg Config, d Deps) *Pages { return &Pages{cfg: cfg, d: d} }

func (p *Pages) sandbox() bool { return p.cfg.Environment == "sandbox" }

// render writes a hosted page.
func (p *Pages) render(c echo.Context, name string, pg Page) error {
	return p.renderStatus(c, http.StatusOK, name, pg)
}

// renderStatus is render with the status a page that refuses (a closed link, an
// error page) answers with.
func (p *Pages) renderStatus(c echo.Context, status int, name string, pg Page) error {
	pg.Sandbox = p.sandbox()
	return Render(c, status, name, pg)
}

// continueLink is where a page's "Continue" link sends the customer after the
// outcome: the merchant's redirect URL and the host the link names, both "" for
// none (continue in layout.html).
type continueLink struct {
	RedirectURL  string
	RedirectHost string
}

// continueTo is the "Continue" link to the redirect URL raw ("" when unsafe: Redirect).
func (p *Pages) continueTo(raw string) continueLink {
	u, host := Redirect(raw, p.sandbox())
	return continueLink{RedirectURL: u, RedirectHost: host}
}

// ErrorPage renders e as a page when the request is a browser's on a customer
// page (docs/api-decisions.md, "Hosted pages"); false when it is not (the caller
// answers JSON) or the page could not be rendered.
//
// The customer's addresses (a checkout, a payment link, a plan's subscribe page,
// a subscription's setup page, and anything under them) are opened by people in
// a browser, who must not be shown the API's JSON error when the address is
// unknown, the link used up or the service at fault. A request under one of these
// paths whose Accept prefers HTML gets a page in the hosted pages' layout saying
// what happened and what to do, with a status that says the same (404, 410, 409,
// 429, 5xx; the words are problems.go). Every other caller (the pages' own
// script, which asks for JSON; an API client; a request without Accept) keeps the
// JSON error shape unchanged.
func (p *Pages) ErrorPage(c echo.Context, e *edge.Error) bool {
	r := c.Request()
	kind := CustomerPageKind(r.URL.Path)
	if kind == "" || !PrefersHTML(r.Header.Get("Accept")) {
		return false
	}
	merchant := ""
	if m, ok := p.d.Admitted(c); ok {
		merchant = m.Name
	}
	status, pr := ProblemOf(kind, e, merchant)
	pr.RequestID = edge.RequestID(c)
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if err := p.renderStatus(c, status, "problem", Page{Title: pr.Heading, Merchant: merchant, Static: true, Data: pr}); err != nil {
		p.d.Log.Warn("render customer error page", "request_id", edge.RequestID(c), "err", err)
		return false
	}
	return true
}
