package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// heldReceiver is a webhook endpoint that holds every request until the test answers
// it, so the test can look at the event record while the request is out.
type heldReceiver struct {
	arrived chan heldRequest
	stop    chan struct{} // closed at the end: held requests are answered at once
	srv     *httptest.Server
}

type heldRequest struct {
	recorded
	answer chan int
}

func newHeldReceiver(t *testing.T) *heldReceiver {
	h := &heldReceiver{arrived: make(chan heldRequest, 16), stop: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		hd := map[string]string{}
		for _, k := range []string{"X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"} {
			hd[k] = req.Header.Get(k)
		}
		r := heldRequest{recorded{hd, b}, make(chan int, 1)}
		h.arrived <- r
		select {
		case status := <-r.answer:
			w.WriteHeader(status)
		case <-h.stop: // the test ended (or failed) without answering it
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() { close(h.stop) }) // runs before Close
	return h
}

// next is the next request the receiver holds.
func (h *heldReceiver) next(t *testing.T) heldRequest {
	t.Helper()
	select {
	case r := <-h.arrived:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook request arrived")
		return heldRequest{}
	}
}

// Delivery statuses follow the spec's order, PENDING -> PROCESSING -> DELIVERED or
// FAILED, on every path, as the events API shows them: a first attempt and a retry
// read PROCESSING while the receiver holds the request, a later event of the same
// wallet waits PENDING behind it, and a replay (of a FAILED record, and of one a
// disabled webhook never got) reads PROCESSING while out, then DELIVERED.
func TestWebhookDeliveryStatusOrder(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.RetryBase, c.Webhooks.MaxAttempts = 20*time.Millisecond, 2
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	b := newBundle(t, env, "Order")
	recv := newHeldReceiver(t)
	r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": recv.srv.URL + "/hook", "challenge": "order-secret",
		"wallet_transfer_event": true})
	if r.Status != 201 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	hookID := r.Map(t)["id"].(string)
	w := b.wallet(t, "KES", "W")
	b.deposit(t, b.settlement, "10.00")

	records := func() []map[string]any {
		var l struct{ Results []map[string]any }
		b.get("/api/v1/webhooks/events/?page_size=100").JSON(t, &l)
		return l.Results
	}
	record := func(id string) map[string]any {
		for _, e := range records() {
			if e["id"] == id {
				return e
			}
		}
		return nil
	}
	// seen is each event's statuses in the order the test observed them.
	seen := map[string][]string{}
	observe := func(id, want string) {
		t.Helper()
		e := record(id)
		if e == nil || e["status"] != want {
			t.Fatalf("event %s: %v, want status %s (seen so far %v)", id, e, want, seen[id])
		}
		seen[id] = append(seen[id], want)
	}
	waitStatus := func(id, want string) {
		t.Helper()
		waitUntil(t, "event "+id+" "+want, func() bool { e := record(id); return e != nil && e["status"] == want })
		seen[id] = append(seen[id], want)
	}
	transfer := func(amount string) {
		t.Helper()
		if r := b.transfer(b.settlement, w, amount); r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
	}
	// replay posts the replay from another goroutine (it waits for the receiver) and
	// returns its answer's channel.
	replay := func(id string) <-chan []byte {
		out := make(chan []byte, 1)
		go func() {
			req, _ := http.NewRequest("POST", env.BaseURL+"/api/v1/webhooks/events/"+id+"/replay/", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+b.secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- []byte(err.Error())
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			out <- body
		}()
		return out
	}
	delivered := func(answer []byte) bool {
		var x struct{ Replays []map[string]any }
		_ = json.Unmarshal(answer, &x)
		return len(x.Replays) == 1 && x.Replays[0]["webhook_id"] == hookID && x.Replays[0]["delivered"] == true
	}

	// First attempt: PROCESSING while the receiver holds it.
	transfer("1.00")
	first := recv.next(t)
	id1 := first.headers["webhook-id"]
	observe(id1, "PROCESSING")

	// A later event of the same wallet waits behind it: PENDING.
	transfer("2.00")
	var id2 string
	waitUntil(t, "the second event's record", func() bool {
		for _, e := range records() {
			if e["id"] != id1 {
				id2 = e["id"].(string)
				return true
			}
		}
		return false
	})
	observe(id2, "PENDING")
	first.answer <- 200
	waitStatus(id1, "DELIVERED")

	// The second one's first attempt fails, its retry is held, then fails too: the
	// attempts are exhausted.
	second := recv.next(t)
	if second.headers["webhook-id"] != id2 {
		t.Fatalf("the second request is event %s, want %s", second.headers["webhook-id"], id2)
	}
	observe(id2, "PROCESSING")
	second.answer <- 500
	retry := recv.next(t)
	observe(id2, "PROCESSING")
	if retry.headers["webhook-id"] != id2 || !bytes.Equal(retry.body, second.body) {
		t.Fatal("the retry is not the same delivery")
	}
	retry.answer <- 500
	waitStatus(id2, "FAILED")

	// A replay of the FAILED record: PROCESSING while out, DELIVERED after a 200.
	answer := replay(id2)
	rep := recv.next(t)
	observe(id2, "PROCESSING")
	if !bytes.Equal(rep.body, second.body) {
		t.Fatalf("the replay sent other bytes:\n%s\n%s", rep.body, second.body)
	}
	rep.answer <- 200
	if a := <-answer; !delivered(a) {
		t.Fatalf("replay answer: %s", a)
	}
	observe(id2, "DELIVERED")

	// A disabled webhook's event is FAILED without a request; replayed after enabling,
	// it goes FAILED -> PROCESSING -> DELIVERED.
	patch := func(active bool) {
		t.Helper()
		if r := env.Do("PATCH", "/api/v1/webhooks/"+hookID+"/", map[string]any{"is_active": active}, servicetest.Bearer(b.secret)...); r.Status != 200 {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
	}
	patch(false)
	transfer("3.00")
	var id3 string
	waitUntil(t, "the disabled webhook's record", func() bool {
		for _, e := range records() {
			if e["id"] != id1 && e["id"] != id2 && e["status"] == "FAILED" && e["last_error"] == "webhook is disabled" {
				id3 = e["id"].(string)
				return true
			}
		}
		return false
	})
	seen[id3] = append(seen[id3], "FAILED")
	patch(true)
	answer = replay(id3)
	rep = recv.next(t)
	observe(id3, "PROCESSING")
	rep.answer <- 200
	if a := <-answer; !delivered(a) {
		t.Fatalf("replay answer: %s", a)
	}
	observe(id3, "DELIVERED")

	for id, want := range map[string][]string{
		id1: {"PROCESSING", "DELIVERED"},
		id2: {"PENDING", "PROCESSING", "PROCESSING", "FAILED", "PROCESSING", "DELIVERED"},
		id3: {"FAILED", "PROCESSING", "DELIVERED"},
	} {
		if !slices.Equal(seen[id], want) {
			t.Errorf("event %s went %v, want %v", id, seen[id], want)
		}
	}
	select {
	case r := <-recv.arrived:
		t.Fatalf("an unexpected request: event %s", r.headers["webhook-id"])
	default:
	}
}
