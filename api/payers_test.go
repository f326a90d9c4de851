package api_test

import (
	"testing"
)

// TestPayersAreCustomers: a collection that carries an email links its payer to the
// merchant's customer record of that email, the one the customers APIs show, and
// the payment session names it. Only a secret key may change a record that exists.
func TestPayersAreCustomers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// stk pushes with a public key and returns the session's customer as the
	// merchant reads it (secret key): the public key's own answer names no customer
	// id (TestPayerDataByPrincipal), else it would tell anyone whether an email is
	// the merchant's customer.
	stk := func(t *testing.T, body map[string]any, headers ...string) map[string]any {
		t.Helper()
		r := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", body, headers...)
		if r.Status != 200 {
			t.Fatalf("stk push: %d %s", r.Status, r.Body)
		}
		if id := r.Map(t)["customer"].(map[string]any)["customer_id"]; id != nil {
			t.Fatalf("a public-key answer names customer %v", id)
		}
		inv := r.Map(t)["invoice"].(map[string]any)["invoice_id"]
		st := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv})
		if st.Status != 200 {
			t.Fatalf("status: %d %s", st.Status, st.Body)
		}
		return st.Map(t)["meta"].(map[string]any)["customer"].(map[string]any)
	}
	record := func(t *testing.T, id string) map[string]any {
		t.Helper()
		r := b.get("/api/v1/customers/" + id)
		if r.Status != 200 {
			t.Fatalf("customer %s: %d %s", id, r.Status, r.Body)
		}
		return r.Map(t)
	}

	t.Run("APayerBecomesACustomer", func(t *testing.T) {
		// The Python SDK's STK push: public key, email and one `name`.
		cust := stk(t, map[string]any{"public_key": b.public, "phone_number": "254708374149", "amount": 50, "currency": "KES",
			"method": "M-PESA", "email": "payer@example.com", "name": "Amina Odhiambo"}, "INTASEND_PUBLIC_API_KEY", b.public)
		id := cust["customer_id"].(string)
		rec := record(t, id)
		if rec["email"] != "payer@example.com" || rec["first_name"] != "Amina" || rec["last_name"] != "Odhiambo" ||
			rec["phone_number"] != "+254708374149" {
			t.Fatalf("customer record: %v", rec)
		}
		var page struct {
			Count   int              `json:"count"`
			Results []map[string]any `json:"results"`
		}
		b.get("/api/v1/customers/"+id+"/transactions").JSON(t, &page)
		if page.Count != 1 || page.Results[0]["customer"].(map[string]any)["customer_id"] != id {
			t.Fatalf("the payment is the customer's transaction under the same id: %+v", page)
		}
		// The same payer again, in another case of the email: the same record.
		again := stk(t, map[string]any{"phone_number": "254708374149", "amount": 60, "email": "PAYER@example.com"},
			"X-IntaSend-Public-API-Key", b.public)
		if again["customer_id"] != id {
			t.Fatalf("second payment names customer %v, want %s", again["customer_id"], id)
		}
	})

	t.Run("APublicKeyCannotRewriteACustomer", func(t *testing.T) {
		r := b.post("/api/v1/customers/", map[string]any{"email": "known@example.com", "first_name": "Wanjiku", "last_name": "Kamau",
			"phone_number": "+254711000001"})
		if r.Status != 201 {
			t.Fatalf("create customer: %d %s", r.Status, r.Body)
		}
		id := r.Map(t)["customer_id"].(string)
		cust := stk(t, map[string]any{"phone_number": "254799999999", "amount": 50, "email": "known@example.com",
			"first_name": "Mallory", "last_name": "Attacker"}, "X-IntaSend-Public-API-Key", b.public)
		if cust["customer_id"] != id {
			t.Fatalf("payment names customer %v, want the existing %s", cust["customer_id"], id)
		}
		if rec := record(t, id); rec["first_name"] != "Wanjiku" || rec["phone_number"] != "+254711000001" {
			t.Fatalf("a public-key payment rewrote the customer: %v", rec)
		}
		// The merchant's own secret key may: its collection updates the record.
		r = b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "amount": "100", "currency": "KES",
			"phone_number": "254722000002", "api_ref": "crm", "email": "known@example.com", "first_name": "Wanjiku",
			"last_name": "Mwangi"})
		if r.Status != 200 {
			t.Fatalf("collection: %d %s", r.Status, r.Body)
		}
		if rec := record(t, id); rec["last_name"] != "Mwangi" || rec["phone_number"] != "+254722000002" {
			t.Fatalf("a secret-key collection should update the customer: %v", rec)
		}
	})

	t.Run("APaymentIsNeverRefusedForTheCustomerBook", func(t *testing.T) {
		// A US payer without a zipcode breaks the customer record's rule, not the
		// payment's: the payment goes ahead, the record is kept without a country.
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "amount": "100", "currency": "KES",
			"phone_number": "254708374149", "api_ref": "us", "email": "us-payer@example.com", "country": "US"})
		if r.Status != 200 {
			t.Fatalf("collection: %d %s", r.Status, r.Body)
		}
		sess := r.Map(t)["customer"].(map[string]any)
		if sess["country"] != "US" {
			t.Fatalf("the session keeps what the payment carried: %v", sess)
		}
		if rec := record(t, sess["customer_id"].(string)); rec["country"] != nil || rec["email"] != "us-payer@example.com" {
			t.Fatalf("customer record: %v", rec)
		}
	})
}
