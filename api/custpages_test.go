package api_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// browserAccept is what chromium sends when it opens an address.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

// checkErrorPage asserts a customer error page: the status, HTML in the hosted
// pages' layout with the heading, the document language, a main landmark, no
// script (it takes no payment), the hosted pages' headers, and no JSON.
func checkErrorPage(t *testing.T, what string, r servicetest.Response, status int, heading string) string {
	t.Helper()
	page := string(r.Body)
	if r.Status != status || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: %d %s, want a %d page:\n%s", what, r.Status, r.Header.Get("Content-Type"), status, page)
	}
	for _, want := range []string{`<html lang="en">`, `<main id="main">`, `<h1 id="problem-title" tabindex="-1">` + heading + `</h1>`,
		"<title>" + heading, `id="problem-next"`, "/static/paysvc.css"} {
		if !strings.Contains(page, want) {
			t.Errorf("%s: page lacks %q:\n%s", what, want, page)
		}
	}
	if strings.Contains(page, `"request_id"`) || strings.Contains(page, `"detail"`) || strings.HasPrefix(strings.TrimSpace(page), "{") {
		t.Errorf("%s: the page shows the JSON error:\n%s", what, page)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "needs JavaScript") {
		t.Errorf("%s: an error page loads or asks for script:\n%s", what, page)
	}
	if r.Header.Get("Content-Security-Policy") == "" || r.Header.Get("Cache-Control") != "no-store" ||
		r.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("%s: headers %v", what, r.Header)
	}
	return page
}

// checkJSONError asserts the API's JSON error shape with its status.
func checkJSONError(t *testing.T, what string, r servicetest.Response, status int) map[string]any {
	t.Helper()
	var m map[string]any
	if r.Status != status || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || json.Unmarshal(r.Body, &m) != nil ||
		m["detail"] == nil || m["request_id"] == nil {
		t.Fatalf("%s: %d %s, want the %d JSON error: %s", what, r.Status, r.Header.Get("Content-Type"), status, r.Body)
	}
	return m
}

// Every customer-facing address answers a browser's mistake or refusal with a page
// that says what happened and what to do, with a status that says the same; the
// JSON error stays for API clients and for the pages' own script, which asks for
// JSON.
func TestCustomerErrorsArePages(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Duka Kuu")
	html := []string{"Accept", browserAccept}
	asJSON := []string{"Accept", "application/json"}

	checkout := func(bb *bundle) string {
		t.Helper()
		r := env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 100, "currency": "KES"}, "X-SERVICE-PUBLIC-API-KEY", bb.public)
		if r.Status != 200 {
			t.Fatalf("create checkout: %d %s", r.Status, r.Body)
		}
		return r.Map(t)["id"].(string)
	}

	t.Run("UnknownAddresses", func(t *testing.T) {
		for _, c := range []struct{ path, heading, jsonDetail string }{
			{"/checkout/no-such-checkout/", "Payment page not found", "Checkout session not found."},
			{"/checkout/no-such-checkout", "Payment page not found", "Checkout session not found."},
			{"/pay/no-such-link/", "Payment link not found", "Payment link not found."},
			{"/pay/no-such-link/qr.png", "Payment link not found", "Payment link not found."},
			{"/subscribe/NOSUCHPLAN/", "Subscription not found", "Plan not found."},
			{"/subscribe/not*a*plan/", "Subscription not found", "Plan not found."},
			{"/subscriptions/setup/" + strings.Repeat("A", 43) + "/", "Card setup not found", "Subscription setup not found."},
			{"/subscriptions/setup/short/", "Card setup not found", "Subscription setup not found."},
		} {
			page := checkErrorPage(t, c.path, env.Do("GET", c.path, nil, html...), 404, c.heading)
			if !strings.Contains(page, "Check that the address is exactly the one you were sent") ||
				!strings.Contains(page, "Nothing was charged.") || !strings.Contains(page, `class="merchant">Payment page<`) {
				t.Errorf("%s: the page does not say what to do, or names a merchant:\n%s", c.path, page)
			}
			// The API's clients: no Accept, JSON, a wildcard, JSON preferred to HTML.
			for _, accept := range []string{"", "application/json", "*/*", "application/json, text/html;q=0.9"} {
				if m := checkJSONError(t, c.path+" Accept "+accept, env.Do("GET", c.path, nil, "Accept", accept), 404); m["detail"] != c.jsonDetail {
					t.Errorf("%s: JSON detail %v", c.path, m["detail"])
				}
			}
		}
		// The customer's browser POSTs: the link's session and the subscribe form.
		checkErrorPage(t, "POST unknown link session", env.Do("POST", "/pay/no-such-link/session/", map[string]any{}, html...), 404,
			"Payment link not found")
		checkErrorPage(t, "POST unknown plan", env.Do("POST", "/subscribe/NOSUCHPLAN/", map[string]any{}, html...), 404,
			"Subscription not found")
		checkJSONError(t, "POST unknown link session, JSON", env.Do("POST", "/pay/no-such-link/session/", map[string]any{}, asJSON...), 404)
		// The API's own paths under /api/ stay JSON for a browser too.
		checkJSONError(t, "API setup route", env.Do("GET", "/api/v1/subscriptions/setup/"+strings.Repeat("A", 43)+"/", nil, html...), 404)
	})

	t.Run("DisabledMerchantLooksUnknown", func(t *testing.T) {
		// A disabled merchant's addresses are the unknown address's page, word for
		// word: the page must not tell a stranger the merchant exists.
		d := newBundle(t, env, "Closed Shop")
		id := checkout(d)
		link := d.pythonCreateLink(t, map[string]any{"title": "Deposit", "amount": 100})["id"].(string)
		if p := env.Do("GET", "/checkout/"+id+"/", nil, html...); p.Status != 200 {
			t.Fatalf("enabled merchant's checkout page: %d", p.Status)
		}
		if _, err := storage.SetMerchantEnabled(context.Background(), env.Schema.DB, d.merchant, false); err != nil {
			t.Fatal(err)
		}
		unknown := checkErrorPage(t, "unknown checkout", env.Do("GET", "/checkout/no-such-checkout/", nil, html...), 404, "Payment page not found")
		disabled := checkErrorPage(t, "disabled merchant's checkout", env.Do("GET", "/checkout/"+id+"/", nil, html...), 404, "Payment page not found")
		if strings.Contains(disabled, "Closed Shop") || stripReference(disabled) != stripReference(unknown) {
			t.Errorf("a disabled merchant's checkout page differs from an unknown one:\n%s\n---\n%s", disabled, unknown)
		}
		checkErrorPage(t, "disabled merchant's link", env.Do("GET", "/pay/"+link+"/", nil, html...), 404, "Payment link not found")
		checkJSONError(t, "disabled merchant's checkout, JSON", env.Do("GET", "/checkout/"+id+"/", nil), 404)
	})

	t.Run("InactiveLink", func(t *testing.T) {
		id := b.pythonCreateLink(t, map[string]any{"title": "Rent", "amount": 100})["id"].(string)
		if r := b.pythonLink("POST", "/"+id+"/deactivate/", nil); r.Status != 200 {
			t.Fatalf("deactivate: %d %s", r.Status, r.Body)
		}
		// The link's own page says so (410, it takes no payment), to a browser and to
		// anyone else who opens it: it is a page either way.
		for _, accept := range []string{browserAccept, ""} {
			p := env.Do("GET", "/pay/"+id+"/", nil, "Accept", accept)
			if p.Status != 410 || !strings.Contains(string(p.Body), "This link is not accepting payments") ||
				strings.Contains(string(p.Body), "<script") || strings.Contains(string(p.Body), "pay-form") {
				t.Errorf("inactive link page (Accept %q): %d %s", accept, p.Status, p.Body)
			}
		}
		page := checkErrorPage(t, "inactive link session", env.Do("POST", "/pay/"+id+"/session/", map[string]any{}, html...), 410,
			"This link is not accepting payments")
		if !strings.Contains(page, "Please contact Duka Kuu") || !strings.Contains(page, "Duka Kuu</p>") {
			t.Errorf("the inactive link's page does not name whom to contact:\n%s", page)
		}
		if m := checkJSONError(t, "inactive link session, JSON", env.Do("POST", "/pay/"+id+"/session/", map[string]any{}, asJSON...), 400); !strings.Contains(string(mustJSON(t, m)), "payment_link_inactive") {
			t.Errorf("JSON refusal: %v", m)
		}
	})

	t.Run("UsedUpLink", func(t *testing.T) {
		id := b.pythonCreateLink(t, map[string]any{"title": "One seat", "amount": 100, "usage_limit": 1})["id"].(string)
		st, m, sess, err := payLink(env, id, 100, "254708374149")
		if err != nil || st != 200 {
			t.Fatalf("pay the link: %d %v %v", st, m, err)
		}
		if inv := waitLinkPayment(t, env, sess, invoiceIDOf(m)); inv["invoice"].(map[string]any)["state"] != "COMPLETE" {
			t.Fatalf("payment: %v", inv)
		}
		p := env.Do("GET", "/pay/"+id+"/", nil, html...)
		if p.Status != 410 || !strings.Contains(string(p.Body), "This link has reached its limit") {
			t.Errorf("used-up link page: %d %s", p.Status, p.Body)
		}
		checkErrorPage(t, "used-up link session", env.Do("POST", "/pay/"+id+"/session/", map[string]any{}, html...), 410,
			"This link has reached its limit")
		checkJSONError(t, "used-up link session, JSON", env.Do("POST", "/pay/"+id+"/session/", map[string]any{}, asJSON...), 400)
		// Opening the paid session's checkout again is not an error: it says it was paid.
		if p := env.Do("GET", "/checkout/"+sess["checkout_id"].(string)+"/", nil, html...); p.Status != 200 ||
			!strings.Contains(string(p.Body), "This checkout has been paid.") {
			t.Errorf("paid checkout: %d %s", p.Status, p.Body)
		}
	})

	t.Run("BadFormPost", func(t *testing.T) {
		// A browser posting the subscribe form itself (no script: urlencoded) is told
		// in a page; the script's JSON request is answered in JSON.
		plan := b.post("/api/v1/subscriptions/plans/", goldPlan(nil))
		if plan.Status != 201 {
			t.Fatalf("plan: %d %s", plan.Status, plan.Body)
		}
		path := pagePath(t, plan.Map(t)["plan_url"], "/subscribe/")
		form := url.Values{"email": {"not-an-email"}, "first_name": {"Amina"}, "last_name": {"Otieno"}}.Encode()
		r := env.Do("POST", path, form, "Content-Type", "application/x-www-form-urlencoded", "Accept", browserAccept)
		if r.Status < 400 || r.Status >= 500 {
			t.Fatalf("urlencoded subscribe: %d %s", r.Status, r.Body)
		}
		checkErrorPage(t, "urlencoded subscribe", r, r.Status, "This could not be done")
		bad := env.Do("POST", path, map[string]any{"email": "not-an-email", "first_name": "Amina", "last_name": "Otieno"}, html...)
		page := checkErrorPage(t, "bad email", bad, 400, "This could not be done")
		if !strings.Contains(page, "Enter a valid email address.") || !strings.Contains(page, "Go back to the page you came from") {
			t.Errorf("the page does not say what was wrong and what to do:\n%s", page)
		}
		checkJSONError(t, "bad email, JSON", env.Do("POST", path, map[string]any{"email": "not-an-email", "first_name": "Amina",
			"last_name": "Otieno"}, asJSON...), 400)
	})

}

// stripReference drops the page's support reference (the request id, different on
// every answer) so two pages can be compared.
func stripReference(page string) string {
	if i := strings.Index(page, `<code id="problem-reference">`); i >= 0 {
		if j := strings.Index(page[i:], "</code>"); j >= 0 {
			return page[:i] + page[i+j:]
		}
	}
	return page
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
