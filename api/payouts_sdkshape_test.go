package api_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/admin"
	"paysvc/storage"
)

// payoutFiles counts the merchant's stored payment files.
func (b *bundle) payoutFiles(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.env.Schema.DB.Get(&n, `SELECT count(*) FROM payout_files WHERE merchant_id = $1`, b.merchant); err != nil {
		t.Fatal(err)
	}
	return n
}

// An approval the wallet cannot cover is a 400 that changes nothing (both SDKs
// read a 200 as success): the file still awaits approval, nothing is held, and
// after a top-up the same approval goes through.
func TestPayoutUnderfundedApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "100") // the file needs 110: 100 plus the 10 fee
	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149"))
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)

	r = b.post("/api/v1/send-money/approve/", f) // the whole initiation response, as the SDKs send it
	if r.Status != 400 {
		t.Fatalf("underfunded approval: %d %s", r.Status, r.Body)
	}
	detail, code, attr := errorBody(t, r)
	if code != "insufficient_balance" || attr != "wallet_id" || !strings.Contains(detail, "available 100.00") ||
		!strings.Contains(detail, "needs 110.00") {
		t.Fatalf("refusal: %s", r.Body)
	}
	st := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": f["tracking_id"]}).Map(t)
	if st["status"] != "PREVIEW-AND-APPROVE" || st["status_code"] != "BP103" || st["failed_reason"] != nil || st["failed_amount"] != "0.00" {
		t.Fatalf("after the refusal the file must still await approval: %v", st)
	}
	for _, x := range st["transactions"].([]any) {
		if tx := x.(map[string]any); tx["status"] != "PENDING" || tx["status_code"] != "TP101" {
			t.Fatalf("transaction after the refusal: %v", tx)
		}
	}
	b.wantWallet(t, "100.00", "100.00", "nothing held")

	b.deposit(t, b.settlement, "10")
	r = b.post("/api/v1/send-money/approve/", f)
	if r.Status != 200 || r.Map(t)["status"] != "PROCESSING" {
		t.Fatalf("approval after the top-up: %d %s", r.Status, r.Body)
	}
	done := b.waitFile(t, f["tracking_id"].(string))
	if done["status"] != "COMPLETE" || done["paid_amount"] != "100.00" {
		t.Fatalf("file: %v", done)
	}
	b.wantWallet(t, "0.00", "0.00", "after the payout")
}

// requires_approval NO asks to pay now: a wallet that cannot cover the file gets a
// 400 and no file is created (a 4xx changes nothing), so nothing is left behind
// waiting for an approval the merchant never meant to give.
func TestPayoutUnderfundedNoApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "100")
	r := b.post("/api/v1/send-money/initiate/", b2cFile("NO", "254708374149"))
	if r.Status != 400 {
		t.Fatalf("underfunded initiation without approval: %d %s", r.Status, r.Body)
	}
	if detail, code, attr := errorBody(t, r); code != "insufficient_balance" || attr != "wallet_id" ||
		!strings.Contains(detail, "no file was created") {
		t.Fatalf("refusal: %s", r.Body)
	}
	if n := b.payoutFiles(t); n != 0 {
		t.Fatalf("%d files stored after a refused initiation", n)
	}
	b.wantWallet(t, "100.00", "100.00", "nothing held")
	b.deposit(t, b.settlement, "10")
	r = b.post("/api/v1/send-money/initiate/", b2cFile("NO", "254708374149"))
	if r.Status != 200 || r.Map(t)["status"] != "PROCESSING" {
		t.Fatalf("initiation after the top-up: %d %s", r.Status, r.Body)
	}
	if n := b.payoutFiles(t); n != 1 {
		t.Fatalf("%d files stored, want 1", n)
	}
}

// Bank codes are numbers: "2" (as IntaSend's examples send it) and the JSON number
// 2 name bank 02, and the file stores and shows the published "02".
func TestPayoutBankCodeAsNumber(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	r := b.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "PESALINK", "requires_approval": "NO",
		"transactions": []any{
			map[string]any{"account": "1234567890", "amount": "100", "bank_code": "2"},
			map[string]any{"account": "1234567891", "amount": "100", "bank_code": 2},
			map[string]any{"account": "1234567892", "amount": "100", "bank_code": "068"},
		}})
	if r.Status != 201 {
		t.Fatalf("pesalink with unpadded codes: %d %s", r.Status, r.Body)
	}
	want := []string{"02", "02", "68"}
	for i, x := range r.Map(t)["transactions"].([]any) {
		if tx := x.(map[string]any); tx["bank_code"] != want[i] {
			t.Fatalf("transaction %d bank_code %v, want %s", i, tx["bank_code"], want[i])
		}
	}
	done := b.waitFile(t, r.Map(t)["tracking_id"].(string))
	if done["status"] != "COMPLETE" || done["paid_amount"] != "300.00" {
		t.Fatalf("file: %v", done)
	}
	for i, x := range done["transactions"].([]any) {
		if tx := x.(map[string]any); tx["bank_code"] != want[i] || tx["status"] != "COMPLETE" {
			t.Fatalf("stored transaction %d: %v", i, tx)
		}
	}
	// The published list keeps its two-digit form.
	var banks []map[string]string
	b.env.Do("GET", "/api/v1/send-money/bank-codes/ke/", nil).JSON(t, &banks)
	found := false
	for _, bank := range banks {
		found = found || bank["bank_code"] == "02"
		if bank["bank_code"] == "2" {
			t.Fatalf("bank-codes lists an unpadded code: %v", bank)
		}
	}
	if !found {
		t.Fatalf("bank-codes lacks 02")
	}
	v := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "PESALINK", "account": "1234567890", "bank_code": "2"}).Map(t)
	if v["status"] != "SUCCESS" {
		t.Fatalf("validate-account with bank_code 2: %v", v)
	}
}

// P2P (INTASEND) accounts: a wallet id of any merchant of the environment, or the
// email of one merchant of the environment (its settlement wallet of the file's
// currency). A phone number, an unknown email, an email two merchants share and
// another environment's merchant are refused with the transaction's index.
func TestPayoutP2PRecipientForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	other := newBundle(t, b.env, "Recipient")
	ctx := context.Background()
	db := b.env.Schema.DB
	if _, err := storage.SetMerchantEmail(ctx, db, other.merchant, "Pay@Recipient.example"); err != nil {
		t.Fatal(err)
	}
	// The same address on a live merchant must not make the sandbox one ambiguous,
	// and a live merchant's own address names nothing here.
	live, err := admin.CreateMerchant(ctx, db, "Live Twin", "live")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{live.MerchantID} {
		if _, err := storage.SetMerchantEmail(ctx, db, m, "pay@recipient.example"); err != nil {
			t.Fatal(err)
		}
	}
	liveOnly, err := admin.CreateMerchant(ctx, db, "Live Only", "live")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.SetMerchantEmail(ctx, db, liveOnly.MerchantID, "live@only.example"); err != nil {
		t.Fatal(err)
	}
	shared1, shared2 := newBundle(t, b.env, "Shared One"), newBundle(t, b.env, "Shared Two")
	for _, m := range []string{shared1.merchant, shared2.merchant} {
		if _, err := storage.SetMerchantEmail(ctx, db, m, "shared@two.example"); err != nil {
			t.Fatal(err)
		}
	}

	r := b.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "INTASEND", "requires_approval": "NO",
		"transactions": []any{
			map[string]any{"account": other.settlement, "amount": "10.00"},
			map[string]any{"account": "pay@recipient.example", "amount": "20.00"},
		}})
	if r.Status != 201 {
		t.Fatalf("p2p by wallet id and email: %d %s", r.Status, r.Body)
	}
	done := b.waitFile(t, r.Map(t)["tracking_id"].(string))
	if done["status"] != "COMPLETE" || done["paid_amount"] != "30.00" {
		t.Fatalf("file: %v", done)
	}
	byEmail := done["transactions"].([]any)[1].(map[string]any)
	if byEmail["account"] != "pay@recipient.example" || byEmail["status"] != "COMPLETE" {
		t.Fatalf("the email payout shows the account as sent: %v", byEmail)
	}
	if desc, _ := byEmail["status_description"].(string); strings.Contains(desc, other.settlement) {
		t.Fatalf("the email payout's description names the wallet it resolved to: %q", desc)
	}
	if cur, _ := other.balance(t, other.settlement); cur != "30.00" {
		t.Fatalf("recipient: %s", cur)
	}

	for _, tc := range []struct{ name, account, says string }{
		{"phone", "254708374149", "MPESA-B2C"},
		{"unknown email", "nobody@nowhere.example", "No merchant"},
		{"shared email", "shared@two.example", "No merchant"},
		{"live merchant's email", "live@only.example", "No merchant"},
		{"live merchant's wallet", "", "No wallet"},
	} {
		account := tc.account
		if account == "" {
			var w string
			if err := db.Get(&w, `SELECT wallet_id FROM wallets WHERE merchant_id = $1`, live.MerchantID); err != nil {
				t.Fatal(err)
			}
			account = w
		}
		r := b.post("/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "INTASEND",
			"transactions": []any{map[string]any{"account": other.settlement, "amount": "1.00"}, map[string]any{"account": account, "amount": "1.00"}}})
		if r.Status != 400 {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Body)
		}
		if detail, _, attr := errorBody(t, r); attr != "transactions[1].account" || !strings.Contains(detail, tc.says) {
			t.Fatalf("%s: %s", tc.name, r.Body)
		}
	}
	// The shared address is refused exactly like an unknown one.
	unknown := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "INTASEND", "account": "nobody@nowhere.example"}).Map(t)
	shared := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "INTASEND", "account": "shared@two.example"}).Map(t)
	if unknown["status"] != "INVALID_ACCOUNT" || shared["status"] != "INVALID_ACCOUNT" ||
		strings.ReplaceAll(shared["description"].(string), "shared@two.example", "X") != strings.ReplaceAll(unknown["description"].(string), "nobody@nowhere.example", "X") {
		t.Fatalf("validate-account: unknown %v, shared %v", unknown, shared)
	}
	if v := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "INTASEND", "account": "PAY@recipient.example"}).Map(t); v["status"] != "SUCCESS" || v["name"] != "Recipient" {
		t.Fatalf("validate-account by email: %v", v)
	}
}
