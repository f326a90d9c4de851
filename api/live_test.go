package api_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// otherEnvWallet stores a merchant of the other environment in env's database and
// returns its KES settlement wallet: what a P2P payout might try to reach.
func otherEnvWallet(t *testing.T, env *servicetest.Env, environment string) string {
	t.Helper()
	m, err := admin.CreateMerchant(context.Background(), env.Schema.DB, "Other "+environment, environment)
	if err != nil {
		t.Fatal(err)
	}
	w, err := walletstore.Settlement(context.Background(), env.Schema.DB, m.MerchantID, "KES")
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

// A sandbox server and a live API process on one database and one command log
// (docs/security.md, "Guards of the money-moving commands"): the sandbox's
// simulated M-Pesa never answers a live merchant's prompt, its recovery never
// sends one again, and no live wallet changes; the sandbox's own collections
// complete as before.
func TestSharedLog_SandboxRailsNeverAnswerLive(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.SimRecoverAfter = 100 * time.Millisecond })
	live := servicetest.StartPeer(t, env, "live", service.RoleAPI)
	lb := newBundle(t, live, "Live Co")
	sb := newBundle(t, env, "Sandbox Co")
	skippedBefore := metricValue(t, env, `paysvc_rails_skipped_total{rail="mpesa_stk"}`)

	push := func(b *bundle) string {
		t.Helper()
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100"})
		if r.Status != 200 {
			t.Fatalf("STK push: %d %s", r.Status, r.Body)
		}
		return r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	}
	liveInv := push(lb)
	// The sandbox merchant's prompt goes the same way, after the live one.
	if inv := sb.waitInvoice(t, push(sb)); inv["state"] != "COMPLETE" {
		t.Fatalf("sandbox collection: %v", inv)
	}
	// Several simulator and recovery periods (recovery after 360 ms here). The
	// delay is what is under test: recovery acts only on prompts older than its
	// delay, and a pass lists only its own environment's, leaving no trace to wait for.
	time.Sleep(1500 * time.Millisecond)
	r := lb.post("/api/v1/payment/status/", map[string]any{"invoice_id": liveInv})
	if s := r.Map(t)["invoice"].(map[string]any)["state"]; r.Status != 200 || s != "PENDING" {
		t.Fatalf("live invoice after the sandbox's simulator and recovery ran: %d %v, want PENDING", r.Status, s)
	}
	if cur, avail := lb.balance(t, lb.settlement); cur != "0.00" || avail != "0.00" {
		t.Fatalf("live wallet %s/%s, want untouched", cur, avail)
	}
	if got := metricValue(t, env, `paysvc_rails_skipped_total{rail="mpesa_stk"}`); got <= skippedBefore {
		t.Fatalf("the sandbox rails role did not skip the live prompt (skipped %v -> %v)", skippedBefore, got)
	}
}

// metricValue reads one series of the service's /metrics (0 when absent).
func metricValue(t *testing.T, env *servicetest.Env, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(env.Metrics(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
