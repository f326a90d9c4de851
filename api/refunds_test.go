package api_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics"
)

// collected pushes an STK collection of amount (BUSINESS-PAYS: 1.5 % fee) and
// waits for it to complete; it returns the invoice id.
func (b *bundle) collected(t *testing.T, amount string) string {
	t.Helper()
	r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": amount, "api_ref": "refundable"})
	if r.Status != 200 {
		t.Fatalf("stk push: %d %s", r.Status, r.Body)
	}
	id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	if inv := b.waitInvoice(t, id); inv["state"] != "COMPLETE" {
		t.Fatalf("invoice %s: %v", id, inv)
	}
	return id
}

func (b *bundle) refund(invoice string, amount any, details string) servicetest.Response {
	return b.post("/api/v1/chargebacks/", map[string]any{"invoice": invoice, "amount": amount, "reason": "Wrong service",
		"reason_details": details})
}

func refundID(t *testing.T, r servicetest.Response) string {
	t.Helper()
	if r.Status != 201 {
		t.Fatalf("create refund: %d %s", r.Status, r.Body)
	}
	m := r.Map(t)
	id := strconv.FormatFloat(m["id"].(float64), 'f', 0, 64)
	if m["chargeback_id"] != id || m["status"] != "PENDING" {
		t.Fatalf("created refund: %s", r.Body)
	}
	return id
}

func wantRefusal(t *testing.T, r servicetest.Response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want %d %s, got %d %s", status, code, r.Status, r.Body)
	}
	if _, got, _ := errorBody(t, r); got != code {
		t.Fatalf("want code %s, got %s: %s", code, got, r.Body)
	}
}

// The sandbox refund rail waits 10 s by default: long enough that these refunds
// stay PENDING for the whole test.
func TestRefunds_LimitsHoldsCancelAndIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inv := b.collected(t, "1000") // value 1000.00, net 985.00 in the settlement wallet

	t.Run("Refused", func(t *testing.T) {
		wantRefusal(t, b.refund(inv, "1000.01", ""), 400, "refund_exceeds_invoice")
		wantRefusal(t, b.refund(inv, "0", ""), 400, "invalid")
		wantRefusal(t, b.refund("NOSUCHINV", "1", ""), 404, "not_found")
		r := b.post("/api/v1/chargebacks/", map[string]any{"invoice": inv, "amount": "1", "reason": "UNAVAIBLE"})
		wantRefusal(t, r, 400, "invalid")
		if cur, avail := b.balance(t, b.settlement); cur != "985.00" || avail != "985.00" {
			t.Fatalf("refused refunds moved money: %s/%s", cur, avail)
		}
	})

	var held string
	t.Run("ConcurrentRefundsNeverExceedTheInvoice", func(t *testing.T) {
		var wg sync.WaitGroup
		res := make([]servicetest.Response, 2)
		for i := range res {
			wg.Go(func() { res[i] = b.refund(inv, "600.00", "concurrent") })
		}
		wg.Wait()
		ok := 0
		for _, r := range res {
			switch r.Status {
			case 201:
				ok++
				held = refundID(t, r)
			default:
				wantRefusal(t, r, 400, "refund_exceeds_invoice")
			}
		}
		if ok != 1 {
			t.Fatalf("%d of two 600.00 refunds of a 1000.00 invoice accepted, want exactly 1", ok)
		}
		if cur, avail := b.balance(t, b.settlement); cur != "985.00" || avail != "385.00" {
			t.Fatalf("after a 600.00 refund the wallet is %s/%s, want 985.00/385.00 (held)", cur, avail)
		}
	})

	t.Run("LargerThanTheAvailableBalance", func(t *testing.T) {
		// 400.00 of the invoice is left, but the wallet has only 385.00 available.
		wantRefusal(t, b.refund(inv, "390.00", ""), 400, "insufficient_funds")
		if _, avail := b.balance(t, b.settlement); avail != "385.00" {
			t.Fatalf("a refused refund changed the available balance to %s", avail)
		}
	})

	t.Run("GetAndList", func(t *testing.T) {
		for _, p := range []string{"/api/v1/chargebacks/" + held, "/api/v1/chargebacks/" + held + "/"} {
			r := b.get(p)
			if r.Status != 200 || r.Map(t)["status"] != "PENDING" || r.Map(t)["invoice"] != inv || r.Map(t)["amount"] != "600.00" {
				t.Fatalf("GET %s: %d %s", p, r.Status, r.Body)
			}
			tr := r.Map(t)["transaction"].(map[string]any)
			if tr["trans_type"] != "SALE" || tr["value"] != "1000.00" {
				t.Fatalf("transaction object: %v", tr)
			}
		}
		for _, p := range []string{"/api/v1/chargebacks/999999999", "/api/v1/chargebacks/abc", "/api/v1/chargebacks/-1"} {
			if r := b.get(p); r.Status != 404 {
				t.Fatalf("GET %s: %d %s", p, r.Status, r.Body)
			}
		}
	})

	t.Run("CancelReleasesTheHold", func(t *testing.T) {
		r := b.post("/api/v1/chargebacks/"+held+"/cancel/", nil)
		if r.Status != 200 || r.Map(t)["status"] != "CANCELLED" {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		if cur, avail := b.balance(t, b.settlement); cur != "985.00" || avail != "985.00" {
			t.Fatalf("after cancel the wallet is %s/%s, want 985.00/985.00", cur, avail)
		}
		wantRefusal(t, b.post("/api/v1/chargebacks/"+held+"/cancel", nil), 400, "not_cancellable")
		// A cancelled refund no longer counts: the whole value can be refunded again.
		refundID(t, b.refund(inv, "985.00", ""))
		if _, avail := b.balance(t, b.settlement); avail != "0.00" {
			t.Fatalf("available %s, want 0.00", avail)
		}
		ledgerOK(t, b)
	})

	t.Run("OtherMerchantsSeeNothing", func(t *testing.T) {
		other := newBundle(t, b.env, "Other")
		other.deposit(t, other.settlement, "5000.00")
		for _, p := range []string{"/api/v1/chargebacks/" + held, "/api/v1/chargebacks/" + held + "/"} {
			if r := other.get(p); r.Status != 404 {
				t.Fatalf("other merchant GET %s: %d %s", p, r.Status, r.Body)
			}
		}
		if r := other.post("/api/v1/chargebacks/"+held+"/cancel/", nil); r.Status != 404 {
			t.Fatalf("other merchant cancel: %d %s", r.Status, r.Body)
		}
		if r := other.get("/api/v1/chargebacks/"); r.Status != 200 || r.Map(t)["count"].(float64) != 0 {
			t.Fatalf("other merchant list: %d %s", r.Status, r.Body)
		}
		wantRefusal(t, other.refund(inv, "1.00", ""), 404, "not_found")
		if cur, avail := other.balance(t, other.settlement); cur != "5000.00" || avail != "5000.00" {
			t.Fatalf("other merchant's wallet moved: %s/%s", cur, avail)
		}
	})

	t.Run("ListNewestFirstPaginated", func(t *testing.T) {
		r := b.get("/api/v1/chargebacks/?page_size=1")
		m := r.Map(t)
		if r.Status != 200 || m["count"].(float64) != 2 || m["next"] == nil || m["previous"] != nil {
			t.Fatalf("page 1: %d %s", r.Status, r.Body)
		}
		first := m["results"].([]any)[0].(map[string]any)
		if first["amount"] != "985.00" {
			t.Fatalf("newest first: %v", first)
		}
		r = b.get("/api/v1/chargebacks?page=2&page_size=1")
		m = r.Map(t)
		if second := m["results"].([]any)[0].(map[string]any); fmt.Sprint(second["id"]) != held || m["next"] != nil || m["previous"] == nil {
			t.Fatalf("page 2: %s", r.Body)
		}
		if r := b.get("/api/v1/chargebacks/?page=0"); r.Status != 400 {
			t.Fatalf("page 0: %d %s", r.Status, r.Body)
		}
	})

	t.Run("RestrictedKeys", func(t *testing.T) {
		view := b.env.Key(b.merchant, "view_refunds")
		if r := b.env.Do("GET", "/api/v1/chargebacks/", nil, servicetest.Bearer(view)...); r.Status != 200 {
			t.Fatalf("view_refunds list: %d %s", r.Status, r.Body)
		}
		r := b.env.Do("POST", "/api/v1/chargebacks/", map[string]any{"invoice": inv, "amount": "1", "reason": "Other"}, servicetest.Bearer(view)...)
		if r.Status != 403 {
			t.Fatalf("view_refunds key created a refund: %d %s", r.Status, r.Body)
		}
	})
}

// Every status is reachable in the sandbox; completion moves the money out of the
// wallet through the ledger; the Python SDK's form of the calls works; every
// public status change is a reversal_event (the rail's take is none); the
// simulator's commands say they are the sandbox's and simulated.
func TestRefunds_SandboxOutcomesAndEvents(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.SimAggregateDelay = 50 * time.Millisecond })
	b := newBundle(t, env, "Acme")
	inv := b.collected(t, "1000")

	// The Python SDK: Bearer plus INTASEND_PUBLIC_API_KEY, amount as a number, no
	// trailing slash on some paths.
	py := []string{"Authorization", "Bearer " + b.secret, "INTASEND_PUBLIC_API_KEY", b.public, "Content-Type", "application/json"}
	create := func(amount any, details string) string {
		t.Helper()
		return refundID(t, env.Do("POST", "/api/v1/chargebacks/", map[string]any{"invoice": inv, "amount": amount,
			"reason": "Duplicate payment", "reason_details": details}, py...))
	}
	completed := create(100, "duplicate")
	declined := create(10, "please [sandbox:declined]")
	disputed := create(20, "[sandbox:disputed]")
	overdue := create(30, "[sandbox:overdue]")
	wait := func(id, status string) map[string]any {
		t.Helper()
		var m map[string]any
		waittest.Eventually(t, 20*time.Second, func() (bool, string) {
			r := env.Do("GET", "/api/v1/chargebacks/"+id+"/", nil, py...)
			if r.Status != 200 {
				t.Fatalf("get %s: %d %s", id, r.Status, r.Body)
			}
			m = r.Map(t)
			return m["status"] == status, fmt.Sprintf("refund %s stuck in %v, want %s", id, m["status"], status)
		})
		return m
	}
	wait(completed, "COMPLETED")
	wait(declined, "CANCELLED")
	wait(disputed, "CANCELLED") // DISPUTED first, then closed by the rail (the events below show both)
	wait(overdue, "COMPLETED")  // OVERDUE first, then the late confirmation
	// 985.00 collected; 100.00 and 30.00 paid out; the rest released.
	if cur, avail := b.balance(t, b.settlement); cur != "855.00" || avail != "855.00" {
		t.Fatalf("wallet %s/%s, want 855.00/855.00", cur, avail)
	}
	ledgerOK(t, b)
	var refunded string
	if err := env.Schema.DB.Get(&refunded, `SELECT coalesce(sum(amount), 0)::text FROM ledger_entries WHERE account = 'system:refunds_clearing'`); err != nil || refunded != "130.00" {
		t.Fatalf("refunds clearing holds %q (%v), want 130.00", refunded, err)
	}

	// The events: one per creation and status change, with the spec's fields.
	want := map[string][]string{completed: {"PENDING", "COMPLETED"}, declined: {"PENDING", "CANCELLED"},
		disputed: {"PENDING", "DISPUTED", "CANCELLED"}, overdue: {"PENDING", "OVERDUE", "COMPLETED"}}
	total := 0
	for _, s := range want {
		total += len(s)
	}
	got := map[string][]string{}
	n := 0
	readLog(t, env, topics.EventTopics[topics.ReversalEvent], 20*time.Second, func(r *kgo.Record) {
		ev, err := decodeEvent(r.Value)
		if err != nil || ev.Type != topics.ReversalEvent || ev.MerchantID != b.merchant {
			t.Errorf("bad event %s: %v", r.Value, err)
			return
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"id", "amount", "currency", "status", "reason", "original_invoice_id", "created_at", "updated_at"} {
			if _, ok := p[f]; !ok {
				t.Errorf("reversal_event lacks %s: %s", f, ev.Payload)
			}
		}
		if p["original_invoice_id"] != inv || p["currency"] != "KES" || p["reason"] != "Duplicate payment" {
			t.Errorf("reversal_event: %s", ev.Payload)
		}
		id := fmt.Sprint(p["id"])
		got[id] = append(got[id], p["status"].(string))
		n++
	}, func() (bool, string) { return n >= total, fmt.Sprintf("%d of %d reversal events: %v", n, total, got) })
	for id, w := range want {
		if fmt.Sprint(got[id]) != fmt.Sprint(w) {
			t.Errorf("refund %s events %v, want %v", id, got[id], w)
		}
	}
	if m := env.Metrics(); !containsAll(m, `paysvc_refunds_total{status="COMPLETED"}`, `paysvc_refunds_total{status="PENDING"}`) {
		t.Errorf("refund metrics missing")
	}

	// The rail's commands in the log: a take of each refund before its first
	// outcome, every one stamped sandbox and simulated.
	takes := map[string]bool{}
	railCommands(t, env, b.merchant, 10, func(typ string, c topics.Command) {
		if c.Environment != topics.Sandbox || !c.Simulated {
			t.Errorf("%s command %s: environment %q, simulated %v", typ, c.ID, c.Environment, c.Simulated)
		}
		if typ == "refund.take" {
			takes[c.ID] = true
		}
	})
	if len(takes) != len(want) {
		t.Errorf("%d distinct takes, want one per refund (%d)", len(takes), len(want))
	}
}

// railCommands reads the merchant's refund.take and refund.settle commands from
// the command log until it has n distinct ones (above: 4 takes, 6 outcomes).
func railCommands(t *testing.T, env *servicetest.Env, merchant string, n int, each func(typ string, c topics.Command)) {
	t.Helper()
	seen := map[string]int{}
	readLog(t, env, topics.CommandsTopic, 20*time.Second, func(r *kgo.Record) {
		var c topics.Command
		if err := json.Unmarshal(r.Value, &c); err != nil || c.MerchantID != merchant ||
			(c.Type != "refund.take" && c.Type != "refund.settle") {
			return
		}
		seen[c.ID]++
		each(c.Type, c)
	}, func() (bool, string) {
		return len(seen) >= n, fmt.Sprintf("%d rail commands in the log, want %d", len(seen), n)
	})
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !contains(s, x) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestNodeSDK_Refunds runs the official SDK's refunds() calls (sdktest/refunds.js)
// against a completed collection.
func TestNodeSDK_Refunds(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	f := sdkStart(t, "1.00")
	b := &bundle{env: f.env, secret: f.secret, public: f.public, settlement: f.settlement}
	inv := b.collected(t, "1000")
	res := f.run(t, dir, "refunds.js", map[string]string{"PAYSVC_INVOICE": inv})
	created := sdkOK(t, res, "create")
	if created["status"] != "PENDING" || created["amount"] != "200.00" || created["invoice"] != inv || created["reason"] != "Unavailable service" {
		t.Fatalf("create: %v", created)
	}
	got := sdkOK(t, res, "get")
	if got["id"] != created["id"] || got["chargeback_id"] != created["chargeback_id"] {
		t.Fatalf("get: %v, created %v", got, created)
	}
	list := sdkOK(t, res, "list")
	sdkListShape(t, list)
	if rs := sdkResults(t, list); len(rs) != 1 || rs[0]["id"] != created["id"] {
		t.Fatalf("list: %v", list)
	}
	if e := sdkRejected(t, res, "createTooMuch", 400); e.Code != "refund_exceeds_invoice" {
		t.Fatalf("createTooMuch: %+v", e)
	}
	if e := sdkRejected(t, res, "createBadReason", 400); e.Code != "invalid" {
		t.Fatalf("createBadReason: %+v", e)
	}
	if cur, avail := b.balance(t, b.settlement); cur != "986.00" || avail != "786.00" {
		t.Fatalf("wallet %s/%s, want 986.00/786.00 (200.00 held)", cur, avail)
	}
}
