package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/subscription/scheduler"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// now is 2025-06-01 12:00 EAT: every fixture's wall-clock cycle is due.
var now = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

type bundle struct {
	ctx context.Context
	db  *sqlx.DB
	n   int
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{ctx: context.Background(), db: storagetest.New(t).DB}
}

func (b *bundle) merchant(t *testing.T, id, env string, enabled bool) {
	t.Helper()
	if err := storage.InsertMerchant(b.ctx, b.db, storage.Merchant{MerchantID: id, Name: id, Environment: env, Enabled: enabled}); err != nil {
		t.Fatal(err)
	}
	if err := storage.CreateTestClock(b.ctx, b.db, storage.TestClock{ClockID: "TC" + id, MerchantID: id, FrozenTime: now.AddDate(1, 0, 0),
		CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// due stores an ACTIVE subscription of the merchant due on date, on the wall
// clock or on the merchant's test clock (a year ahead of now).
func (b *bundle) due(t *testing.T, merchant, date string, onClock bool) string {
	t.Helper()
	b.n++
	id := fmt.Sprintf("SUB%s%04d", merchant, b.n)
	st := subscription.State{SubscriptionID: id, MerchantID: merchant, CustomerID: "C", Status: subscription.StatusActive,
		Plan: subscription.Plan{PlanID: "P", Frequency: 1, FrequencyUnit: "M", BillingCycles: 12}, StartDate: date, NextDate: date,
		Anchor: date, CardOutcome: subscription.CardApproves, Version: 2, CreatedAt: now, UpdatedAt: now}
	var clock *string
	if onClock {
		c := "TC" + merchant
		st.TestClockID, clock = c, &c
	}
	data, _ := json.Marshal(st)
	if _, err := b.db.ExecContext(b.ctx, `INSERT INTO subscriptions (subscription_id, merchant_id, customer_id, plan_id, status,
		next_date, billing, test_clock_id, version, data, created_at, updated_at)
		VALUES ($1, $2, 'C', 'P', 'ACTIVE', $3, true, $4, 2, $5, $6, $6)`, id, merchant, date, clock, data, now); err != nil {
		t.Fatal(err)
	}
	return id
}

// capture is a Produce that records every batch.
type capture struct {
	mu      sync.Mutex
	batches [][]topics.Command
}

func (c *capture) produce(_ context.Context, cmds []topics.Command) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, append([]topics.Command(nil), cmds...))
	return nil
}

func (c *capture) all() []topics.Command {
	var out []topics.Command
	for _, b := range c.batches {
		out = append(out, b...)
	}
	return out
}

func (b *bundle) scheduler(env string, page int, c *capture) *scheduler.Scheduler {
	return &scheduler.Scheduler{Environment: env, DB: b.db, Produce: c.produce, Now: func() time.Time { return now }, Page: page}
}

func subscriptionOf(t *testing.T, c topics.Command) string {
	t.Helper()
	var p topics.SubscriptionCycle
	if err := json.Unmarshal(c.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.SubscriptionID
}

// The scheduler charges only its own environment's enabled merchants, and says
// so on every command (its environment, Simulated: the sandbox card's outcome).
// A live scheduler issues nothing (no live acquirer); one that does not know its
// environment issues nothing and says why.
func TestSchedulerOnlyItsEnvironmentsEnabledMerchants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.merchant(t, "SB", "sandbox", true)
	b.merchant(t, "OFF", "sandbox", false)
	b.merchant(t, "LV", "live", true)
	want := map[string]bool{b.due(t, "SB", "2025-05-31", false): true, b.due(t, "SB", "2025-05-31", true): true}
	for _, m := range []string{"OFF", "LV"} {
		b.due(t, m, "2025-05-31", false)
		b.due(t, m, "2025-05-31", true)
	}
	var c capture
	n, err := b.scheduler(topics.Sandbox, 10, &c).RunOnce(b.ctx)
	if err != nil || n != 2 {
		t.Fatalf("sandbox run: %d %v, want 2", n, err)
	}
	for _, cmd := range c.all() {
		if !want[subscriptionOf(t, cmd)] || cmd.MerchantID != "SB" {
			t.Fatalf("charged %s of %s", subscriptionOf(t, cmd), cmd.MerchantID)
		}
		if cmd.Environment != topics.Sandbox || !cmd.Simulated || cmd.Type != topics.CmdSubscriptionCycle {
			t.Fatalf("envelope: %+v", cmd)
		}
	}
	var live capture
	if n, err := b.scheduler(topics.Live, 10, &live).RunOnce(b.ctx); err != nil || n != 0 || len(live.batches) != 0 {
		t.Fatalf("live run: %d %v %v", n, err, live.batches)
	}
	for _, env := range []string{"", "Sandbox", "prod"} {
		var none capture
		if n, err := b.scheduler(env, 10, &none).RunOnce(b.ctx); !errors.Is(err, scheduler.ErrEnvironment) || n != 0 || len(none.batches) != 0 {
			t.Fatalf("environment %q: %d %v", env, n, err)
		}
		s := b.scheduler(env, 10, &none)
		if err := s.Run(b.ctx, time.Millisecond); !errors.Is(err, scheduler.ErrEnvironment) {
			t.Fatalf("Run with environment %q: %v", env, err)
		}
	}
}

// One merchant's backlog does not hold back another's cycles: test clocks give
// every merchant a page each tick (they were one oldest-first page for all), and
// the wall clock reads a page of each merchant in turn.
func TestSchedulerIsFairAcrossMerchants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.merchant(t, "BIG", "sandbox", true)
	b.merchant(t, "SMALL", "sandbox", true)
	for i := range 10 {
		b.due(t, "BIG", fmt.Sprintf("2025-01-%02d", i+1), true) // older than SMALL's
		b.due(t, "BIG", "2025-05-01", false)
	}
	smallClock := b.due(t, "SMALL", "2025-06-01", true)
	smallWall := b.due(t, "SMALL", "2025-05-01", false)

	var c capture
	if _, err := b.scheduler(topics.Sandbox, 3, &c).RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	perMerchant := map[string]int{}
	for i, cmd := range c.all() {
		pos[subscriptionOf(t, cmd)] = i
		perMerchant[cmd.MerchantID]++
	}
	if _, ok := pos[smallClock]; !ok {
		t.Fatalf("SMALL's test-clock cycle waited behind BIG's backlog: %v", pos)
	}
	// Wall clock: everything due in one run, SMALL's in the first round (before
	// BIG's second page); test clocks: one page (3) of BIG this tick.
	wi, ok := pos[smallWall]
	if !ok || perMerchant["BIG"] != 10+3 || perMerchant["SMALL"] != 2 {
		t.Fatalf("issued per merchant %v, positions %v", perMerchant, pos)
	}
	if wi > 3 {
		t.Fatalf("SMALL's wall-clock cycle was issued %dth, after BIG's second page", wi+1)
	}
}
