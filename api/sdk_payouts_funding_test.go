package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

// TestSDKPayoutsFunding runs sdktest/payouts_funding.js: through the official SDK,
// an approval the wallet cannot cover is rejected (400, insufficient_balance) and
// leaves the file awaiting approval, a top-up and the same approve() call then pay
// it; a PesaLink payout with bank_code "2" is paid to bank 02; P2P (INTASEND) pays
// a wallet id and a merchant's email, and refuses a phone number.
func TestSDKPayoutsFunding(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	f := sdkStart(t, "500.00")
	payer := &bundle{env: f.env, secret: f.secret, public: f.public, settlement: f.settlement}
	if err := f.env.Schema.DB.Get(&payer.merchant, `SELECT merchant_id FROM wallets WHERE wallet_id = $1`, f.settlement); err != nil {
		t.Fatal(err)
	}
	working := payer.wallet(t, "KES", "Float")
	payer.deposit(t, working, "1000")
	recipient := newBundle(t, f.env, "SDK Recipient")
	if _, err := storage.SetMerchantEmail(context.Background(), f.env.Schema.DB, recipient.merchant, "sdk@recipient.example"); err != nil {
		t.Fatal(err)
	}

	res := f.run(t, dir, "payouts_funding.js", map[string]string{"PAYSVC_SETTLEMENT_WALLET": f.settlement,
		"PAYSVC_WORKING_WALLET": working, "PAYSVC_RECIPIENT_WALLET": recipient.settlement, "PAYSVC_RECIPIENT_EMAIL": "sdk@recipient.example"})

	t.Run("UnderfundedApproval", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "underfunded"), "status", "PREVIEW-AND-APPROVE")
		if body := sdkRejected(t, res, "approveUnderfunded", 400); body.Code != "insufficient_balance" ||
			!strings.Contains(body.Detail, "needs 1010.00") {
			t.Errorf("refusal: %+v", body)
		}
		still := sdkOK(t, res, "stillAwaiting")
		sdkWant(t, still, "status", "PREVIEW-AND-APPROVE")
		sdkWant(t, still, "status_code", "BP103")
		sdkOK(t, res, "topUp")
		sdkWant(t, sdkOK(t, res, "approveFunded"), "status", "PROCESSING")
		done := sdkOK(t, res, "underfundedStatus")
		sdkWant(t, done, "status", "COMPLETE")
		sdkWant(t, done, "paid_amount", "1000.00")
	})

	t.Run("NoApprovalUnderfunded", func(t *testing.T) {
		if body := sdkRejected(t, res, "noApproval", 400); body.Code != "insufficient_balance" {
			t.Errorf("refusal: %+v", body)
		}
		if n := payer.payoutFiles(t); n != 4 { // underfunded, bank, p2pWallet, p2pEmail
			t.Errorf("%d files stored, want 4: the refused initiation must create none", n)
		}
	})

	t.Run("BankCodeUnpadded", func(t *testing.T) {
		done := sdkOK(t, res, "bankStatus")
		sdkWant(t, done, "status", "COMPLETE")
		tx := done["transactions"].([]any)[0].(map[string]any)
		sdkWant(t, tx, "bank_code", "02")
		sdkWant(t, tx, "status", "COMPLETE")
	})

	t.Run("P2PForms", func(t *testing.T) {
		for _, name := range []string{"p2pWalletStatus", "p2pEmailStatus"} {
			done := sdkOK(t, res, name)
			sdkWant(t, done, "status", "COMPLETE")
			sdkWant(t, done, "paid_amount", "5.00")
		}
		sdkWant(t, sdkOK(t, res, "p2pEmailStatus")["transactions"].([]any)[0].(map[string]any), "account", "sdk@recipient.example")
		body := sdkRejected(t, res, "p2pPhone", 400)
		if !strings.Contains(body.Detail, "transactions[0].account") || !strings.Contains(body.Detail, "MPESA-B2C") {
			t.Errorf("phone refusal: %+v", body)
		}
		if cur, av := recipient.balance(t, recipient.settlement); cur != "10.00" || av != "10.00" {
			t.Errorf("recipient: %s / %s, want 10.00", cur, av)
		}
	})

	t.Run("Ledger", func(t *testing.T) {
		if rep, err := storage.CheckLedger(context.Background(), f.env.Schema.DB); err != nil || !rep.OK {
			t.Errorf("ledger: %+v %v", rep, err)
		}
	})
}

// TestSDKPayoutsLargeFile initiates a file of MaxFileTransactions transactions
// through the SDK and approves it with payouts().approve(<the whole response>), as
// the SDK's README does: a body of megabytes that approve must take. No rails role
// runs, so nothing is paid out after the approval and the test stays quick.
func TestSDKPayoutsLargeFile(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	const n = 10_000
	f := sdkStartWith(t, "200000.00", func(c *service.Config) {
		c.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay, service.RoleDispatcher}
		// The file's 10,000 lines are one command: alone it answers in a few
		// seconds, but under the whole race-enabled suite it took over the default
		// 10 s (a 504 in a fresh-clone run). The write timeout (1 m) must exceed
		// this by 10 s.
		c.API.ReplyTimeout = 45 * time.Second
	})
	payer := &bundle{env: f.env, secret: f.secret, public: f.public, settlement: f.settlement}
	res := f.run(t, dir, "payouts_large.js", map[string]string{"PAYSVC_TRANSACTIONS": fmt.Sprint(n)})

	var large, approved struct {
		Status            string `json:"status"`
		TransactionsCount int    `json:"transactions_count"`
		Transactions      int    `json:"transactions"`
		TrackingID        string `json:"tracking_id"`
		Estimate          string `json:"total_amount_estimate"`
		Bytes             int    `json:"bytes"`
	}
	if err := json.Unmarshal(res["large"], &large); err != nil || large.Status != "PREVIEW-AND-APPROVE" || large.Transactions != n {
		t.Fatalf("initiation: %v %s", err, res["large"])
	}
	if large.Bytes <= 1<<20 {
		t.Fatalf("the initiation response is %d bytes: the test must post back more than the old 1 MiB limit", large.Bytes)
	}
	if err := json.Unmarshal(res["approve"], &approved); err != nil || approved.Status != "PROCESSING" ||
		approved.TransactionsCount != n || approved.TrackingID != large.TrackingID {
		t.Fatalf("approve with the whole %d-byte response: %v %s", large.Bytes, err, res["approve"])
	}
	// 10,000 x (10 + the 10 minimum fee) held.
	if large.Estimate != "200000.00" {
		t.Fatalf("estimate %s", large.Estimate)
	}
	if cur, av := payer.balance(t, f.settlement); cur != "200000.00" || av != "0.00" {
		t.Fatalf("after approval: %s / %s, want the whole 200000.00 held", cur, av)
	}
	// The approval's rail requests (~60 kB each, all keyed by the file: more than
	// Kafka's 1 MiB message limit together) are published, none refused and
	// dead-lettered (relay.BatchMaxBytes).
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		var left, dead int
		if err := f.env.Schema.DB.Get(&left, `SELECT count(*) FROM outbox`); err != nil {
			t.Fatal(err)
		}
		if err := f.env.Schema.DB.Get(&dead, `SELECT count(*) FROM outbox_dead`); err != nil {
			t.Fatal(err)
		}
		if dead != 0 {
			t.Fatalf("%d rail requests dead-lettered", dead)
		}
		return left == 0, fmt.Sprintf("%d outbox rows still unpublished", left)
	})
}
