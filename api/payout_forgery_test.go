package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// forgedB2CFailure is a well-formed Daraja B2C failure result for txn, as someone
// holding the callback token (but not Daraja) can post it.
func forgedB2CFailure(t *testing.T, txn, conversationID string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"Result": map[string]any{"ResultType": 0, "ResultCode": 2001,
		"ResultDesc": "The initiator information is invalid.", "OriginatorConversationID": txn,
		"ConversationID": conversationID, "TransactionID": "FORGED0001"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A forged B2C failure cannot release the hold of a payout the rails role still
// sends: posted before the transaction was submitted (no rails process has taken
// the file yet), with a ConversationID Daraja never gave, or after the
// transaction's real outcome, it changes nothing. The real sends complete the file,
// and the money reconciles to the cent.
func TestPayoutB2C_ForgedResultsChangeNothing(t *testing.T) {
	t.Parallel()
	const token = "cb-forgery-0123456789abcdef0123456789"
	// No rails role yet: the file is approved and waits to be sent.
	env, fake, _ := startDaraja(t, daraja{token: token, b2c: true}, func(c *service.Config) {
		c.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay, service.RoleDispatcher}
	})
	b := newBundle(t, env, "Forgery Target")
	b.deposit(t, b.settlement, "1000")
	r := b.post("/api/v1/send-money/initiation/", b2cFile("NO", "254712000031", "254712000032"))
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	tracking := f["tracking_id"].(string)
	first := f["transactions"].([]any)[0].(map[string]any)["transaction_id"].(string)
	second := f["transactions"].([]any)[1].(map[string]any)["transaction_id"].(string)
	if cur, av := b.balance(t, b.settlement); cur != "1000.00" || av != "780.00" {
		t.Fatalf("after approval 2 x (100 + 10) is held: %s / %s", cur, av)
	}
	txnStatus := func(id string) string {
		file := b.post("/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}).Map(t)
		for _, x := range file["transactions"].([]any) {
			if tx := x.(map[string]any); tx["transaction_id"] == id {
				return tx["status"].(string)
			}
		}
		t.Fatalf("no transaction %s", id)
		return ""
	}

	// 1. Before any submission: acknowledged (Daraja must not retry), nothing applied.
	for _, id := range []string{first, second} {
		if r := env.Do("POST", "/api/v1/send-money/mpesa/result/"+token, forgedB2CFailure(t, id, "AG_forged_"+id)); r.Status != 200 {
			t.Fatalf("forged result: %d %s", r.Status, r.Body)
		}
	}
	b.wallet(t, "KES", "Marker 1") // a later command of the merchant: applied after anything the forgeries produced
	if cur, av := b.balance(t, b.settlement); cur != "1000.00" || av != "780.00" {
		t.Fatalf("a forged failure moved the hold: %s / %s", cur, av)
	}
	if s1, s2 := txnStatus(first), txnStatus(second); s1 != "PENDING" || s2 != "PENDING" {
		t.Fatalf("forged failures finished unsent transactions: %s, %s", s1, s2)
	}

	// 2. The rails role starts and sends both, each once.
	cfg := env.Config
	cfg.Roles, cfg.KafkaBrokers, cfg.InstanceID, cfg.HTTPAddr = []string{service.RoleRails}, env.Svc.Brokers, "rails-forgery", "127.0.0.1:0"
	rails, err := service.Start(context.Background(), cfg, servicetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rails.Close)
	sendOf := func(id string) storage.PayoutSend {
		s, err := storage.GetPayoutSend(context.Background(), env.Schema.DB, id)
		if err != nil && err != storage.ErrNotFound {
			t.Fatal(err)
		}
		return s
	}
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		s1, s2 := sendOf(first), sendOf(second)
		return s1.State == storage.PayoutSendAccepted && s2.State == storage.PayoutSendAccepted,
			fmt.Sprintf("sends: %+v %+v; B2C requests %d", s1, s2, len(fake.B2CRequests()))
	})

	// 3. Sent, accepted: a failure with a ConversationID Daraja never gave is not applied.
	if r := env.Do("POST", "/api/v1/send-money/mpesa/result/"+token, forgedB2CFailure(t, first, "AG_forged_late")); r.Status != 200 {
		t.Fatalf("forged result: %d %s", r.Status, r.Body)
	}
	b.wallet(t, "KES", "Marker 2")
	if cur, av := b.balance(t, b.settlement); cur != "1000.00" || av != "780.00" {
		t.Fatalf("a forged failure with a wrong ConversationID moved the hold: %s / %s", cur, av)
	}
	if s := txnStatus(first); s != "PROCESSING" {
		t.Fatalf("forged failure finished a sent transaction: %s", s)
	}

	// 4. Daraja's real results complete the file: both paid, out of the hold.
	for _, id := range []string{first, second} {
		if err := fake.CompleteB2C(id, 0); err != nil {
			t.Fatal(err)
		}
	}
	done := b.waitFile(t, tracking)
	if done["status"] != "COMPLETE" || !amt(t, done["paid_amount"]).Equal(money.MustParse("200")) ||
		!amt(t, done["failed_amount"]).IsZero() || !amt(t, done["actual_charges"]).Equal(money.MustParse("20")) {
		t.Fatalf("final file: %v", done)
	}
	if cur, av := b.balance(t, b.settlement); cur != "780.00" || av != "780.00" {
		t.Fatalf("after the file: 220 paid out: %s / %s", cur, av)
	}

	// 5. A forged failure for a transaction already final changes nothing.
	if r := env.Do("POST", "/api/v1/send-money/mpesa/result/"+token, forgedB2CFailure(t, second, sendOf(second).Reference)); r.Status != 200 {
		t.Fatalf("late forged result: %d %s", r.Status, r.Body)
	}
	b.wallet(t, "KES", "Marker 3")
	if cur, av := b.balance(t, b.settlement); cur != "780.00" || av != "780.00" {
		t.Fatalf("a result for a final transaction moved money: %s / %s", cur, av)
	}
	if s := txnStatus(second); s != "COMPLETE" {
		t.Fatalf("a result for a final transaction changed it: %s", s)
	}
	n := map[string]int{}
	for _, req := range fake.B2CRequests() {
		n[req.OriginatorConversationID]++
	}
	if len(n) != 2 || n[first] != 1 || n[second] != 1 {
		t.Fatalf("B2C requests per transaction: %v", n)
	}
	if rep, err := storage.CheckLedger(context.Background(), env.Schema.DB); err != nil || !rep.OK {
		t.Fatalf("ledger check: %+v, %v", rep, err)
	}
}
