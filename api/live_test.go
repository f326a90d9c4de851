package api_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// otherEnvWallet stores a merchant of the other environment in env's database and
// returns its KES settlement wallet: what a P2P payout might try to reach.
func otherEnvWallet(t *testing.T, env *servicetest.Env, environment string) string {
	t.Helper()
	m, err := admin.CreateMerchant(context.Background(), env.Schema.DB, "Other "+environment, environment)
	if err != nil {
		t.Fatal(err)
	}
	w, err := storage.SettlementWallet(context.Background(), env.Schema.DB, m.MerchantID, "KES")
	if err != nil {
		t.Fatal(err)
	}
	return w.WalletID
}

func p2pFile(account string) map[string]any {
	return map[string]any{"currency": "KES", "provider": "INTASEND", "requires_approval": "YES",
		"transactions": []map[string]any{{"account": account, "amount": "10", "narrative": "P2P"}}}
}

// A live server never answers from the sandbox simulator, and money never crosses
// between live and sandbox merchants.
func TestLiveServer_SandboxBoundaries(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.Environment, c.API.Environment = "live", "live" })
	b := newBundle(t, env, "Live Co")
	peer := newBundle(t, env, "Live Peer")
	sandboxWallet := otherEnvWallet(t, env, "sandbox")
	validate := func(body map[string]any) map[string]any {
		t.Helper()
		r := b.post("/api/v1/send-money/validate-account/", body)
		if r.Status != 200 {
			t.Fatalf("validate %v: %d %s", body, r.Status, r.Body)
		}
		return r.Map(t)
	}

	t.Run("ValidateAccount_NoSimulatorAnswers", func(t *testing.T) {
		// The simulator would answer SUCCESS with a made-up name, or INVALID_ACCOUNT
		// for its magic suffix 0011: neither may come from a live server.
		for _, body := range []map[string]any{
			{"provider": "MPESA-B2C", "account": "254708374149"},
			{"provider": "MPESA-B2C", "account": "254708370011"},
			{"provider": "PESALINK", "account": "1234567890", "bank_code": "68"},
			{"provider": "MPESA-B2B", "account": "888880", "account_type": "PayBill"},
			{"provider": "AIRTIME", "account": "254708374149"},
		} {
			v := validate(body)
			if v["status"] != "VALIDATION_UNAVAILABLE" || v["name"] != "" || !strings.Contains(v["description"].(string), "not available") {
				t.Errorf("live validate %v: %v", body, v)
			}
		}
		// What can be checked for real still is: the account's format.
		if v := validate(map[string]any{"provider": "MPESA-B2C", "account": "0712"}); v["status"] != "INVALID_ACCOUNT" {
			t.Errorf("malformed phone on live: %v", v)
		}
		// P2P wallets are this service's own: validated for real, in the environment.
		if v := validate(map[string]any{"provider": "INTASEND", "account": peer.settlement}); v["status"] != "SUCCESS" || v["name"] != "Live Peer" {
			t.Errorf("live P2P wallet: %v", v)
		}
		if v := validate(map[string]any{"provider": "INTASEND", "account": sandboxWallet}); v["status"] != "INVALID_ACCOUNT" || v["name"] != "" {
			t.Errorf("a sandbox wallet seen from live: %v", v)
		}
	})
	t.Run("P2P_NeverToSandbox", func(t *testing.T) {
		r := b.post("/api/v1/send-money/initiation/", p2pFile(sandboxWallet))
		if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "transactions[0].account" {
			t.Fatalf("live file paying a sandbox wallet: %d %s", r.Status, r.Body)
		}
		// The same file to a live wallet passes the same check (refused later only
		// for want of funds, or accepted).
		if r := b.post("/api/v1/send-money/initiation/", p2pFile(peer.settlement)); strings.Contains(string(r.Body), "No wallet") {
			t.Fatalf("live file paying a live wallet: %d %s", r.Status, r.Body)
		}
	})
	t.Run("NoDeposits", func(t *testing.T) {
		r := b.post("/api/v1/sandbox/wallets/"+b.settlement+"/deposit/", map[string]any{"amount": "1.00"})
		if r.Status != 404 {
			t.Fatalf("sandbox deposit on live: %d %s", r.Status, r.Body)
		}
		if cur, _ := b.balance(t, b.settlement); cur != "0.00" {
			t.Fatalf("balance after a refused deposit: %s", cur)
		}
	})
}

// The sandbox side of the same boundary: sandbox money never reaches a live wallet.
func TestSandboxServer_P2PNeverToLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	liveWallet := otherEnvWallet(t, b.env, "live")
	r := b.post("/api/v1/send-money/validate-account/", map[string]any{"provider": "INTASEND", "account": liveWallet})
	if v := r.Map(t); r.Status != 200 || v["status"] != "INVALID_ACCOUNT" || v["name"] != "" {
		t.Fatalf("a live wallet seen from the sandbox: %d %s", r.Status, r.Body)
	}
	b.deposit(t, b.settlement, "100.00")
	r = b.post("/api/v1/send-money/initiation/", p2pFile(liveWallet))
	if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "transactions[0].account" {
		t.Fatalf("sandbox file paying a live wallet: %d %s", r.Status, r.Body)
	}
}
