package api_test

import (
	"strings"
	"testing"

	"paysvc/actors/aggregates/tariff"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// pythonCheckout creates a checkout as the Python SDK's wallets.fund(mode="LINK")
// does (collect.checkout): Bearer and public key headers, its whole payload with
// the nulls it sends, the phone as a JSON number, version 3.0.0.
func (b *bundle) pythonCheckout(extra map[string]any) servicetest.Response {
	body := map[string]any{"public_key": b.public, "currency": "KES", "email": "payer@example.com", "amount": 1000,
		"method": nil, "api_ref": "API Request", "callback_url": nil, "redirect_url": nil, "comment": nil,
		"first_name": nil, "last_name": nil, "phone_number": 254708374149, "mobile_tarrif": "BUSINESS-PAYS",
		"card_tarrif": "BUSINESS-PAYS", "version": "3.0.0"}
	for k, v := range extra {
		body[k] = v
	}
	return b.env.Do("POST", "/api/v1/checkout/", body, "Authorization", "Bearer "+b.secret, "INTASEND_PUBLIC_API_KEY", b.public)
}

// payOnPage pays a session as its hosted page's M-Pesa form does: the session's
// signature and no key, plus whatever extra fields a payer adds to the request.
func (b *bundle) payOnPage(t *testing.T, co map[string]any, phone string, extra map[string]any) map[string]any {
	t.Helper()
	body := map[string]any{"method": "M-PESA", "currency": co["currency"], "amount": co["amount"], "api_ref": "checkout",
		"phone_number": phone, "checkout_id": co["id"], "signature": co["signature"]}
	for k, v := range extra {
		body[k] = v
	}
	r := b.env.Do("POST", "/api/v1/payment/collection/", body)
	if r.Status != 200 {
		t.Fatalf("pay on the page: %d %s", r.Status, r.Body)
	}
	return r.Map(t)
}

// waitPage polls /payment/status as the page does until the invoice is final.
func (b *bundle) waitPage(t *testing.T, co map[string]any, invoiceID string) map[string]any {
	t.Helper()
	return pageStatus(t, b.env, co["id"], co["signature"], invoiceID)
}

func (b *bundle) countCheckouts(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.env.Schema.DB.Get(&n, `SELECT count(*) FROM checkouts WHERE merchant_id = $1`, b.merchant); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCheckoutFundsItsWallet: a session created with wallet_id (the Python SDK's
// fund(mode="LINK")) credits that WORKING wallet when paid on its page, not the
// settlement wallet, whatever wallet the paying request names; the customer
// details given at creation come back on the payment.
func TestCheckoutFundsItsWallet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	working := b.wallet(t, "KES", "Funded by link")
	r := b.pythonCheckout(map[string]any{"wallet_id": working, "redirect_url": "https://shop.example/thanks?order=7",
		"comment": "Fees", "first_name": "Wanjiku", "last_name": "Kamau", "country": "ke", "zipcode": "00100"})
	if r.Status != 200 {
		t.Fatalf("python checkout: %d %s", r.Status, r.Body)
	}
	co := r.Map(t)
	if co["wallet_id"] != working || co["redirect_url"] != "https://shop.example/thanks?order=7" || co["amount"] != "1000.00" {
		t.Fatalf("checkout: %v", co)
	}
	// The page offers the session's phone masked; sending the mask back pays from it.
	page := string(b.env.Do("GET", "/checkout/"+co["id"].(string)+"/", nil).Body)
	if !strings.Contains(page, `value="2547****4149"`) || strings.Contains(page, "254708374149") {
		t.Fatalf("page does not offer the session's phone masked:\n%s", page)
	}
	// A payer adds the settlement wallet and another tariff to the page's request.
	paid := b.payOnPage(t, co, "2547****4149", map[string]any{"wallet_id": b.settlement, "mobile_tarrif": "CUSTOMER-PAYS"})
	inv := paid["invoice"].(map[string]any)
	if inv["value"] != "1000.00" || inv["charges"] != "15.00" || inv["net_amount"] != "985.00" {
		t.Fatalf("priced with the request's tariff, not the session's: %v", inv)
	}
	final := b.waitPage(t, co, inv["id"].(string))
	if final["invoice"].(map[string]any)["state"] != "COMPLETE" {
		t.Fatalf("not paid: %v", final)
	}
	// The page (its signature) reads the payer masked; the merchant reads the
	// details the session described (TestPayerDataByPrincipal).
	if cust := final["meta"].(map[string]any)["customer"].(map[string]any); cust["email"] != nil || cust["phone_number"] != "2547****4149" {
		t.Fatalf("the page reads the payer unmasked: %v", cust)
	}
	meta := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv["id"]}).Map(t)["meta"].(map[string]any)
	cust := meta["customer"].(map[string]any)
	if cust["email"] != "payer@example.com" || cust["first_name"] != "Wanjiku" || cust["last_name"] != "Kamau" ||
		cust["country"] != "KE" || cust["zipcode"] != "00100" || cust["phone_number"] != "254708374149" || meta["customer_comment"] != "Fees" {
		t.Fatalf("customer details of the session lost: %v", meta)
	}
	if cur, avail := b.balance(t, working); cur != "985.00" || avail != "985.00" {
		t.Fatalf("working wallet %s/%s, want 985.00", cur, avail)
	}
	if cur, _ := b.balance(t, b.settlement); cur != "0.00" {
		t.Fatalf("settlement wallet got %s, want nothing", cur)
	}
	st := b.get("/api/v1/wallets/" + working + "/transactions/")
	rows := st.Map(t)["results"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["value"] != "985.00" || rows[0].(map[string]any)["trans_type"] != "SALE" {
		t.Fatalf("working wallet statement: %s", st.Body)
	}
	checkLedger(t, b.env)

	t.Run("CardCreditsTheSessionWallet", func(t *testing.T) {
		co := b.pythonCheckout(map[string]any{"wallet_id": working, "amount": "200", "card_tarrif": "CUSTOMER-PAYS", "phone_number": nil}).Map(t)
		r := b.env.Do("POST", "/api/v1/payment/card/", map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123",
			"amount": "200", "currency": "KES", "checkout_id": co["id"], "signature": co["signature"],
			"card_tarrif": "BUSINESS-PAYS", "wallet_id": b.settlement})
		if r.Status != 200 {
			t.Fatalf("card: %d %s", r.Status, r.Body)
		}
		inv := r.Map(t)["invoice"].(map[string]any)
		if inv["value"] != "207.00" || inv["net_amount"] != "200.00" || inv["account"] != nil {
			t.Fatalf("card priced or shown wrong: %v", inv)
		}
		if b.waitPage(t, co, inv["id"].(string))["invoice"].(map[string]any)["state"] != "COMPLETE" {
			t.Fatal("card payment failed")
		}
		if cur, _ := b.balance(t, working); cur != "1185.00" {
			t.Fatalf("working wallet %s, want 1185.00", cur)
		}
		if cur, _ := b.balance(t, b.settlement); cur != "0.00" {
			t.Fatalf("settlement wallet got %s", cur)
		}
		checkLedger(t, b.env)
	})

	t.Run("WalletRefusals", func(t *testing.T) {
		other := newBundle(t, b.env, "Other merchant")
		theirs := other.wallet(t, "KES", "Theirs")
		dollars := b.wallet(t, "USD", "Dollars")
		before := b.countCheckouts(t)
		for _, tc := range []struct {
			name   string
			extra  map[string]any
			status int
			attr   string
		}{
			{"another merchant's wallet", map[string]any{"wallet_id": theirs}, 404, "wallet_id"},
			{"unknown wallet", map[string]any{"wallet_id": "NOSUCHWALLET"}, 404, "wallet_id"},
			{"USD wallet", map[string]any{"wallet_id": dollars}, 400, "wallet_id"},
			{"USD wallet for a USD checkout", map[string]any{"wallet_id": dollars, "currency": "USD", "amount": 10}, 400, "wallet_id"},
			{"bad wallet id", map[string]any{"wallet_id": "a/b"}, 400, "wallet_id"},
			{"script redirect", map[string]any{"redirect_url": "javascript:alert(1)"}, 400, "redirect_url"},
			{"relative redirect", map[string]any{"redirect_url": "/thanks"}, 400, "redirect_url"},
			{"long redirect", map[string]any{"redirect_url": "https://x.example/" + strings.Repeat("a", 400)}, 400, "redirect_url"},
			{"bad phone", map[string]any{"phone_number": "0712345678"}, 400, "phone_number"},
			{"bad first name", map[string]any{"first_name": "<b>"}, 400, "first_name"},
			{"bad comment", map[string]any{"comment": "a;b"}, 400, "comment"},
			{"bad country", map[string]any{"country": "KEN"}, 400, "country"},
			{"long zipcode", map[string]any{"zipcode": "12345678901"}, 400, "zipcode"},
		} {
			r := b.pythonCheckout(tc.extra)
			if _, _, attr := errorBody(t, r); r.Status != tc.status || attr != tc.attr {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			}
		}
		if after := b.countCheckouts(t); after != before {
			t.Fatalf("refused checkouts were stored: %d -> %d", before, after)
		}
	})
}

// TestCheckoutCustomerPaysByMpesa: a CUSTOMER-PAYS session paid by M-Pesa from its
// page charges the customer amount + fee and credits the amount, to the cent, even
// when the payer's request asks for BUSINESS-PAYS. Pay requests' tariffs too.
func TestCheckoutCustomerPaysByMpesa(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": "1001", "currency": "KES", "mobile_tarrif": "CUSTOMER-PAYS"},
		"X-SERVICE-PUBLIC-API-KEY", b.public)
	if r.Status != 200 {
		t.Fatalf("checkout: %d %s", r.Status, r.Body)
	}
	co := r.Map(t)
	inv := b.payOnPage(t, co, "254708374149", map[string]any{"mobile_tarrif": "BUSINESS-PAYS"})["invoice"].(map[string]any)
	// 1.5% of 1,001.00 is 15.02; the prompt is rounded up to 1,017.00 (docs/fees.md).
	if inv["value"] != "1017.00" || inv["charges"] != "16.00" || inv["net_amount"] != "1001.00" {
		t.Fatalf("CUSTOMER-PAYS session priced %v", inv)
	}
	if b.waitPage(t, co, inv["id"].(string))["invoice"].(map[string]any)["state"] != "COMPLETE" {
		t.Fatal("not paid")
	}
	if cur, _ := b.balance(t, b.settlement); cur != "1001.00" {
		t.Fatalf("settlement wallet %s, want 1001.00", cur)
	}

	t.Run("PayRequest", func(t *testing.T) {
		r := b.post("/api/v1/payment/collection/pay-requests/", map[string]any{"first_name": "Jane", "last_name": "Doe",
			"email": "jane@example.com", "currency": "KES", "amount": 100, "mobile_tarrif": "CUSTOMER-PAYS"})
		if r.Status != 200 {
			t.Fatalf("pay request: %d %s", r.Status, r.Body)
		}
		id := r.Map(t)["detail"].(map[string]any)["checkout"].(map[string]any)["id"].(string)
		// The emailed link's page carries the session's signature.
		page := string(b.env.Do("GET", "/checkout/"+id+"/", nil).Body)
		i := strings.Index(page, `data-signature="`)
		if i < 0 {
			t.Fatalf("no signature on the page:\n%s", page)
		}
		sig := page[i+len(`data-signature="`):]
		sig = sig[:strings.Index(sig, `"`)]
		co := map[string]any{"id": id, "signature": sig, "currency": "KES", "amount": "100.00"}
		paid := b.payOnPage(t, co, "254708374149", map[string]any{"mobile_tarrif": "BUSINESS-PAYS"})
		inv := paid["invoice"].(map[string]any)
		if inv["value"] != "102.00" || inv["net_amount"] != "100.00" {
			t.Fatalf("pay request's mobile_tarrif lost: %v", inv)
		}
		// The merchant's key reads the payer the pay request named (the page's
		// answer leaves them out: TestPayerDataByPrincipal).
		st := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv["id"]}).Map(t)
		cust := st["meta"].(map[string]any)["customer"].(map[string]any)
		if cust["first_name"] != "Jane" || cust["last_name"] != "Doe" || cust["email"] != "jane@example.com" {
			t.Fatalf("pay request's customer lost: %v", cust)
		}
	})
}

// TestCheckoutUGXAndTZS: sessions in UGX and TZS are paid converted to KES at the
// configured rates (default UGX 0.035, TZS 0.05); those currencies are refused
// outside a session, and a session in a currency without a rate is refused.
func TestCheckoutUGXAndTZS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	create := func(currency string, amount any) map[string]any {
		t.Helper()
		r := b.env.Do("POST", "/api/v1/payment/collection/checkout/", map[string]any{"amount": amount, "currency": currency},
			"X-SERVICE-PUBLIC-API-KEY", b.public)
		if r.Status != 200 {
			t.Fatalf("%s checkout: %d %s", currency, r.Status, r.Body)
		}
		return r.Map(t)
	}
	ugx := create("UGX", 1000)
	inv := b.payOnPage(t, ugx, "254708374149", nil)["invoice"].(map[string]any)
	// UGX 1,000 is KES 35.00; fee 1.5% = 0.525 -> 0.53.
	if inv["currency"] != "KES" || inv["value"] != "35.00" || inv["charges"] != "0.53" || inv["net_amount"] != "34.47" {
		t.Fatalf("UGX payment: %v", inv)
	}
	tzs := create("TZS", "500")
	inv2 := b.payOnPage(t, tzs, "254708374149", nil)["invoice"].(map[string]any)
	// TZS 500 is KES 25.00; fee 0.375 -> 0.38.
	if inv2["value"] != "25.00" || inv2["charges"] != "0.38" || inv2["net_amount"] != "24.62" {
		t.Fatalf("TZS payment: %v", inv2)
	}
	b.waitPage(t, ugx, inv["id"].(string))
	b.waitPage(t, tzs, inv2["id"].(string))
	if cur, _ := b.balance(t, b.settlement); cur != "59.09" {
		t.Fatalf("settlement %s, want 59.09", cur)
	}
	if again := b.env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 1000, "currency": "UGX"},
		"X-SERVICE-PUBLIC-API-KEY", b.public); again.Status != 200 {
		t.Fatalf("%d", again.Status)
	} else if co := again.Map(t); co["paid"] != false {
		t.Fatalf("new session paid: %v", co)
	}
	checkLedger(t, b.env)

	r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "UGX", "amount": "1000",
		"api_ref": "x", "phone_number": "254708374149"})
	if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "currency" {
		t.Fatalf("UGX outside a session: %d %s", r.Status, r.Body)
	}

	env := servicetest.Start(t, func(c *service.Config) {
		rates, err := tariff.ParseRates("USD=129.50")
		if err != nil {
			t.Fatal(err)
		}
		c.API.Rates = rates
	})
	nb := newBundle(t, env, "No shilling rates")
	r = env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 1000, "currency": "TZS"}, "X-SERVICE-PUBLIC-API-KEY", nb.public)
	if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "currency" {
		t.Fatalf("TZS without a rate: %d %s", r.Status, r.Body)
	}
}
