package api_test

import (
	"testing"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// A test clock is created at a frozen time, read back, moved forward only, and
// is the merchant's own: another merchant's key finds nothing.
func TestTestClocks(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	a, other := newBundle(t, env, "ClockA"), newBundle(t, env, "ClockB")
	r := a.post("/api/v1/subscriptions/test_clocks/", map[string]any{"frozen_time": "2025-01-31T00:00:00+03:00", "name": "year"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	clock := r.Map(t)
	id, _ := clock["test_clock_id"].(string)
	if id == "" || clock["frozen_time"] != "2025-01-30T21:00:00Z" || clock["name"] != "year" {
		t.Fatalf("clock: %s", r.Body)
	}
	for _, path := range []string{"/api/v1/subscriptions/test_clocks/" + id + "/", "/api/v1/subscriptions/test_clocks/" + id} {
		if r := a.get(path); r.Status != 200 || r.Map(t)["test_clock_id"] != id {
			t.Fatalf("get %s: %d %s", path, r.Status, r.Body)
		}
		if r := other.get(path); r.Status != 404 {
			t.Fatalf("another merchant's get: %d %s", r.Status, r.Body)
		}
	}
	if r := other.post("/api/v1/subscriptions/test_clocks/"+id+"/advance/", map[string]any{"frozen_time": 1767214800}); r.Status != 404 {
		t.Fatalf("another merchant advanced it: %d %s", r.Status, r.Body)
	}
	refused(t, a.post("/api/v1/subscriptions/test_clocks/"+id+"/advance/", map[string]any{"frozen_time": "2025-01-01T00:00:00Z"}),
		"frozen_time", "advance backwards")
	refused(t, a.post("/api/v1/subscriptions/test_clocks/", map[string]any{"frozen_time": "tomorrow"}), "frozen_time", "bad time")
	r = a.post("/api/v1/subscriptions/test_clocks/"+id+"/advance", map[string]any{"frozen_time": 1767214800})
	if r.Status != 200 || r.Map(t)["frozen_time"] != "2025-12-31T21:00:00Z" {
		t.Fatalf("advance: %d %s", r.Status, r.Body)
	}
}

// Test clocks do not exist on a live server: nothing there can be billed early.
func TestTestClocksRefusedOnLive(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.Environment, c.API.Environment = "live", "live" })
	m := env.Merchant("LiveClock")
	r := env.Do("POST", "/api/v1/subscriptions/test_clocks/", map[string]any{"frozen_time": 1767214800}, servicetest.Bearer(m.SecretKey)...)
	if r.Status != 404 {
		t.Fatalf("live test clock: %d %s", r.Status, r.Body)
	}
}
