package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

func TestSTKPush(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("SuccessCreditsTheSettlementWallet", func(t *testing.T) {
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100.40",
			"api_ref": "order-1", "public_key": b.public})
		if r.Status != 200 {
			t.Fatalf("stk push: %d %s", r.Status, r.Body)
		}
		var sess struct {
			ID      string         `json:"id"`
			Invoice map[string]any `json:"invoice"`
			Cust    map[string]any `json:"customer"`
		}
		r.JSON(t, &sess)
		inv := sess.Invoice
		// 100.40 rounds up to 101; BUSINESS-PAYS takes the 1.5% fee (1.52) out of it.
		if inv["state"] != "PENDING" || inv["provider"] != "M-PESA" || inv["value"] != "101.00" || inv["charges"] != "1.52" ||
			inv["net_amount"] != "99.48" || inv["api_ref"] != "order-1" || sess.Cust["phone_number"] != "254708374149" || sess.ID == "" {
			t.Fatalf("session: %s", r.Body)
		}
		final := b.waitInvoice(t, inv["invoice_id"].(string))
		if final["state"] != "COMPLETE" || final["mpesa_reference"] == nil || final["failed_reason"] != nil {
			t.Fatalf("final invoice: %v", final)
		}
		if cur, avail := b.balance(t, b.settlement); cur != "99.48" || avail != "99.48" {
			t.Fatalf("settlement wallet %s/%s, want 99.48 (collected M-Pesa funds are cleared at once)", cur, avail)
		}
		rep, err := storage.CheckLedger(context.Background(), b.env.Schema.DB)
		if err != nil || !rep.OK {
			t.Fatalf("ledger: %+v %v", rep, err)
		}
	})
	t.Run("CustomerPaysAddsTheFee", func(t *testing.T) {
		w := b.wallet(t, "KES", "Collections")
		r := b.post("/api/v1/payment/mpesa-stk-push", map[string]any{"phone_number": "254711111111", "amount": 200,
			"mobile_tarrif": "CUSTOMER-PAYS", "wallet_id": w})
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		inv := r.Map(t)["invoice"].(map[string]any)
		if inv["value"] != "203.00" || inv["charges"] != "3.00" || inv["net_amount"] != "200.00" {
			t.Fatalf("customer-pays invoice: %v", inv)
		}
		b.waitInvoice(t, inv["invoice_id"].(string))
		if cur, _ := b.balance(t, w); cur != "200.00" {
			t.Fatalf("wallet %s, want the full 200.00", cur)
		}
	})
	t.Run("CancelledFailsWithNoMoney", func(t *testing.T) {
		before, _ := b.balance(t, b.settlement)
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254700000001", "amount": "50"})
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		final := b.waitInvoice(t, id)
		if final["state"] != "FAILED" || final["failed_code"] != "1032" || final["failed_reason"] != "Request cancelled by user" ||
			final["failed_code_link"] == nil || final["mpesa_reference"] != nil {
			t.Fatalf("cancelled invoice: %v", final)
		}
		if after, _ := b.balance(t, b.settlement); after != before {
			t.Fatalf("a failed collection moved money: %s -> %s", before, after)
		}
	})
	t.Run("Validation", func(t *testing.T) {
		for _, tc := range []struct {
			body map[string]any
			attr string
		}{
			{map[string]any{"amount": "100"}, "phone_number"},
			{map[string]any{"phone_number": "0712345678", "amount": "100"}, "phone_number"},
			{map[string]any{"phone_number": "254712345678"}, "amount"},
			{map[string]any{"phone_number": "254712345678", "amount": "9"}, "amount"},
			{map[string]any{"phone_number": "254712345678", "amount": "150000.01"}, "amount"},
			{map[string]any{"phone_number": "254712345678", "amount": "abc"}, "amount"},
			{map[string]any{"phone_number": "254712345678", "amount": "100", "api_ref": "bad<ref>"}, "api_ref"},
			{map[string]any{"phone_number": "254712345678", "amount": "100", "mobile_tarrif": "NOBODY-PAYS"}, "mobile_tarrif"},
			{map[string]any{"phone_number": "254712345678", "amount": "100", "currency": "USD"}, "currency"},
		} {
			r := b.post("/api/v1/payment/mpesa-stk-push/", tc.body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.attr {
				t.Errorf("%v: %d %s (want 400 on %s)", tc.body, r.Status, r.Body, tc.attr)
			}
		}
		usd := b.wallet(t, "USD", "Dollars")
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254712345678", "amount": "100", "wallet_id": usd})
		if _, code, _ := errorBody(t, r); r.Status != 400 || code != "wallet_not_kes" {
			t.Fatalf("USD wallet: %d %s", r.Status, r.Body)
		}
	})
	t.Run("PublicKeyAlone", func(t *testing.T) {
		r := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254712345678", "amount": "10",
			"public_key": b.public})
		if r.Status != 200 {
			t.Fatalf("public key alone: %d %s", r.Status, r.Body)
		}
	})
	t.Run("StatusIsMerchantScoped", func(t *testing.T) {
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254712345678", "amount": "10"})
		id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		other := newBundle(t, b.env, "Other")
		if r := other.post("/api/v1/payment/status/", map[string]any{"invoice_id": id}); r.Status != 404 {
			t.Fatalf("another merchant's invoice: %d %s", r.Status, r.Body)
		}
	})
	t.Run("OneCollectionEventPerStateChange", func(t *testing.T) {
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254722222222", "amount": "10"})
		id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		b.waitInvoice(t, id)
		states := map[string]int{}
		readLog(t, b.env, topics.EventTopics[topics.CollectionEvent], 15*time.Second, func(rec *kgo.Record) {
			if _, p, ok := eventOf[topics.Collection](t, rec); ok && p.ID == id {
				states[p.State]++
				if p.Provider != "MPESA" { // the events' spelling (spec), not the invoice's M-PESA
					t.Errorf("collection_event provider %q, want MPESA", p.Provider)
				}
			}
		}, func() (bool, string) {
			return states["COMPLETE"] > 0, fmt.Sprintf("collection events for %s by state: %v", id, states)
		})
		if states["PENDING"] != 1 || states["PROCESSING"] != 1 || states["COMPLETE"] != 1 {
			t.Fatalf("collection events for %s by state: %v", id, states)
		}
	})
}

// A provider that repeats its callback (or a rail request delivered twice) produces
// the same result command again: it has one effect.
func TestSTKPush_DuplicateProviderResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254733333333", "amount": "1000"})
	id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	final := b.waitInvoice(t, id)
	before, _ := b.balance(t, b.settlement)
	if before != "985.00" {
		t.Fatalf("after one collection the wallet holds %s, want 985.00", before)
	}
	cmd, err := rails.ResultCommand(mpesa.Result{InvoiceID: id, MerchantID: b.merchant, Stage: mpesa.StageFinal,
		Code: 0, Receipt: final["mpesa_reference"].(string)}, rails.Origin{Environment: "sandbox", Simulated: true})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.env.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value, _ := topics.EncodeCommand(cmd)
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: b.env.Topic(topics.CommandsTopic),
			Key: topics.CommandKey(b.merchant), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the engine has consumed them: a later command from the same
	// merchant is applied after them.
	b.deposit(t, b.wallet(t, "KES", "Marker"), "1.00")
	if after, _ := b.balance(t, b.settlement); after != before {
		t.Fatalf("a repeated provider result moved money: %s -> %s", before, after)
	}
	var n int
	if err := b.env.Schema.DB.Get(&n, `SELECT count(*) FROM ledger_entries WHERE trans_type = 'SALE'`); err != nil || n != 2 {
		t.Fatalf("SALE entries: %d (%v), want the 2 of one collection", n, err)
	}
	// The stored answer to a result is the invoice's id, state and version, not
	// the whole invoice: nobody reads it but the duplicate check.
	var stored []byte
	if err := b.env.Schema.DB.Get(&stored, `SELECT reply FROM processed_commands WHERE command_id = $1`, cmd.ID); err != nil {
		t.Fatal(err)
	}
	reply, err := topics.DecodeReply(stored)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	var ack struct {
		InvoiceID string `json:"invoice_id"`
		State     string `json:"state"`
		Version   int64  `json:"version"`
	}
	if err := json.Unmarshal(reply.Result, &fields); err != nil {
		t.Fatalf("stored reply %s: %v", stored, err)
	}
	if err := json.Unmarshal(reply.Result, &ack); err != nil {
		t.Fatalf("stored reply %s: %v", stored, err)
	}
	// Version 3: opened by the push, PROCESSING on ACCEPTED, COMPLETE on FINAL.
	if len(fields) != 3 || ack.InvoiceID != id || ack.State != "COMPLETE" || ack.Version != 3 {
		t.Fatalf("stored reply of the FINAL result: %s", stored)
	}
}

// The signature returned with a collection lets a browser poll that invoice's
// status with no key at all; a tampered, foreign or other-invoice token is refused.
func TestPaymentStatus_Signature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	push := func() (string, string) {
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254744444444", "amount": "10"})
		m := r.Map(t)
		sig, _ := m["signature"].(string)
		if r.Status != 200 || sig == "" {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		return m["invoice"].(map[string]any)["invoice_id"].(string), sig
	}
	inv1, sig1 := push()
	inv2, _ := push()

	r := b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv1, "signature": sig1})
	if r.Status != 200 || r.Map(t)["invoice"].(map[string]any)["invoice_id"] != inv1 {
		t.Fatalf("status by signature: %d %s", r.Status, r.Body)
	}
	tampered := sig1[:len(sig1)-2] + "AA"
	if tampered == sig1 {
		tampered = sig1[:len(sig1)-2] + "BB"
	}
	r = b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv1, "signature": tampered})
	if d, _, _ := errorBody(t, r); r.Status != 401 || d != "Invalid or expired signature" {
		t.Fatalf("tampered: %d %s", r.Status, r.Body)
	}
	r = b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv2, "signature": sig1})
	if r.Status != 403 {
		t.Fatalf("another invoice with this signature: %d %s", r.Status, r.Body)
	}
	if r := b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv1}); r.Status != 401 {
		t.Fatalf("no credentials at all: %d %s", r.Status, r.Body)
	}
	// Merchant B's token cannot read merchant A's invoice.
	other := newBundle(t, b.env, "Other")
	r = other.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254755555555", "amount": "10"})
	otherSig := r.Map(t)["signature"].(string)
	r = b.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv1, "signature": otherSig})
	if r.Status != 403 && r.Status != 404 {
		t.Fatalf("foreign signature: %d %s", r.Status, r.Body)
	}
}

func TestCollection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := func(extra map[string]any) map[string]any {
		m := map[string]any{"method": "M-PESA", "currency": "KES", "amount": "500", "api_ref": "coll-1", "phone_number": "254766666666",
			"first_name": "Jane", "last_name": "Doe", "email": "jane@example.com"}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	t.Run("KESBySecretKey", func(t *testing.T) {
		r := b.post("/api/v1/payment/collection/", body(nil))
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		inv := m["invoice"].(map[string]any)
		if inv["id"] == nil || inv["state"] != "PENDING" || inv["value"] != "500.00" || inv["currency"] != "KES" || m["signature"] == "" {
			t.Fatalf("%s", r.Body)
		}
		if final := b.waitInvoice(t, inv["id"].(string)); final["state"] != "COMPLETE" {
			t.Fatalf("%v", final)
		}
	})
	t.Run("USDConvertedToKES", func(t *testing.T) {
		r := b.env.Do("POST", "/api/v1/payment/collection/", body(map[string]any{"currency": "USD", "amount": "10", "public_key": b.public}))
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		inv := r.Map(t)["invoice"].(map[string]any)
		// 10 USD at the default 129.50 = 1295.00 KES.
		if inv["value"] != "1295.00" || inv["currency"] != "KES" {
			t.Fatalf("%v", inv)
		}
		if final := b.waitInvoice(t, inv["id"].(string)); final["state"] != "COMPLETE" || final["value"] != "1295.00" {
			t.Fatalf("%v", final)
		}
		ledgerOK(t, b)
	})
	t.Run("PesaLink", func(t *testing.T) {
		// Its own wallet: earlier subtests' collections may still land in the settlement one.
		pw := b.wallet(t, "KES", "PesaLink in")
		before, _ := b.balance(t, pw)
		r := b.post("/api/v1/payment/collection/", body(map[string]any{"method": "PESALINK", "amount": "10000", "phone_number": nil, "wallet_id": pw}))
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		inv := r.Map(t)["invoice"].(map[string]any)
		// PesaLink: 0.5% with a KES 10 minimum and KES 200 cap: 50.00 on 10,000.
		if inv["provider"] != "PESALINK" || inv["charges"] != "50.00" || inv["net_amount"] != "9950.00" {
			t.Fatalf("%v", inv)
		}
		if final := b.waitInvoice(t, inv["id"].(string)); final["state"] != "COMPLETE" || final["clearing_status"] != "AVAILABLE" {
			t.Fatalf("%v", final)
		}
		after, _ := b.balance(t, pw)
		if !money.MustParse(after).Sub(money.MustParse(before)).Equal(money.MustParse("9950.00")) {
			t.Fatalf("PesaLink credited %s -> %s, want +9950.00", before, after)
		}
		r = b.post("/api/v1/payment/collection/", body(map[string]any{"method": "PESALINK", "phone_number": "254700000003"}))
		if final := b.waitInvoice(t, r.Map(t)["invoice"].(map[string]any)["id"].(string)); final["state"] != "FAILED" || final["failed_code"] != "51" {
			t.Fatalf("insufficient funds: %v", final)
		}
		ledgerOK(t, b)
	})
	t.Run("Refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			body map[string]any
			attr string
		}{
			{"BothCredentials", body(map[string]any{"public_key": b.public}), "public_key"},
			{"PesalinkBadTariff", body(map[string]any{"method": "PESALINK", "bank_tarrif": "X"}), "bank_tarrif"},
			{"PesalinkOverMax", body(map[string]any{"method": "PESALINK", "amount": "1000000"}), "amount"},
			{"UnknownMethod", body(map[string]any{"method": "CASH"}), "method"},
			{"NoAPIRef", body(map[string]any{"api_ref": nil}), "api_ref"},
			{"NoPhone", body(map[string]any{"phone_number": nil}), "phone_number"},
			{"BadCurrency", body(map[string]any{"currency": "JPY"}), "currency"},
			{"UnderMinAfterConversion", body(map[string]any{"currency": "USD", "amount": "0.05"}), "amount"},
			{"OverMax", body(map[string]any{"amount": "150001"}), "amount"},
			{"BadEmail", body(map[string]any{"email": "not-an-email"}), "email"},
			{"LongAddress", body(map[string]any{"address": string(make([]byte, 141))}), "address"},
		} {
			r := b.post("/api/v1/payment/collection/", tc.body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.attr {
				t.Errorf("%s: %d %s (want 400 on %s)", tc.name, r.Status, r.Body, tc.attr)
			}
		}
		if r := b.post("/api/v1/payment/collection/", body(map[string]any{"checkout_id": "nope"})); r.Status != 404 {
			t.Errorf("unknown checkout: %d %s", r.Status, r.Body)
		}
	})
}

// Every sandbox M-Pesa outcome, through HTTP: the final state, the result code, and
// money only on success.
func TestSTKPush_EverySandboxOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		phone, state, code string
	}{
		{"254711110001", "FAILED", "1032"}, // cancelled by the customer
		{"254711110002", "FAILED", "1037"}, // timeout: the phone cannot be reached
		{"254711110003", "FAILED", "1"},    // insufficient funds, after the PIN
		{"254711110004", "FAILED", "2001"}, // wrong PIN
		{"254711110005", "FAILED", "1001"}, // subscriber busy
		{"254711110006", "FAILED", "1019"}, // expired
		{"254711119999", "COMPLETE", ""},   // any other number: approved
	} {
		t.Run(tc.phone, func(t *testing.T) {
			before, _ := b.balance(t, b.settlement)
			r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": tc.phone, "amount": "100"})
			if r.Status != 200 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
			final := b.waitInvoice(t, id)
			code, _ := final["failed_code"].(string)
			if final["state"] != tc.state || code != tc.code {
				t.Fatalf("final %v, want %s %s", final, tc.state, tc.code)
			}
			after, _ := b.balance(t, b.settlement)
			moved := !money.MustParse(after).Equal(money.MustParse(before))
			if moved != (tc.state == "COMPLETE") {
				t.Fatalf("balance %s -> %s for a %s invoice", before, after, tc.state)
			}
		})
	}
}
