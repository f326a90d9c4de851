package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/rails"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics"
)

// waitFile polls the status endpoint until the file is COMPLETE, CANCELLED or FAILED.
func (b *bundle) waitFile(t *testing.T, trackingID string) map[string]any {
	t.Helper()
	var f map[string]any
	waittest.Eventually(t, 60*time.Second, func() (bool, string) {
		r := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": trackingID})
		if r.Status != 200 {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		f = r.Map(t)
		s := f["status"]
		return s == "COMPLETE" || s == "FAILED" || s == "CANCELLED", fmt.Sprintf("file %s stuck in %v", trackingID, s)
	})
	return f
}

func amt(t *testing.T, v any) money.Amount {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("amount %v (%T) is not a string", v, v)
	}
	return money.MustParse(s)
}

func b2cFile(approval string, accounts ...string) map[string]any {
	txns := make([]map[string]any, len(accounts))
	for i, a := range accounts {
		txns[i] = map[string]any{"account": a, "amount": "100", "name": "Jane Doe", "narrative": "Salary"}
	}
	return map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": approval,
		"batch_reference": "batch-1", "transactions": txns}
}

// TestPayoutFileLife walks a file through preview, approval and mixed outcomes, and
// checks the hold and the final money to the cent.
func TestPayoutFileLife(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "10000")

	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149", "254712340011", "254712340014"))
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	if f["status"] != "PREVIEW-AND-APPROVE" || f["status_code"] != "BP103" || f["transactions_count"] != float64(3) {
		t.Fatalf("new file: %s", r.Body)
	}
	// 3 x 100 with the B2C fee of 1% (minimum 10): 10 each.
	if !amt(t, f["total_amount"]).Equal(money.MustParse("300")) || !amt(t, f["charge_estimate"]).Equal(money.MustParse("30")) ||
		!amt(t, f["total_amount_estimate"]).Equal(money.MustParse("330")) {
		t.Fatalf("estimates: %s", r.Body)
	}
	b.wantWallet(t, "10000.00", "10000.00", "nothing is held before approval")
	// The SDK posts the whole initiation response back.
	r = b.post("/api/v1/send-money/approve/", f)
	if r.Status != 200 || r.Map(t)["status"] != "PROCESSING" {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	b.wantWallet(t, "10000.00", "9670.00", "after approval the file's 330 is held")
	r = b.post("/api/v1/send-money/approve/", map[string]any{"tracking_id": f["tracking_id"]})
	if r.Status != 400 {
		t.Fatalf("second approval: %d %s", r.Status, r.Body)
	}
	done := b.waitFile(t, f["tracking_id"].(string))
	if done["status"] != "COMPLETE" || done["status_code"] != "BC100" {
		t.Fatalf("final: %v", done)
	}
	// Two paid (one late, after a timeout), one invalid account.
	if !amt(t, done["paid_amount"]).Equal(money.MustParse("200")) || !amt(t, done["failed_amount"]).Equal(money.MustParse("100")) ||
		!amt(t, done["actual_charges"]).Equal(money.MustParse("20")) {
		t.Fatalf("amounts: paid %v failed %v charges %v", done["paid_amount"], done["failed_amount"], done["actual_charges"])
	}
	for _, x := range done["transactions"].([]any) {
		tx := x.(map[string]any)
		switch tx["account"] {
		case "254712340011":
			if tx["status"] != "FAILED" || tx["status_code"] != "TF106" || tx["status_description"] == "" || tx["provider_reference"] != nil {
				t.Fatalf("invalid account: %v", tx)
			}
		default:
			if tx["status"] != "COMPLETE" || tx["status_code"] != "TS100" || tx["provider_reference"] == nil || tx["provider_account_name"] == nil {
				t.Fatalf("paid: %v", tx)
			}
		}
	}
	b.wantWallet(t, "9780.00", "9780.00", "after the file: 220 paid out, the failure's 110 released, no hold left")
	if r := b.post("/api/v1/send-money/cancel/", map[string]any{"file_id": f["file_id"]}); r.Status != 400 {
		t.Fatalf("cancel of a COMPLETE file: %d %s", r.Status, r.Body)
	}
	// SREs see the outcomes (the registry is shared by the tests of this process:
	// at least this file's).
	metrics := b.env.Metrics()
	for _, want := range []string{`paysvc_payout_transactions_total{provider="MPESA-B2C",status="COMPLETE"}`,
		`paysvc_payout_transactions_total{provider="MPESA-B2C",status="FAILED"}`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}

// TestPayoutRTGS pays a file by RTGS (bank transfers, KES 500.00 a transaction):
// the hold at approval, one transfer paid and one the provider refuses, to the
// cent, and the ledger check with the hold open and once the file is COMPLETE.
func TestPayoutRTGS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "10000")
	r := b.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "RTGS", "requires_approval": "YES",
		"transactions": []any{
			map[string]any{"account": "000123456789", "bank_code": "01", "amount": "1000", "name": "Jane Doe", "narrative": "Rent"},
			map[string]any{"account": "000123450013", "bank_code": "01", "amount": "2000", "name": "John Doe", "narrative": "Rent"}, // provider down
		}})
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	if !amt(t, f["charge_estimate"]).Equal(money.MustParse("1000")) {
		t.Fatalf("RTGS charges 500.00 a transfer: %s", r.Body)
	}
	if r := b.post("/api/v1/send-money/approve/", f); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	b.wantWallet(t, "10000.00", "6000.00", "after approval 3000 + 1000 charges are held")
	ledgerOK(t, b) // the file's 4000.00 is its open hold
	done := b.waitFile(t, f["tracking_id"].(string))
	if done["status"] != "COMPLETE" || !amt(t, done["paid_amount"]).Equal(money.MustParse("1000")) ||
		!amt(t, done["failed_amount"]).Equal(money.MustParse("2000")) || !amt(t, done["actual_charges"]).Equal(money.MustParse("500")) {
		t.Fatalf("final: %v", done)
	}
	for _, x := range done["transactions"].([]any) {
		tx := x.(map[string]any)
		if ok := tx["account"] == "000123456789"; ok != (tx["status"] == "COMPLETE") {
			t.Fatalf("transaction: %v", tx)
		}
	}
	b.wantWallet(t, "8500.00", "8500.00", "after the file: 1500 paid out, the failure's 2500 released")
	ledgerOK(t, b)
}

func TestPayoutNoApprovalAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")

	// requires_approval NO: PROCESSING at once, through /initiate (200).
	r := b.post("/api/v1/send-money/initiate", b2cFile("NO", "254708374149"))
	if r.Status != 200 || r.Map(t)["status"] != "PROCESSING" {
		t.Fatalf("initiate NO: %d %s", r.Status, r.Body)
	}
	if r := b.post("/api/v1/send-money/cancel", map[string]any{"file_id": r.Map(t)["file_id"]}); r.Status != 400 {
		t.Fatalf("cancel of a PROCESSING file: %d %s", r.Status, r.Body)
	}
	b.waitFile(t, r.Map(t)["tracking_id"].(string))

	// Cancel: nothing held, transactions stay PENDING.
	r = b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149", "254708374150"))
	f := r.Map(t)
	before, _ := b.balance(t, b.settlement)
	r = b.post("/api/v1/send-money/cancel/", map[string]any{"file_id": f["file_id"]})
	if r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	c := r.Map(t)
	if c["status"] != "CANCELLED" || c["status_code"] != "BE111" || c["paid_amount"] != "0.00" || c["actual_charges"] != "0.00" {
		t.Fatalf("cancelled: %s", r.Body)
	}
	for _, x := range c["transactions"].([]any) {
		if tx := x.(map[string]any); tx["status"] != "PENDING" || tx["status_code"] != "TC108" {
			t.Fatalf("cancelled transaction: %v", tx)
		}
	}
	b.wantWallet(t, before, before, "cancel moved money")
	if r := b.post("/api/v1/send-money/approve/", map[string]any{"file_id": f["file_id"]}); r.Status != 400 {
		t.Fatalf("approve of a cancelled file: %d %s", r.Status, r.Body)
	}
}

func TestPayoutValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := make([]byte, 71)
	for i := range long {
		long[i] = 'x'
	}
	usd := b.wallet(t, "USD", "Dollars")
	cases := []struct {
		name string
		body map[string]any
		attr string
	}{
		{"no currency", map[string]any{"provider": "MPESA-B2C", "transactions": []any{}}, "currency"},
		{"bad provider", map[string]any{"currency": "KES", "provider": "MPESA", "transactions": []any{}}, "provider"},
		{"no transactions", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "transactions": []any{}}, "transactions"},
		{"batch_reference too long", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "batch_reference": string(long),
			"transactions": []any{map[string]any{"account": "254708374149", "amount": 100}}}, "batch_reference"},
		{"requires_approval", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": "maybe",
			"transactions": []any{map[string]any{"account": "254708374149", "amount": 100}}}, "requires_approval"},
		{"pesalink without bank_code", map[string]any{"currency": "KES", "provider": "PESALINK",
			"transactions": []any{map[string]any{"account": "1234567890", "amount": 100}}}, "transactions[0].bank_code"},
		{"bank_code not digits", map[string]any{"currency": "KES", "provider": "PESALINK",
			"transactions": []any{map[string]any{"account": "1234567890", "amount": 100, "bank_code": "0x2"}}}, "transactions[0].bank_code"},
		{"bank_code negative number", map[string]any{"currency": "KES", "provider": "PESALINK",
			"transactions": []any{map[string]any{"account": "1234567890", "amount": 100, "bank_code": -2}}}, "transactions[0].bank_code"},
		{"bank_code unknown", map[string]any{"currency": "KES", "provider": "RTGS",
			"transactions": []any{map[string]any{"account": "1234567890", "amount": 100, "bank_code": "99"}}}, "transactions[0].bank_code"},
		{"bank_code too long", map[string]any{"currency": "KES", "provider": "PESALINK",
			"transactions": []any{map[string]any{"account": "1234567890", "amount": 100, "bank_code": "00000000002"}}}, "transactions[0].bank_code"},
		{"paybill without reference", map[string]any{"currency": "KES", "provider": "MPESA-B2B",
			"transactions": []any{map[string]any{"account": "888880", "amount": 100, "account_type": "PayBill"}}}, "transactions[0].account_reference"},
		{"b2b without type", map[string]any{"currency": "KES", "provider": "MPESA-B2B",
			"transactions": []any{map[string]any{"account": "888880", "amount": 100}}}, "transactions[0].account_type"},
		{"bad phone", map[string]any{"currency": "KES", "provider": "MPESA-B2C",
			"transactions": []any{map[string]any{"account": "0712", "amount": 100}}}, "transactions[0].account"},
		{"amount over limit", map[string]any{"currency": "KES", "provider": "MPESA-B2C",
			"transactions": []any{map[string]any{"account": "254708374149", "amount": "150001"}}}, "transactions[0].amount"},
		{"float-looking amount", map[string]any{"currency": "KES", "provider": "MPESA-B2C",
			"transactions": []any{map[string]any{"account": "254708374149", "amount": "100.001"}}}, "transactions[0].amount"},
		{"usd b2c", map[string]any{"currency": "USD", "provider": "MPESA-B2C",
			"transactions": []any{map[string]any{"account": "254708374149", "amount": 100}}}, "currency"},
		{"unknown p2p wallet", map[string]any{"currency": "KES", "provider": "INTASEND",
			"transactions": []any{map[string]any{"account": "NOSUCHWALLET", "amount": 100}}}, "transactions[0].account"},
		{"p2p currency", map[string]any{"currency": "KES", "provider": "P2P",
			"transactions": []any{map[string]any{"account": usd, "amount": 100}}}, "transactions[0].account"},
		// Without wallet_id the settlement wallet pays: it cannot also receive.
		{"p2p to the default paying wallet", map[string]any{"currency": "KES", "provider": "P2P",
			"transactions": []any{map[string]any{"account": b.settlement, "amount": 100}}}, "transactions[0].account"},
		{"p2p to the named paying wallet", map[string]any{"currency": "KES", "provider": "P2P", "wallet_id": b.settlement,
			"transactions": []any{map[string]any{"account": b.settlement, "amount": 100}}}, "transactions[0].account"},
	}
	for _, tc := range cases {
		r := b.post("/api/v1/send-money/initiation/", tc.body)
		if r.Status != 400 {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Body)
		}
		if _, _, attr := errorBody(t, r); attr != tc.attr {
			t.Fatalf("%s: attr %q, want %q (%s)", tc.name, attr, tc.attr, r.Body)
		}
	}
	// A wallet that cannot disburse.
	w := b.wallet(t, "KES", "No payouts")
	r := b.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "wallet_id": w,
		"transactions": []any{map[string]any{"account": "254708374149", "amount": 100}}})
	if r.Status != 400 {
		t.Fatalf("can_disburse false: %d %s", r.Status, r.Body)
	}
}

func TestPayoutPermissionsAndIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	other := newBundle(t, b.env, "Other")
	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149"))
	f := r.Map(t)
	for _, path := range []string{"/api/v1/send-money/status/", "/api/v1/send-money/approve/", "/api/v1/send-money/cancel/"} {
		if r := other.post(path, map[string]any{"tracking_id": f["tracking_id"], "file_id": f["file_id"]}); r.Status != 404 {
			t.Fatalf("%s of another merchant's file: %d %s", path, r.Status, r.Body)
		}
	}
	viewOnly, adder := b.env.Key(b.merchant, "view_files"), b.env.Key(b.merchant, "add_files")
	status := map[string]any{"tracking_id": f["tracking_id"]}
	for _, c := range []struct {
		what, key, path string
		body            any
		want            int
	}{
		{"initiation without add_files", viewOnly, "/api/v1/send-money/initiation/", b2cFile("YES", "254708374149"), 403},
		{"cancel without change_files", viewOnly, "/api/v1/send-money/cancel/", map[string]any{"file_id": f["file_id"]}, 403},
		{"status with view_files", viewOnly, "/api/v1/send-money/status/", status, 200},
		{"status without view_files", adder, "/api/v1/send-money/status/", status, 403},
	} {
		if r := b.env.Do("POST", c.path, c.body, servicetest.Bearer(c.key)...); r.Status != c.want {
			t.Fatalf("%s: %d %s", c.what, r.Status, r.Body)
		}
	}
}

// TestPayoutP2P pays another merchant's wallet through the command path: the
// recipient's partition credits it, and the outcome comes back to the payer's file.
func TestPayoutP2P(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	other := newBundle(t, b.env, "Recipient")
	r := b.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "INTASEND", "requires_approval": "NO",
		"transactions": []any{map[string]any{"account": other.settlement, "amount": "250.50", "narrative": "refund"}}})
	if r.Status != 201 {
		t.Fatalf("p2p: %d %s", r.Status, r.Body)
	}
	done := b.waitFile(t, r.Map(t)["tracking_id"].(string))
	if done["status"] != "COMPLETE" || done["paid_amount"] != "250.50" || done["actual_charges"] != "0.00" {
		t.Fatalf("p2p file: %v", done)
	}
	if cur, av := other.balance(t, other.settlement); cur != "250.50" || av != "250.50" {
		t.Fatalf("recipient: %s / %s", cur, av)
	}
	b.wantWallet(t, "749.50", "749.50", "payer")
}

// TestPayoutIdempotencyKey: a transaction whose key was already paid is not paid again.
func TestPayoutIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	file := func() map[string]any {
		return map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": "NO",
			"transactions": []any{
				map[string]any{"account": "254708374149", "amount": "100", "idempotency_key": "salary-2026-11-jane"},
				map[string]any{"account": "254708374149", "amount": "100", "idempotency_key": "salary-2026-11-jane"},
			}}
	}
	first := b.waitFile(t, b.post("/api/v1/send-money/initiation/", file()).Map(t)["tracking_id"].(string))
	if first["paid_amount"] != "100.00" || first["failed_amount"] != "100.00" {
		t.Fatalf("a key twice in one file pays once: %v", first)
	}
	second := b.waitFile(t, b.post("/api/v1/send-money/initiation/", file()).Map(t)["tracking_id"].(string))
	if second["paid_amount"] != "0.00" || second["failed_amount"] != "200.00" {
		t.Fatalf("a key paid before is not paid again: %v", second)
	}
	if cur, _ := b.balance(t, b.settlement); cur != "890.00" {
		t.Fatalf("balance: %s, want 890.00 (one payment of 100 plus 10 charge)", cur)
	}
}

// A key is held from the moment its file is approved, not only once the rail has
// reported on it: a second file with the key, approved while the first file's
// transaction is still PENDING (no rails role here, so it stays so), is refused.
func TestPayoutIdempotencyKeyHeldFromApproval(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay, service.RoleDispatcher}
	})
	b := newBundle(t, env, "Keys")
	b.deposit(t, b.settlement, "1000")
	file := func(approval string) map[string]any {
		return map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": approval,
			"transactions": []any{map[string]any{"account": "254708374149", "amount": "100", "idempotency_key": "rent-2026-11"}}}
	}
	a := b.post("/api/v1/send-money/initiation/", file("YES")).Map(t)
	second := b.post("/api/v1/send-money/initiation/", file("YES")).Map(t)
	// Each approval is its own command and batch: the first has committed (and its
	// in-memory key is gone) when the second is applied.
	if r := b.post("/api/v1/send-money/approve/", a); r.Status != 200 || r.Map(t)["status"] != "PROCESSING" {
		t.Fatalf("approve the first: %d %s", r.Status, r.Body)
	}
	r := b.post("/api/v1/send-money/approve/", second)
	if r.Status != 200 {
		t.Fatalf("approve the second: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	tx := f["transactions"].([]any)[0].(map[string]any)
	if f["status"] != "COMPLETE" || f["failed_amount"] != "100.00" || tx["status"] != "FAILED" || tx["status_code"] != "TF106" {
		t.Fatalf("the second file's transaction with a held key: %v", f)
	}
	// A file without approval meets the same stored key.
	third := b.post("/api/v1/send-money/initiation/", file("NO")).Map(t)
	if tx := third["transactions"].([]any)[0].(map[string]any); tx["status_code"] != "TF106" {
		t.Fatalf("a third file with the key: %v", third)
	}
	// Only the first file holds money: 100 plus its 10 charge.
	b.wantWallet(t, "1000.00", "890.00", "one hold")
}

func TestPayoutReferenceEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.env.Do("GET", "/api/v1/send-money/bank-codes/ke/", nil)
	if r.Status != 200 {
		t.Fatalf("bank codes without auth: %d %s", r.Status, r.Body)
	}
	var banks []map[string]string
	r.JSON(t, &banks)
	if len(banks) < 20 || banks[0]["bank_code"] == "" || banks[0]["bank_name"] == "" {
		t.Fatalf("banks: %s", r.Body)
	}
	v := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "MPESA-B2C", "account": "254708374149"}).Map(t)
	if v["status"] != "SUCCESS" || v["name"] == "" {
		t.Fatalf("validate: %v", v)
	}
	v = b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "PESALINK", "account": "1234560011", "bank_code": "68"}).Map(t)
	if v["status"] == "SUCCESS" {
		t.Fatalf("validate of an invalid account: %v", v)
	}
	if r := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "MPESA-B2B", "account": "888880"}); r.Status != 400 {
		t.Fatalf("b2b without account_type: %d %s", r.Status, r.Body)
	}
	b.deposit(t, b.settlement, "1000")
	b.waitFile(t, b.post("/api/v1/send-money/initiation/", b2cFile("NO", "254708374149", "254708374149", "254711111111")).Map(t)["tracking_id"].(string))
	r = b.get("/api/v1/send-money/beneficiaries/frequently_used?provider=MPESA-B2C")
	var bens []map[string]any
	r.JSON(t, &bens)
	if len(bens) != 2 || bens[0]["account"] != "254708374149" || bens[0]["provider"] != "MPESA-B2C" || bens[0]["is_active"] != true {
		t.Fatalf("beneficiaries: %s", r.Body)
	}
	if r := b.get("/api/v1/send-money/beneficiaries/frequently_used?provider=PESALINK"); r.Status != 200 || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("no PesaLink beneficiaries: %d %q", r.Status, r.Body)
	}
}

// A callback_url that hangs holds back only its own file's callbacks: another
// merchant's file, initiated after it, gets its callbacks at once. (Before lanes, the
// consumer waited for every callback of a poll, retries included: up to ~90 s.)
func TestPayoutCallbackSlowReceiverDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var slowCalls atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowCalls.Add(1)
		select { // hangs until the client gives up or the test ends
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	var fastCalls atomic.Int32
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fastCalls.Add(1) }))
	defer fast.Close()
	env := servicetest.Start(t, func(c *service.Config) { c.API.WebhookAllowPrivate = true })
	hanging := newBundle(t, env, "Hanging receiver")
	hanging.deposit(t, hanging.settlement, "1000")
	other := newBundle(t, env, "Other merchant")
	other.deposit(t, other.settlement, "1000")

	f := b2cFile("YES", "254708374149")
	f["callback_url"] = slow.URL + "/cb"
	if r := hanging.post("/api/v1/send-money/initiation/", f); r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	waitUntil(t, "the hanging receiver's first request", func() bool { return slowCalls.Load() >= 1 })

	g := b2cFile("YES", "254708374149")
	g["callback_url"] = fast.URL + "/cb"
	if r := other.post("/api/v1/send-money/initiation/", g); r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	// The slow receiver's first attempt alone lasts the client's 15 s timeout.
	waittest.Eventually(t, 10*time.Second, func() (bool, string) {
		return fastCalls.Load() > 0, "another merchant's callback waited behind a hanging receiver"
	})
}

// TestPayoutCallback: callback_url receives the file's changes, signed like a
// webhook with the file's callback secret (returned once, at initiation; 256 bits,
// different for every file), never with its guessable 8-character nonce, in order,
// ending with COMPLETE.
func TestPayoutCallback(t *testing.T) {
	t.Parallel()
	type got struct {
		headers map[string]string
		body    []byte
	}
	var mu sync.Mutex
	var calls []got
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/payouts" {
			return // the other files' callbacks
		}
		h := map[string]string{}
		for _, k := range []string{"X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"} {
			h[k] = r.Header.Get(k)
		}
		mu.Lock()
		calls = append(calls, got{h, body})
		mu.Unlock()
	}))
	defer rcv.Close()
	env := servicetest.Start(t, func(c *service.Config) { c.API.WebhookAllowPrivate = true })
	b := newBundle(t, env, "Callbacks")
	b.deposit(t, b.settlement, "1000")
	f := b2cFile("NO", "254708374149", "254712340011")
	f["callback_url"] = rcv.URL + "/payouts"
	r := b.post("/api/v1/send-money/initiation/", f)
	file := r.Map(t)
	nonce := file["nonce"].(string)
	secret, _ := file["callback_secret"].(string)
	if !regexp.MustCompile(`^pcs_[0-9a-f]{64}$`).MatchString(secret) {
		t.Fatalf("initiation answer callback_secret = %q, want pcs_ and 256 bits in hex", secret)
	}
	// Another file (another merchant's, and the same merchant's) gets its own secret;
	// a file without callback_url gets none; the status answer never shows it.
	other := newBundle(t, env, "Callbacks Too")
	other.deposit(t, other.settlement, "1000")
	secrets := map[string]bool{secret: true}
	for _, by := range []*bundle{b, other} {
		g := b2cFile("YES", "254708374149")
		g["callback_url"] = rcv.URL + "/other"
		s2, _ := by.post("/api/v1/send-money/initiation/", g).Map(t)["callback_secret"].(string)
		if s2 == "" || secrets[s2] {
			t.Fatalf("another file's callback secret %q repeats one of %v", s2, secrets)
		}
		secrets[s2] = true
	}
	if plain := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149")).Map(t); plain["callback_secret"] != nil {
		t.Fatalf("a file without callback_url got a callback secret: %v", plain["callback_secret"])
	}
	b.waitFile(t, file["tracking_id"].(string))
	if st := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": file["tracking_id"]}); strings.Contains(string(st.Body), secret) {
		t.Fatalf("the status answer shows the callback secret: %s", st.Body)
	}
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		mu.Lock()
		n := len(calls)
		last := got{}
		if n > 0 {
			last = calls[n-1]
		}
		mu.Unlock()
		var m struct {
			Topic string         `json:"topic"`
			Data  map[string]any `json:"data"`
		}
		if n > 0 {
			if err := json.Unmarshal(last.body, &m); err != nil {
				t.Fatalf("callback body: %v: %s", err, last.body)
			}
		}
		return n > 0 && m.Data["status"] == "COMPLETE", fmt.Sprintf("no COMPLETE callback; %d received", n)
	})
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, c := range calls {
		if !webhooks.Verify(secret, c.headers, c.body, time.Now(), time.Minute) {
			t.Fatalf("callback signature does not verify with the file's callback secret: %s", c.body)
		}
		if webhooks.Verify(nonce, c.headers, c.body, time.Now(), time.Minute) ||
			c.headers["X-SERVICE-Signature"] == webhooks.ServiceSignature(nonce, c.body) {
			t.Fatalf("callback still signed with the file's 40-bit nonce: %s", c.body)
		}
		if strings.Contains(string(c.body), secret) || strings.Contains(string(c.body), nonce) {
			t.Fatalf("a callback carries a secret: %s", c.body)
		}
		var m struct {
			Data struct {
				Status       string           `json:"status"`
				Transactions []map[string]any `json:"transactions"`
			} `json:"data"`
		}
		_ = json.Unmarshal(c.body, &m)
		seen[m.Data.Status] = true
		for _, tx := range m.Data.Transactions {
			seen["txn:"+tx["status"].(string)] = true
		}
	}
	for _, want := range []string{"PROCESSING", "COMPLETE", "txn:PROCESSING", "txn:COMPLETE", "txn:FAILED"} {
		if !seen[want] {
			t.Fatalf("no callback showed %s; saw %v", want, seen)
		}
	}
}

// TestPayoutEventsAndRepeats: one send_money_event per file status change on the
// Kafka topic (read with a plain franz-go consumer); a rail report produced again
// (same command) and a regrouped one (new command, same outcomes) move nothing.
func TestPayoutEventsAndRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149"))
	f := r.Map(t)
	b.post("/api/v1/send-money/approve/", map[string]any{"file_id": f["file_id"], "nonce": f["nonce"]})
	done := b.waitFile(t, f["tracking_id"].(string))
	txn := done["transactions"].([]any)[0].(map[string]any)
	after, _ := b.balance(t, b.settlement)
	if after != "890.00" {
		t.Fatalf("after the file: %s, want 890.00", after)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(b.env.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// The same FINAL report again, and regrouped under a new batch label.
	for _, batch := range []string{"c0", "regrouped"} {
		res := topics.PayoutResults{FileID: f["file_id"].(string), MerchantID: b.merchant, Stage: topics.PayoutStageFinal, Batch: batch,
			Results: []topics.PayoutTxnResult{{TransactionID: txn["transaction_id"].(string), Success: true, ProviderReference: "AGAIN"}}}
		cmd, err := rails.PayoutResultsCommand(b.merchant, res, rails.Origin{Environment: "sandbox", Simulated: true})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := topics.EncodeCommand(cmd)
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: b.env.Topic(topics.CommandsTopic),
			Key: topics.CommandKey(b.merchant), Value: body}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waittest.Eventually(t, 10*time.Second, func() (bool, string) {
		var n int
		if err := b.env.Schema.DB.Get(&n, `SELECT count(*) FROM processed_commands WHERE command_type = 'payout.results'
			AND merchant_id = $1 AND convert_from(reply, 'UTF8') LIKE '%"ignored":1%'`, b.merchant); err != nil {
			t.Fatal(err)
		}
		return n >= 1, "the regrouped report was not applied (ignored) in time"
	})
	b.wantWallet(t, "890.00", "890.00", "a repeated report moved money")
	again := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": f["tracking_id"]}).Map(t)
	if ref := again["transactions"].([]any)[0].(map[string]any)["provider_reference"]; ref == "AGAIN" {
		t.Fatal("a repeated report overwrote the transaction")
	}

	// Events on the Kafka topic, for downstream consumers.
	states := map[string]int{}
	readLog(t, b.env, topics.EventTopics[topics.SendMoneyEvent], 15*time.Second, func(rec *kgo.Record) {
		if ev, p, ok := eventOf[topics.SendMoney](t, rec); ok && p.FileID == f["file_id"] {
			if string(rec.Key) != p.FileID || ev.MerchantID != b.merchant || ev.Type != topics.SendMoneyEvent {
				t.Errorf("event envelope: key %s, %+v", rec.Key, ev)
			}
			// The events' vocabulary (the spec) next to the status endpoint's.
			states[p.State+"/"+p.Status]++
		}
	}, func() (bool, string) {
		return states["PROCESSED/COMPLETE"] > 0, fmt.Sprintf("send_money_events by state: %v", states)
	})
	if states["PREVIEW-AND-APPROVE/PREVIEW-AND-APPROVE"] != 1 || states["PENDING/PROCESSING"] != 1 ||
		states["PROCESSED/COMPLETE"] != 1 || len(states) != 3 {
		t.Fatalf("send_money_events by state: %v", states)
	}

	// Another merchant's wallet cannot pay a file.
	other := newBundle(t, b.env, "Other")
	r = other.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "wallet_id": b.settlement,
		"transactions": []any{map[string]any{"account": "254708374149", "amount": 100}}})
	if r.Status != 404 {
		t.Fatalf("a file paid from another merchant's wallet: %d %s", r.Status, r.Body)
	}
}
