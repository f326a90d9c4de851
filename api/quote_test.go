package api_test

import (
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
)

// TestAmountEstimate checks the fee quote against what the payment calls really
// charge: for each method, tariff and currency the quote's value, charges and
// net_amount are those of the invoice the same inputs open.
func TestAmountEstimate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The Python SDK's call: Bearer and public key header on every call, the public
	// key in the body too, the amount a JSON number, the tariff under `tarrif`.
	python := append(servicetest.Bearer(b.secret), "INTASEND_PUBLIC_API_KEY", b.public)
	estimate := func(t *testing.T, body map[string]any, headers ...string) map[string]any {
		t.Helper()
		r := b.env.Do("POST", "/api/v1/payment/get_amount_estimate/", body, headers...)
		if r.Status != 200 {
			t.Fatalf("estimate %v: %d %s", body, r.Status, r.Body)
		}
		return r.Map(t)
	}
	same := func(t *testing.T, q, inv map[string]any) {
		t.Helper()
		for _, f := range []string{"value", "charges", "net_amount"} {
			if q[f] != inv[f] {
				t.Fatalf("%s: quote %v, invoice %v (quote %v, invoice %v)", f, q[f], inv[f], q, inv)
			}
		}
	}

	t.Run("MpesaAsThePromptCharges", func(t *testing.T) {
		for _, tar := range []string{"BUSINESS-PAYS", "CUSTOMER-PAYS"} {
			q := estimate(t, map[string]any{"public_key": b.public, "currency": "KES", "method": "M-PESA", "tarrif": tar,
				"amount": 100.40}, python...)
			// 100.40 is prompted as 101 shillings; the customer-pays prompt rounds up again.
			if q["settlement_amount"] != "101.00" || q["tarrif"] != tar || q["exchange_rate"] != "1" {
				t.Fatalf("quote: %v", q)
			}
			r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100.40",
				"mobile_tarrif": tar})
			if r.Status != 200 {
				t.Fatalf("stk: %d %s", r.Status, r.Body)
			}
			same(t, q, r.Map(t)["invoice"].(map[string]any))
		}
	})
	t.Run("ForeignCurrencySettlesInKES", func(t *testing.T) {
		q := estimate(t, map[string]any{"currency": "USD", "method": "MPESA", "amount": "10", "tarrif": "CUSTOMER-PAYS"},
			"X-IntaSend-Public-API-Key", b.public)
		if q["currency"] != "USD" || q["settlement_currency"] != "KES" || q["amount"] != "10.00" {
			t.Fatalf("quote: %v", q)
		}
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "USD", "amount": "10",
			"phone_number": "254708374149", "api_ref": "usd-quote", "mobile_tarrif": "CUSTOMER-PAYS"})
		if r.Status != 200 {
			t.Fatalf("collection: %d %s", r.Status, r.Body)
		}
		same(t, q, r.Map(t)["invoice"].(map[string]any))
	})
	t.Run("CardAndPesalink", func(t *testing.T) {
		for _, tar := range []string{"BUSINESS-PAYS", "CUSTOMER-PAYS"} {
			q := estimate(t, map[string]any{"method": "CARD-PAYMENT", "amount": "1234.56", "currency": "KES", "card_tarrif": tar},
				"X-IntaSend-Public-API-Key", b.public)
			r := b.post("/api/v1/payment/card/", map[string]any{"card_number": "4242424242424242", "expiry": "12/39",
				"cvv": "123", "amount": "1234.56", "currency": "KES", "card_tarrif": tar})
			if r.Status != 200 {
				t.Fatalf("card: %d %s", r.Status, r.Body)
			}
			same(t, q, r.Map(t)["invoice"].(map[string]any))

			q = estimate(t, map[string]any{"method": "PESALINK", "amount": "50000", "currency": "KES", "tarrif": tar},
				"X-IntaSend-Public-API-Key", b.public)
			r = b.post("/api/v1/payment/collection/", map[string]any{"method": "PESALINK", "amount": "50000", "currency": "KES",
				"api_ref": "pl-quote", "bank_tarrif": tar})
			if r.Status != 200 {
				t.Fatalf("pesalink: %d %s", r.Status, r.Body)
			}
			same(t, q, r.Map(t)["invoice"].(map[string]any))
		}
		// PesaLink's fee is capped at KES 200 (docs/fees.md).
		q := estimate(t, map[string]any{"method": "PESALINK", "amount": "50000"}, "X-IntaSend-Public-API-Key", b.public)
		if q["charges"] != "200.00" || q["net_amount"] != "49800.00" || q["currency"] != "KES" {
			t.Fatalf("pesalink quote: %v", q)
		}
	})
	t.Run("BadInputIsRefused", func(t *testing.T) {
		for _, c := range []struct {
			body map[string]any
			attr string
		}{
			{map[string]any{"amount": "100"}, "method"},
			{map[string]any{"method": "BITCOIN", "amount": "100"}, "method"},
			{map[string]any{"method": "M-PESA"}, "amount"},
			{map[string]any{"method": "M-PESA", "amount": "0"}, "amount"},
			{map[string]any{"method": "M-PESA", "amount": "-5"}, "amount"},
			{map[string]any{"method": "M-PESA", "amount": "1e400"}, "amount"},
			{map[string]any{"method": "M-PESA", "amount": "5"}, "amount"},
			{map[string]any{"method": "M-PESA", "amount": "150001"}, "amount"},
			{map[string]any{"method": "CARD", "amount": "1000000"}, "amount"},
			{map[string]any{"method": "PESALINK", "amount": "10"}, "amount"}, // the KES 10 minimum fee takes it all
			{map[string]any{"method": "M-PESA", "amount": "100", "currency": "XYZ"}, "currency"},
			{map[string]any{"method": "M-PESA", "amount": "100", "tarrif": "WHO-PAYS"}, "tarrif"},
			{map[string]any{"method": "CARD", "amount": "100", "card_tarrif": "business-pays"}, "card_tarrif"},
		} {
			r := b.env.Do("POST", "/api/v1/payment/get_amount_estimate", c.body, "X-IntaSend-Public-API-Key", b.public)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != c.attr {
				t.Errorf("%v: %d %s, want 400 on %s", c.body, r.Status, r.Body, c.attr)
			}
		}
		// No credential at all: a quote is public-key business, not anyone's.
		r := b.env.Do("POST", "/api/v1/payment/get_amount_estimate/", map[string]any{"method": "M-PESA", "amount": "100"})
		if r.Status != 401 {
			t.Fatalf("without a key: %d %s", r.Status, r.Body)
		}
	})
}
