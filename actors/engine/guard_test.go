package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"paysvc/actors/aggregates/invoice/invoicekind"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// startGuardedEngine runs an engine that reads a merchant's state for every
// command, so a test's disable takes effect at once (the default trusts it for
// a second: Config.MerchantRefresh).
func (b *engineBundle) startGuardedEngine(t *testing.T) {
	t.Helper()
	b.runEngine(t, engine.Config{Owner: "guarded", MerchantRefresh: -1})
}

// The engine's guards (guard.go, docs/security.md "Guards of the money-moving
// commands"): whatever process produced a command, it applies only in its
// merchant's environment, a simulator's outcome never to a live merchant, a
// sandbox-only command never to a live merchant, and a disabled merchant's
// command only when it completes money already in motion. Each subtest fails
// with its guard removed (checked once by deleting each case of Engine.guard).
func TestEngine_Guards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startGuardedEngine(t)
	live, liveSettle := b.newMerchant(t, "Live Co", "live")
	// A live collection, pushed by the live API: the money that forged outcomes
	// would credit.
	push := func(merchant string) string {
		t.Helper()
		inv := ids.Alias(8)
		ok(t, b.send(t, b.command(t, topics.CmdInvoiceSTKPush, merchant, topics.InvoiceSTKPush{InvoiceID: inv,
			Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "guard"})))
		return inv
	}
	success := func(merchant, inv string) topics.Command {
		c := b.command(t, topics.CmdInvoiceProviderResult, merchant, topics.ProviderResult{InvoiceID: inv,
			Stage: "FINAL", Receipt: "RCPT" + inv, CheckoutRequestID: "ws_CO_" + inv})
		c.ID = ids.DeriveUUID("provider-result", inv, "FINAL") // as the rails derive it
		return c
	}
	invoiceState := func(merchant, inv string) string {
		t.Helper()
		found, err := invoicestore.Load(b.ctx, b.db, merchant, []string{inv})
		if err != nil {
			t.Fatal(err)
		}
		return found[inv].State
	}
	processed := func(id string) int {
		return b.count(t, `SELECT count(*) FROM processed_commands WHERE command_id = $1`, id)
	}

	t.Run("OtherEnvironment", func(t *testing.T) {
		// A sandbox process's deposit, transfer and outcome for a live merchant,
		// and a live process's deposit for a sandbox merchant.
		for _, c := range []topics.Command{
			depositCmd(b, t, live, liveSettle, "1000.00"),
			transferCmd(b, t, live, liveSettle, liveSettle, "1.00"),
			depositCmd(b, t, b.merchant, b.settle, "1000.00"),
		} {
			if c.MerchantID == live {
				c.Environment = topics.Sandbox
			} else {
				c.Environment = topics.Live
			}
			wantCode(t, b.send(t, c), engine.CodeNotFound)
			if n := b.entriesOf(t, c.ID); n != 0 {
				t.Fatalf("%s across environments wrote %d ledger entries", c.Type, n)
			}
		}
		b.wantBalance(t, live, liveSettle, "0.00")
		b.wantBalance(t, b.merchant, b.settle, "0.00")
	})
	t.Run("NoEnvironment", func(t *testing.T) {
		c := depositCmd(b, t, b.merchant, b.settle, "10.00")
		c.Environment = ""
		if r := b.send(t, c); r.Error == nil || r.Error.Detail != "Not found: the command names no environment." {
			t.Fatalf("a command without an environment: %+v", r.Error)
		}
		b.wantBalance(t, b.merchant, b.settle, "0.00")
	})
	t.Run("UnknownMerchant", func(t *testing.T) {
		c := depositCmd(b, t, "NOSUCHMERCHANT", b.settle, "10.00")
		c.Environment = "" // what an unknown merchant's environment reads as: only existence refuses it
		if r := b.send(t, c); r.Error == nil || r.Error.Detail != "Merchant not found." {
			t.Fatalf("an unknown merchant's command: %+v", r.Error)
		}
		b.wantBalance(t, b.merchant, b.settle, "0.00")
	})
	t.Run("ForgedOutcomeNeitherAppliesNorTakesTheID", func(t *testing.T) {
		inv := push(live)
		forged := success(live, inv)
		forged.Environment = topics.Sandbox // the sandbox simulator answering a live prompt
		forged.Simulated = true
		wantCode(t, b.send(t, forged), engine.CodeNotFound)
		if s := invoiceState(live, inv); s != "PENDING" {
			t.Fatalf("live invoice %s after a sandbox outcome, want PENDING", s)
		}
		b.wantBalance(t, live, liveSettle, "0.00")
		if n := processed(forged.ID); n != 0 {
			t.Fatalf("the refused forgery was recorded as processed under the genuine outcome's id")
		}
		// The live rail's genuine outcome, under the same derived id, applies.
		genuine := success(live, inv)
		ok(t, b.send(t, genuine))
		if s := invoiceState(live, inv); s != "COMPLETE" {
			t.Fatalf("live invoice %s after its rail's outcome, want COMPLETE", s)
		}
		b.wantBalance(t, live, liveSettle, "98.50")
	})
	t.Run("SimulatedNeverForLive", func(t *testing.T) {
		// Even stamped live (a live process wired to a simulator by mistake).
		inv := push(live)
		c := success(live, inv)
		c.Simulated = true
		wantCode(t, b.send(t, c), engine.CodeInvalid)
		if s := invoiceState(live, inv); s != "PENDING" {
			t.Fatalf("live invoice %s after a simulated outcome, want PENDING", s)
		}
		// A sandbox merchant takes its simulator's outcomes.
		sinv := push(b.merchant)
		sc := success(b.merchant, sinv)
		sc.Simulated = true
		ok(t, b.send(t, sc))
		b.wantBalance(t, b.merchant, b.settle, "98.50")
	})
	t.Run("SandboxOnly", func(t *testing.T) {
		r := b.send(t, depositCmd(b, t, live, liveSettle, "1000.00"))
		wantCode(t, r, engine.CodeInvalid)
		if !strings.Contains(r.Error.Detail, "sandbox") {
			t.Fatalf("refusal should say deposits are sandbox-only: %v", r.Error)
		}
		b.wantBalance(t, live, liveSettle, "98.50")
	})
	t.Run("Disabled", func(t *testing.T) {
		m, settle := b.newMerchant(t, "Soon Disabled", "sandbox")
		ok(t, b.send(t, depositCmd(b, t, m, settle, "50.00")))
		inv := push(m) // money on its way in before the disable
		if _, err := storage.SetMerchantEnabled(b.ctx, b.db, m, false); err != nil {
			t.Fatal(err)
		}
		w := ids.Alias(10)
		for _, c := range []topics.Command{
			depositCmd(b, t, m, settle, "50.00"),
			createCmd(b, t, m, w, "after disable"),
			b.command(t, topics.CmdInvoiceSTKPush, m, topics.InvoiceSTKPush{InvoiceID: ids.Alias(8),
				Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "disabled"}),
		} {
			wantCode(t, b.send(t, c), engine.CodeMerchantDisabled)
		}
		b.wantBalance(t, m, settle, "50.00")
		// The payer paid before the disable: the rail's outcome lands where the
		// money went.
		ok(t, b.send(t, success(m, inv)))
		b.wantBalance(t, m, settle, "148.50")
		// A P2P payout to the disabled merchant fails (the payer's hold is
		// released by the failed result); nothing is credited.
		p2p := b.command(t, topics.CmdPayoutP2PCredit, m, topics.PayoutP2PCredit{PayerMerchantID: b.merchant,
			FileID: ids.Alias(8), TransactionID: ids.Alias(10), WalletID: settle, Amount: money.MustParse("3.00"), Currency: "KES"})
		p2p.Environment = topics.Sandbox
		r := b.send(t, p2p)
		ok(t, r)
		var res topics.PayoutTxnResult
		if err := json.Unmarshal(r.Result, &res); err != nil || res.Success {
			t.Fatalf("P2P credit to a disabled merchant: %+v (%v)", res, err)
		}
		b.wantBalance(t, m, settle, "148.50")
		if _, err := storage.SetMerchantEnabled(b.ctx, b.db, m, true); err != nil {
			t.Fatal(err)
		}
		ok(t, b.send(t, depositCmd(b, t, m, settle, "1.50")))
		b.wantBalance(t, m, settle, "150.00")
	})
	t.Run("RegisteredKinds", func(t *testing.T) {
		// Subscriptions' card set-up and cycles are the sandbox's test cards: a
		// live merchant's would invent money, whatever produced them.
		for _, typ := range []string{topics.CmdSubscriptionActivate, topics.CmdSubscriptionCycle} {
			c := b.command(t, typ, live, map[string]any{"subscription_id": "SUBLIVE00001"})
			r := b.send(t, c)
			wantCode(t, r, engine.CodeInvalid)
			if !strings.Contains(r.Error.Detail, "only in the sandbox") {
				t.Fatalf("%s for a live merchant: %v", typ, r.Error)
			}
		}
		// A refund rail's outcome from a simulator never applies to a live merchant.
		c := b.command(t, "refund.settle", live, map[string]any{"refund_id": 1, "invoice_id": "INVLIVE1", "status": "COMPLETED"})
		c.Simulated = true
		wantCode(t, b.send(t, c), engine.CodeInvalid)
	})
	t.Run("Metric", func(t *testing.T) {
		if v := counter(t, "paysvc_engine_guard_refusals_total", "type", topics.CmdInvoiceProviderResult); v < 2 {
			t.Fatalf("guard refusals of provider results counted %v, want >= 2", v)
		}
	})
	b.ledgerOK(t)
}

// Past the guard, the handlers hold the rest: a command of one
// merchant cannot reach another merchant's invoice or payment file held in the
// same partition (the guard checks only the command's own merchant), an outcome
// whose stage is missing or unknown is never read as final, and a payment
// reported for a FAILED collection is refused and counted, never credited.
func TestEngine_OutcomesFailClosed(t *testing.T) {
	t.Parallel()
	b, x := setupCrossMerchant(t)
	inv := ids.Alias(8)
	ok(t, b.send(t, b.command(t, topics.CmdInvoiceSTKPush, b.merchant, topics.InvoiceSTKPush{InvoiceID: inv,
		Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "owner"})))
	result := func(merchant, stage string, code int) topics.Command {
		return b.command(t, topics.CmdInvoiceProviderResult, merchant, topics.ProviderResult{InvoiceID: inv,
			Stage: stage, Code: code, Receipt: "RCPT" + stage, CheckoutRequestID: "ws_CO_owner"})
	}
	state := func() string {
		t.Helper()
		found, err := invoicestore.Load(b.ctx, b.db, b.merchant, []string{inv})
		if err != nil {
			t.Fatal(err)
		}
		return found[inv].State
	}
	before := b.balance(t, b.merchant, b.settle)

	t.Run("AnotherMerchantsInvoice", func(t *testing.T) {
		// B's outcome for A's invoice, in A's partition, where A's invoice is live.
		wantCode(t, x.sendB(result(x.merchantB, StageFinalForTest, 0)), engine.CodeNotFound)
		wantCode(t, x.sendB(b.command(t, topics.CmdInvoiceClear, x.merchantB, topics.InvoiceClear{InvoiceID: inv})), engine.CodeNotFound)
		if s := state(); s != "PENDING" {
			t.Fatalf("A's invoice %s after B's outcome, want PENDING", s)
		}
		b.wantBalance(t, x.merchantB, x.settleB, "20.00")
	})
	t.Run("UnknownStage", func(t *testing.T) {
		for _, stage := range []string{"", "final", "SETTLED"} {
			wantCode(t, b.send(t, result(b.merchant, stage, 0)), engine.CodeInvalid)
		}
		if s := state(); s != "PENDING" {
			t.Fatalf("invoice %s after outcomes of unknown stages, want PENDING", s)
		}
		b.wantBalance(t, b.merchant, b.settle, before)
	})
	t.Run("PaymentAfterFailed", func(t *testing.T) {
		ok(t, b.send(t, result(b.merchant, StageFinalForTest, 1032)))
		if s := state(); s != "FAILED" {
			t.Fatalf("invoice %s after a failure, want FAILED", s)
		}
		n := counter(t, "paysvc_engine_contradicted_outcomes_total", "", "")
		wantCode(t, b.send(t, result(b.merchant, StageFinalForTest, 0)), engine.CodeInvalid)
		if s := state(); s != "FAILED" {
			t.Fatalf("invoice %s after a late success, want FAILED", s)
		}
		b.wantBalance(t, b.merchant, b.settle, before)
		if got := counter(t, "paysvc_engine_contradicted_outcomes_total", "", ""); got != n+1 {
			t.Fatalf("contradicted outcomes %v -> %v, want one more", n, got)
		}
	})
	b.ledgerOK(t)
}

// StageFinalForTest is the rails' final stage (mpesa.StageFinal).
const StageFinalForTest = invoicekind.StageFinal
