package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// sseMsg is one message of a listen stream.
type sseMsg struct {
	id, event, data string
}

// sseStream is an open GET /api/v1/events/listen/ and what it delivered so far.
type sseStream struct {
	mu   sync.Mutex
	msgs []sseMsg
	done chan struct{}
}

// openStream opens a listen stream; it returns once the server answered 200, from
// when on the stream holds every event of the merchant.
func openStream(t *testing.T, env *servicetest.Env, secret, query, challenge string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", env.BaseURL+"/api/v1/events/listen/"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("X-Paysvc-Listen-Challenge", challenge)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{done: make(chan struct{})}
	t.Cleanup(func() { resp.Body.Close(); <-s.done })
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.id != "" {
					s.mu.Lock()
					s.msgs = append(s.msgs, m)
					s.mu.Unlock()
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "id: "):
				m.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				m.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			}
		}
	}()
	return s
}

func (s *sseStream) messages() []sseMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sseMsg(nil), s.msgs...)
}

// find waits for the message of an event id.
func (s *sseStream) find(t *testing.T, id string) sseMsg {
	t.Helper()
	var got sseMsg
	waitUntil(t, "event "+id+" on the stream", func() bool {
		for _, m := range s.messages() {
			if m.id == id {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// caughtUp waits for the stream to carry two events of b's triggered now. The
// stream reads every partition in each fetch, so the fetch of the second began
// after everything triggered before the first was in the log, and the first's
// fetch was read whole before: an earlier event the stream has not sent by then
// is one it never sends.
func (s *sseStream) caughtUp(t *testing.T, b *bundle, topic string) {
	t.Helper()
	for range 2 {
		s.find(t, trigger(t, b, topic))
	}
}

func trigger(t *testing.T, b *bundle, topic string) string {
	t.Helper()
	r := b.post("/api/v1/events/trigger/", map[string]any{"topic": topic})
	if r.Status != 201 {
		t.Fatalf("trigger %s: %d %s", topic, r.Status, r.Body)
	}
	m := r.Map(t)
	id, _ := m["event_id"].(string)
	if m["topic"] != topic || !strings.HasPrefix(id, "evt_sample_") {
		t.Fatalf("trigger answer %s", r.Body)
	}
	return id
}

func TestListen(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	a, other := newBundle(t, env, "Listener"), newBundle(t, env, "Other")

	t.Run("OwnEventsOnly_ExactWebhookBody", func(t *testing.T) {
		// A webhook with the same challenge, echoed (the stream echoes the
		// X-Paysvc-Listen-Challenge it was given), gets the very bytes the stream carries.
		rcv := newReceiver(t, 200)
		if r := a.post("/api/v1/webhooks/", map[string]any{"endpoint": rcv.srv.URL + "/hook", "challenge": "session-secret",
			"collection_event": true, "include_challenge": true}); r.Status != 201 {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		mine := openStream(t, env, a.secret, "", "session-secret")
		theirs := openStream(t, env, other.secret, "", "their-secret")
		id := trigger(t, a, "collection_event")
		otherID := trigger(t, other, "collection_event")
		m := mine.find(t, id)
		if m.event != "collection_event" {
			t.Fatalf("event field %q", m.event)
		}
		waitUntil(t, "the webhook delivery", func() bool { return len(rcv.requests()) == 1 })
		if got := rcv.requests()[0]; string(got.body) != m.data || got.headers["webhook-id"] != id {
			t.Fatalf("stream data differs from the delivered body:\nstream  %s\nwebhook %s", m.data, got.body)
		}
		theirs.find(t, otherID)
		mine.caughtUp(t, a, "collection_event")
		theirs.caughtUp(t, other, "collection_event")
		for _, msg := range mine.messages() {
			if msg.id == otherID || strings.Contains(msg.data, other.merchant) {
				t.Fatalf("another merchant's event leaked into the stream: %+v", msg)
			}
		}
		for _, msg := range theirs.messages() {
			if msg.id == id {
				t.Fatalf("this merchant's event leaked into the other's stream")
			}
		}
	})

	t.Run("EveryTopicWithSpecFields", func(t *testing.T) {
		s := openStream(t, env, a.secret, "", "session-secret")
		fields := map[string][]string{
			"collection_event": {"id", "state", "value", "currency", "provider", "account", "api_ref", "created_at", "updated_at"},
			"send_money_event": {"id", "state", "provider", "currency", "total_amount", "transactions_count", "batch_reference",
				"created_at", "updated_at"},
			"reversal_event": {"id", "amount", "currency", "status", "reason", "original_invoice_id", "created_at", "updated_at"},
			"subscription_event": {"id", "status", "plan", "customer", "completed_cycles", "next_date", "fail_reason",
				"created_at", "updated_at"},
			"wallet_transfer_event": {"id", "from_currency", "to_currency", "amount_sent", "amount_received", "exchange_rate",
				"status", "created_at"},
		}
		for _, topic := range webhooks.Topics {
			id := trigger(t, a, topic)
			m := s.find(t, id)
			var body struct {
				Topic     string                     `json:"topic"`
				Data      map[string]json.RawMessage `json:"data"`
				Challenge string                     `json:"challenge"`
			}
			if err := json.Unmarshal([]byte(m.data), &body); err != nil {
				t.Fatalf("%s: data is not JSON: %v", topic, err)
			}
			if m.event != topic || body.Topic != topic || body.Challenge != "session-secret" {
				t.Fatalf("%s: event %q body %s", topic, m.event, m.data)
			}
			for _, f := range fields[topic] {
				if _, ok := body.Data[f]; !ok {
					t.Errorf("%s: data lacks %q: %s", topic, f, m.data)
				}
			}
			// A refund's id is a number, as in a real reversal_event: its sample is
			// marked by the invoice it names.
			marker := "id"
			if topic == "reversal_event" {
				marker = "original_invoice_id"
			}
			if id, _ := body.Data[marker].MarshalJSON(); !strings.HasPrefix(string(id), `"sample_`) {
				t.Errorf("%s: data %s %s is not marked as a sample", topic, marker, id)
			}
		}
	})

	t.Run("EventsFilter", func(t *testing.T) {
		s := openStream(t, env, a.secret, "?events=send_money_event", "x")
		skipped := trigger(t, a, "collection_event")
		s.caughtUp(t, a, "send_money_event")
		for _, m := range s.messages() {
			if m.id == skipped || m.event != "send_money_event" {
				t.Fatalf("filtered stream got %+v", m)
			}
		}
		r := a.get("/api/v1/events/listen/?events=nope")
		if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "events" {
			t.Fatalf("unknown events filter: %d %s", r.Status, r.Body)
		}
	})

	t.Run("Trigger_UnknownTopic", func(t *testing.T) {
		for _, body := range []map[string]any{{"topic": "charge.succeeded"}, {}} {
			r := a.post("/api/v1/events/trigger/", body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "topic" {
				t.Fatalf("trigger %v: %d %s", body, r.Status, r.Body)
			}
		}
	})

	t.Run("TooManyStreams", func(t *testing.T) {
		busy := newBundle(t, env, "Busy")
		for range 5 {
			openStream(t, env, busy.secret, "", "")
		}
		r := busy.get("/api/v1/events/listen/")
		if _, code, _ := errorBody(t, r); r.Status != 429 || code != "too_many_streams" {
			t.Fatalf("sixth stream: %d %s", r.Status, r.Body)
		}
		// Other merchants are not affected.
		openStream(t, env, other.secret, "", "")
	})

	t.Run("SecretKeyRequired", func(t *testing.T) {
		if r := env.Do("GET", "/api/v1/events/listen/", nil); r.Status != 401 {
			t.Fatalf("no key: %d %s", r.Status, r.Body)
		}
		if r := env.Do("POST", "/api/v1/events/trigger/", map[string]any{"topic": "collection_event"},
			"X-SERVICE-PUBLIC-API-KEY", a.public); r.Status != 401 {
			t.Fatalf("public key: %d %s", r.Status, r.Body)
		}
	})
}

func TestListen_LiveServer(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.Environment = "live"; c.API.Environment = "live" })
	m := env.Merchant("Live Co")
	for _, r := range []servicetest.Response{
		env.Do("GET", "/api/v1/events/listen/", nil, servicetest.Bearer(m.SecretKey)...),
		env.Do("POST", "/api/v1/events/trigger/", map[string]any{"topic": "collection_event"}, servicetest.Bearer(m.SecretKey)...),
	} {
		if r.Status != 404 {
			t.Fatalf("live server: %d %s", r.Status, r.Body)
		}
		errorBody(t, r)
	}
}

// A listen stream is long-lived on purpose: it outlives the public listener's
// write bound (api/deadline, the server's WriteTimeout), which would cut it.
func TestListen_OutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.HTTP.Write = time.Second })
	b := newBundle(t, env, "Long Listener")
	s := openStream(t, env, b.secret, "", "c")
	// The delay is what is under test: three write bounds pass with the stream open.
	time.Sleep(3 * time.Second)
	id := trigger(t, b, "collection_event")
	s.find(t, id)
}
