package api_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// receiver is a webhook endpoint the test runs: it answers from a script and keeps
// every request it got.
type receiver struct {
	mu     sync.Mutex
	script []int
	got    []recorded
	srv    *httptest.Server
	always int
}

type recorded struct {
	headers map[string]string
	body    []byte
}

func newReceiver(t *testing.T, always int, script ...int) *receiver {
	r := &receiver{script: script, always: always}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		h := map[string]string{}
		for _, k := range []string{"X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"} {
			h[k] = req.Header.Get(k)
		}
		r.mu.Lock()
		r.got = append(r.got, recorded{h, b})
		status := r.always
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.got...)
}

// waitUntil is waittest.Eventually for a condition that has nothing more to say
// than what it waits for.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Eventually(t, 20*time.Second, func() (bool, string) { return cond(), "no " + what + " yet" })
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.RetryBase, c.Webhooks.MaxAttempts, c.Webhooks.Threshold = 20*time.Millisecond, 4, 4
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	b := newBundle(t, env, "Hooks")
	if ok, err := storage.SetMerchantEmail(context.Background(), env.Schema.DB, b.merchant, "ops@hooks.example"); err != nil || !ok {
		t.Fatalf("set merchant email: %v %v", ok, err)
	}
	flaky := newReceiver(t, 200, 500, 500, 200)
	down := newReceiver(t, 500)
	keys := map[string][]byte{} // webhook -> its whsec_ signing key
	hook := func(url, secret string, echo bool) string {
		r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": url, "challenge": secret, "wallet_transfer_event": true,
			"include_challenge": echo})
		if r.Status != 201 {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		id := r.Map(t)["id"].(string)
		keys[id] = signingKey(t, r)
		return id
	}
	flakyID := hook(flaky.srv.URL+"/hook", "flaky-secret", true) // opted in: its bodies echo the challenge
	downID := hook(down.srv.URL+"/hook", "down-secret", false)
	w := b.wallet(t, "KES", "W")
	b.deposit(t, b.settlement, "10.00")
	if r := b.transfer(b.settlement, w, "1.00"); r.Status != 200 {
		t.Fatalf("transfer: %d %s", r.Status, r.Body)
	}

	t.Run("RetriedUntilDelivered", func(t *testing.T) {
		waitUntil(t, "three attempts on the flaky receiver", func() bool { return len(flaky.requests()) >= 3 })
		got := flaky.requests()
		id := got[0].headers["webhook-id"]
		for i, r := range got[:3] {
			if r.headers["webhook-id"] != id || string(r.body) != string(got[0].body) {
				t.Fatalf("attempt %d: another id or body", i)
			}
			if !webhooks.VerifyDelivery("flaky-secret", keys[flakyID], r.headers, r.body, time.Now(), 5*time.Minute) {
				t.Fatalf("attempt %d does not verify with either scheme", i)
			}
		}
		if !strings.Contains(string(got[0].body), `"topic":"wallet_transfer_event"`) || !strings.Contains(string(got[0].body), `"challenge":"flaky-secret"`) {
			t.Fatalf("body %s", got[0].body)
		}
		waitUntil(t, "the event record DELIVERED", func() bool {
			var l struct{ Results []map[string]any }
			b.get("/api/v1/webhooks/events/?status=DELIVERED").JSON(t, &l)
			return len(l.Results) == 1 && l.Results[0]["attempts"] == float64(3) && l.Results[0]["id"] == id
		})

		r := b.post("/api/v1/webhooks/events/"+id+"/replay/", nil)
		if r.Status != 200 {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		waitUntil(t, "the replay", func() bool { return len(flaky.requests()) >= 4 })
		if rep := flaky.requests()[3]; string(rep.body) != string(got[0].body) || rep.headers["webhook-id"] != id {
			t.Fatal("the replay did not resend the exact original bytes")
		}
		var records int
		if err := env.Schema.DB.Get(&records, `SELECT count(DISTINCT event_id) FROM webhook_deliveries`); err != nil || records != 1 {
			t.Fatalf("replay created event records: %d %v", records, err)
		}
	})
	t.Run("FailingEndpointDisabledWithWarning", func(t *testing.T) {
		waitUntil(t, "the delivery to FAILED", func() bool {
			var l struct{ Results []map[string]any }
			b.get("/api/v1/webhooks/events/?status=FAILED").JSON(t, &l)
			return len(l.Results) == 1 && l.Results[0]["webhook_id"] == downID
		})
		// The dispatcher turns the webhook off just after it writes the failure.
		waitUntil(t, "the failing webhook turned off", func() bool { return b.get("/api/v1/webhooks/" + downID + "/").Map(t)["is_active"] == false })
		// The schedule made 4 attempts (the replay above went to every webhook of the
		// event, this one included, and is recorded as a replay).
		var scheduled int
		if err := env.Schema.DB.Get(&scheduled, `SELECT count(*) FROM webhook_attempts WHERE webhook_id = $1 AND NOT replay`, downID); err != nil || scheduled != 4 {
			t.Fatalf("%d scheduled attempts on the down receiver, want 4 (%v)", scheduled, err)
		}
		wh := b.get("/api/v1/webhooks/" + downID + "/").Map(t)
		if wh["is_active"] != false || wh["failures_count"] != float64(4) {
			t.Fatalf("webhook after 4 failures: %v", wh)
		}
		var l struct{ Results []map[string]any }
		b.get("/api/v1/sandbox/mail/").JSON(t, &l)
		warned := false
		for _, m := range l.Results {
			if strings.Contains(m["subject"].(string), downID) && strings.Contains(m["subject"].(string), "failing (2 of 4)") {
				to, _ := m["to"].([]any)
				if len(to) != 1 || to[0] != "ops@hooks.example" {
					t.Fatalf("the warning went to %v, not the merchant's address", m["to"])
				}
				warned = true
			}
		}
		if !warned {
			t.Fatalf("no warning email at half the threshold: %v", l.Results)
		}
	})
	t.Run("EventsWhileDisabledAreKeptForReplay", func(t *testing.T) {
		before := len(down.requests())
		if r := b.transfer(b.settlement, w, "2.00"); r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
		// The disabled webhook's event is recorded, FAILED at once, and sent nothing.
		var missed map[string]any
		waitUntil(t, "the disabled webhook's event record", func() bool {
			var l struct{ Results []map[string]any }
			b.get("/api/v1/webhooks/events/?status=FAILED").JSON(t, &l)
			for _, e := range l.Results {
				if e["webhook_id"] == downID && e["last_error"] == "webhook is disabled" {
					missed = e
					return true
				}
			}
			return false
		})
		if n := len(down.requests()); n != before {
			t.Fatalf("a disabled webhook was sent %d requests", n-before)
		}
		id := missed["id"].(string)
		replayTo := func(webhookID string) (map[string]any, servicetest.Response) {
			r := b.post("/api/v1/webhooks/events/"+id+"/replay/", nil)
			var out struct{ Replays []map[string]any }
			r.JSON(t, &out)
			for _, x := range out.Replays {
				if x["webhook_id"] == webhookID {
					return x, r
				}
			}
			return nil, r
		}
		if x, r := replayTo(downID); r.Status != 200 || x == nil || x["delivered"] != false || len(down.requests()) != before {
			t.Fatalf("replay to a disabled webhook: %d %s", r.Status, r.Body)
		}
		// The merchant fixes the endpoint, enables the webhook and replays: delivered.
		down.mu.Lock()
		down.always = 200
		down.mu.Unlock()
		if r := b.env.Do("PATCH", "/api/v1/webhooks/"+downID+"/", map[string]any{"is_active": true}, servicetest.Bearer(b.secret)...); r.Status != 200 {
			t.Fatalf("enable: %d %s", r.Status, r.Body)
		}
		if x, r := replayTo(downID); r.Status != 200 || x == nil || x["delivered"] != true {
			t.Fatalf("replay after enabling: %d %s", r.Status, r.Body)
		}
		got := down.requests()
		if len(got) != before+1 || !webhooks.VerifyDelivery("down-secret", keys[downID], got[len(got)-1].headers, got[len(got)-1].body, time.Now(), 5*time.Minute) ||
			got[len(got)-1].headers["webhook-id"] != id {
			t.Fatalf("the replay reached the receiver %d times, or unsigned", len(got)-before)
		}
		// A replay the endpoint accepted makes the event DELIVERED; still one record.
		var l struct{ Results []map[string]any }
		b.get("/api/v1/webhooks/events/?status=DELIVERED").JSON(t, &l)
		delivered := 0
		for _, e := range l.Results {
			if e["id"] == id && e["webhook_id"] == downID {
				delivered++
			}
		}
		var records int
		if err := env.Schema.DB.Get(&records, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 AND webhook_id = $2`, id, downID); err != nil ||
			delivered != 1 || records != 1 {
			t.Fatalf("after the replay: %d DELIVERED listings, %d records (%v)", delivered, records, err)
		}
	})
	t.Run("ReplayAfterRotationSendsTheOriginalBytes", func(t *testing.T) {
		// The opted-in webhook's first delivery echoed "flaky-secret". After the
		// challenge and the signing secret rotate, a replay sends exactly those bytes
		// (the old challenge in them signs nothing any more), signed with the new
		// secrets only.
		first := flaky.requests()[0]
		if !strings.Contains(string(first.body), `"challenge":"flaky-secret"`) {
			t.Fatalf("first body %s", first.body)
		}
		id := first.headers["webhook-id"]
		r := b.post("/api/v1/webhooks/"+flakyID+"/rotate-secret/", map[string]any{"challenge": "rotated-secret"})
		if r.Status != 200 || strings.Contains(string(r.Body), "rotated-secret") {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		oldKey := keys[flakyID]
		newKey := signingKey(t, r)
		keys[flakyID] = newKey
		replayFlaky := func() map[string]any {
			t.Helper()
			var out struct{ Replays []map[string]any }
			b.post("/api/v1/webhooks/events/"+id+"/replay/", nil).JSON(t, &out)
			for _, x := range out.Replays {
				if x["webhook_id"] == flakyID {
					return x
				}
			}
			t.Fatalf("no replay to %s: %v", flakyID, out.Replays)
			return nil
		}
		n := len(flaky.requests())
		if x := replayFlaky(); x["delivered"] != true {
			t.Fatalf("replay after rotation: %v", x)
		}
		got := flaky.requests()[n]
		if !bytes.Equal(got.body, first.body) {
			t.Fatalf("the replay after rotation changed the body:\n%s\n%s", got.body, first.body)
		}
		if got.headers["webhook-id"] != id {
			t.Fatalf("webhook-id %q, want %q", got.headers["webhook-id"], id)
		}
		if !webhooks.VerifyDelivery("rotated-secret", newKey, got.headers, got.body, time.Now(), 5*time.Minute) ||
			webhooks.VerifyDelivery("flaky-secret", oldKey, got.headers, got.body, time.Now(), 5*time.Minute) {
			t.Fatal("the replay is not signed with the new secrets alone")
		}

		// The merchant sets the challenge those bytes echo again and turns the echo
		// off: sending them would hand out the live key of X-SERVICE-Signature that
		// the merchant withdrew from bodies. Not sent, and the answer says why.
		if r := b.env.Do("PATCH", "/api/v1/webhooks/"+flakyID+"/", map[string]any{"challenge": "flaky-secret", "include_challenge": false},
			servicetest.Bearer(b.secret)...); r.Status != 200 {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		n = len(flaky.requests())
		if x := replayFlaky(); x["delivered"] != false || !strings.Contains(fmt.Sprint(x["error"]), "challenge") {
			t.Fatalf("replay echoing the withdrawn live challenge: %v", x)
		}
		if len(flaky.requests()) != n {
			t.Fatal("a body echoing the live, withdrawn challenge was sent")
		}
		// A new challenge makes the old one harmless: the same bytes go out again.
		if r := b.post("/api/v1/webhooks/"+flakyID+"/rotate-secret/", map[string]any{"challenge": "third-secret"}); r.Status != 200 {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		} else {
			keys[flakyID] = signingKey(t, r)
		}
		if x := replayFlaky(); x["delivered"] != true {
			t.Fatalf("replay after the second rotation: %v", x)
		}
		got = flaky.requests()[n]
		if !bytes.Equal(got.body, first.body) || !webhooks.VerifyDelivery("third-secret", keys[flakyID], got.headers, got.body, time.Now(), 5*time.Minute) {
			t.Fatalf("second replay: %s", got.body)
		}
	})
	t.Run("EventsAreMerchantScoped", func(t *testing.T) {
		other := newBundle(t, env, "Other")
		var l struct{ Count int }
		other.get("/api/v1/webhooks/events/").JSON(t, &l)
		if l.Count != 0 {
			t.Fatalf("another merchant sees %d events", l.Count)
		}
	})
}

// A real HTTPS receiver whose certificate is trusted through PAYSVC_WEBHOOK_CA_FILE:
// the delivery verifies TLS and both signature schemes.
func TestWebhookDelivery_HTTPS(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []recorded
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		got = append(got, recorded{map[string]string{"X-SERVICE-Signature": req.Header.Get("X-SERVICE-Signature"),
			"webhook-id": req.Header.Get("webhook-id"), "webhook-timestamp": req.Header.Get("webhook-timestamp"),
			"webhook-signature": req.Header.Get("webhook-signature")}, b})
		mu.Unlock()
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true // the receiver is on loopback; TLS is still verified
		c.WebhookCAFile = caFile
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	b := newBundle(t, env, "TLS")
	r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": srv.URL + "/hook", "challenge": "tls-secret-1",
		"wallet_transfer_event": true})
	if r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	key := signingKey(t, r)
	w := b.wallet(t, "KES", "W")
	b.deposit(t, b.settlement, "5.00")
	b.transfer(b.settlement, w, "1.00")
	waitUntil(t, "the HTTPS delivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if !webhooks.VerifyDelivery("tls-secret-1", key, got[0].headers, got[0].body, time.Now(), 5*time.Minute) {
		t.Fatal("the HTTPS delivery does not verify")
	}
}

// signingKey is the whsec_ secret a create or rotate-secret answer shows, as key bytes.
func signingKey(t *testing.T, r servicetest.Response) []byte {
	t.Helper()
	s, _ := r.Map(t)["signing_secret"].(string)
	k, err := webhooks.ParseSecret(s)
	if err != nil {
		t.Fatalf("signing_secret %q: %v", s, err)
	}
	return k
}
