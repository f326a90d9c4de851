package api_test

import (
	"time"

	"encoding/json"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// subFixture is one merchant's plan, customer and test clock at 2025-01-31 00:00 EAT.
type subFixture struct {
	b                 *bundle
	plan, cust, clock string
}

func newSubFixture(t *testing.T, b *bundle, plan map[string]any) subFixture {
	t.Helper()
	if plan == nil {
		plan = map[string]any{"name": "Monthly", "amount": "1000", "currency": "KES", "frequency": 1, "frequency_unit": "M",
			"billing_cycles": 12, "redirect_url": "https://shop.example.com/done"}
	}
	f := subFixture{b: b}
	f.plan = f.mustPost(t, "/api/v1/subscriptions/plans/", plan, "plan_id")
	f.cust = f.mustPost(t, "/api/v1/subscriptions/customers/", map[string]any{"email": "ann@example.com", "first_name": "Ann",
		"last_name": "Otieno"}, "customer_id")
	f.clock = f.mustPost(t, "/api/v1/subscriptions/test_clocks/", map[string]any{"frozen_time": "2025-01-31T00:00:00+03:00"}, "test_clock_id")
	return f
}

// startSubFixture starts a service of its own with one merchant of that name and
// its subscription fixture.
func startSubFixture(t *testing.T, merchant string) subFixture {
	t.Helper()
	return newSubFixture(t, newBundle(t, servicetest.Start(t, nil), merchant), nil)
}

// setUp creates a subscription and sets up card on it; it returns its id.
func (f subFixture) setUp(t *testing.T, card string) string {
	t.Helper()
	s := f.create(t, nil)
	if r := setupCard(f, setupPath(t, s), card, nil); r.Status != 200 {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	return s["subscription_id"].(string)
}

func (f subFixture) mustPost(t *testing.T, path string, body any, idField string) string {
	t.Helper()
	r := f.b.post(path, body)
	if r.Status != 200 && r.Status != 201 {
		t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
	}
	return r.Map(t)[idField].(string)
}

// create makes a PENDING subscription on the fixture's clock starting 2025-01-31.
func (f subFixture) create(t *testing.T, extra map[string]any) map[string]any {
	t.Helper()
	body := map[string]any{"plan_id": f.plan, "customer_id": f.cust, "start_date": "2025-01-31", "test_clock_id": f.clock,
		"reference": "gym-ann"}
	for k, v := range extra {
		body[k] = v
	}
	r := f.b.post("/api/v1/subscriptions/subscriptions/", body)
	if r.Status != 201 {
		t.Fatalf("create subscription: %d %s", r.Status, r.Body)
	}
	return r.Map(t)
}

func setupPath(t *testing.T, sub map[string]any) string {
	t.Helper()
	u, _ := sub["setup_url"].(string)
	i := strings.Index(u, "/subscriptions/setup/")
	if i < 0 {
		t.Fatalf("no setup_url: %v", sub)
	}
	return "/api/v1" + u[i:]
}

// setupCard posts a card to the setup endpoint with no key: the token is the credential.
func setupCard(f subFixture, path, pan string, extra map[string]any) servicetest.Response {
	body := map[string]any{"card_number": pan, "expiry": "12/39", "cvv": "123"}
	for k, v := range extra {
		body[k] = v
	}
	return f.b.env.Do("POST", path, body)
}

func (f subFixture) sub(t *testing.T, id string) map[string]any {
	t.Helper()
	r := f.b.get("/api/v1/subscriptions/subscriptions/" + id + "/")
	if r.Status != 200 {
		t.Fatalf("get subscription: %d %s", r.Status, r.Body)
	}
	return r.Map(t)
}

func (f subFixture) waitSub(t *testing.T, id, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var last map[string]any
	waitUntil(t, what, func() bool { last = f.sub(t, id); return cond(last) })
	return last
}

// put updates subscription id with the merchant's secret key.
func (f subFixture) put(id string, body map[string]any) servicetest.Response {
	return f.b.env.Do("PUT", "/api/v1/subscriptions/subscriptions/"+id+"/", body, servicetest.Bearer(f.b.secret)...)
}

func (f subFixture) advance(t *testing.T, to string) {
	t.Helper()
	r := f.b.post("/api/v1/subscriptions/test_clocks/"+f.clock+"/advance/", map[string]any{"frozen_time": to})
	if r.Status != 200 {
		t.Fatalf("advance: %d %s", r.Status, r.Body)
	}
}

func (f subFixture) payments(t *testing.T, id string) []map[string]any {
	t.Helper()
	var l struct {
		Count   int              `json:"count"`
		Results []map[string]any `json:"results"`
	}
	r := f.b.get("/api/v1/subscriptions/subscriptions/" + id + "/transactions/?page_size=100")
	if r.Status != 200 {
		t.Fatalf("transactions: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &l)
	return l.Results
}

func cycles(n int) func(map[string]any) bool {
	return func(s map[string]any) bool { return s["completed_cycles"] == float64(n) }
}

// A 12-cycle monthly plan on a test clock: PENDING with a stable setup_url, card
// setup (no key) -> ACTIVE, the clock advanced a year -> COMPLETE with next_date
// null, 12 charges with their invoices, 12 credits net of the card fee in the KES
// settlement wallet, the customer's payments list them, the ledger balances, and
// subscription_event reports every step.
func TestSubscriptionTwelveCyclesToComplete(t *testing.T) {
	t.Parallel()
	// The production tick (1 s): an advanced clock catches up without waiting a tick
	// per cycle.
	env := servicetest.Start(t, func(c *service.Config) { c.PublicBaseURL, c.SubscriptionTick = "https://pay.example.com", time.Second })
	b := newBundle(t, env, "Gym")
	f := newSubFixture(t, b, nil)
	stream := openStream(t, env, b.secret, "", "subs")
	s := f.create(t, nil)
	id := s["subscription_id"].(string)
	if s["status"] != "PENDING" || s["next_date"] != "2025-01-31" || s["start_date"] != "2025-01-31" || s["completed_cycles"] != 0.0 ||
		s["fail_reason"] != nil || s["payment_method"] != "CARD-PAYMENT" || s["card_number"] != nil || s["reference"] != "gym-ann" ||
		s["redirect_url"] != "https://shop.example.com/done" || !strings.HasPrefix(s["setup_url"].(string), "https://pay.example.com/subscriptions/setup/") {
		t.Fatalf("created: %v", s)
	}
	if p, _ := s["plan"].(map[string]any); p["plan_id"] != f.plan || p["amount"] != "1000.00" {
		t.Fatalf("plan object: %v", s["plan"])
	}
	if c, _ := s["customer"].(map[string]any); c["customer_id"] != f.cust || c["email"] != "ann@example.com" {
		t.Fatalf("customer object: %v", s["customer"])
	}
	if got := f.sub(t, id); got["setup_url"] != s["setup_url"] {
		t.Fatalf("setup_url not stable: %v vs %v", got["setup_url"], s["setup_url"])
	}
	path := setupPath(t, s)
	info := env.Do("GET", path, nil)
	if info.Status != 200 || info.Map(t)["merchant_name"] != "Gym" || info.Map(t)["status"] != "PENDING" ||
		info.Map(t)["plan"].(map[string]any)["amount"] != "1000.00" {
		t.Fatalf("setup info: %d %s", info.Status, info.Body)
	}
	if r := env.Do("GET", "/api/v1/subscriptions/setup/"+strings.Repeat("A", 43)+"/", nil); r.Status != 404 {
		t.Fatalf("unknown setup token: %d %s", r.Status, r.Body)
	}
	r := setupCard(f, path, "4242 4242 4242 4242", nil)
	if r.Status != 200 || r.Map(t)["status"] != "ACTIVE" || r.Map(t)["card_number"] != "424242******4242" {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	// The first cycle falls on the clock's date: charged at once.
	s = f.waitSub(t, id, "first cycle", cycles(1))
	if s["status"] != "ACTIVE" || s["next_date"] != "2025-02-28" || s["card_network"] != "VISA" || s["setup_url"] != nil {
		t.Fatalf("after cycle 1: %v", s)
	}
	f.advance(t, "2025-12-31T00:00:00+03:00")
	s = f.waitSub(t, id, "COMPLETE", func(s map[string]any) bool { return s["status"] == "COMPLETE" })
	if s["completed_cycles"] != 12.0 || s["next_date"] != nil {
		t.Fatalf("complete: %v", s)
	}
	pays := f.payments(t, id)
	if len(pays) != 12 {
		t.Fatalf("%d payments, want 12", len(pays))
	}
	for i, p := range pays {
		inv := p["invoice"].(map[string]any)
		if p["status"] != "COMPLETE" || p["cycle"] != float64(i+1) || inv["value"] != "1000.00" || inv["charges"] != "35.00" ||
			inv["net_amount"] != "965.00" || inv["provider"] != "CARD" || inv["currency"] != "KES" {
			t.Fatalf("payment %d: %v", i, p)
		}
	}
	if pays[1]["cycle_date"] != "2025-02-28" || pays[11]["cycle_date"] != "2025-12-31" {
		t.Fatalf("cycle dates: %v %v", pays[1]["cycle_date"], pays[11]["cycle_date"])
	}
	if cur, avail := b.balance(t, b.settlement); cur != "11580.00" || avail != "11580.00" {
		t.Fatalf("settlement wallet %s/%s, want 12 x 965.00", cur, avail)
	}
	var ct struct {
		Count int `json:"count"`
	}
	b.get("/api/v1/customers/"+f.cust+"/transactions").JSON(t, &ct)
	if ct.Count != 12 {
		t.Fatalf("customer transactions: %d, want 12", ct.Count)
	}
	ledgerOK(t, b)
	// subscription_event: created, activated, 11 cycles, the last one COMPLETE.
	var statuses []string
	waitUntil(t, "14 subscription events", func() bool {
		statuses = statuses[:0]
		for _, m := range stream.messages() {
			if m.event == "subscription_event" {
				var ev map[string]any
				_ = json.Unmarshal([]byte(m.data), &ev)
				if d, ok := ev["data"].(map[string]any); ok {
					ev = d
				}
				statuses = append(statuses, ev["status"].(string))
			}
		}
		return len(statuses) >= 14
	})
	if statuses[0] != "PENDING" || statuses[1] != "ACTIVE" || statuses[13] != "COMPLETE" || len(statuses) != 14 {
		t.Fatalf("events: %v", statuses)
	}
}

// Card setup refusals leave the subscription PENDING; a card whose charges fail
// makes the cycle FAILED (fail_reason), retried at the next scheduled date; the
// customer fixes it with a new card on the same setup_url (the sandbox challenge
// card, completed with its challenge_code), and the next date charges it.
func TestSubscriptionDeclinesRetriesAndNewCard(t *testing.T) {
	t.Parallel()
	f := startSubFixture(t, "Club")
	b := f.b
	s := f.create(t, nil)
	id, path := s["subscription_id"].(string), setupPath(t, s)
	if r := setupCard(f, path, "4000000000000002", nil); r.Status != 402 || !strings.Contains(string(r.Body), "card_declined") {
		t.Fatalf("declined setup card: %d %s", r.Status, r.Body)
	}
	refused(t, setupCard(f, path, "4242424242424241", nil), "card_number", "Luhn")
	refused(t, setupCard(f, path, "4242424242424242", map[string]any{"expiry": "01/20"}), "expiry", "expired")
	if got := f.sub(t, id); got["status"] != "PENDING" || got["card_number"] != nil {
		t.Fatalf("after refused setups: %v", got)
	}
	if r := setupCard(f, path, "4000000000009995", nil); r.Status != 200 || r.Map(t)["status"] != "ACTIVE" {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	s = f.waitSub(t, id, "first cycle fails", func(s map[string]any) bool { return s["status"] == "FAILED" })
	if s["fail_reason"] != "Insufficient funds on the card." || s["completed_cycles"] != 0.0 || s["next_date"] != "2025-02-28" || s["setup_url"] == nil {
		t.Fatalf("failed: %v", s)
	}
	f.advance(t, "2025-02-28T00:00:00+03:00")
	waitUntil(t, "the retry fails too", func() bool { return len(f.payments(t, id)) == 2 })
	s = f.sub(t, id)
	if s["status"] != "FAILED" || s["next_date"] != "2025-03-31" {
		t.Fatalf("after retry: %v", s)
	}
	for _, p := range f.payments(t, id) {
		if p["status"] != "FAILED" || p["invoice"].(map[string]any)["failed_reason"] != "Insufficient funds on the card." {
			t.Fatalf("failed payment: %v", p)
		}
	}
	// A new card: the sandbox challenge card asks for its step first.
	r := setupCard(f, path, "4000000000003220", nil)
	if r.Status != 402 || !strings.Contains(string(r.Body), "challenge_required") {
		t.Fatalf("challenge card: %d %s", r.Status, r.Body)
	}
	refused(t, setupCard(f, path, "4000000000003220", map[string]any{"challenge_code": "000000"}), "challenge_code", "wrong code")
	r = setupCard(f, path, "4000000000003220", map[string]any{"challenge_code": "123456"})
	if r.Status != 200 || r.Map(t)["status"] != "ACTIVE" {
		t.Fatalf("challenge completed: %d %s", r.Status, r.Body)
	}
	if s = f.sub(t, id); s["fail_reason"] != nil || s["next_date"] != "2025-03-31" || s["completed_cycles"] != 0.0 {
		t.Fatalf("new card: %v", s)
	}
	f.advance(t, "2025-03-31T00:00:00+03:00")
	s = f.waitSub(t, id, "charged with the new card", cycles(1))
	if s["status"] != "ACTIVE" || s["next_date"] != "2025-04-30" {
		t.Fatalf("after the new card: %v", s)
	}
	if cur, _ := b.balance(t, b.settlement); cur != "965.00" {
		t.Fatalf("wallet %s, want one credit", cur)
	}
	// Once ACTIVE, the setup endpoint takes no card.
	if r := setupCard(f, path, "4242424242424242", nil); r.Status != 400 {
		t.Fatalf("setup while ACTIVE: %d %s", r.Status, r.Body)
	}
	ledgerOK(t, b)

	// A card that sets up but whose issuer declines every charge.
	s2 := f.create(t, map[string]any{"start_date": nil})
	if s2["start_date"] != "2025-03-31" {
		t.Fatalf("start_date defaults to the clock's today: %v", s2)
	}
	if r := setupCard(f, setupPath(t, s2), "4000000000000341", nil); r.Status != 200 {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	got := f.waitSub(t, s2["subscription_id"].(string), "declined cycle", func(s map[string]any) bool { return s["status"] == "FAILED" })
	if got["fail_reason"] != "The card was declined (do not honour)." {
		t.Fatalf("declined: %v", got)
	}
}

// PUT: a plan change applies from the next cycle (the announced next_date stays);
// a plan's amount change applies from the next cycle charged; next_date in the
// past is refused and a later one re-anchors; unsubscribe stops every charge.
func TestSubscriptionPlanChangeNextDateAndUnsubscribe(t *testing.T) {
	t.Parallel()
	f := startSubFixture(t, "Box")
	b := f.b
	weekly := f.mustPost(t, "/api/v1/subscriptions/plans/", map[string]any{"name": "Weekly", "amount": "2000", "currency": "KES",
		"frequency": 1, "frequency_unit": "W", "billing_cycles": 6}, "plan_id")
	id := f.setUp(t, "4242424242424242")
	f.waitSub(t, id, "cycle 1", cycles(1))

	refused(t, f.put(id, map[string]any{"next_date": "2025-01-30"}), "next_date", "next_date in the past")
	refused(t, f.put(id, map[string]any{"next_date": "31/03/2025"}), "next_date", "next_date not a date")
	refused(t, f.put(id, map[string]any{}), "plan_id", "empty PUT")
	r := f.put(id, map[string]any{"plan_id": weekly})
	if r.Status != 200 || r.Map(t)["next_date"] != "2025-02-28" || r.Map(t)["plan"].(map[string]any)["plan_id"] != weekly {
		t.Fatalf("plan change: %d %s", r.Status, r.Body)
	}
	f.advance(t, "2025-02-28T00:00:00+03:00")
	s := f.waitSub(t, id, "cycle 2 on the new plan", cycles(2))
	if s["next_date"] != "2025-03-07" {
		t.Fatalf("weekly from the kept date: %v", s)
	}
	// The plan's amount changes: the next cycle charges the new amount.
	f.mustPost(t, "/api/v1/subscriptions/plans/", map[string]any{"name": "Weekly", "amount": "2500", "currency": "KES", "frequency": 1}, "plan_id")
	r = f.put(id, map[string]any{"next_date": "2025-03-10"})
	if r.Status != 200 || r.Map(t)["next_date"] != "2025-03-10" {
		t.Fatalf("next_date override: %d %s", r.Status, r.Body)
	}
	f.advance(t, "2025-03-09T00:00:00+03:00")
	// Another subscription on the same clock, due on 2025-03-09, proves the
	// scheduler has passed that date (it takes the oldest date first).
	probe := f.create(t, map[string]any{"start_date": "2025-03-09"})
	setupCard(f, setupPath(t, probe), "4242424242424242", nil)
	f.waitSub(t, probe["subscription_id"].(string), "probe charged", cycles(1))
	if s = f.sub(t, id); s["completed_cycles"] != 2.0 {
		t.Fatalf("charged before the overridden date: %v", s)
	}
	f.advance(t, "2025-03-10T00:00:00+03:00")
	s = f.waitSub(t, id, "cycle 3", cycles(3))
	if s["next_date"] != "2025-03-17" {
		t.Fatalf("after override: %v", s)
	}
	pays := f.payments(t, id)
	if len(pays) != 3 || pays[0]["invoice"].(map[string]any)["value"] != "1000.00" || pays[1]["invoice"].(map[string]any)["value"] != "2000.00" ||
		pays[2]["invoice"].(map[string]any)["value"] != "2500.00" {
		t.Fatalf("amounts: %v", pays)
	}

	r = b.post("/api/v1/subscriptions/subscriptions/"+id+"/unsubscribe/", nil)
	if r.Status != 200 || r.Map(t)["status"] != "CANCELED" || r.Map(t)["next_date"] != nil {
		t.Fatalf("unsubscribe: %d %s", r.Status, r.Body)
	}
	if r := b.post("/api/v1/subscriptions/subscriptions/"+id+"/unsubscribe", nil); r.Status != 200 {
		t.Fatalf("unsubscribe again: %d %s", r.Status, r.Body)
	}
	if r := f.put(id, map[string]any{"plan_id": f.plan}); r.Status != 400 {
		t.Fatalf("PUT on a canceled subscription: %d %s", r.Status, r.Body)
	}
	f.advance(t, "2025-06-01T00:00:00+03:00")
	f.waitSub(t, probe["subscription_id"].(string), "probe charged through June", cycles(3))
	if got := f.payments(t, id); len(got) != 3 {
		t.Fatalf("charged after unsubscribe: %d payments", len(got))
	}
	ledgerOK(t, b)
}

// Every subscription route is the merchant's own: another merchant's ids answer
// 404 (paths) or 400 naming the field (bodies); restricted keys need the
// subscription permissions.
func TestSubscriptionIsolation(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	a, other := newBundle(t, env, "Mine"), newBundle(t, env, "Theirs")
	f, g := newSubFixture(t, a, nil), newSubFixture(t, other, nil)
	s := f.create(t, nil)
	id := s["subscription_id"].(string)
	base := "/api/v1/subscriptions/subscriptions/" + id
	for _, r := range []servicetest.Response{other.get(base + "/"), other.get(base), other.get(base + "/transactions/"),
		other.post(base+"/unsubscribe/", nil),
		env.Do("PUT", base+"/", map[string]any{"next_date": "2026-01-01"}, servicetest.Bearer(other.secret)...)} {
		if r.Status != 404 {
			t.Fatalf("another merchant's subscription: %d %s", r.Status, r.Body)
		}
	}
	var l struct {
		Count int `json:"count"`
	}
	other.get("/api/v1/subscriptions/subscriptions/").JSON(t, &l)
	if l.Count != 0 {
		t.Fatalf("another merchant lists %d subscriptions", l.Count)
	}
	a.get("/api/v1/subscriptions/subscriptions").JSON(t, &l)
	if l.Count != 1 {
		t.Fatalf("own list: %d", l.Count)
	}
	mk := func(plan, cust, clock string) servicetest.Response {
		return a.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan, "customer_id": cust, "test_clock_id": clock})
	}
	refused(t, mk(g.plan, f.cust, f.clock), "plan_id", "another merchant's plan")
	refused(t, mk(f.plan, g.cust, f.clock), "customer_id", "another merchant's customer")
	refused(t, mk(f.plan, f.cust, g.clock), "test_clock_id", "another merchant's clock")
	refused(t, a.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": f.plan, "customer_id": f.cust,
		"reference": strings.Repeat("r", 46)}), "reference", "long reference")
	refused(t, a.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": f.plan, "customer_id": f.cust,
		"test_clock_id": f.clock, "start_date": "2025-01-30"}), "start_date", "start in the past")
	view := env.Key(a.merchant, "view_subscriptions")
	if r := env.Do("GET", base+"/", nil, servicetest.Bearer(view)...); r.Status != 200 {
		t.Fatalf("view key reads: %d %s", r.Status, r.Body)
	}
	if r := env.Do("POST", base+"/unsubscribe/", nil, servicetest.Bearer(view)...); r.Status != 403 {
		t.Fatalf("view key unsubscribed: %d %s", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": f.plan, "customer_id": f.cust},
		servicetest.Bearer(a.public)...); r.Status != 401 && r.Status != 403 {
		t.Fatalf("public key created a subscription: %d %s", r.Status, r.Body)
	}
}

// A live server has no card acquirer: setup is refused clearly, nothing changes.
func TestSubscriptionSetupRefusedOnLive(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.Environment = "live"; c.API.Environment = "live" })
	m := env.Merchant("Live")
	b := &bundle{env: env, secret: m.SecretKey, merchant: m.MerchantID}
	plan := subFixture{b: b}.mustPost(t, "/api/v1/subscriptions/plans/", map[string]any{"name": "L", "amount": "100", "currency": "KES", "frequency": 1}, "plan_id")
	cust := subFixture{b: b}.mustPost(t, "/api/v1/subscriptions/customers/", map[string]any{"email": "x@example.com", "first_name": "X", "last_name": "Y"}, "customer_id")
	r := b.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan, "customer_id": cust})
	if r.Status != 201 {
		t.Fatalf("create on live: %d %s", r.Status, r.Body)
	}
	s := r.Map(t)
	if r := env.Do("POST", setupPath(t, s), map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123"}); r.Status != 400 ||
		!strings.Contains(string(r.Body), "method_unavailable") {
		t.Fatalf("live setup: %d %s", r.Status, r.Body)
	}
}
