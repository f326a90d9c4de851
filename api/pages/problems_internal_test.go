package pages

import (
	"net/http"
	"strings"
	"testing"

	"paysvc/api/edge"
)

// Which Accept headers get a page: a browser's navigation and form post do; an API
// client's (none, JSON, a wildcard, JSON preferred) do not.
func TestPrefersHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true, // chromium, firefox
		"text/html":             true,
		"application/xhtml+xml": true,
		"text/html;q=0.5, application/json;q=0.4": true,
		"":                                  false,
		"*/*":                               false,
		"application/json":                  false,
		"application/json, text/plain, */*": false, // axios
		"application/json, text/html":       false, // a tie is the API's
		"application/json, text/html;q=0.9": false,
		"text/html;q=0":                     false,
		"image/avif,image/webp,*/*":         false,
		"text/html;q=garbage":               true, // an unreadable q is 1
		";;;,":                              false,
	} {
		if got := PrefersHTML(accept); got != want {
			t.Errorf("PrefersHTML(%q) = %v, want %v", accept, got, want)
		}
	}
}

// The pages the HTTP tests cannot provoke without breaking the service: the address
// rate limit and a fault on our side. Neither shows the internal message.
func TestCustomerProblemOfLimitsAndFaults(t *testing.T) {
	st, p := ProblemOf("checkout", &edge.Error{Status: http.StatusTooManyRequests, Code: "throttled", Detail: "Request was throttled.", RetryAfter: 3}, "")
	if st != 429 || p.Heading != "Too many attempts" || !strings.Contains(p.Next, "Wait a minute") {
		t.Errorf("throttled: %d %+v", st, p)
	}
	for _, e := range []*edge.Error{edge.ErrInternal, edge.Unavailable()} {
		st, p := ProblemOf("link", e, "Duka")
		if st != e.Status || p.Heading != "Something went wrong on our side" || strings.Contains(p.Detail+p.Next, e.Detail) {
			t.Errorf("%d: %d %+v", e.Status, st, p)
		}
	}
}
