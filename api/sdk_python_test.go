package api_test

// Wire compatibility with the official Python SDK (intasend-python 1.1.2): the real
// package, installed by `make pysdk` into .data/pysdk, calls a real paysvc over HTTP
// through sdktest/python/harness.py, which replaces the SDK's one URL function and
// nothing else. Every call of every SDK module runs, and every result is checked
// here. The SDK raises on 400, 401, 403 and 500 only and returns any other status's
// JSON body as if it were a result (docs/compat.md, "Other clients").

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const pySDKVersion = "1.1.2"

// TestPythonSDK_Collect: collect's quote, STK push (Bearer and public key), status
// by public key alone and by checkout signature, checkout (public key alone), and
// their errors; then the chargebacks calls on the completed STK push.
func TestPythonSDK_Collect(t *testing.T) {
	t.Parallel()
	py := pySDK(t)
	f := sdkStart(t, "1.00")
	res := f.py(t, py, "collect.py", map[string]string{"PAYSVC_PHONE": "254708374149"})

	push := sdkOK(t, res, "stkPush")
	inv, _ := push["invoice"].(map[string]any)
	if inv == nil {
		t.Fatalf("stkPush: no invoice in %v", push)
	}
	id, _ := inv["invoice_id"].(string)
	t.Run("QuoteIsWhatThePushCharges", func(t *testing.T) {
		q := sdkOK(t, res, "quote")
		for field, want := range map[string]any{"method": "M-PESA", "tarrif": "BUSINESS-PAYS", "currency": "KES",
			"amount": "1000.00", "value": "1000.00", "charges": "15.00", "net_amount": "985.00"} {
			sdkWant(t, q, field, want)
		}
		for _, field := range []string{"value", "charges", "net_amount"} {
			sdkWant(t, inv, field, q[field])
		}
	})
	// The SDK names every method's tariff `tarrif`: the quote must price the tariff
	// asked for, as the quote by the method's own field (card_tarrif, mobile_tarrif) does.
	t.Run("QuoteTariffs", func(t *testing.T) {
		for name, body := range map[string]map[string]any{
			"quoteCard": {"method": "CARD-PAYMENT", "amount": "1234.56", "currency": "KES", "card_tarrif": "CUSTOMER-PAYS"},
			"quoteUSD":  {"method": "M-PESA", "amount": "10", "currency": "USD", "mobile_tarrif": "CUSTOMER-PAYS"},
		} {
			q := sdkOK(t, res, name)
			sdkWant(t, q, "tarrif", "CUSTOMER-PAYS")
			sdkWant(t, q, "net_amount", q["settlement_amount"]) // the customer pays the fee on top
			r := f.env.Do("POST", "/api/v1/payment/get_amount_estimate/", body, "X-IntaSend-Public-API-Key", f.public)
			if r.Status != 200 {
				t.Fatalf("%s over HTTP: %d %s", name, r.Status, r.Body)
			}
			if want := r.Map(t); !reflect.DeepEqual(q, want) {
				t.Errorf("%s: %v, over HTTP %v", name, q, want)
			}
		}
	})
	t.Run("STKPush", func(t *testing.T) {
		for field, want := range map[string]any{"state": "PENDING", "provider": "M-PESA", "value": "1000.00",
			"currency": "KES", "api_ref": "py-order-1", "account": "254708374149"} {
			sdkWant(t, inv, field, want)
		}
		// The SDK's one `name` is the payer's first and last name.
		cust, _ := push["customer"].(map[string]any)
		if cust == nil || cust["email"] != "amina@example.com" || cust["first_name"] != "Amina" || cust["last_name"] != "Odhiambo" {
			t.Errorf("customer: %v", push["customer"])
		}
	})
	t.Run("StatusByPublicKey", func(t *testing.T) {
		st := sdkOK(t, res, "status")
		if i, _ := st["invoice"].(map[string]any); i == nil || i["invoice_id"] != id || st["meta"] == nil {
			t.Fatalf("status: %v", st)
		}
		later, _ := sdkOK(t, res, "statusLater")["invoice"].(map[string]any)
		if later["invoice_id"] != id || later["state"] != "COMPLETE" || later["mpesa_reference"] == nil || later["net_amount"] != "985.00" {
			t.Fatalf("statusLater: %v", later)
		}
	})
	t.Run("Checkout", func(t *testing.T) {
		co := sdkOK(t, res, "checkout")
		for field, want := range map[string]any{"amount": "150.00", "currency": "KES", "email": "buyer@example.com",
			"api_ref": "py-checkout-1", "paid": false, "redirect_url": "https://shop.example/thanks", "wallet_id": nil,
			"mobile_tarrif": "BUSINESS-PAYS", "card_tarrif": "BUSINESS-PAYS"} {
			sdkWant(t, co, field, want)
		}
		if sig, _ := co["signature"].(string); sig == "" || co["url"] != fmt.Sprintf("%s/checkout/%v/", f.env.BaseURL, co["id"]) {
			t.Errorf("checkout: signature %q, url %v", sig, co["url"])
		}
		st, _ := sdkOK(t, res, "statusSig")["invoice"].(map[string]any)
		if st["state"] != "COMPLETE" || st["value"] != "150.00" || st["charges"] != "2.25" || st["api_ref"] != "py-checkout-1" {
			t.Fatalf("statusSig: %v", st)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		pyNotFound(t, res, "statusUnknown", "Invoice not found.")
		pyRaised(t, res, "badAmount", "IntaSendBadRequest", "invalid")
		if e := pyRaised(t, res, "wrongSecret", "IntaSendUnauthorized", "authentication_failed"); e.Detail != "Invalid api token" {
			t.Errorf("wrongSecret: %+v", e)
		}
	})
	t.Run("Chargebacks", func(t *testing.T) { pyChargebacks(t, py, f, id) })
}

// pyChargebacks runs chargebacks.py on invoice, a completed 1,000.00 STK push;
// the merchant's wallet also holds 1.00 deposited and the 150.00 checkout.
func pyChargebacks(t *testing.T, py pythonSDK, f *sdkFixture, invoice string) {
	res := f.py(t, py, "chargebacks.py", map[string]string{"PAYSVC_INVOICE": invoice})
	created := sdkOK(t, res, "create")
	for field, want := range map[string]any{"status": "PENDING", "amount": "200.00", "invoice": invoice,
		"reason": "Unavailable service", "reason_details": "Service unavailable"} {
		sdkWant(t, created, field, want)
	}
	if created["id"] == nil || created["chargeback_id"] == nil {
		t.Fatalf("create: %v", created)
	}
	list := sdkOK(t, res, "list")
	sdkListShape(t, list)
	if rows := sdkResults(t, list); len(rows) != 1 || rows[0]["id"] != created["id"] {
		t.Errorf("list: %v", list)
	}
	for _, name := range []string{"retrieve", "details"} {
		got := sdkOK(t, res, name)
		for _, field := range []string{"id", "chargeback_id", "invoice", "amount", "status", "reason"} {
			sdkWant(t, got, field, created[field])
		}
	}
	pyRaised(t, res, "tooMuch", "IntaSendBadRequest", "refund_exceeds_invoice")
	pyNotFound(t, res, "unknown", "Refund not found.")
	// 1.00 + 985.00 + 147.75 collected; the refund holds its 200.00.
	b := &bundle{env: f.env, secret: f.secret, settlement: f.settlement}
	if cur, avail := b.balance(t, f.settlement); cur != "1133.75" || avail != "933.75" {
		t.Errorf("settlement wallet %s/%s, want 1133.75/933.75", cur, avail)
	}
	checkLedger(t, f.env)
}

// TestPythonSDK_Wallets: every wallets call, balances before and after the intra
// transfer and the STK-push funding, and the errors.
func TestPythonSDK_Wallets(t *testing.T) {
	t.Parallel()
	py := pySDK(t)
	f := sdkStart(t, "100.00")
	const label = "PY-WALLET-1"
	// Another merchant's key that may view wallets and nothing else.
	other := f.env.Merchant("Py Viewer")
	res := f.py(t, py, "wallets.py", map[string]string{"PAYSVC_SOURCE_WALLET": f.settlement, "PAYSVC_PHONE": "254708374149",
		"PAYSVC_LABEL": label, "PAYSVC_VIEW_PUBLIC_KEY": other.PublicKey,
		"PAYSVC_VIEW_SECRET_KEY": f.env.Key(other.MerchantID, "view_wallets")})
	b := &bundle{env: f.env, secret: f.secret, settlement: f.settlement}

	list := sdkOK(t, res, "list")
	sdkListShape(t, list)
	if rows := sdkResults(t, list); len(rows) != 1 || rows[0]["wallet_id"] != f.settlement || rows[0]["current_balance"] != "100.00" {
		t.Fatalf("list: %v", list)
	}
	created := sdkOK(t, res, "create")
	id, _ := created["wallet_id"].(string)
	for _, name := range []string{"create", "retrieve", "details"} {
		w := sdkOK(t, res, name)
		sdkWantWallet(t, w, id, label)
		sdkWant(t, w, "current_balance", "0.00")
		sdkWant(t, w, "available_balance", "0.00")
	}
	t.Run("IntraTransfer", func(t *testing.T) {
		tr := sdkOK(t, res, "intraTransfer")
		for side, want := range map[string][2]string{"origin": {f.settlement, "90.00"}, "destination": {id, "10.00"}} {
			w, _ := tr[side].(map[string]any)
			if w == nil {
				t.Fatalf("intra_transfer: no %s in %v", side, tr)
			}
			sdkWant(t, w, "wallet_id", want[0])
			sdkWant(t, w, "current_balance", want[1])
			sdkWant(t, w, "available_balance", want[1])
		}
		rows := sdkResults(t, sdkOK(t, res, "transactions"))
		if len(rows) != 1 || rows[0]["value"] != "10.00" || rows[0]["running_balance"] != "10.00" || rows[0]["narrative"] != "py transfer" {
			t.Fatalf("transactions: %v", rows)
		}
	})
	t.Run("FundByLink", func(t *testing.T) {
		co := sdkOK(t, res, "fundLink")
		for field, want := range map[string]any{"wallet_id": id, "amount": "500.00", "currency": "KES",
			"email": "topup@example.com", "api_ref": "API Request", "paid": false} {
			sdkWant(t, co, field, want)
		}
		if sig, _ := co["signature"].(string); sig == "" || co["url"] == nil {
			t.Errorf("fundLink: %v", co)
		}
	})
	t.Run("FundBySTKPush", func(t *testing.T) {
		inv, _ := sdkOK(t, res, "fundStk")["invoice"].(map[string]any)
		if inv["state"] != "PENDING" || inv["value"] != "300.00" || inv["charges"] != "4.50" || inv["net_amount"] != "295.50" {
			t.Fatalf("fundStk: %v", inv)
		}
		if later, _ := sdkOK(t, res, "fundStkLater")["invoice"].(map[string]any); later["state"] != "COMPLETE" {
			t.Fatalf("fundStkLater: %v", later)
		}
		// The push credits the wallet it names, not the settlement wallet.
		after := sdkOK(t, res, "detailsAfter")
		sdkWant(t, after, "current_balance", "305.50")
		sdkWant(t, after, "available_balance", "305.50")
	})
	t.Run("Errors", func(t *testing.T) {
		pyRaised(t, res, "overdraw", "IntaSendBadRequest", "insufficient_funds")
		pyNotFound(t, res, "unknown", "Wallet not found.")
		if e := pyRaised(t, res, "wrongSecret", "IntaSendUnauthorized", "authentication_failed"); e.Detail != "Invalid api token" {
			t.Errorf("wrongSecret: %+v", e)
		}
		pyRaised(t, res, "viewCreate", "IntaSendNotAllowed", "permission_denied")
	})
	t.Run("AnotherMerchantsKey", func(t *testing.T) {
		rows := sdkResults(t, sdkOK(t, res, "viewList"))
		if len(rows) != 1 || rows[0]["wallet_id"] == f.settlement || rows[0]["wallet_type"] != "SETTLEMENT" || rows[0]["current_balance"] != "0.00" {
			t.Errorf("viewList: want the other merchant's settlement wallet alone, got %v", rows)
		}
	})
	for w, want := range map[string]string{id: "305.50", f.settlement: "90.00"} {
		if cur, avail := b.balance(t, w); cur != want || avail != want {
			t.Errorf("wallet %s: %s/%s, want %s", w, cur, avail, want)
		}
	}
	checkLedger(t, f.env)
}

// TestPythonSDK_Transfers: every transfer call. An M-Pesa file approved with the
// whole initiation response (one recipient fails), B2B, PesaLink, P2P and airtime
// files paid without approval, a file left for approval, the bank codes, and the
// errors; then the money to the cent.
func TestPythonSDK_Transfers(t *testing.T) {
	t.Parallel()
	py := pySDK(t)
	f := sdkStart(t, "100000.00")
	payer := &bundle{env: f.env, secret: f.secret, settlement: f.settlement}
	recipient := newBundle(t, f.env, "Py Recipient")
	r := payer.post("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "Airtime",
		"can_disburse": true})
	if r.Status != 201 {
		t.Fatalf("create wallet: %d %s", r.Status, r.Body)
	}
	working := r.Map(t)["wallet_id"].(string)
	payer.deposit(t, working, "100.00")
	res := f.py(t, py, "transfers.py", map[string]string{"PAYSVC_RECIPIENT_WALLET": recipient.settlement,
		"PAYSVC_WORKING_WALLET": working})

	t.Run("MpesaWithApproval", func(t *testing.T) {
		m := sdkOK(t, res, "mpesa")
		for field, want := range map[string]any{"status": "PREVIEW-AND-APPROVE", "status_code": "BP103", "provider": "MPESA-B2C",
			"requires_approval": "YES", "transactions_count": float64(2), "total_amount": "1250.00",
			"charge_estimate": "20.00", "total_amount_estimate": "1270.00"} {
			sdkWant(t, m, field, want)
		}
		if n, _ := m["nonce"].(string); n == "" {
			t.Errorf("no nonce in the initiation response: %v", m)
		}
		sdkWant(t, sdkTxns(t, m)["254708374149"], "amount", "1000.00") // sent as a JSON number
		a := sdkOK(t, res, "approve")
		sdkWant(t, a, "status", "PROCESSING")
		sdkWant(t, a, "tracking_id", m["tracking_id"])
		pyRaised(t, res, "approveAgain", "IntaSendBadRequest", "not_awaiting_approval")
		txns := sdkTxns(t, pyFinal(t, payer, res, "mpesaStatus", "MPESA-B2C", "1000.00", "250.00", "10.00"))
		if bad := txns["254712340011"]; bad["status"] != "FAILED" || bad["status_code"] != "TF106" || bad["provider_reference"] != nil {
			t.Errorf("invalid account: %v", bad)
		}
		sdkPaid(t, txns["254708374149"])
	})
	t.Run("B2B", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "b2b"), "status", "PROCESSING")
		tx := sdkTxns(t, pyFinal(t, payer, res, "b2bStatus", "MPESA-B2B", "2000.00", "0.00", "20.00"))["888880"] // a JSON number
		sdkPaid(t, tx)
		sdkWant(t, tx, "account_type", "PayBill")
		sdkWant(t, tx, "account_reference", "ACC-1")
	})
	t.Run("Bank", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "bank"), "status", "PROCESSING")
		tx := sdkTxns(t, pyFinal(t, payer, res, "bankStatus", "PESALINK", "2500.50", "0.00", "50.00"))["1234567890"]
		sdkPaid(t, tx)
		sdkWant(t, tx, "bank_code", "11")
	})
	t.Run("P2P", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "p2p"), "status", "PROCESSING")
		sdkPaid(t, sdkTxns(t, pyFinal(t, payer, res, "p2pStatus", "P2P", "750.25", "0.00", "0.00"))[recipient.settlement])
	})
	t.Run("AirtimeFromAWorkingWallet", func(t *testing.T) {
		a := sdkOK(t, res, "airtime")
		sdkWant(t, a, "status", "PROCESSING")
		if w, _ := a["wallet"].(map[string]any); w == nil || w["wallet_id"] != working {
			t.Errorf("airtime paid from %v, want the wallet_id %s", a["wallet"], working)
		}
		sdkPaid(t, sdkTxns(t, pyFinal(t, payer, res, "airtimeStatus", "AIRTIME", "50.00", "0.00", "0.00"))["254722000111"])
	})
	t.Run("SendMoneyAwaitsApproval", func(t *testing.T) {
		m := sdkOK(t, res, "sendMoney")
		sdkWant(t, m, "status", "PREVIEW-AND-APPROVE")
		sdkWant(t, m, "provider", "MPESA-B2C")
		sdkWant(t, m, "total_amount", "100.00")
	})
	t.Run("BankCodes", func(t *testing.T) { pyBankCodes(t, f, res) })
	t.Run("Errors", func(t *testing.T) {
		pyRaised(t, res, "badAmount", "IntaSendBadRequest", "invalid")
		pyNotFound(t, res, "unknownStatus", "Payment file not found.")
		// Raised by the SDK itself, before any request.
		pyRaised(t, res, "airtimeNone", "ValueError", "")
	})
	t.Run("Money", func(t *testing.T) {
		// 100,000 less what was paid and its charges: 1,000 + 10 (B2C; the failed
		// 250 and its fee are released), 2,000 + 20, 2,500.50 + 50, 750.25. The
		// airtime's 50 left the working wallet; the file awaiting approval holds nothing.
		for w, want := range map[string]string{f.settlement: "93669.25", working: "50.00"} {
			if cur, avail := payer.balance(t, w); cur != want || avail != want {
				t.Errorf("payer wallet %s: %s/%s, want %s", w, cur, avail, want)
			}
		}
		if cur, avail := recipient.balance(t, recipient.settlement); cur != "750.25" || avail != "750.25" {
			t.Errorf("recipient settlement: %s/%s, want 750.25", cur, avail)
		}
		checkLedger(t, f.env)
	})
}

// TestPythonSDK_LinksAndCustomers: every payment_links and customers call. In
// 1.1.2 payment_links.deactivate() and update() take no argument and list the links.
func TestPythonSDK_LinksAndCustomers(t *testing.T) {
	t.Parallel()
	py := pySDK(t)
	f := sdkStart(t, "1.00")
	t.Run("PaymentLinks", func(t *testing.T) { pyLinks(t, f, f.py(t, py, "links.py", nil)) })
	t.Run("Customers", func(t *testing.T) {
		res := f.py(t, py, "customers.py", map[string]string{"PAYSVC_PHONE": "254708374149"})
		c := sdkOK(t, res, "create")
		for field, want := range map[string]any{"email": "wanjiku@example.com", "first_name": "Wanjiku", "last_name": "Kamau",
			"phone_number": "+254711000001", "country": "KE"} {
			sdkWant(t, c, field, want)
		}
		list := sdkOK(t, res, "list")
		sdkListShape(t, list)
		if rows := sdkResults(t, list); len(rows) != 1 || !reflect.DeepEqual(rows[0], c) {
			t.Errorf("list: %v, created %v", list, c)
		}
		pySame(t, res, c, "retrieve", "details")
		paid, _ := sdkOK(t, res, "pay")["invoice"].(map[string]any)
		if paid["state"] != "COMPLETE" || paid["value"] != "120.00" {
			t.Fatalf("pay: %v", paid)
		}
		rows := sdkResults(t, sdkOK(t, res, "transactions"))
		if len(rows) != 1 {
			t.Fatalf("transactions: %v", rows)
		}
		inv, _ := rows[0]["invoice"].(map[string]any)
		cust, _ := rows[0]["customer"].(map[string]any)
		if inv["invoice_id"] != paid["invoice_id"] || inv["value"] != "120.00" || cust["customer_id"] != c["customer_id"] {
			t.Errorf("transaction: %v", rows[0])
		}
		pyRaised(t, res, "badEmail", "IntaSendBadRequest", "invalid")
		pyNotFound(t, res, "unknown", "Customer not found.")
	})
}

func pyLinks(t *testing.T, f *sdkFixture, res map[string]json.RawMessage) {
	link := sdkOK(t, res, "create")
	id := link["id"]
	for field, want := range map[string]any{"title": "Stall rent", "is_active": true, "redirect_url": "https://shop.example/thanks",
		"amount": 250.0, "usage_limit": 5.0, "currency": "KES", "mobile_tarrif": "BUSINESS-PAYS", "card_tarrif": "BUSINESS-PAYS",
		"url": fmt.Sprintf("%s/pay/%v/", f.env.BaseURL, id), "qrcode_file": fmt.Sprintf("%s/pay/%v/qr.png", f.env.BaseURL, id)} {
		sdkWant(t, link, field, want)
	}
	open := sdkOK(t, res, "createOpen")
	for field, want := range map[string]any{"title": "Harambee", "amount": 0.0, "usage_limit": 0.0, "redirect_url": nil, "is_active": true} {
		sdkWant(t, open, field, want)
	}
	list := sdkOK(t, res, "list")
	sdkListShape(t, list)
	if rows := sdkResults(t, list); len(rows) != 2 || !reflect.DeepEqual(rows[0], open) || !reflect.DeepEqual(rows[1], link) {
		t.Errorf("list (newest first): %v", list)
	}
	pySame(t, res, link, "retrieve", "details", "afterwards")
	pySame(t, res, list, "deactivate", "update")
	pyRaised(t, res, "badCurrency", "IntaSendBadRequest", "invalid")
	pyNotFound(t, res, "unknown", "Payment link not found.")
}

// pyBankCodes: the SDK's get_bank_codes() (a GET with a "{}" body and the public key
// alone) returns the same list a plain GET does, Co-operative Bank's 11 among them.
func pyBankCodes(t *testing.T, f *sdkFixture, res map[string]json.RawMessage) {
	var got, want []map[string]any
	if err := json.Unmarshal(res["bankCodes"], &got); err != nil {
		t.Fatalf("bankCodes: want a JSON array: %v: %s", err, res["bankCodes"])
	}
	r := f.env.Do("GET", "/api/v1/send-money/bank-codes/ke/", nil)
	if r.Status != 200 {
		t.Fatalf("bank codes over HTTP: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &want)
	if len(got) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("bankCodes: %v, over HTTP %v", got, want)
	}
	for _, c := range got {
		if c["bank_code"] == "11" && c["bank_name"] == "Co-operative Bank of Kenya" {
			return
		}
	}
	t.Errorf("bankCodes has no Co-operative Bank (11): %v", got)
}

// pyFinal checks a file the SDK polled to its end, and that the service says the
// same over HTTP.
func pyFinal(t *testing.T, b *bundle, res map[string]json.RawMessage, name, provider, paid, failed, charges string) map[string]any {
	t.Helper()
	done := sdkOK(t, res, name)
	for field, want := range map[string]any{"status": "COMPLETE", "status_code": "BC100", "provider": provider,
		"paid_amount": paid, "failed_amount": failed, "actual_charges": charges} {
		sdkWant(t, done, field, want)
	}
	r := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": done["tracking_id"]})
	if r.Status != 200 {
		t.Fatalf("status over HTTP: %d %s", r.Status, r.Body)
	}
	again := r.Map(t)
	for _, k := range []string{"status", "status_code", "paid_amount", "failed_amount", "actual_charges"} {
		if again[k] != done[k] {
			t.Errorf("HTTP status %s = %v, the SDK saw %v", k, again[k], done[k])
		}
	}
	return done
}

// sdkTxns indexes a payment file's transactions by account (both SDKs' tests).
func sdkTxns(t *testing.T, file map[string]any) map[string]map[string]any {
	t.Helper()
	raw, _ := file["transactions"].([]any)
	out := map[string]map[string]any{}
	for _, x := range raw {
		tx, _ := x.(map[string]any)
		acc, _ := tx["account"].(string)
		out[acc] = tx
	}
	if len(out) != len(raw) || len(raw) == 0 {
		t.Fatalf("transactions: %v", file["transactions"])
	}
	return out
}

// sdkPaid checks a transaction the rail paid.
func sdkPaid(t *testing.T, tx map[string]any) {
	t.Helper()
	if tx["status"] != "COMPLETE" || tx["status_code"] != "TS100" || tx["provider_reference"] == nil {
		t.Errorf("paid transaction: %v", tx)
	}
}

// pySame checks that each named call returned exactly want.
func pySame(t *testing.T, res map[string]json.RawMessage, want map[string]any, names ...string) {
	t.Helper()
	for _, name := range names {
		if got := sdkOK(t, res, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// pyRaised checks that a call raised the exception class (the SDK's: IntaSendBadRequest
// for 400, IntaSendUnauthorized for 401, ...) and, for the SDK's own classes, that its
// text is the server's JSON error body with the error code, and returns that body.
func pyRaised(t *testing.T, res map[string]json.RawMessage, name, class, code string) sdkErrorBody {
	t.Helper()
	var r sdkResult
	if err := json.Unmarshal(res[name], &r); err != nil || r.Error == nil {
		t.Fatalf("%s: want %s raised, the SDK returned %q (calls: %v)", name, class, res[name], sdkKeys(res))
	}
	if r.RejectedWith != class {
		t.Fatalf("%s: raised %s, want %s: %s", name, r.RejectedWith, class, *r.Error)
	}
	if !strings.HasPrefix(class, "IntaSend") {
		return sdkErrorBody{Detail: *r.Error}
	}
	e := pyErrorBody(t, name, []byte(*r.Error))
	if e.Code != code {
		t.Errorf("%s: code %q, want %q (detail %q)", name, e.Code, code, e.Detail)
	}
	return e
}

// pyNotFound checks a 404, a status the SDK does not raise on (it raises on 400,
// 401, 403 and 500 only): the call returns the server's error body as its result.
func pyNotFound(t *testing.T, res map[string]json.RawMessage, name, detail string) {
	t.Helper()
	raw, _ := json.Marshal(sdkOK(t, res, name))
	if e := pyErrorBody(t, name, raw); e.Detail != detail || e.Code != "not_found" {
		t.Errorf("%s: %+v, want detail %q, code not_found", name, e, detail)
	}
}

func pyErrorBody(t *testing.T, name string, raw []byte) sdkErrorBody {
	t.Helper()
	var body struct {
		Detail string `json:"detail"`
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Detail == "" || len(body.Errors) == 0 {
		t.Fatalf("%s: not the server's JSON error body (%v): %s", name, err, raw)
	}
	return sdkErrorBody{Detail: body.Detail, Code: body.Errors[0].Code}
}

// pythonSDK is the harness directory and the virtualenv's interpreter.
type pythonSDK struct{ dir, python string }

// pySDK finds the virtualenv `make pysdk` builds, failing (never skipping) when it is
// missing or holds another version of the SDK: `make test` depends on `make pysdk`.
func pySDK(t *testing.T) pythonSDK {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("sdktest", "python"))
	if err != nil {
		t.Fatal(err)
	}
	venv, err := filepath.Abs(filepath.Join("..", ".data", "pysdk"))
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no Python virtualenv at %s (%v): run `make pysdk`", venv, err)
	}
	dist, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "intasend_python-*.dist-info"))
	if want := "intasend_python-" + pySDKVersion + ".dist-info"; len(dist) != 1 || filepath.Base(dist[0]) != want {
		t.Fatalf("%s holds %v, want %s: run `make pysdk`", venv, dist, want)
	}
	return pythonSDK{dir: dir, python: python}
}

// py runs a script of sdktest/python against the service as the merchant. The
// interpreter writes no __pycache__ into the source tree.
func (f *sdkFixture) py(t *testing.T, py pythonSDK, script string, vars map[string]string) map[string]json.RawMessage {
	t.Helper()
	env := map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}
	for k, v := range vars {
		env[k] = v
	}
	return f.script(t, py.dir, []string{py.python, script}, env)
}

// script runs a harness script (argv, in dir) with the service's URL and the
// merchant's keys in its environment, and returns its JSON output keyed by call name.
// A hang, a crash or a call left pending fails the test with everything the script
// printed.
func (f *sdkFixture) script(t *testing.T, dir string, argv []string, vars map[string]string) map[string]json.RawMessage {
	t.Helper()
	name := argv[len(argv)-1]
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PAYSVC_BASE_URL="+f.env.BaseURL,
		"PAYSVC_PUBLIC_KEY="+f.public, "PAYSVC_SECRET_KEY="+f.secret)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s\nstdout:\n%s\nstderr:\n%s", name, sdkTimeout, &stdout, &stderr)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v\nstderr:\n%s", name, err, &stderr)
	}
	if err != nil {
		t.Fatalf("%s exited with %v (a call is pending or the SDK crashed)\nstdout:\n%s\nstderr:\n%s", name, err, &stdout, &stderr)
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%s printed no JSON object: %v\nstdout:\n%s\nstderr:\n%s", name, err, &stdout, &stderr)
	}
	t.Logf("%s:\n%s", name, &stdout)
	return res
}
