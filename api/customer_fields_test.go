package api_test

import (
	"strings"
	"testing"
)

// TestCustomerFieldsRoundTrip: the payer details a collection or an STK push
// carries come back in its answer and in /payment/status, invoice host included;
// a payment without a phone shows account and phone_number null; refundable is a
// string.
func TestCustomerFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status := func(id string) map[string]any {
		t.Helper()
		r := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": id})
		if r.Status != 200 {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		return r.Map(t)
	}
	wantCustomer := func(where string, cust map[string]any, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if cust[k] != v {
				t.Errorf("%s: customer.%s = %v, want %v (%v)", where, k, cust[k], v, cust)
			}
		}
	}

	t.Run("Collection", func(t *testing.T) {
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "100",
			"api_ref": "cust-1", "phone_number": "254708374149", "email": "ada@example.com", "first_name": "Ada",
			"last_name": "Lovelace", "country": "KE", "zipcode": "00100", "address": "1 Moi Avenue", "city": "Nairobi",
			"state": "Nairobi", "host": "https://shop.example.com"})
		if r.Status != 200 {
			t.Fatalf("collection: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		want := map[string]any{"email": "ada@example.com", "first_name": "Ada", "last_name": "Lovelace", "country": "KE",
			"zipcode": "00100", "phone_number": "254708374149"}
		wantCustomer("collection", m["customer"].(map[string]any), want)
		if inv := m["invoice"].(map[string]any); inv["host"] != "https://shop.example.com" || inv["account"] != "254708374149" {
			t.Fatalf("invoice: %v", inv)
		}
		st := status(m["invoice"].(map[string]any)["id"].(string))
		wantCustomer("status", st["meta"].(map[string]any)["customer"].(map[string]any), want)
		if st["invoice"].(map[string]any)["host"] != "https://shop.example.com" {
			t.Fatalf("status invoice: %v", st["invoice"])
		}
	})

	t.Run("PythonSTKPush", func(t *testing.T) {
		// collect.mpesa_stk_push as the Python SDK sends it: both credentials, its
		// whole payload (amount a number).
		r := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"public_key": b.public, "currency": "KES",
			"method": "M-PESA", "amount": 10, "phone_number": "254708374149", "api_ref": "API Request",
			"name": "Awesome Customer", "email": "awesome@example.com", "narrative": "Fees"},
			"Authorization", "Bearer "+b.secret, "INTASEND_PUBLIC_API_KEY", b.public)
		if r.Status != 200 {
			t.Fatalf("stk push: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		want := map[string]any{"email": "awesome@example.com", "first_name": "Awesome", "last_name": "Customer",
			"phone_number": "254708374149", "country": nil, "zipcode": nil}
		wantCustomer("stk push", m["customer"].(map[string]any), want)
		if m["refundable"] != "false" || m["payment_link"] != nil {
			t.Fatalf("refundable %#v payment_link %#v", m["refundable"], m["payment_link"])
		}
		id := m["invoice"].(map[string]any)["id"].(string)
		b.waitInvoice(t, id)
		wantCustomer("status", status(id)["meta"].(map[string]any)["customer"].(map[string]any), want)
	})

	t.Run("NoPhoneIsNull", func(t *testing.T) {
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "PESALINK", "currency": "KES", "amount": "500",
			"api_ref": "bank-1", "email": "bank@example.com"})
		if r.Status != 200 {
			t.Fatalf("pesalink: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		inv := m["invoice"].(map[string]any)
		if v, ok := inv["account"]; !ok || v != nil {
			t.Fatalf("invoice.account = %#v, want null", v)
		}
		if v, ok := m["customer"].(map[string]any)["phone_number"]; !ok || v != nil {
			t.Fatalf("customer.phone_number = %#v, want null", v)
		}
		st := status(inv["id"].(string))
		if st["invoice"].(map[string]any)["account"] != nil || st["meta"].(map[string]any)["customer"].(map[string]any)["email"] != "bank@example.com" {
			t.Fatalf("status: %v", st)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		base := func() map[string]any {
			return map[string]any{"method": "M-PESA", "currency": "KES", "amount": "100", "api_ref": "v", "phone_number": "254708374149"}
		}
		for _, tc := range []struct {
			path, field string
			value       any
		}{
			{"collection", "first_name", "<script>"},
			{"collection", "last_name", strings.Repeat("a", 46)},
			{"collection", "country", "KEN"},
			{"collection", "zipcode", "00-100;"},
			{"collection", "address", strings.Repeat("a", 141)},
			{"collection", "host", "evil<host>"},
			{"collection", "host", strings.Repeat("h", 201)},
			{"stk", "name", "Bad;Name"},
			{"stk", "name", strings.Repeat("a", 46) + " b"},
			{"stk", "email", "not-an-email"},
			{"stk", "narrative", strings.Repeat("n", 141)},
			{"stk", "city", strings.Repeat("c", 101)},
		} {
			body, path := base(), "/api/v1/payment/collection/"
			if tc.path == "stk" {
				body, path = map[string]any{"amount": "10", "phone_number": "254708374149"}, "/api/v1/payment/mpesa-stk-push/"
			}
			body[tc.field] = tc.value
			r := b.post(path, body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.field {
				t.Errorf("%s %s=%v: %d %s", tc.path, tc.field, tc.value, r.Status, r.Body)
			}
		}
		// A NUL anywhere is refused before any handler reads the body.
		body := base()
		body["city"] = "Nai\x00robi"
		if r := b.post("/api/v1/payment/collection/", body); r.Status != 400 {
			t.Errorf("NUL in city: %d %s", r.Status, r.Body)
		}
	})
}
