package api_test

import (
	"strings"
	"testing"
)

// The hosted page is public to whoever holds its link: a returning payer's phone is
// offered masked, and kept as is, it still pays from the right phone, resolved on
// the server from the checkout's own stored payer.
func TestCheckoutPrefilledPhone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const full, masked = "254712345678", "2547****5678"
	checkout := func(email string) (id, sig string) {
		t.Helper()
		body := map[string]any{"amount": 20, "currency": "KES"}
		if email != "" {
			body["email"] = email
		}
		r := b.env.Do("POST", "/api/v1/checkout/", body, "X-SERVICE-PUBLIC-API-KEY", b.public)
		if r.Status != 200 {
			t.Fatalf("create checkout: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		return m["id"].(string), m["signature"].(string)
	}
	pay := func(id, sig, phone string) (status int, body string, invoice string) {
		t.Helper()
		r := b.env.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "20.00",
			"api_ref": "prefill", "phone_number": phone, "checkout_id": id, "signature": sig})
		if r.Status == 200 {
			invoice = r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		}
		return r.Status, string(r.Body), invoice
	}

	// The payer's first payment, typed in full.
	first, firstSig := checkout("returning@example.com")
	status, body, inv := pay(first, firstSig, full)
	if status != 200 {
		t.Fatalf("first payment: %d %s", status, body)
	}
	if got := b.waitInvoice(t, inv); got["state"] != "COMPLETE" {
		t.Fatalf("first payment: %v", got)
	}

	id, sig := checkout("returning@example.com")
	t.Run("PageShowsOnlyTheMask", func(t *testing.T) {
		r := b.env.Do("GET", "/checkout/"+id+"/", nil)
		page := string(r.Body)
		if r.Status != 200 || !strings.Contains(page, `value="`+masked+`"`) {
			t.Fatalf("page lacks the masked prefill: %d\n%s", r.Status, page)
		}
		if strings.Contains(page, full) || strings.Contains(page, "712345678") {
			t.Fatalf("page carries the full phone number:\n%s", page)
		}
	})
	t.Run("MaskedPrefillPaysFromTheStoredPhone", func(t *testing.T) {
		status, body, inv := pay(id, sig, masked)
		if status != 200 {
			t.Fatalf("pay with the masked prefill: %d %s", status, body)
		}
		if strings.Contains(body, full) || !strings.Contains(body, masked) {
			t.Fatalf("the page's reply must carry the masked number only: %s", body)
		}
		// The page's poll (checkout signature) sees the mask too.
		st := b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv, "checkout_id": id, "signature": sig})
		if st.Status != 200 || strings.Contains(string(st.Body), full) {
			t.Fatalf("status by signature: %d %s", st.Status, st.Body)
		}
		// The merchant (secret key) sees the phone actually prompted: the stored one.
		got := b.waitInvoice(t, inv)
		if got["account"] != full || got["state"] != "COMPLETE" {
			t.Fatalf("masked prefill should have paid from %s: %v", full, got)
		}
	})
	t.Run("OtherMasksRefused", func(t *testing.T) {
		other, otherSig := checkout("returning@example.com")
		for _, phone := range []string{"2547****9999", "2548****5678", "************", "254*********"} {
			if status, body, _ := pay(other, otherSig, phone); status != 400 || !strings.Contains(body, `"phone_number"`) {
				t.Errorf("mask %s: %d %s", phone, status, body)
			}
		}
		// A session without a returning payer has nothing to resolve a mask to.
		fresh, freshSig := checkout("")
		if status, body, _ := pay(fresh, freshSig, masked); status != 400 || !strings.Contains(body, `"phone_number"`) {
			t.Errorf("mask on a session without email: %d %s", status, body)
		}
		stranger, strangerSig := checkout("stranger@example.com")
		if status, body, _ := pay(stranger, strangerSig, masked); status != 400 || !strings.Contains(body, `"phone_number"`) {
			t.Errorf("mask on another payer's session: %d %s", status, body)
		}
		// Nor does a payment naming no checkout.
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "20.00",
			"api_ref": "prefill", "phone_number": masked, "email": "returning@example.com"})
		if r.Status != 400 || !strings.Contains(string(r.Body), `"phone_number"`) {
			t.Errorf("mask without a checkout: %d %s", r.Status, r.Body)
		}
	})
}

// A checkout id is looked up by the uuid primary key; an id that is not one is a
// 404 before any query (storage.TestCheckoutLookup shows the index and the skip).
func TestCheckoutMalformedID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"not-a-uuid", "00000000-0000-4000-8000-00000000000Z", "1%27%20OR%201=1"} {
		r := b.env.Do("GET", "/checkout/"+id+"/", nil)
		if _, code, _ := errorBody(t, r); r.Status != 404 || code != "not_found" {
			t.Errorf("page of %q: %d %s", id, r.Status, r.Body)
		}
	}
	r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "20.00",
		"api_ref": "x", "phone_number": "254712345678", "checkout_id": "not-a-uuid"})
	if r.Status != 404 {
		t.Errorf("collection naming a malformed checkout: %d %s", r.Status, r.Body)
	}
}
