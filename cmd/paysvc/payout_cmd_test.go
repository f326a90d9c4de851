package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// An operator finishes payout transactions the rail never reported (the sandbox
// rail here answers after an hour): one paid, one not. The file completes with the
// money moved and released as a rail's outcomes would, and a second finish of
// either, or of an unknown transaction, is refused and changes nothing.
func TestPayoutFinish(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, func(c *service.Config) { c.SimPayoutDelay = time.Hour })
	m := svc.Merchant("Stuck")
	auth := servicetest.Bearer(m.SecretKey)
	settlement := svc.Settlement(auth)
	svc.Deposit(auth, settlement, "1000")
	r := svc.Do("POST", "/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": "NO",
		"transactions": []any{map[string]any{"account": "254708374149", "amount": "100"}, map[string]any{"account": "254708374150", "amount": "100"}}}, auth...)
	if r.Status != 201 {
		t.Fatalf("initiation: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	txns := f["transactions"].([]any)
	paid, unpaid := txns[0].(map[string]any)["transaction_id"].(string), txns[1].(map[string]any)["transaction_id"].(string)
	status := func() map[string]any {
		return svc.Do("POST", "/api/v1/send-money/status/", map[string]any{"tracking_id": f["tracking_id"]}, auth...).Map(t)
	}
	waittest.Eventually(t, cliWait, func() (bool, string) {
		return status()["transactions"].([]any)[0].(map[string]any)["status"] == "PROCESSING", "the rail has not taken the transactions"
	})

	env := envFor(svc.Schema, "PAYSVC_KAFKA_BROKERS", strings.Join(svc.Svc.Brokers, ","),
		"PAYSVC_KAFKA_NAMESPACE", string(svc.Config.KafkaNamespace))
	wantUsage(t, runCLI(t, env, "payout", "finish", paid, "--status", "COMPLETE")) // no reference
	wantUsage(t, runCLI(t, env, "payout", "finish", paid, "--status", "MAYBE"))
	wantFailure(t, runCLI(t, env, "payout", "finish", "NOSUCHTXN1", "--status", "FAILED"), "not found")
	if r := runCLI(t, env, "payout", "finish", paid, "--status", "COMPLETE", "--reference", "SIM1234567"); r.err != nil {
		t.Fatalf("finish paid: %v", r)
	}
	if r := runCLI(t, env, "payout", "finish", unpaid, "--status", "FAILED", "--reason", "Not found in the M-Pesa portal"); r.err != nil {
		t.Fatalf("finish unpaid: %v", r)
	}
	var done map[string]any
	waittest.Eventually(t, cliWait, func() (bool, string) {
		done = status()
		return done["status"] == "COMPLETE", fmt.Sprintf("the file is %v, not COMPLETE", done["status"])
	})
	if done["paid_amount"] != "100.00" || done["failed_amount"] != "100.00" || done["actual_charges"] != "10.00" {
		t.Fatalf("file after the operator: %v", done)
	}
	for _, x := range done["transactions"].([]any) {
		tx := x.(map[string]any)
		if tx["transaction_id"] == paid && (tx["status"] != "COMPLETE" || tx["provider_reference"] != "SIM1234567") {
			t.Fatalf("paid transaction: %v", tx)
		}
		if tx["transaction_id"] == unpaid && (tx["status"] != "FAILED" || tx["status_description"] != "Not found in the M-Pesa portal") {
			t.Fatalf("unpaid transaction: %v", tx)
		}
	}
	w := svc.Do("GET", "/api/v1/wallets/"+settlement+"/", nil, auth...).Map(t)
	if w["current_balance"] != "890.00" || w["available_balance"] != "890.00" {
		t.Fatalf("wallet %v / %v, want 890.00 for both", w["current_balance"], w["available_balance"])
	}
	wantFailure(t, runCLI(t, env, "payout", "finish", unpaid, "--status", "COMPLETE", "--reference", "LATE"), "only a transaction waiting")
}
