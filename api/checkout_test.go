package api_test

import (
	"strings"
	"testing"
	"time"
)

func TestCheckout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	create := func(body map[string]any, headers ...string) map[string]any {
		t.Helper()
		r := b.env.Do("POST", "/api/v1/checkout/", body, append([]string{"X-SERVICE-PUBLIC-API-KEY", b.public}, headers...)...)
		if r.Status != 200 {
			t.Fatalf("create checkout: %d %s", r.Status, r.Body)
		}
		return r.Map(t)
	}
	co := create(map[string]any{"amount": 250, "currency": "KES", "email": "payer@example.com", "api_ref": "order-77", "unique_api_ref": true})
	id := co["id"].(string)
	if co["paid"] != false || co["amount"] != "250.00" || co["signature"] == "" || !strings.HasSuffix(co["url"].(string), "/checkout/"+id+"/") ||
		co["card_tarrif"] != "BUSINESS-PAYS" || co["email"] != "payer@example.com" {
		t.Fatalf("checkout: %v", co)
	}

	t.Run("Refusals", func(t *testing.T) {
		r := b.env.Do("POST", "/api/v1/payment/collection/checkout/", map[string]any{"amount": 10, "currency": "KES"},
			"Authorization", "Bearer "+b.secret)
		if r.Status != 401 {
			t.Fatalf("secret key alone on checkout: %d %s", r.Status, r.Body)
		}
		// The Python SDK sends its Bearer token with the public key on every call: the
		// extra valid credential is no reason to refuse (docs/compat.md).
		r = b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES"},
			"Authorization", "Bearer "+b.secret, "INTASEND_PUBLIC_API_KEY", b.public)
		if r.Status != 200 {
			t.Fatalf("public key with the same merchant's secret key: %d %s", r.Status, r.Body)
		}
		r = b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES", "public_key": b.public},
			"Authorization", "Bearer ISSecretKey_test_"+strings.Repeat("0", 64))
		if r.Status != 401 {
			t.Fatalf("public key with an invalid secret key: %d %s", r.Status, r.Body)
		}
		live := strings.Replace(b.public, "_test_", "_live_", 1)
		r = b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES", "public_key": live})
		if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "public_key" {
			t.Fatalf("wrong-environment public key: %d %s", r.Status, r.Body)
		}
		r = b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 100, "currency": "UGX", "public_key": b.public})
		if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "amount" {
			t.Fatalf("UGX under 500: %d %s", r.Status, r.Body)
		}
	})
	t.Run("HostedPage", func(t *testing.T) {
		r := b.env.Do("GET", "/checkout/"+id+"/", nil)
		page := string(r.Body)
		if r.Status != 200 || !strings.Contains(r.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(page, "KES 250.00") || !strings.Contains(page, "Pay with M-Pesa") || !strings.Contains(page, "Pay by card") || strings.Contains(page, b.public) {
			t.Fatalf("page: %d %s", r.Status, page)
		}
		if r := b.env.Do("GET", "/checkout/00000000-0000-0000-0000-000000000000/", nil); r.Status != 404 {
			t.Fatalf("unknown checkout page: %d", r.Status)
		}
	})
	t.Run("PayFromThePageThenPaid", func(t *testing.T) {
		// What the page's form sends: the session's signature, no key.
		r := b.env.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "250.00",
			"api_ref": "order-77", "phone_number": "254777777777", "checkout_id": id, "signature": co["signature"]})
		if r.Status != 200 {
			t.Fatalf("pay: %d %s", r.Status, r.Body)
		}
		inv := r.Map(t)["invoice"].(map[string]any)["id"].(string)
		// The page polls with the checkout's signature and id.
		statusUntil(t, b.env, 20*time.Second, map[string]any{"invoice_id": inv, "checkout_id": id, "signature": co["signature"]},
			func(inv map[string]any) bool { return inv["state"] == "COMPLETE" })
		again := create(map[string]any{"amount": 250, "currency": "KES", "api_ref": "order-77", "unique_api_ref": true})
		if again["id"] != id || again["paid"] != true {
			t.Fatalf("unique_api_ref should return the paid session: %v", again)
		}
		// The public key is published: a caller that does not name the session's
		// email is not shown it (least privilege); one that names it is.
		if v, ok := again["email"]; !ok || v != nil {
			t.Fatalf("unique_api_ref showed the session's email to a caller that did not name it: %v", again)
		}
		same := create(map[string]any{"amount": 250, "currency": "KES", "api_ref": "order-77", "unique_api_ref": true,
			"email": "payer@example.com"})
		if same["id"] != id || same["email"] != "payer@example.com" {
			t.Fatalf("unique_api_ref with the session's email: %v", same)
		}
		// A new session for the same payer's email pre-fills their phone on the page,
		// masked (TestCheckoutPrefilledPhone pays with it).
		next := create(map[string]any{"amount": 5, "currency": "KES", "email": "payer@example.com"})
		page := string(b.env.Do("GET", "/checkout/"+next["id"].(string)+"/", nil).Body)
		if !strings.Contains(page, `value="2547****7777"`) || strings.Contains(page, "254777777777") {
			t.Fatalf("phone not pre-filled for a returning payer:\n%s", page)
		}
		// A payment with the wrong amount for a fixed-amount session is refused.
		r = b.env.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "10",
			"api_ref": "x", "phone_number": "254777777777", "checkout_id": next["id"], "signature": next["signature"]})
		if r.Status != 400 {
			t.Fatalf("wrong amount: %d %s", r.Status, r.Body)
		}
		// The first session's signature does not pay the second.
		r = b.env.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "5",
			"api_ref": "x", "phone_number": "254777777777", "checkout_id": next["id"], "signature": co["signature"]})
		if r.Status != 401 {
			t.Fatalf("another session's signature: %d %s", r.Status, r.Body)
		}
	})
}
