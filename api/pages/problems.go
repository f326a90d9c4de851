package pages

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"paysvc/api/edge"
)

// A customer's browser refused on one of the hosted pages' addresses reads a
// page, not the API's JSON error: these are which addresses, which requests are
// a browser's, and what each refusal's page says.

// customerPages are the path prefixes of the customer's hosted pages.
var customerPages = []struct{ prefix, kind string }{
	{"/checkout/", "checkout"},
	{"/pay/", "link"},
	{"/subscribe/", "plan"},
	{"/subscriptions/setup/", "setup"},
}

// CustomerPageKind is which hosted page a path is under, "" for any other path.
func CustomerPageKind(p string) string {
	for _, cp := range customerPages {
		if strings.HasPrefix(p, cp.prefix) {
			return cp.kind
		}
	}
	return ""
}

// PrefersHTML reports whether an Accept header asks for HTML before JSON, as a
// browser's navigation does (text/html first, */* last). Wildcards count for
// neither: `*/*` alone, or no Accept at all, is an API client's, answered in JSON.
func PrefersHTML(accept string) bool {
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

// Problem is the view of the page a customer's browser gets for a refusal.
type Problem struct {
	Heading, Detail, Next string
	RequestID             string
}

// notFoundPages are the 404 pages: one per kind, the same for an address that
// never existed and for one whose merchant this server does not serve (disabled,
// other environment), as the capability's JSON 404 is (api/capability.go).
var notFoundPages = map[string]Problem{
	"checkout": {Heading: "Payment page not found", Detail: "This payment page does not exist or is no longer available."},
	"link":     {Heading: "Payment link not found", Detail: "This payment link does not exist or is no longer available."},
	"plan":     {Heading: "Subscription not found", Detail: "This subscription page does not exist or is no longer available."},
	"setup":    {Heading: "Card setup not found", Detail: "This card setup page does not exist or is no longer available."},
}

const (
	nextCheckLink = "Check that the address is exactly the one you were sent, or ask the business that sent it for a new one. Nothing was charged."
	nothingDone   = "Nothing was charged."
)

// ProblemOf is the page for a refusal e on a page of kind, and its status.
// merchant is the capability's merchant when the refusal came after it was
// admitted ("" before: an unknown address names no one).
func ProblemOf(kind string, e *edge.Error, merchant string) (int, Problem) {
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
		return http.StatusGone, Problem{Heading: "This link is not accepting payments", Detail: e.Detail,
			Next: nothingDone + " Please contact " + contact + " for another way to pay."}
	case e.Code == "payment_link_limit_reached":
		return http.StatusGone, Problem{Heading: "This link has reached its limit", Detail: e.Detail,
			Next: nothingDone + " Please contact " + contact + " for another way to pay."}
	case e.Code == "payment_link_busy", e.Code == "payment_link_changed":
		return http.StatusConflict, Problem{Heading: "Please try again", Detail: e.Detail, Next: nothingDone}
	case e.Status == http.StatusTooManyRequests:
		return http.StatusTooManyRequests, Problem{Heading: "Too many attempts",
			Detail: "This page was asked for too often from your connection.", Next: "Wait a minute, then try again. " + nothingDone}
	case e.Status >= 500:
		return e.Status, Problem{Heading: "Something went wrong on our side",
			Detail: "This page could not be shown just now.", Next: "Please try again in a few minutes."}
	}
	return e.Status, Problem{Heading: "This could not be done", Detail: e.Detail,
		Next: "Go back to the page you came from and try again. " + nothingDone}
}
