package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/topics"
)

// The kill switch of a merchant's money (docs/security.md, "Kill switches"): a
// large file is approved while the rails role is stopped, then the operator
// disables the merchant. When the rails start they send nothing: Daraja (its
// wire-level fake) sees no B2C request, every transaction stays PENDING and the
// whole amount stays held, however often the recovery passes. Enabled again,
// the file is paid exactly where it stopped: every transaction once, none
// skipped, the ledger balanced and no hold left.
func TestKillSwitch_DisabledMerchantsPayoutsStop(t *testing.T) {
	t.Parallel()
	env, fake, _ := startDaraja(t, daraja{token: "cb-secret-kill", live: true, b2c: true}, func(c *service.Config) {
		c.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay, service.RoleDispatcher}
		// Recovery passes every 125 ms while the merchant is disabled: none may send.
		c.PayoutRecoverAfter = 500 * time.Millisecond
	})
	startRails := func(id string) *service.Service {
		cfg := env.Config
		cfg.Roles, cfg.KafkaBrokers, cfg.InstanceID, cfg.HTTPAddr = []string{service.RoleRails}, env.Svc.Brokers, id, "127.0.0.1:0"
		cfg.DataDir = t.TempDir()
		svc, err := service.Start(context.Background(), cfg, servicetest.Logger())
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	rails1 := startRails("rails-1")
	b := newBundle(t, env, "Stolen Key Ltd")
	fundByDaraja(t, env, b, fake, "254712000099", "60000") // 59,100.00 after the collection fee
	rails1.Close()
	funded, _ := b.balance(t, b.settlement)

	const n = 520 // two rail requests (500 + 20)
	accounts := make([]string, n)
	for i := range accounts {
		accounts[i] = fmt.Sprintf("2547%08d", 20000000+i)
	}
	r := b.post("/api/v1/send-money/initiation/", b2cFile("NO", accounts...))
	if r.Status != 201 {
		t.Fatalf("initiation: %d %.300s", r.Status, r.Body)
	}
	f := r.Map(t)
	if f["status"] != "PROCESSING" {
		t.Fatalf("file %v", f["status"])
	}
	tracking := f["tracking_id"].(string)
	held := money.MustParse(fmt.Sprint(n * 110)) // 100 + a 10.00 charge each
	wantAvailable := money.MustParse(funded).Sub(held).String()
	if cur, av := b.balance(t, b.settlement); cur != funded || av != wantAvailable {
		t.Fatalf("after approval: %s / %s, want %s / %s", cur, av, funded, wantAvailable)
	}

	// The operator disables the merchant (what `paysvc merchant disable` does).
	if ok, err := storage.SetMerchantEnabled(context.Background(), env.Schema.DB, b.merchant, false); err != nil || !ok {
		t.Fatalf("disable: %v %v", ok, err)
	}
	rails2 := startRails("rails-2")
	defer func() { rails2.Close() }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		return railsTook(cl, env) >= 2, "the rails role never read the file's requests"
	})
	// A dozen recovery passes (every 125 ms). The delay is what is under test: a
	// pass lists only enabled merchants' payouts, so it leaves no trace to wait for.
	time.Sleep(1500 * time.Millisecond)
	if got := fake.B2CRequests(); len(got) != 0 {
		t.Fatalf("Daraja received %d B2C requests for a disabled merchant", len(got))
	}
	var pending int
	if err := env.Schema.DB.Get(&pending, `SELECT count(*) FROM payout_transactions WHERE merchant_id = $1 AND status = 'PENDING'`, b.merchant); err != nil || pending != n {
		t.Fatalf("%d of %d transactions PENDING (%v)", pending, n, err)
	}
	// The API answers nothing to a disabled merchant: the wallet's row says it.
	var w struct {
		Cur string `db:"current_balance"`
		Av  string `db:"available_balance"`
	}
	if err := env.Schema.DB.Get(&w, `SELECT current_balance::text, available_balance::text FROM wallets WHERE wallet_id = $1`, b.settlement); err != nil ||
		w.Cur != funded || w.Av != wantAvailable {
		t.Fatalf("disabled: %+v (%v), want the amount still held (%s / %s)", w, err, funded, wantAvailable)
	}
	checkLedger(t, env)

	// Enabled again: sending resumes. Daraja's results finish each transaction.
	if ok, err := storage.SetMerchantEnabled(context.Background(), env.Schema.DB, b.merchant, true); err != nil || !ok {
		t.Fatalf("enable: %v %v", ok, err)
	}
	completed := map[string]bool{}
	waittest.Eventually(t, 180*time.Second, func() (bool, string) {
		for _, req := range fake.B2CRequests() {
			if !completed[req.OriginatorConversationID] {
				if err := fake.CompleteB2C(req.OriginatorConversationID, 0); err != nil {
					t.Fatal(err)
				}
				completed[req.OriginatorConversationID] = true
			}
		}
		return len(completed) >= n, fmt.Sprintf("after enable only %d of %d sent", len(completed), n)
	})
	done := b.waitFile(t, tracking)
	if done["status"] != "COMPLETE" || done["paid_amount"] != money.MustParse(fmt.Sprint(n*100)).String() ||
		done["actual_charges"] != money.MustParse(fmt.Sprint(n*10)).String() || done["failed_amount"] != "0.00" {
		t.Fatalf("file after enable: %v %v %v %v", done["status"], done["paid_amount"], done["actual_charges"], done["failed_amount"])
	}
	sent := map[string]int{}
	for _, req := range fake.B2CRequests() {
		sent[req.OriginatorConversationID]++
	}
	for _, x := range done["transactions"].([]any) {
		if id := x.(map[string]any)["transaction_id"].(string); sent[id] != 1 {
			t.Fatalf("transaction %s sent %d times", id, sent[id])
		}
	}
	if len(sent) != n {
		t.Fatalf("%d transactions sent, want %d", len(sent), n)
	}
	want := money.MustParse(funded).Sub(held).String()
	if cur, av := b.balance(t, b.settlement); cur != want || av != want {
		t.Fatalf("after the file: %s / %s, want %s for both (no hold left)", cur, av, want)
	}
	checkLedger(t, env)
}

// railsTook is how many payout requests the live rails role has read.
func railsTook(cl *kgo.Client, env *servicetest.Env) int64 {
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), env.Config.KafkaNamespace.Group("paysvc-rails-payout"))
	if err != nil {
		return 0
	}
	n := int64(0)
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == env.Topic(topics.RailsPayoutTopic) && o.Err == nil {
			n += o.At
		}
	})
	return n
}
