package api_test

import (
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
	env := servicetest.Start(t, func(c *service.Config) { c.PublicBaseURL = "https://pay.example.com" })
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
