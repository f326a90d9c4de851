package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/subscription/subscriptionstore"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// A cycle charged today is not charged again: PUT next_date=<today> after the
// charge is refused (also after a plan change, which bumps the cycle's command
// id), the schedule is unchanged, and the next date charged is a later one.
func TestSubscriptionChargedDateIsChargedOnce(t *testing.T) {
	t.Parallel()
	f := startSubFixture(t, "Once")
	b := f.b
	daily := f.mustPost(t, "/api/v1/subscriptions/plans/", map[string]any{"name": "Daily", "amount": "1000", "currency": "KES",
		"frequency": 1, "frequency_unit": "D", "billing_cycles": 12}, "plan_id")
	id := f.setUp(t, "4242424242424242")
	f.waitSub(t, id, "cycle 1", cycles(1))
	refused(t, f.put(id, map[string]any{"next_date": "2025-01-31"}), "next_date", "next_date on the charged date")
	if r := f.put(id, map[string]any{"plan_id": daily}); r.Status != 200 {
		t.Fatalf("plan change: %d %s", r.Status, r.Body)
	}
	refused(t, f.put(id, map[string]any{"next_date": "2025-01-31"}), "next_date", "next_date on the charged date after a plan change")
	refused(t, f.put(id, map[string]any{"plan_id": daily, "next_date": "2025-01-31"}), "next_date", "both at once")
	if s := f.sub(t, id); s["next_date"] != "2025-02-28" || s["completed_cycles"] != 1.0 {
		t.Fatalf("after the refused overrides: %v", s)
	}
	// A later date is fine, and charged when due.
	if r := f.put(id, map[string]any{"next_date": "2025-02-01"}); r.Status != 200 || r.Map(t)["next_date"] != "2025-02-01" {
		t.Fatalf("next_date tomorrow: %d %s", r.Status, r.Body)
	}
	f.advance(t, "2025-02-01T00:00:00+03:00")
	f.waitSub(t, id, "cycle 2", cycles(2))
	pays := f.payments(t, id)
	if len(pays) != 2 || pays[0]["cycle_date"] != "2025-01-31" || pays[1]["cycle_date"] != "2025-02-01" {
		t.Fatalf("payments: %v", pays)
	}
	if cur, _ := b.balance(t, b.settlement); cur != "1930.00" {
		t.Fatalf("wallet %s, want two credits of 965.00", cur)
	}
	ledgerOK(t, b)
}

// Retries are bounded: a declining card on a daily plan with its clock advanced
// 20 days is charged 4 times (the first attempt and 3 retries), then the
// subscription is CANCELED with a fail_reason, seen in GET and in its
// subscription_event; nothing more is charged. Its transactions page in SQL with
// the usual links.
func TestSubscriptionRetriesEndCanceled(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Retry")
	f := newSubFixture(t, b, map[string]any{"name": "Daily", "amount": "100", "currency": "KES", "frequency": 1,
		"frequency_unit": "D", "billing_cycles": 30})
	stream := openStream(t, env, b.secret, "", "retries")
	id := f.setUp(t, "4000000000000341")
	f.waitSub(t, id, "the first charge fails", func(s map[string]any) bool { return s["status"] == "FAILED" })
	f.advance(t, "2025-02-20T00:00:00+03:00")
	s := f.waitSub(t, id, "CANCELED by the retry policy", func(s map[string]any) bool { return s["status"] == "CANCELED" })
	const reason = "Canceled after 4 failed charges in a row. Last: The card was declined (do not honour)."
	if s["fail_reason"] != reason || s["next_date"] != nil || s["completed_cycles"] != 0.0 || s["setup_url"] != nil {
		t.Fatalf("canceled: %v", s)
	}
	schedulerPassed(t, env) // nothing more is charged
	pays := f.payments(t, id)
	if len(pays) != 4 {
		t.Fatalf("%d charges, want 4", len(pays))
	}
	for i, p := range pays {
		if p["status"] != "FAILED" || p["cycle_date"] != []string{"2025-01-31", "2025-02-01", "2025-02-02", "2025-02-03"}[i] {
			t.Fatalf("charge %d: %v", i, p)
		}
	}
	if cur, _ := b.balance(t, b.settlement); cur != "0.00" {
		t.Fatalf("wallet %s after declines", cur)
	}
	var last map[string]any
	waitUntil(t, "the CANCELED subscription_event", func() bool {
		for _, m := range stream.messages() {
			if m.event != "subscription_event" {
				continue
			}
			var ev map[string]any
			_ = json.Unmarshal([]byte(m.data), &ev)
			if d, ok := ev["data"].(map[string]any); ok {
				ev = d
			}
			last = ev
		}
		return last != nil && last["status"] == "CANCELED"
	})
	if last["fail_reason"] != reason || last["next_date"] != nil {
		t.Fatalf("event: %v", last)
	}
	if r := setupCard(f, setupPath(t, f.create(t, map[string]any{"start_date": nil})), "4242424242424242", nil); r.Status != 200 {
		t.Fatalf("another subscription still sets up: %d %s", r.Status, r.Body)
	}

	// GET .../transactions/ pages: 3 + 1, then past the end.
	type list struct {
		Count    int              `json:"count"`
		Next     *string          `json:"next"`
		Previous *string          `json:"previous"`
		Results  []map[string]any `json:"results"`
	}
	var l list
	base := "/api/v1/subscriptions/subscriptions/" + id + "/transactions/"
	b.get(base+"?page_size=3").JSON(t, &l)
	if l.Count != 4 || len(l.Results) != 3 || l.Results[0]["cycle"] != 1.0 || l.Next == nil || !strings.Contains(*l.Next, "page=2") || l.Previous != nil {
		t.Fatalf("page 1: %+v", l)
	}
	l = list{}
	b.get(base+"?page_size=3&page=2").JSON(t, &l)
	if l.Count != 4 || len(l.Results) != 1 || l.Results[0]["cycle"] != 4.0 || l.Next != nil || l.Previous == nil {
		t.Fatalf("page 2: %+v", l)
	}
	l = list{}
	b.get(base+"?page_size=500&page=1000000").JSON(t, &l)
	if l.Count != 4 || len(l.Results) != 0 {
		t.Fatalf("past the end: %+v", l)
	}
}

// A test clock's time is bounded: from 2000-01-01 to five years from now, on
// create and on advance (400 naming frozen_time, the clock unchanged).
func TestTestClockBounds(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Bounds")
	const path = "/api/v1/subscriptions/test_clocks/"
	for _, at := range []any{"2100-01-01T00:00:00Z", "9999-12-31T23:59:59Z", int64(1) << 39, "1999-12-31T23:59:59Z", 946684799,
		time.Now().AddDate(5, 1, 0).Format(time.RFC3339)} {
		refused(t, b.post(path, map[string]any{"frozen_time": at}), "frozen_time", fmt.Sprintf("frozen_time %v", at))
	}
	r := b.post(path, map[string]any{"frozen_time": "2000-01-01T00:00:00Z"})
	if r.Status != 201 {
		t.Fatalf("the earliest time: %d %s", r.Status, r.Body)
	}
	id := r.Map(t)["test_clock_id"].(string)
	refused(t, b.post(path+id+"/advance/", map[string]any{"frozen_time": time.Now().AddDate(6, 0, 0).Unix()}), "frozen_time", "advance six years ahead")
	if got := b.get(path + id + "/").Map(t)["frozen_time"]; got != "2000-01-01T00:00:00Z" {
		t.Fatalf("refused advance moved the clock to %v", got)
	}
	ahead := time.Now().AddDate(4, 11, 0).UTC().Truncate(time.Second)
	if r := b.post(path+id+"/advance/", map[string]any{"frozen_time": ahead.Format(time.RFC3339)}); r.Status != 200 ||
		r.Map(t)["frozen_time"] != ahead.Format(time.RFC3339) {
		t.Fatalf("advance within the bound: %d %s", r.Status, r.Body)
	}
}

// setup_url is the capability to set or replace the card: only a key that may
// change subscriptions sees it, in every response that carries it.
func TestSubscriptionSetupURLNeedsChangePermission(t *testing.T) {
	t.Parallel()
	f := startSubFixture(t, "Keys")
	b := f.b
	env := b.env
	view := env.Key(b.merchant, "view_subscriptions")
	both := env.Key(b.merchant, "view_subscriptions", "change_subscriptions")
	change := env.Key(b.merchant, "change_subscriptions")
	as := func(key, method, path string, body any) map[string]any {
		t.Helper()
		r := env.Do(method, path, body, servicetest.Bearer(key)...)
		if r.Status != 200 && r.Status != 201 {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
		}
		return r.Map(t)
	}
	subs := "/api/v1/subscriptions/subscriptions/"
	created := as(change, "POST", subs, map[string]any{"plan_id": f.plan, "customer_id": f.cust, "test_clock_id": f.clock,
		"start_date": "2025-02-10"})
	id := created["subscription_id"].(string)
	url, _ := created["setup_url"].(string)
	if url == "" {
		t.Fatalf("the creating key gets no setup_url: %v", created)
	}
	for _, key := range []string{b.secret, both} {
		if got := as(key, "GET", subs+id+"/", nil)["setup_url"]; got != url {
			t.Fatalf("a key that may change subscriptions reads setup_url %v", got)
		}
	}
	if got := as(change, "PUT", subs+id+"/", map[string]any{"next_date": "2025-02-11"})["setup_url"]; got != url {
		t.Fatalf("PUT by a change key: setup_url %v", got)
	}
	if got := as(view, "GET", subs+id+"/", nil); got["setup_url"] != nil || got["status"] != "PENDING" {
		t.Fatalf("a view_subscriptions key reads setup_url: %v", got)
	}
	var l struct {
		Results []map[string]any `json:"results"`
	}
	env.Do("GET", subs, nil, servicetest.Bearer(view)...).JSON(t, &l)
	if len(l.Results) != 1 || l.Results[0]["setup_url"] != nil {
		t.Fatalf("a view_subscriptions key lists setup_url: %v", l.Results)
	}
	env.Do("GET", subs, nil, servicetest.Bearer(b.secret)...).JSON(t, &l)
	if len(l.Results) != 1 || l.Results[0]["setup_url"] != url {
		t.Fatalf("the unrestricted key lists no setup_url: %v", l.Results)
	}
}

// A disabled merchant's subscriptions are not charged: its clock advanced a
// month bills nothing, while another merchant's on the same scheduler is billed.
func TestSubscriptionNotChargedForDisabledMerchant(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	off, on := newBundle(t, env, "Off"), newBundle(t, env, "On")
	fOff, fOn := newSubFixture(t, off, nil), newSubFixture(t, on, nil)
	sOff, sOn := fOff.create(t, nil), fOn.create(t, nil)
	for _, x := range []struct {
		f subFixture
		s map[string]any
	}{{fOff, sOff}, {fOn, sOn}} {
		if r := setupCard(x.f, setupPath(t, x.s), "4242424242424242", nil); r.Status != 200 {
			t.Fatalf("setup: %d %s", r.Status, r.Body)
		}
		x.f.waitSub(t, x.s["subscription_id"].(string), "cycle 1", cycles(1))
	}
	ctx := t.Context()
	if _, err := storage.SetMerchantEnabled(ctx, env.Schema.DB, off.merchant, false); err != nil {
		t.Fatal(err)
	}
	march := time.Date(2025, 3, 31, 0, 0, 0, 0, subscription.Zone)
	for _, x := range []struct {
		b     *bundle
		clock string
	}{{off, fOff.clock}, {on, fOn.clock}} {
		if _, err := storage.AdvanceTestClock(ctx, env.Schema.DB, x.b.merchant, x.clock, march); err != nil {
			t.Fatal(err)
		}
	}
	fOn.waitSub(t, sOn["subscription_id"].(string), "the enabled merchant billed", cycles(3))
	schedulerPassed(t, env)
	st, err := subscriptionstore.Get(ctx, env.Schema.DB, off.merchant, sOff["subscription_id"].(string))
	if err != nil || st.CompletedCycles != 1 || st.NextDate != "2025-02-28" {
		t.Fatalf("the disabled merchant's subscription: %+v %v", st, err)
	}
}

// schedulerPassed waits for the subscription scheduler of env to bill a cycle
// that fell due now: a subscription of a merchant of its own, set up, then its
// clock moved a month on. The pass that bills it began after everything before
// it was due, so what that pass has not charged it never charges.
func schedulerPassed(t *testing.T, env *servicetest.Env) {
	t.Helper()
	f := newSubFixture(t, newBundle(t, env, "Scheduler Witness"), nil)
	id := f.setUp(t, "4242424242424242")
	f.waitSub(t, id, "the witness's first cycle", cycles(1))
	f.advance(t, "2025-02-28T00:00:00+03:00")
	f.waitSub(t, id, "the witness's second cycle, by the scheduler", cycles(2))
}
