package api_test

import (
	"fmt"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// hostileEnv is a service whose writes give up after a few seconds, so a stalled
// partition shows as a 504 on the next write instead of a long wait.
func hostileEnv(t *testing.T) *servicetest.Env {
	t.Helper()
	return servicetest.Start(t, func(c *service.Config) { c.API.ReplyTimeout = 3 * time.Second })
}

// publicWrite is a normal write of the merchant with nothing but its public key:
// an STK push, which goes through the command partition. It must succeed, which
// proves the partition still moves.
func publicWrite(t *testing.T, b *bundle, ref string) {
	t.Helper()
	r := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"public_key": b.public,
		"phone_number": "254708374149", "amount": "10", "api_ref": ref})
	if r.Status != 200 {
		t.Fatalf("a normal write after hostile input: %d %s (the partition is stuck?)", r.Status, r.Body)
	}
}

// TestHostileInputIsRefusedAtTheEdge sends, with the public key alone (published in
// merchants' web pages), the requests that used to poison a command partition: each
// is a 400 naming its field, and the merchant's next write goes through.
func TestHostileInputIsRefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	env := hostileEnv(t)
	b := newBundle(t, env, "Hostile")
	pk := fmt.Sprintf("%q", b.public)
	for _, tc := range []struct {
		name, path, body, attr string
	}{
		// encoding/json keeps \u0000 as a NUL, which the invoice's jsonb cannot hold
		// (22P05): this one request stalled the partition for good.
		{"NULInEmail", "/api/v1/payment/collection/",
			`{"public_key":` + pk + `,"method":"M-PESA","currency":"KES","amount":"100","api_ref":"order-1",
			  "phone_number":"254708374149","email":"a\u0000@b.co"}`, "email"},
		{"LoneSurrogateInFirstName", "/api/v1/payment/collection/",
			`{"public_key":` + pk + `,"method":"M-PESA","currency":"KES","amount":"100","api_ref":"order-2",
			  "phone_number":"254708374149","first_name":"Jane\ud800"}`, "first_name"},
		{"LoneLowSurrogateInCity", "/api/v1/payment/collection/",
			`{"public_key":` + pk + `,"method":"M-PESA","currency":"KES","amount":"100","api_ref":"order-3",
			  "phone_number":"254708374149","city":"\udc00"}`, "city"},
		{"NULInAPIRef", "/api/v1/payment/mpesa-stk-push/",
			`{"public_key":` + pk + `,"phone_number":"254708374149","amount":"10","api_ref":"ref\u0000"}`, "api_ref"},
		{"InvalidUTF8InEmail", "/api/v1/payment/collection/",
			`{"public_key":` + pk + `,"method":"M-PESA","currency":"KES","amount":"100","api_ref":"order-4",
			  "phone_number":"254708374149","email":"a` + "\xff" + `@b.co"}`, "email"},
		// A GBP card payment of the largest amount the money parser reads is 1.7e17
		// KES: far past any sane payment, and a wallet credit of it cannot be undone.
		{"OverflowingCardAmountGBP", "/api/v1/payment/card/",
			`{"public_key":` + pk + `,"card_number":"4242424242424242","expiry":"12/39","cvv":"123",
			  "amount":"999999999999999.99","currency":"GBP","api_ref":"big"}`, "amount"},
		{"CardAmountJustOverTheBoundGBP", "/api/v1/payment/card/",
			`{"public_key":` + pk + `,"card_number":"4242424242424242","expiry":"12/39","cvv":"123",
			  "amount":"5721","currency":"GBP","api_ref":"big"}`, "amount"},
		{"CheckoutAmountPastEveryMethod", "/api/v1/checkout/",
			`{"public_key":` + pk + `,"amount":"999999999999999","currency":"USD"}`, "amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.Do("POST", tc.path, []byte(tc.body))
			if r.Status != 400 {
				t.Fatalf("%s: %d %s, want 400", tc.name, r.Status, r.Body)
			}
			if _, _, attr := errorBody(t, r); attr != tc.attr {
				t.Fatalf("%s: attr %q, want %q: %s", tc.name, attr, tc.attr, r.Body)
			}
			publicWrite(t, b, "after-"+tc.name)
		})
	}
	t.Run("NestedFieldIsNamedByItsPath", func(t *testing.T) {
		r := b.post("/api/v1/send-money/initiate/", []byte(`{"currency":"KES","provider":"MPESA-B2C","transactions":[
			{"account":"254708374149","amount":"100","name":"A"},{"account":"254708374149","amount":"100","name":"B\u0000"}]}`))
		if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "transactions[1].name" {
			t.Fatalf("NUL in a transaction's name: %d %s", r.Status, r.Body)
		}
	})
	t.Run("CardWithinTheBoundIsAccepted", func(t *testing.T) {
		r := env.Do("POST", "/api/v1/payment/card/", []byte(`{"public_key":`+pk+`,"card_number":"4242424242424242","expiry":"12/39",
			"cvv":"123","amount":"5720","currency":"GBP","api_ref":"within"}`))
		if r.Status != 200 {
			t.Fatalf("GBP 5,720 (KES 999,856 at 174.80): %d %s", r.Status, r.Body)
		}
	})
	t.Run("EmojiPairAndRTLTextAreKept", func(t *testing.T) {
		// Valid text outside ASCII is not hostile: a surrogate pair and RTL marks pass
		// the check and come back as sent (the reason is stored and read back).
		r := b.post("/api/v1/payment/collection/pay-requests/", []byte(`{"first_name":"Jane","last_name":"Doe","email":"jane@example.com",
			"currency":"KES","amount":"10","reason":"Caf\u00e9 \ud83d\ude00 \u200f\u0645\u0631\u062d\u0628\u0627"}`))
		if r.Status != 200 {
			t.Fatalf("pay request: %d %s", r.Status, r.Body)
		}
		id := r.Map(t)["detail"].(map[string]any)["request_id"].(string)
		got := b.get("/api/v1/payment/collection/pay-requests/" + id + "/")
		var pr struct{ Detail map[string]any }
		got.JSON(t, &pr)
		if want := "Café 😀 \u200fمرحبا"; got.Status != 200 || pr.Detail["reason"] != want {
			t.Fatalf("reason read back: %d %s, want %q", got.Status, got.Body, want)
		}
	})
}

// TestHostileURLs: a path parameter PostgreSQL cannot store is a 404 (no resource
// has such an id), a query parameter or Idempotency-Key with such bytes is a 400
// naming it: never a 500 from the database refusing the bytes.
func TestHostileURLs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{
		"/api/v1/wallets/%00/", "/api/v1/wallets/%ff/", "/api/v1/wallets/a%00b/transactions/",
		"/api/v1/payment/collection/pay-requests/%00/", "/api/v1/payment/collection/pay-requests/%c3%28/",
		"/api/v1/webhooks/%00/", "/api/v1/webhooks/%ed%a0%80/", "/checkout/%ff", "/checkout/%00/",
	} {
		r := b.get(path)
		if r.Status != 404 {
			t.Fatalf("GET %s: %d %s, want 404", path, r.Status, r.Body)
		}
		errorBody(t, r)
	}
	for _, path := range []string{"/api/v1/webhooks/%00/", "/api/v1/webhooks/events/%ff/replay/", "/api/v1/wallets/%00/intra_transfer/"} {
		if r := b.post(path, map[string]any{}); r.Status != 404 {
			t.Fatalf("POST %s: %d %s, want 404", path, r.Status, r.Body)
		}
	}
	for path, attr := range map[string]string{
		"/api/v1/webhooks/events/?topic=%ff":                            "topic",
		"/api/v1/webhooks/events/?status=a%00":                          "status",
		"/api/v1/send-money/beneficiaries/frequently_used?provider=%00": "provider",
		"/api/v1/wallets/?page=%ff":                                     "page",
	} {
		r := b.get(path)
		if _, _, got := errorBody(t, r); r.Status != 400 || got != attr {
			t.Fatalf("GET %s: %d %s, want 400 naming %s", path, r.Status, r.Body, attr)
		}
	}
	r := b.post("/api/v1/wallets/", map[string]any{"currency": "KES", "label": "Idem"}, "Idempotency-Key", "key-\xff")
	if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "Idempotency-Key" {
		t.Fatalf("Idempotency-Key with invalid UTF-8: %d %s", r.Status, r.Body)
	}
}
