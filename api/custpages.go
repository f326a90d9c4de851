package api

import (
	"strconv"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
	"paysvc/api/pages"
	"paysvc/storage"
)

// Customer-facing errors are pages (docs/api-decisions.md, "Hosted pages"). The
// customer's addresses (a checkout, a payment link, a plan's subscribe page, a
// subscription's setup page, and anything under them) are opened by people in a
// browser, who must not be shown the API's JSON error when the address is unknown,
// the link used up or the service at fault. handleError asks customerErrorPage
// first: a request under one of these paths whose Accept prefers HTML gets a page
// in the hosted pages' layout saying what happened and what to do, with a status
// that says the same (404, 410, 409, 429, 5xx; the words are api/pages'
// problems.go). Every other caller (the pages' own script, which asks for JSON; an
// API client; a request without Accept) keeps the JSON error shape unchanged.

// customerErrorPage renders e as a page when the request is a browser's on a
// customer page; false when it is not (the caller answers JSON) or the page could
// not be rendered.
func (s *Server) customerErrorPage(c echo.Context, e *edge.Error) bool {
	r := c.Request()
	kind := pages.CustomerPageKind(r.URL.Path)
	if kind == "" || !pages.PrefersHTML(r.Header.Get("Accept")) {
		return false
	}
	merchant := ""
	if m, ok := c.Get(ctxCapabilityMerchant).(storage.Merchant); ok {
		merchant = m.Name
	}
	status, p := pages.ProblemOf(kind, e, merchant)
	p.RequestID = edge.RequestID(c)
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if err := s.renderPageStatus(c, status, "problem", pages.Page{Title: p.Heading, Merchant: merchant, Static: true, Data: p}); err != nil {
		s.log.Warn("render customer error page", "request_id", edge.RequestID(c), "err", err)
		return false
	}
	return true
}
