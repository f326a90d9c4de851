package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// The API keeps sandbox helpers and P2P within an environment; the engine holds
// the same lines whatever produced the command (a sandbox API on the live command
// log, a bug): a live merchant's deposit would invent money.
func TestEngine_Environments(t *testing.T) {
	t.Parallel()
	b := setupRunning(t)
	live, liveSettle := b.newMerchant(t, "Live Co", "live")

	t.Run("DepositRefusedForLiveMerchant", func(t *testing.T) {
		c := depositCmd(b, t, live, liveSettle, "1000.00")
		r := b.send(t, c)
		wantCode(t, r, engine.CodeInvalid)
		if !strings.Contains(r.Error.Detail, "sandbox") {
			t.Fatalf("refusal should say deposits are sandbox-only: %v", r.Error)
		}
		b.wantBalance(t, live, liveSettle, "0.00")
		if n := b.entriesOf(t, c.ID); n != 0 {
			t.Fatalf("a refused deposit wrote %d ledger entries", n)
		}
		// A sandbox merchant's deposit still works.
		ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "5.00")))
		b.wantBalance(t, b.merchant, b.settle, "5.00")
	})

	p2p := func(payer, recipient, walletID string) topics.PayoutTxnResult {
		t.Helper()
		c := b.command(t, topics.CmdPayoutP2PCredit, recipient, topics.PayoutP2PCredit{PayerMerchantID: payer,
			FileID: ids.Alias(8), TransactionID: ids.Alias(10), WalletID: walletID, Amount: money.MustParse("3.00"), Currency: "KES"})
		c.Environment = b.environment(t, payer) // as the payer's approval stamps it
		r := b.send(t, c)
		ok(t, r)
		var res topics.PayoutTxnResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("P2PNeverCrossesEnvironments", func(t *testing.T) {
		before := b.balance(t, b.merchant, b.settle)
		if res := p2p(live, b.merchant, b.settle); res.Success {
			t.Fatalf("a live payer credited a sandbox wallet: %+v", res)
		}
		b.wantBalance(t, b.merchant, b.settle, before)
		if res := p2p(b.merchant, live, liveSettle); res.Success {
			t.Fatalf("a sandbox payer credited a live wallet: %+v", res)
		}
		b.wantBalance(t, live, liveSettle, "0.00")
		// Within the sandbox the same credit goes through.
		other, _ := b.newMerchant(t, "Sandbox Peer", "sandbox")
		if res := p2p(other, b.merchant, b.settle); !res.Success {
			t.Fatalf("sandbox to sandbox P2P: %+v", res)
		}
		after, _ := money.Parse(before)
		b.wantBalance(t, b.merchant, b.settle, after.Add(money.MustParse("3.00")).String())
		b.ledgerOK(t)
	})
}
