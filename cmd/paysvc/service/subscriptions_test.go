package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/subscription/scheduler"
	"paysvc/actors/aggregates/subscription/subscriptionstore"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// The subscription scheduler is stateless: a scheduler killed after producing part
// of a run, two schedulers racing over the same due cycles, and a service that was
// down while cycles fell due all bill every cycle exactly once.
func TestSubscriptionSchedulersExactlyOnce(t *testing.T) {
	t.Parallel()
	schema := storagetest.New(t)
	cfg := servicetest.Config(t, schema)
	cfg.SubscriptionTick = 0 // this test runs the schedulers itself
	start := func(c service.Config) *servicetest.Env { return servicetest.Run(t, schema, c) }
	m, err := admin.CreateMerchant(context.Background(), schema.DB, "Acme", "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	env := start(cfg)
	key := servicetest.Bearer(m.SecretKey)
	post := func(path string, body any) map[string]any { return subscriptionsPost(t, env, key, path, body) }
	plan := post("/api/v1/subscriptions/plans/", map[string]any{"name": "Four", "amount": "100", "currency": "KES", "frequency": 1,
		"billing_cycles": 4})["plan_id"]
	cust := post("/api/v1/subscriptions/customers/", map[string]any{"email": "a@example.com", "first_name": "A", "last_name": "B"})["customer_id"]
	clock := post("/api/v1/subscriptions/test_clocks/", map[string]any{"frozen_time": "2025-01-31T00:00:00+03:00"})["test_clock_id"].(string)
	const n = 12
	var subs []string
	for range n {
		s := post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan, "customer_id": cust, "test_clock_id": clock})
		u := s["setup_url"].(string)
		i := len(u) - len("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/")
		if r := env.Do("POST", "/api/v1/subscriptions/setup/"+u[i:], map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123"}); r.Status != 200 {
			t.Fatalf("setup: %d %s", r.Status, r.Body)
		}
		subs = append(subs, s["subscription_id"].(string))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := scheduler.KafkaProducer(cl, env.Config.KafkaNamespace) // the schedulers stamp their environment (Scheduler.Environment)
	cycles := func() map[string]int {
		out := map[string]int{}
		for _, id := range subs {
			s, err := subscriptionstore.Get(context.Background(), schema.DB, m.MerchantID, id)
			if err != nil {
				t.Fatal(err)
			}
			out[id] = s.CompletedCycles
		}
		return out
	}
	allAt := func(k int) bool {
		for _, c := range cycles() {
			if c != k {
				return false
			}
		}
		return true
	}
	runUntil := func(what string, k int, schedulers ...*scheduler.Scheduler) {
		// Each look that finds the cycles short runs every scheduler once more,
		// side by side, as their ticks would.
		waittest.Eventually(t, 30*time.Second, func() (bool, string) {
			if allAt(k) {
				return true, ""
			}
			var wg sync.WaitGroup
			for _, s := range schedulers {
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = s.RunOnce(context.Background()) }()
			}
			wg.Wait()
			return false, fmt.Sprintf("%s: cycles %v, want %d each", what, cycles(), k)
		})
	}

	// A scheduler killed mid-run: 3 of its page of 5 cycles reached the log.
	dying := &scheduler.Scheduler{Environment: topics.Sandbox, DB: schema.DB, Page: 5, Produce: func(ctx context.Context, cmds []topics.Command) error {
		if err := produce(ctx, cmds[:3]); err != nil {
			return err
		}
		return errors.New("killed")
	}}
	if _, err := dying.RunOnce(context.Background()); err == nil {
		t.Fatal("the dying scheduler finished its run")
	}
	// Two fresh instances (a restarted one and another) finish the run, then
	// bill two more months racing each other; every tick re-reads the due cycles.
	a := &scheduler.Scheduler{Environment: topics.Sandbox, DB: schema.DB, Produce: produce, Page: 4, ReissueAfter: time.Nanosecond}
	b := &scheduler.Scheduler{Environment: topics.Sandbox, DB: schema.DB, Produce: produce, Page: 7, ReissueAfter: time.Nanosecond}
	runUntil("after the kill", 1, a, b)
	if _, err := storage.AdvanceTestClock(context.Background(), schema.DB, m.MerchantID, clock, time.Date(2025, 3, 31, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	runUntil("two schedulers", 3, a, b)

	// Down while the last cycle falls due: billed once on return.
	env.Svc.Close()
	if _, err := storage.AdvanceTestClock(context.Background(), schema.DB, m.MerchantID, clock, time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	again := cfg
	again.SubscriptionTick = 20 * time.Millisecond
	env = start(again)
	defer env.Svc.Close()
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		return allAt(4), fmt.Sprintf("after restart: %v", cycles())
	})
	for _, id := range subs {
		pays, _, err := subscriptionstore.Payments(context.Background(), schema.DB, m.MerchantID, id, 100, 0)
		if err != nil || len(pays) != 4 {
			t.Fatalf("%s: %d payments (%v), want 4", id, len(pays), err)
		}
	}
	var credits int
	if err := schema.DB.Get(&credits, `SELECT count(*) FROM ledger_entries WHERE wallet_id IS NOT NULL AND amount > 0`); err != nil {
		t.Fatal(err)
	}
	if credits != 4*n {
		t.Fatalf("%d wallet credits, want %d", credits, 4*n)
	}
	var bal string
	if err := schema.DB.Get(&bal, `SELECT current_balance::text FROM wallets WHERE merchant_id = $1 AND wallet_type = 'SETTLEMENT'`, m.MerchantID); err != nil {
		t.Fatal(err)
	}
	if bal != "4632.00" { // 48 cycles of 100.00 less the 3.5% card fee
		t.Fatalf("settlement balance %s, want 4632.00", bal)
	}
	if rep, err := storage.CheckLedger(context.Background(), schema.DB); err != nil || !rep.OK {
		t.Fatalf("ledger: %+v %v", rep, err)
	}
}

// The engine fails closed on a card's outcome: a subscription.activate command
// with no outcome, or an unknown one (sent straight to the command log, as a
// buggy or hostile producer would), is refused and the subscription stays
// PENDING, never charged; the documented test card still sets up.
func TestSubscriptionActivateWithoutOutcomeRefused(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	m := env.Merchant("Outcome")
	key := servicetest.Bearer(m.SecretKey)
	post := func(path string, body any) map[string]any { return subscriptionsPost(t, env, key, path, body) }
	plan := post("/api/v1/subscriptions/plans/", map[string]any{"name": "P", "amount": "100", "currency": "KES", "frequency": 1})["plan_id"]
	cust := post("/api/v1/subscriptions/customers/", map[string]any{"email": "a@example.com", "first_name": "A", "last_name": "B"})["customer_id"]
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, outcome := range []string{"", "approved"} {
		id := post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan, "customer_id": cust})["subscription_id"].(string)
		body, _ := json.Marshal(topics.SubscriptionActivate{SubscriptionID: id, CardToken: "ctok_raw", CardNetwork: "VISA",
			CardNumber: "424242******4242", CardOutcome: outcome})
		cmdID := fmt.Sprintf("raw-activate-%d-%s", i, id)
		if err := scheduler.KafkaProducer(cl, env.Config.KafkaNamespace)(context.Background(), []topics.Command{{ID: cmdID, Type: topics.CmdSubscriptionActivate,
			Version: 1, MerchantID: m.MerchantID, IssuedAt: time.Now(), Environment: topics.Sandbox, Payload: body}}); err != nil {
			t.Fatal(err)
		}
		var reply []byte
		waittest.Eventually(t, 20*time.Second, func() (bool, string) {
			err := env.Schema.DB.Get(&reply, `SELECT reply FROM processed_commands WHERE command_id = $1`, cmdID)
			return err == nil, fmt.Sprintf("outcome %q: the command was not applied: %v", outcome, err)
		})
		s, err := subscriptionstore.Get(context.Background(), env.Schema.DB, m.MerchantID, id)
		if err != nil || s.Status != "PENDING" || s.CardToken != "" {
			t.Fatalf("outcome %q: %+v %v (reply %s)", outcome, s, err, reply)
		}
	}
}

// subscriptionsPost sends a POST that must succeed (200 or 201) and returns its
// answer, for the tests that set up a plan, a customer and a subscription.
func subscriptionsPost(t *testing.T, env *servicetest.Env, key []string, path string, body any) map[string]any {
	t.Helper()
	r := env.Do("POST", path, body, key...)
	if r.Status != 200 && r.Status != 201 {
		t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
	}
	return r.Map(t)
}
