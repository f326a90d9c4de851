package engine_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/engine"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/topics"
)

// startIdleEngine runs an engine whose actors are passivated after idle, and
// returns it so a test can see how many actors it holds.
func (b *engineBundle) startIdleEngine(t *testing.T, idle time.Duration) *engine.Engine {
	t.Helper()
	eng, _ := b.runEngine(t, engine.Config{Owner: "idle", ActorIdle: idle})
	return eng
}

// waitNoLiveActors waits until the engine has passivated every actor.
func waitNoLiveActors(t *testing.T, eng *engine.Engine) {
	t.Helper()
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return eng.LiveActors() == 0, fmt.Sprintf("engine still holds %d actors after %v of idleness", eng.LiveActors(), replyWait)
	})
}

// holdsActors checks that the engine holds actors after a command sent at sent.
// A sweep drops only actors unused for longer than idle, and the command's were
// used after sent: none held before idle has passed since is a fault, whatever the
// machine's speed. Later, a sweep may rightly have dropped them, and a count of 0
// proves nothing; the test's balances still show what the actors held.
func holdsActors(t *testing.T, eng *engine.Engine, idle time.Duration, sent time.Time, when string) {
	t.Helper()
	n := eng.LiveActors()
	elapsed := time.Since(sent)
	switch {
	case n > 0:
	case elapsed < idle:
		t.Fatalf("no live actor %s (%v after the command, less than the idle time %v)", when, elapsed, idle)
	default:
		t.Logf("no live actor %s, but %v had passed, more than the idle time %v: not a finding", when, elapsed, idle)
	}
}

func (b *engineBundle) walletVersion(t *testing.T, walletID string) int64 {
	t.Helper()
	return int64(b.count(t, `SELECT version FROM wallets WHERE wallet_id = $1`, walletID))
}

// An idle wallet actor is stopped and forgotten, and the next command brings it
// back from its snapshot with the balance and version it had: the command applies
// on top of them and its commit passes the snapshot's version check.
func TestIdleActorsArePassivatedAndRehydrated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const idle = 300 * time.Millisecond
	eng := b.startIdleEngine(t, idle)

	w := ids.Alias(10)
	ok(t, b.send(t, createCmd(b, t, b.merchant, w, "idle "+w)))
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "100.00")))
	sent := time.Now()
	ok(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "30.00")))
	holdsActors(t, eng, idle, sent, "right after the commands")
	version := b.walletVersion(t, w)

	waitNoLiveActors(t, eng)

	// Rehydrated from the snapshot: 30.00 held, so 12.50 out leaves 17.50.
	sent = time.Now()
	r := b.send(t, transferCmd(b, t, b.merchant, w, b.settle, "12.50"))
	ok(t, r)
	holdsActors(t, eng, idle, sent, "after the command that rehydrates them")
	var res wallet.TransferResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.Origin.CurrentBalance.String() != "17.50" || res.Destination.CurrentBalance.String() != "82.50" {
		t.Fatalf("transfer result after rehydration %+v", res)
	}
	b.wantBalance(t, b.merchant, w, "17.50")
	b.wantBalance(t, b.merchant, b.settle, "82.50")
	if got := b.walletVersion(t, w); got != version+1 {
		t.Fatalf("wallet version %d after one more command, want %d", got, version+1)
	}
	// More than the rehydrated balance is refused, as it would have been live.
	waitNoLiveActors(t, eng)
	wantCode(t, b.send(t, transferCmd(b, t, b.merchant, w, b.settle, "17.51")), "insufficient_funds")
	ok(t, b.send(t, transferCmd(b, t, b.merchant, w, b.settle, "17.50")))
	b.wantBalance(t, b.merchant, w, "0.00")
	b.ledgerOK(t)
}

// Under load, a sweep that runs while a batch is committing must not drop that
// batch's actors (their snapshots are not written yet): with an idle time shorter
// than a batch, every sweep meets commits in flight, and every transfer must still
// land exactly once.
func TestPassivationUnderLoadKeepsEveryTransfer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startIdleEngine(t, time.Millisecond)

	const wallets, rounds = 6, 20
	ws := make([]string, wallets)
	for i := range ws {
		ws[i] = ids.Alias(10)
		ok(t, b.send(t, createCmd(b, t, b.merchant, ws[i], "load "+ws[i])))
	}
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, fmt.Sprintf("%d.00", wallets*100))))
	for _, w := range ws {
		ok(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "100.00")))
	}
	// Each round, every wallet sends 1.00 to the next one, all at once: the
	// balances end where they started, and any lost or doubled transfer shows.
	for range rounds {
		var wg sync.WaitGroup
		replies := make([]topics.Reply, wallets)
		for i := range ws {
			wg.Go(func() {
				c := transferCmd(b, t, b.merchant, ws[i], ws[(i+1)%wallets], "1.00")
				ch, cancel := b.hub.Register(c.ID)
				defer cancel()
				b.produce(t, -1, c)
				replies[i] = await(t, ch, c.Type)
			})
		}
		wg.Wait()
		for _, r := range replies {
			ok(t, r)
		}
	}
	for _, w := range ws {
		b.wantBalance(t, b.merchant, w, "100.00")
		// Version 1 when opened, +1 funded, then one debit and one credit per round:
		// a change applied to a stale rehydrated state would show here.
		if got, want := b.walletVersion(t, w), int64(2+2*rounds); got != want {
			t.Fatalf("wallet %s version %d, want %d", w, got, want)
		}
	}
	b.ledgerOK(t)
}

// A sweep that passivates many actors hands their memory back at once (a GC and
// debug.FreeOSMemory, counted by paysvc_engine_memory_releases_total) instead of
// leaving it to a GC cycle an idle service may not start for minutes.
func TestPassivatingManyActorsReleasesMemory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	eng := b.startIdleEngine(t, 500*time.Millisecond)
	const n = 1100 // more than one sweep's release threshold
	cmds := make([]topics.Command, n)
	for i := range cmds {
		w := ids.Alias(10)
		cmds[i] = createCmd(b, t, b.merchant, w, "many "+w)
	}
	before := counter(t, "paysvc_engine_memory_releases_total", "", "")
	b.produce(t, -1, cmds...)
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return b.count(t, `SELECT count(*) FROM wallets WHERE label LIKE 'many %'`) >= n, "the wallets were not all created"
	})
	waitNoLiveActors(t, eng)
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return counter(t, "paysvc_engine_memory_releases_total", "", "") != before, "no memory release after passivating more than a thousand actors"
	})
}

// An invoice's actor is stopped as soon as the batch that made the invoice final
// commits, not after the idle time; a later command for the invoice brings it back
// from its snapshot, final, and credits nothing a second time.
func TestFinalInvoiceActorIsReleasedAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	eng := b.startIdleEngine(t, time.Hour)
	released := counter(t, "paysvc_engine_final_invoices_released_total", "", "")
	inv := ids.Alias(8)
	ok(t, b.send(t, b.command(t, topics.CmdInvoiceSTKPush, b.merchant, topics.InvoiceSTKPush{InvoiceID: inv,
		Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "final"})))
	result := func(stage string) topics.Command {
		return b.command(t, topics.CmdInvoiceProviderResult, b.merchant, topics.ProviderResult{InvoiceID: inv,
			Stage: stage, Receipt: "SIMFINAL01", CheckoutRequestID: "ws_CO_final"})
	}
	ok(t, b.send(t, result("ACCEPTED")))
	live := eng.LiveActors() // the receiving wallet and the invoice
	if live < 2 {
		t.Fatalf("%d live actors after the push and its acceptance, want the wallet and the invoice", live)
	}
	ok(t, b.send(t, result("FINAL")))
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return eng.LiveActors() == live-1, fmt.Sprintf("%d live actors after the invoice became final, want %d", eng.LiveActors(), live-1)
	})
	if got := counter(t, "paysvc_engine_final_invoices_released_total", "", "") - released; got < 1 {
		t.Fatalf("released counter moved by %v", got)
	}
	b.wantBalance(t, b.merchant, b.settle, "98.50")

	// The same outcome again, under another id: the invoice comes back COMPLETE at
	// version 3 and the wallet is not credited twice.
	r := b.send(t, result("FINAL"))
	ok(t, r)
	var ack struct {
		State   string `json:"state"`
		Version int64  `json:"version"`
	}
	if err := json.Unmarshal(r.Result, &ack); err != nil || ack.State != "COMPLETE" || ack.Version != 3 {
		t.Fatalf("repeated FINAL answered %s (%v)", r.Result, err)
	}
	b.wantBalance(t, b.merchant, b.settle, "98.50")
	b.ledgerOK(t)
}
