package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/engine"
	"paysvc/actors/engine/replies"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

const replyWait = 30 * time.Second

type engineBundle struct {
	ctx      context.Context
	db       *sqlx.DB
	brokers  []string
	ns       topics.Namespace // of the bundle's topics and its engines' group
	prod     *kgo.Client      // partitions by key (the merchant), as the API does
	manual   *kgo.Client      // produces to the partition a record names
	hub      *replies.Hub
	merchant string // merchant A
	settle   string // A's KES settlement wallet
	// kinds are what the bundle's engines apply: the service's one list, to
	// which a test may add its own (the jar of aggregates_test.go).
	kinds []engine.Kind
}

func logger() *slog.Logger {
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// setup starts an in-process Kafka with every paysvc topic, a fresh schema with
// merchant A, a reply hub and two producers. No engine runs yet.
func setup(t *testing.T) *engineBundle {
	t.Helper()
	return setupIn(t, "")
}

// setupRunning is setup with an engine running (owner t1) until the test ends.
func setupRunning(t *testing.T) *engineBundle {
	t.Helper()
	b := setup(t)
	b.startEngine(t, "t1")
	return b
}

// setupIn is setup with the topics and the engines' group in namespace ns.
func setupIn(t *testing.T, ns topics.Namespace) *engineBundle {
	t.Helper()
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, ns.Topic(topics.CommandsTopic)),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	if err := topics.EnsureTopics(ctx, prod, ns, 2); err != nil {
		t.Fatal(err)
	}
	manual, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(manual.Close)

	db := storagetest.New(t).DB
	hub := replies.NewHub("test-" + ids.Alias(10))
	t.Cleanup(hub.Close)
	b := &engineBundle{ctx: ctx, db: db, brokers: brokers, ns: ns, prod: prod, manual: manual, hub: hub,
		kinds: service.Kinds(service.Aggregates(nil, nil))}
	b.merchant, b.settle = b.newMerchant(t, "Merchant A", "sandbox")
	return b
}

// startEngine runs an engine until the returned stop is called (or the test ends).
// stop cancels its context and waits for Run to return.
func (b *engineBundle) startEngine(t *testing.T, owner string) (stop func()) {
	t.Helper()
	_, stop = b.runEngine(t, engine.Config{Owner: owner})
	return stop
}

// runEngine is startEngine for an engine of cfg, given its Kafka, namespace,
// session timeout, logger and kinds from the bundle; it returns the engine so a
// test can look into it.
func (b *engineBundle) runEngine(t *testing.T, cfg engine.Config) (eng *engine.Engine, stop func()) {
	t.Helper()
	cfg.Brokers, cfg.Namespace, cfg.SessionTimeout, cfg.Logger, cfg.Kinds = b.brokers, b.ns, 2*time.Second, logger(), b.kinds
	owner := cfg.Owner
	eng, err := engine.New(cfg, b.db)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("engine %s: Run: %v", owner, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("engine %s: Run did not return after cancel", owner)
		}
		eng.Stop()
	}
	t.Cleanup(stop)
	return eng, stop
}

// newMerchant makes a merchant of the environment (sandbox or live) and returns
// it with its KES settlement wallet.
func (b *engineBundle) newMerchant(t *testing.T, name, environment string) (merchantID, settleID string) {
	t.Helper()
	m, err := admin.CreateMerchant(b.ctx, b.db, name, environment)
	if err != nil {
		t.Fatal(err)
	}
	settle, err := walletstore.Settlement(b.ctx, b.db, m.MerchantID, "KES")
	if err != nil {
		t.Fatal(err)
	}
	return m.MerchantID, settle.WalletID
}

func (b *engineBundle) command(t *testing.T, typ, merchant string, payload any) topics.Command {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return topics.Command{ID: ids.UUID(), Type: typ, MerchantID: merchant, ReplyTo: b.hub.Instance(),
		IssuedAt: time.Now().UTC(), Environment: b.environment(t, merchant), Payload: body}
}

// environment is what a process of the merchant's own environment stamps on its
// commands (the engine's guards refuse any other); sandbox for an unknown
// merchant, as the sandbox API would say.
func (b *engineBundle) environment(t *testing.T, merchant string) string {
	t.Helper()
	m, err := storage.GetMerchant(b.ctx, b.db, merchant)
	if err != nil {
		return topics.Sandbox
	}
	return m.Environment
}

// produce writes commands to Kafka, keyed by merchant; partition >= 0 forces the
// partition instead. It returns the partition of the last record.
func (b *engineBundle) produce(t *testing.T, partition int32, cmds ...topics.Command) int32 {
	t.Helper()
	cl := b.prod
	if partition >= 0 {
		cl = b.manual
	}
	recs := make([]*kgo.Record, len(cmds))
	for i, c := range cmds {
		v, err := topics.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: b.ns.Topic(topics.CommandsTopic), Key: topics.CommandKey(c.MerchantID), Value: v, Partition: partition}
	}
	res := cl.ProduceSync(b.ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	return res[len(res)-1].Record.Partition
}

func await(t *testing.T, ch <-chan topics.Reply, what string) topics.Reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(replyWait):
		t.Fatalf("no reply to %s within %v", what, replyWait)
		return topics.Reply{}
	}
}

// waitFor registers a waiter for each command's reply, in the commands' order,
// until the test ends: registered before the produce, so no reply can come first.
func (b *engineBundle) waitFor(t *testing.T, cmds ...topics.Command) []<-chan topics.Reply {
	t.Helper()
	waits := make([]<-chan topics.Reply, len(cmds))
	for i, c := range cmds {
		waits[i] = waitOn(t, b.hub, c.ID)
	}
	return waits
}

// waitOn registers a waiter on hub for the reply to command id until the test ends.
func waitOn(t *testing.T, hub *replies.Hub, id string) <-chan topics.Reply {
	ch, cancel := hub.Register(id)
	t.Cleanup(cancel)
	return ch
}

// wantSameReply fails the test unless r is, byte for byte, the reply want: every
// copy of a command is answered as the first was.
func wantSameReply(t *testing.T, what string, r, want topics.Reply) {
	t.Helper()
	if got, w := encoded(t, r), encoded(t, want); !bytes.Equal(got, w) {
		t.Fatalf("%s:\n%s\nwant\n%s", what, got, w)
	}
}

// post registers a waiter for c, produces it (by key) and returns the waiter.
func (b *engineBundle) post(t *testing.T, c topics.Command) <-chan topics.Reply {
	t.Helper()
	ch := b.waitFor(t, c)[0]
	b.produce(t, -1, c)
	return ch
}

// send registers a waiter, produces the command (by key) and waits for its reply.
func (b *engineBundle) send(t *testing.T, c topics.Command) topics.Reply {
	t.Helper()
	ch, cancel := b.hub.Register(c.ID)
	defer cancel()
	b.produce(t, -1, c)
	r := await(t, ch, c.Type)
	if r.CommandID != c.ID {
		t.Fatalf("reply for %s carries command id %s", c.ID, r.CommandID)
	}
	return r
}

func ok(t *testing.T, r topics.Reply) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("command %s refused: %v", r.CommandID, r.Error)
	}
}

func wantCode(t *testing.T, r topics.Reply, code string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != code {
		t.Fatalf("reply %+v (error %v), want error code %q", r, r.Error, code)
	}
}

func createCmd(b *engineBundle, t *testing.T, merchant, walletID, label string) topics.Command {
	return b.command(t, topics.CmdWalletCreate, merchant, topics.WalletCreate{WalletID: walletID, Currency: "KES",
		WalletType: wallet.TypeWorking, Label: label})
}

func depositCmd(b *engineBundle, t *testing.T, merchant, walletID, amount string) topics.Command {
	return b.command(t, topics.CmdWalletDeposit, merchant, topics.WalletDeposit{WalletID: walletID,
		Amount: money.MustParse(amount), Narrative: "test deposit"})
}

func transferCmd(b *engineBundle, t *testing.T, merchant, from, to, amount string) topics.Command {
	return b.command(t, topics.CmdWalletTransfer, merchant, topics.WalletTransferCmd{From: from, To: to,
		Amount: money.MustParse(amount), Narrative: "test transfer"})
}

func (b *engineBundle) balance(t *testing.T, merchant, walletID string) string {
	t.Helper()
	w, err := walletstore.Get(b.ctx, b.db, merchant, walletID)
	if err != nil {
		t.Fatalf("wallet %s: %v", walletID, err)
	}
	if !w.CurrentBalance.Equal(w.AvailableBalance) {
		t.Fatalf("wallet %s: current %s != available %s", walletID, w.CurrentBalance, w.AvailableBalance)
	}
	return w.CurrentBalance.String()
}

func (b *engineBundle) wantBalance(t *testing.T, merchant, walletID, want string) {
	t.Helper()
	if got := b.balance(t, merchant, walletID); got != want {
		t.Fatalf("wallet %s balance %s, want %s", walletID, got, want)
	}
}

func (b *engineBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := sqlx.GetContext(b.ctx, b.db, &n, q, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *engineBundle) entries(t *testing.T) int {
	return b.count(t, `SELECT count(*) FROM ledger_entries`)
}

func (b *engineBundle) entriesOf(t *testing.T, commandID string) int {
	return b.count(t, `SELECT count(*) FROM ledger_entries WHERE command_id = $1`, commandID)
}

func (b *engineBundle) ledgerOK(t *testing.T) {
	t.Helper()
	r, err := storage.CheckLedger(b.ctx, b.db)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK {
		t.Fatalf("ledger check failed: %+v", r)
	}
}

func encoded(t *testing.T, r topics.Reply) []byte {
	t.Helper()
	v, err := topics.EncodeReply(r)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fundedWorking opens a WORKING wallet for A and deposits into A's settlement wallet.
func (b *engineBundle) fundedWorking(t *testing.T, deposit string) string {
	t.Helper()
	w := ids.Alias(10)
	ok(t, b.send(t, createCmd(b, t, b.merchant, w, "ops "+w)))
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, deposit)))
	return w
}

type crossMerchant struct {
	working   string // A's funded WORKING wallet (5.00; A's settlement wallet holds 45.00)
	merchantB string
	settleB   string // B's settlement wallet (20.00)
	sendB     func(topics.Command) topics.Reply
}

// setupCrossMerchant runs an engine, uses A's wallets (so their actors are live)
// and makes merchant B, whose commands sendB forces into A's partition.
func setupCrossMerchant(t *testing.T) (*engineBundle, crossMerchant) {
	t.Helper()
	b := setupRunning(t)
	w := b.fundedWorking(t, "50.00")
	ok(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "5.00")))
	partA := b.produce(t, -1, depositCmd(b, t, b.merchant, "NOSUCHWALLET", "1.00"))

	x := crossMerchant{working: w}
	x.merchantB, x.settleB = b.newMerchant(t, "Merchant B", "sandbox")
	x.sendB = func(c topics.Command) topics.Reply {
		t.Helper()
		ch, cancel := b.hub.Register(c.ID)
		defer cancel()
		b.produce(t, partA, c)
		return await(t, ch, "merchant B's "+c.Type)
	}
	ok(t, x.sendB(depositCmd(b, t, x.merchantB, x.settleB, "20.00")))
	return b, x
}

func TestEngine(t *testing.T) {
	t.Parallel()

	t.Run("DepositThenTransfer", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)

		w := ids.Alias(10)
		created := b.send(t, createCmd(b, t, b.merchant, w, "ops"))
		ok(t, created)
		var opened wallet.View
		if err := json.Unmarshal(created.Result, &opened); err != nil {
			t.Fatal(err)
		}
		if opened.WalletID != w || opened.WalletType != wallet.TypeWorking || opened.Label != "ops" {
			t.Fatalf("created %+v", opened)
		}

		dep := b.send(t, depositCmd(b, t, b.merchant, b.settle, "100.00"))
		ok(t, dep)
		var afterDep wallet.View
		if err := json.Unmarshal(dep.Result, &afterDep); err != nil {
			t.Fatal(err)
		}
		if afterDep.CurrentBalance.String() != "100.00" || afterDep.AvailableBalance.String() != "100.00" {
			t.Fatalf("deposit result %+v", afterDep)
		}
		b.wantBalance(t, b.merchant, b.settle, "100.00")

		tr := transferCmd(b, t, b.merchant, b.settle, w, "40.00")
		rep := b.send(t, tr)
		ok(t, rep)
		var res wallet.TransferResult
		if err := json.Unmarshal(rep.Result, &res); err != nil {
			t.Fatal(err)
		}
		if res.Origin.WalletID != b.settle || res.Origin.CurrentBalance.String() != "60.00" ||
			res.Destination.WalletID != w || res.Destination.CurrentBalance.String() != "40.00" {
			t.Fatalf("transfer result %+v", res)
		}
		b.wantBalance(t, b.merchant, b.settle, "60.00")
		b.wantBalance(t, b.merchant, w, "40.00")
		if n := b.entriesOf(t, tr.ID); n != 2 {
			t.Fatalf("transfer made %d entries, want 2", n)
		}
		if n := b.entries(t); n != 4 {
			t.Fatalf("%d entries, want 4", n)
		}
		b.ledgerOK(t)

		// Exactly one event, for the transfer, in the outbox.
		ob, err := storage.FetchOutbox(b.ctx, b.db, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ob) != 1 {
			t.Fatalf("outbox has %d events, want 1", len(ob))
		}
		if ob[0].Topic != topics.EventTopics[topics.WalletTransferEvent] || ob[0].MerchantID != b.merchant || ob[0].RecordKey != b.settle {
			t.Fatalf("outbox record %+v", ob[0])
		}
		var ev topics.Event
		if err := json.Unmarshal(ob[0].Body, &ev); err != nil {
			t.Fatal(err)
		}
		var payload topics.WalletTransfer
		if err := json.Unmarshal(ev.Payload, &payload); err != nil {
			t.Fatal(err)
		}
		if ev.ID != ob[0].EventID || ev.Type != topics.WalletTransferEvent || payload.AmountSent != "40.00" ||
			payload.OriginWallet != b.settle || payload.DestinationWallet != w || payload.Status != "COMPLETE" {
			t.Fatalf("event %+v payload %+v", ev, payload)
		}
	})

	t.Run("SameCommandTwice_OneEffectSameReply", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		w := b.fundedWorking(t, "100.00")
		entriesBefore := b.entries(t)

		// The same transfer twice in one produce: each copy answers its own waiter.
		hub2 := replies.NewHub("test2-" + ids.Alias(10))
		t.Cleanup(hub2.Close)
		c1 := transferCmd(b, t, b.merchant, b.settle, w, "30.00")
		c2 := c1
		c2.ReplyTo = hub2.Instance()
		ch1, ch2 := b.waitFor(t, c1)[0], waitOn(t, hub2, c1.ID)
		b.produce(t, -1, c1, c2)
		r1, r2 := await(t, ch1, "first copy"), await(t, ch2, "second copy")
		ok(t, r1)
		wantSameReply(t, "replies differ", r2, r1)
		b.wantBalance(t, b.merchant, b.settle, "70.00")
		b.wantBalance(t, b.merchant, w, "30.00")
		if n := b.entriesOf(t, c1.ID); n != 2 {
			t.Fatalf("command has %d entries, want 2", n)
		}
		if n := b.count(t, `SELECT count(*) FROM processed_commands WHERE command_id = $1`, c1.ID); n != 1 {
			t.Fatalf("command processed %d times", n)
		}

		// Produced again after its commit (a separate poll): the stored reply.
		r3 := await(t, b.post(t, c1), "copy after commit")
		wantSameReply(t, "reply after commit differs", r3, r1)
		b.wantBalance(t, b.merchant, b.settle, "70.00")
		b.wantBalance(t, b.merchant, w, "30.00")
		if n := b.entries(t); n != entriesBefore+2 {
			t.Fatalf("%d entries, want %d", n, entriesBefore+2)
		}
		ob, err := storage.FetchOutbox(b.ctx, b.db, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ob) != 1 {
			t.Fatalf("outbox has %d events for one transfer, want 1", len(ob))
		}
		b.ledgerOK(t)
	})

	t.Run("CopiesAcrossPolls_OneEffectEach", func(t *testing.T) {
		// Each deposit is produced again a moment after the first copy, so the
		// second copy lands in a later poll while the first is being committed, or
		// just after its commit settled: the dedupe read of that poll may have been
		// taken before the commit, and the partition's uncommitted and recent
		// replies must cover the gap. Every copy gets the first reply; each deposit
		// lands once.
		t.Parallel()
		b := setupRunning(t)
		const n = 60
		chans := make([]<-chan topics.Reply, 0, 2*n)
		hub2 := replies.NewHub("test2-" + ids.Alias(10))
		t.Cleanup(hub2.Close)
		var sent []topics.Command
		for i := range n {
			c := depositCmd(b, t, b.merchant, b.settle, "1.00")
			sent = append(sent, c)
			chans = append(chans, b.post(t, c))
			if i%3 == 0 {
				time.Sleep(time.Duration(i%7) * time.Millisecond) // uneven arrivals: the delay is the load's shape
			}
			if i > 0 {
				prev := sent[i-1]
				prev.ReplyTo = hub2.Instance()
				chans = append(chans, waitOn(t, hub2, prev.ID))
				b.produce(t, -1, prev)
			}
		}
		first := map[string][]byte{}
		for _, ch := range chans {
			r := await(t, ch, "deposit copy")
			ok(t, r)
			enc := encoded(t, r)
			if f, seen := first[r.CommandID]; seen && !bytes.Equal(f, enc) {
				t.Fatalf("copies of %s got different replies:\n%s\n%s", r.CommandID, f, enc)
			}
			first[r.CommandID] = enc
		}
		b.wantBalance(t, b.merchant, b.settle, fmt.Sprintf("%d.00", n))
		if got := b.count(t, `SELECT count(*) FROM processed_commands WHERE merchant_id = $1 AND command_type = $2`,
			b.merchant, topics.CmdWalletDeposit); got != n {
			t.Fatalf("%d deposits processed, want %d", got, n)
		}
		b.ledgerOK(t)
	})

	t.Run("FreshIDReused_AppliedOnce", func(t *testing.T) {
		// A command marked fresh_id skips the dedupe read. If its id had been used
		// all the same (a bug, or another producer), processed_commands' primary key
		// refuses the batch; the copy is isolated, recorded in the quarantine and
		// answered with the stored reply of the first, its effect not applied a
		// second time, and the commands behind it go on.
		t.Parallel()
		b := setupRunning(t)
		d := depositCmd(b, t, b.merchant, b.settle, "10.00")
		d.FreshID = true
		first := b.send(t, d)
		ok(t, first)
		// Two batches in between, so the first commit's reply has left the
		// partition's in-memory window and only the table knows the id. One is not
		// always enough: a commit's replies go out before the loop settles it, so
		// the next command can be applied while that commit still counts as in
		// flight, and the reply then stays in the window for one more poll.
		for _, amount := range []string{"0.25", "0.25"} {
			ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, amount)))
		}
		again := d
		wantSameReply(t, "a reused fresh id was not answered with the stored reply", b.send(t, again), first)
		next := depositCmd(b, t, b.merchant, b.settle, "1.00")
		next.FreshID = true
		ok(t, b.send(t, next))
		b.wantBalance(t, b.merchant, b.settle, "11.50")
		if n := b.count(t, `SELECT count(*) FROM command_quarantine WHERE command_id = $1`, d.ID); n != 1 {
			t.Fatalf("%d quarantine rows for the reused id, want 1", n)
		}
		b.ledgerOK(t)
	})

	t.Run("DepositTwice_OneEffect", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		d := depositCmd(b, t, b.merchant, b.settle, "12.34")
		r1 := b.send(t, d)
		ok(t, r1)
		r2 := b.send(t, d)
		wantSameReply(t, "replies differ", r2, r1)
		b.wantBalance(t, b.merchant, b.settle, "12.34")
		if n := b.entries(t); n != 2 {
			t.Fatalf("%d entries, want 2", n)
		}
	})

	t.Run("Transfer_InsufficientFunds_NothingChanged", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		w := b.fundedWorking(t, "100.00")
		entriesBefore := b.entries(t)

		tr := transferCmd(b, t, b.merchant, b.settle, w, "100.01")
		r := b.send(t, tr)
		wantCode(t, r, engine.CodeInsufficientFunds)
		if r.Result != nil {
			t.Fatalf("refused transfer has a result %s", r.Result)
		}
		b.wantBalance(t, b.merchant, b.settle, "100.00")
		b.wantBalance(t, b.merchant, w, "0.00")
		if n := b.entries(t); n != entriesBefore {
			t.Fatalf("entries %d -> %d after a refused transfer", entriesBefore, n)
		}
		if n := b.count(t, `SELECT count(*) FROM outbox`); n != 0 {
			t.Fatalf("refused transfer made %d events", n)
		}
		// The refusal is stored, so a retry of the same command gets it again.
		reply, found, err := storage.ProcessedReply(b.ctx, b.db, b.merchant, tr.ID)
		if err != nil || !found {
			t.Fatalf("stored reply: %v %v", found, err)
		}
		if !bytes.Equal(reply, encoded(t, r)) {
			t.Fatalf("stored reply %s, sent %s", reply, encoded(t, r))
		}
		// The whole balance can still move afterwards: the refusal left the actor intact.
		ok(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "100.00")))
		b.wantBalance(t, b.merchant, b.settle, "0.00")
		b.wantBalance(t, b.merchant, w, "100.00")
		b.ledgerOK(t)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		w := b.fundedWorking(t, "10.00")
		entriesBefore := b.entries(t)

		wantCode(t, b.send(t, createCmd(b, t, b.merchant, ids.Alias(10), "OPS "+w)), engine.CodeLabelTaken)
		wantCode(t, b.send(t, depositCmd(b, t, b.merchant, "NOSUCHWALLET", "1.00")), engine.CodeNotFound)
		wantCode(t, b.send(t, transferCmd(b, t, b.merchant, "NOSUCHWALLET", w, "1.00")), engine.CodeNotFound)
		wantCode(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, "NOSUCHWALLET", "1.00")), engine.CodeDestNotFound)
		wantCode(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, b.settle, "1.00")), engine.CodeSameWallet)
		wantCode(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "0.00")), engine.CodeInvalid)
		wantCode(t, b.send(t, b.command(t, "wallet.explode", b.merchant, map[string]string{})), engine.CodeUnknownCommand)
		bad := b.command(t, topics.CmdWalletDeposit, b.merchant, map[string]string{})
		bad.Payload = json.RawMessage(`{"wallet_id":"` + w + `","amount":"1.001"}`)
		wantCode(t, b.send(t, bad), engine.CodeInvalid)

		if n := b.entries(t); n != entriesBefore {
			t.Fatalf("entries %d -> %d after refusals", entriesBefore, n)
		}
		b.wantBalance(t, b.merchant, b.settle, "10.00")
		b.wantBalance(t, b.merchant, w, "0.00")
		// The engine still works after all that.
		ok(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "10.00")))
		b.wantBalance(t, b.merchant, w, "10.00")
	})

	// A transfer reads its destination from the actor once it exists, and later
	// transfers to it use that read (what is checked never changes): they still
	// refuse a destination of another currency, and still credit the destination's
	// current balance, not the one read.
	t.Run("DestinationReadOnce", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		w := b.fundedWorking(t, "10.00")
		usd := ids.Alias(10)
		ok(t, b.send(t, b.command(t, topics.CmdWalletCreate, b.merchant, topics.WalletCreate{WalletID: usd, Currency: "USD",
			WalletType: wallet.TypeWorking, Label: "dollars"})))
		for range 2 {
			wantCode(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, usd, "1.00")), engine.CodeCurrencyMismatch)
		}
		for range 3 {
			ok(t, b.send(t, transferCmd(b, t, b.merchant, b.settle, w, "2.00")))
		}
		b.wantBalance(t, b.merchant, w, "6.00")
		b.wantBalance(t, b.merchant, b.settle, "4.00") // fundedWorking deposited 10.00 into the settlement wallet
		b.wantBalance(t, b.merchant, usd, "0.00")
		b.ledgerOK(t)
	})

	// Merchant B's commands are forced into A's partition, after A's wallets were
	// used there (so their actors are live in that worker): the worst case for
	// isolation. Nothing of A's may move.
	t.Run("CrossMerchant_NotFound", func(t *testing.T) {
		t.Parallel()
		b, x := setupCrossMerchant(t)
		w, settleB, sendB := x.working, x.settleB, x.sendB
		entriesBefore := b.entries(t)

		wantCode(t, sendB(depositCmd(b, t, x.merchantB, w, "1.00")), engine.CodeNotFound)
		wantCode(t, sendB(depositCmd(b, t, x.merchantB, b.settle, "1.00")), engine.CodeNotFound)
		wantCode(t, sendB(transferCmd(b, t, x.merchantB, b.settle, settleB, "1.00")), engine.CodeNotFound)
		wantCode(t, sendB(transferCmd(b, t, x.merchantB, w, settleB, "1.00")), engine.CodeNotFound)
		toForeign := sendB(transferCmd(b, t, x.merchantB, settleB, w, "1.00"))
		if toForeign.Error == nil {
			t.Fatalf("merchant B moved money into A's wallet: %s", toForeign.Result)
		}
		toUnknown := sendB(transferCmd(b, t, x.merchantB, settleB, "NOSUCHWALLET", "1.00"))
		wantCode(t, toUnknown, engine.CodeDestNotFound)

		b.wantBalance(t, b.merchant, b.settle, "45.00")
		b.wantBalance(t, b.merchant, w, "5.00")
		b.wantBalance(t, x.merchantB, settleB, "20.00")
		if n := b.entries(t); n != entriesBefore {
			t.Fatalf("entries %d -> %d after cross-merchant commands", entriesBefore, n)
		}
		b.ledgerOK(t)
	})

	// A foreign destination must read exactly like one that does not exist; anything
	// else tells merchant B that A's wallet id is real.
	t.Run("CrossMerchant_ForeignDestinationLooksUnknown", func(t *testing.T) {
		t.Parallel()
		b, x := setupCrossMerchant(t)
		toForeign := x.sendB(transferCmd(b, t, x.merchantB, x.settleB, x.working, "1.00"))
		toUnknown := x.sendB(transferCmd(b, t, x.merchantB, x.settleB, "NOSUCHWALLET", "1.00"))
		if toForeign.Error == nil || toUnknown.Error == nil {
			t.Fatalf("replies %+v / %+v, want both refused", toForeign, toUnknown)
		}
		if toForeign.Error.Code != toUnknown.Error.Code || toForeign.Error.Detail != toUnknown.Error.Detail {
			t.Fatalf("transfer to another merchant's wallet answers %+v, to an unknown wallet %+v",
				toForeign.Error, toUnknown.Error)
		}
	})

	t.Run("Restart_ResumesFromStoredOffset", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		stop := b.startEngine(t, "t1")
		w := ids.Alias(10)
		old := []topics.Command{
			createCmd(b, t, b.merchant, w, "ops"),
			depositCmd(b, t, b.merchant, b.settle, "100.00"),
			transferCmd(b, t, b.merchant, b.settle, w, "30.00"),
		}
		for _, c := range old {
			ok(t, b.send(t, c))
		}
		var epoch1 int64
		var pa int32
		if err := b.db.QueryRowxContext(b.ctx, `SELECT partition, epoch FROM partition_offsets
			WHERE topic = $1 AND next_offset > 0`, topics.CommandsTopic).Scan(&pa, &epoch1); err != nil {
			t.Fatal(err)
		}
		stop()

		// If the new engine re-read the old records it would answer these waiters
		// (from the stored replies) before the new command's reply.
		oldWaiters := b.waitFor(t, old...)

		b.startEngine(t, "t2")
		more := []topics.Command{
			depositCmd(b, t, b.merchant, w, "5.00"),
			transferCmd(b, t, b.merchant, w, b.settle, "1.00"),
		}
		for _, c := range more {
			ok(t, b.send(t, c))
		}
		for i, ch := range oldWaiters {
			select {
			case r := <-ch:
				t.Fatalf("old command %d (%s) was answered again after the restart: %+v", i, old[i].Type, r)
			default:
			}
		}
		b.wantBalance(t, b.merchant, b.settle, "71.00")
		b.wantBalance(t, b.merchant, w, "34.00")
		if n := b.entries(t); n != 2+2+2+2 {
			t.Fatalf("%d entries, want 8", n)
		}
		b.ledgerOK(t)

		var epoch2, next int64
		var owner string
		if err := b.db.QueryRowxContext(b.ctx, `SELECT epoch, next_offset, owner FROM partition_offsets
			WHERE topic = $1 AND partition = $2`, topics.CommandsTopic, pa).Scan(&epoch2, &next, &owner); err != nil {
			t.Fatal(err)
		}
		if epoch2 <= epoch1 || owner != "t2" || next != int64(len(old)+len(more)) {
			t.Fatalf("partition %d after restart: epoch %d (before %d), owner %q, next offset %d (want %d)",
				pa, epoch2, epoch1, owner, next, len(old)+len(more))
		}
	})
}
