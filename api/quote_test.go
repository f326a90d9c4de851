package api_test

import (
	"testing"

	"paysvc/actors/aggregates/tariff"
	"paysvc/cmd/paysvc/service"
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

// TestPricingRefusals: a collection the fee schedule cannot price is refused by
// the invoice kind with the 400 the API gave when it priced at the edge (type,
// code, detail and attr), and its quote is refused alike.
func TestPricingRefusals(t *testing.T) {
	t.Parallel()
	fees, err := tariff.ParseSchedule("M-PESA=0%+10.00;CARD=0%+20.00;PESALINK=0.5%,min=10.00,max=200.00")
	if err != nil {
		t.Fatal(err)
	}
	b := newBundle(t, servicetest.Start(t, func(c *service.Config) { c.API.Fees = fees }), "Acme")
	card := map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123", "currency": "KES"}
	with := func(base map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name, path   string
		body         map[string]any
		attr, detail string
		quote        map[string]any // the same request as a quote; nil: none
	}{
		{"STKFee", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "10"},
			"amount", "The amount does not cover the transaction fee.", map[string]any{"method": "M-PESA", "amount": "10"}},
		{"CollectionFee", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "phone_number": "254708374149",
			"amount": "10", "api_ref": "fee"}, "amount", "The amount does not cover the transaction fee.", nil},
		{"CollectionAfterConversion", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "USD",
			"phone_number": "254708374149", "amount": "2000", "api_ref": "big"}, "amount",
			"M-Pesa amount must be between KES 10 and KES 150,000 (after conversion to KES).",
			map[string]any{"method": "M-PESA", "currency": "USD", "amount": "2000"}},
		{"CardFee", "/api/v1/payment/card/", with(card, "amount", "20"), "amount", "The amount does not cover the CARD fee.",
			map[string]any{"method": "CARD", "amount": "20"}},
		{"CardCeiling", "/api/v1/payment/card/", with(card, "amount", "999999.01"), "amount",
			"Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more.",
			map[string]any{"method": "CARD", "amount": "999999.01"}},
		{"PesalinkCeiling", "/api/v1/payment/collection/", map[string]any{"method": "PESALINK", "currency": "KES", "amount": "1000000",
			"api_ref": "pl"}, "amount", "Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more.",
			map[string]any{"method": "PESALINK", "amount": "1000000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, r servicetest.Response) {
				t.Helper()
				detail, code, attr := errorBody(t, r)
				if r.Status != 400 || code != "invalid" || detail != tc.detail || attr != tc.attr ||
					r.Map(t)["type"] != "validation_error" {
					t.Fatalf("%s: %d %s; want 400 invalid on %s: %q", what, r.Status, r.Body, tc.attr, tc.detail)
				}
			}
			check("payment", b.post(tc.path, tc.body))
			if tc.quote != nil {
				check("quote", b.env.Do("POST", "/api/v1/payment/get_amount_estimate/", tc.quote, "X-IntaSend-Public-API-Key", b.public))
			}
		})
	}
}
