package engine_test

import (
	"encoding/json"
	"testing"

	"paysvc/actors/aggregates/payout/payoutkind"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// The engine's half of the payout kill switches (docs/security.md, "Kill
// switches"): whatever a rail does, the SUBMITTED stage of payout.results is
// refused while the merchant is disabled or the file is held, so the
// transaction stays unsent and its money held; a FINAL outcome of money already
// in motion still lands. An operator's fail releases exactly the unsent
// transactions' hold, and hold, release and fail work on a disabled merchant.
func TestEngine_PayoutKillSwitches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startGuardedEngine(t)
	m, settle := b.newMerchant(t, "Kill Switch Co", "sandbox")
	ok(t, b.send(t, depositCmd(b, t, m, settle, "1000.00")))
	file := ids.Alias(8)
	txns := []string{ids.Alias(10), ids.Alias(10), ids.Alias(10)}
	in := topics.PayoutInitiate{FileID: file, TrackingID: "5f0c6a8e-3a52-4a43-9d1e-1f6d7c3c9a10", Nonce: "n0nce123",
		Provider: "MPESA-B2C", Currency: "KES", RequiresApproval: true}
	for i, id := range txns {
		in.Transactions = append(in.Transactions, topics.PayoutTxnIn{TransactionID: id, RequestReferenceID: id,
			Account: "25470837410" + string(rune('0'+i)), Amount: money.MustParse("100.00"), Charge: money.MustParse("10.00")})
	}
	ok(t, b.send(t, b.command(t, topics.CmdPayoutInitiate, m, in)))
	ok(t, b.send(t, b.command(t, topics.CmdPayoutApprove, m, topics.PayoutApprove{FileID: file})))
	b.wantAvailable(t, m, settle, "670.00", "1000.00")
	results := func(stage, batch string, ids ...string) topics.Command {
		r := topics.PayoutResults{FileID: file, MerchantID: m, Stage: stage, Batch: batch}
		for _, id := range ids {
			r.Results = append(r.Results, topics.PayoutTxnResult{TransactionID: id, Success: true, ProviderReference: "R" + id})
		}
		c := b.command(t, topics.CmdPayoutResults, m, r)
		c.ID = topics.PayoutResultCommandID(file, stage, batch)
		return c
	}
	operator := func(typ, reason string) topics.Reply {
		return b.send(t, b.command(t, typ, m, topics.PayoutOperator{FileID: file, By: "ops-test", Reason: reason}))
	}
	txnStatus := func(id string) string {
		var s string
		if err := b.db.Get(&s, `SELECT status FROM payout_transactions WHERE transaction_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// T0 is handed to the rail before the disable.
	ok(t, b.send(t, results(topics.PayoutStageSubmitted, "s0", txns[0])))
	if _, err := storage.SetMerchantEnabled(b.ctx, b.db, m, false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.send(t, results(topics.PayoutStageSubmitted, "s1", txns[1])), engine.CodeMerchantDisabled)
	if s := txnStatus(txns[1]); s != "PENDING" {
		t.Fatalf("a disabled merchant's submission applied: %s", s)
	}
	// Money already in motion lands.
	ok(t, b.send(t, results(topics.PayoutStageFinal, "f0", txns[0])))
	b.wantAvailable(t, m, settle, "670.00", "890.00")

	// The operator holds the disabled merchant's file: once enabled, its
	// submissions are still refused until it is released.
	ok(t, operator(topics.CmdPayoutHold, "stolen key"))
	if _, err := storage.SetMerchantEnabled(b.ctx, b.db, m, true); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.send(t, results(topics.PayoutStageSubmitted, "s2", txns[1])), payoutkind.CodeFileOnHold)
	ok(t, operator(topics.CmdPayoutRelease, ""))
	ok(t, b.send(t, results(topics.PayoutStageSubmitted, "s3", txns[1]))) // T1 handed to the rail
	r := operator(topics.CmdPayoutFail, "paid to the wrong numbers")
	ok(t, r)
	var res payoutkind.OperatorResult
	if err := json.Unmarshal(r.Result, &res); err != nil || res.Failed != 1 || res.Released != "110.00" || res.Status != "PROCESSING" {
		t.Fatalf("fail: %+v (%v)", res, err)
	}
	if s1, s2 := txnStatus(txns[1]), txnStatus(txns[2]); s1 != "PROCESSING" || s2 != "FAILED" {
		t.Fatalf("after fail: handed %s (want PROCESSING), unsent %s (want FAILED)", s1, s2)
	}
	b.wantAvailable(t, m, settle, "780.00", "890.00")
	// A SUBMITTED of the failed transaction (a rail that read it before the fail)
	// changes nothing; T1's outcome finishes the file.
	ok(t, b.send(t, results(topics.PayoutStageSubmitted, "s4", txns[2])))
	if s := txnStatus(txns[2]); s != "FAILED" {
		t.Fatalf("a failed transaction was submitted: %s", s)
	}
	ok(t, b.send(t, results(topics.PayoutStageFinal, "f1", txns[1])))
	b.wantAvailable(t, m, settle, "780.00", "780.00")
	wantCode(t, operator(topics.CmdPayoutHold, ""), payoutkind.CodeNotProcessing)
	b.ledgerOK(t)
}

// wantAvailable checks a wallet's available balance (what the holds leave) and
// its current balance.
func (b *engineBundle) wantAvailable(t *testing.T, merchant, walletID, available, current string) {
	t.Helper()
	var got struct {
		Av  string `db:"available_balance"`
		Cur string `db:"current_balance"`
	}
	if err := b.db.Get(&got, `SELECT available_balance::text, current_balance::text FROM wallets WHERE wallet_id = $1 AND merchant_id = $2`,
		walletID, merchant); err != nil {
		t.Fatal(err)
	}
	if got.Av != available || got.Cur != current {
		t.Fatalf("wallet %s available %s / current %s, want %s / %s", walletID, got.Av, got.Cur, available, current)
	}
}
