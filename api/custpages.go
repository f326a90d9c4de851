package api

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

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
// first: a request under one of these paths whose Accept prefers HTML gets a
// page in the hosted pages' layout saying what happened and what to do, with a
// status that says the same (404, 410, 409, 429, 5xx). Every other caller (the
// pages' own script, which asks for JSON; an API client; a request without
// Accept) keeps the JSON error shape unchanged.

// customerPages are the path prefixes of the customer's hosted pages.
var customerPages = []struct{ prefix, kind string }{
	{"/checkout/", "checkout"},
	{"/pay/", "link"},
	{"/subscribe/", "plan"},
	{"/subscriptions/setup/", "setup"},
}

// customerPageKind is which hosted page a path is under, "" for any other path.
func customerPageKind(p string) string {
	for _, cp := range customerPages {
		if strings.HasPrefix(p, cp.prefix) {
			return cp.kind
		}
	}
	return ""
}

// prefersHTML reports whether an Accept header asks for HTML before JSON, as a
// browser's navigation does (text/html first, */* last). Wildcards count for
// neither: `*/*` alone, or no Accept at all, is an API client's, answered in JSON.
func prefersHTML(accept string) bool {
	var html, json float64
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			}
		}
		switch mt {
		case "text/html", "application/xhtml+xml":
			html = max(html, q)
		case "application/json", "application/problem+json":
			json = max(json, q)
		}
	}
	return html > 0 && html > json
}

// customerProblem is the error page's view.
type customerProblem struct {
	Heading, Detail, Next string
	RequestID             string
}

// notFoundPages are the 404 pages: one per kind, the same for an address that
// never existed and for one whose merchant this server does not serve (disabled,
// other environment), as the capability's JSON 404 is (capability.go).
var notFoundPages = map[string]customerProblem{
	"checkout": {Heading: "Payment page not found", Detail: "This payment page does not exist or is no longer available."},
	"link":     {Heading: "Payment link not found", Detail: "This payment link does not exist or is no longer available."},
	"plan":     {Heading: "Subscription not found", Detail: "This subscription page does not exist or is no longer available."},
	"setup":    {Heading: "Card setup not found", Detail: "This card setup page does not exist or is no longer available."},
}

const (
	nextCheckLink = "Check that the address is exactly the one you were sent, or ask the business that sent it for a new one. Nothing was charged."
	nothingDone   = "Nothing was charged."
)

// customerProblemOf is the page for a refusal e on a page of kind, and its status.
// merchant is the capability's merchant when the refusal came after it was
// admitted ("" before: an unknown address names no one).
func customerProblemOf(kind string, e *edge.Error, merchant string) (int, customerProblem) {
	contact := "the business that sent you here"
	if merchant != "" {
		contact = merchant
	}
	switch {
	case e.Status == http.StatusNotFound:
		p := notFoundPages[kind]
		p.Next = nextCheckLink
		return http.StatusNotFound, p
	case e.Code == "payment_link_inactive":
		return http.StatusGone, customerProblem{Heading: "This link is not accepting payments", Detail: e.Detail,
			Next: nothingDone + " Please contact " + contact + " for another way to pay."}
	case e.Code == "payment_link_limit_reached":
		return http.StatusGone, customerProblem{Heading: "This link has reached its limit", Detail: e.Detail,
			Next: nothingDone + " Please contact " + contact + " for another way to pay."}
	case e.Code == "payment_link_busy", e.Code == "payment_link_changed":
		return http.StatusConflict, customerProblem{Heading: "Please try again", Detail: e.Detail, Next: nothingDone}
	case e.Status == http.StatusTooManyRequests:
		return http.StatusTooManyRequests, customerProblem{Heading: "Too many attempts",
			Detail: "This page was asked for too often from your connection.", Next: "Wait a minute, then try again. " + nothingDone}
	case e.Status >= 500:
		return e.Status, customerProblem{Heading: "Something went wrong on our side",
			Detail: "This page could not be shown just now.", Next: "Please try again in a few minutes."}
	}
	return e.Status, customerProblem{Heading: "This could not be done", Detail: e.Detail,
		Next: "Go back to the page you came from and try again. " + nothingDone}
}

// customerErrorPage renders e as a page when the request is a browser's on a
// customer page; false when it is not (the caller answers JSON) or the page could
// not be rendered.
func (s *Server) customerErrorPage(c echo.Context, e *edge.Error) bool {
	r := c.Request()
	kind := customerPageKind(r.URL.Path)
	if kind == "" || !prefersHTML(r.Header.Get("Accept")) {
		return false
	}
	merchant := ""
	if m, ok := c.Get(ctxCapabilityMerchant).(storage.Merchant); ok {
		merchant = m.Name
	}
	status, p := customerProblemOf(kind, e, merchant)
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
