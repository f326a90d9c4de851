package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"math/rand/v2"
	"net"
	"paysvc/api"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

func TestHTTPBehaviour(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("SuccessIsJSON", func(t *testing.T) {
		r := b.get("/api/v1/wallets/")
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("%d %s", r.Status, r.Header.Get("Content-Type"))
		}
	})
	t.Run("Healthz", func(t *testing.T) {
		if r := b.env.Do("GET", "/healthz", nil); r.Status != 200 {
			t.Fatalf("healthz %d", r.Status)
		}
	})
	t.Run("Metrics", func(t *testing.T) {
		b.transfer(b.settlement, "NOPE", "1.00")
		metrics := b.env.Metrics() // the operator listener, not the public port (TestAdminListener)
		for _, name := range []string{
			"paysvc_http_requests_total", "paysvc_http_request_duration_seconds_bucket", "paysvc_api_commands_produced_total",
			"paysvc_engine_commands_applied_total", "paysvc_engine_batch_size_commands", "paysvc_engine_batch_commit_seconds",
			"paysvc_engine_command_end_to_end_seconds", "paysvc_engine_consumer_lag_records", "paysvc_engine_live_actors",
			"paysvc_relay_outbox_backlog_events",
		} {
			if !strings.Contains(metrics, name) {
				t.Errorf("/metrics lacks %s", name)
			}
		}
		if !strings.Contains(metrics, `route="/api/v1/wallets/:wallet_id/intra_transfer"`) {
			t.Errorf("HTTP metrics are not labelled by route template")
		}
	})
	// The official Node SDK writes {"public_key":...} after a GET's headers with no
	// framing: the server must close the connection, not parse it as a request.
	t.Run("UnframedGETBody", func(t *testing.T) {
		conn, err := net.Dial("tcp", b.env.Svc.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := "GET /api/v1/wallets/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b.secret +
			"\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n\r\n" + `{"public_key":"` + b.public + `"}`
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1<<16)
		var all []byte
		for {
			n, err := conn.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		s := string(all)
		if !strings.HasPrefix(s, "HTTP/1.1 200") || strings.Count(s, "HTTP/1.1 ") != 1 || !strings.Contains(s, "Connection: close") {
			t.Fatalf("raw exchange:\n%s", s)
		}
	})
}

// What the HTTP edge answers on its own, before any key is looked up: on the
// handler alone (bareAPI), no service behind it.
func TestHTTPEdge(t *testing.T) {
	t.Parallel()
	bare := newBareAPI(t, api.Config{BodyLimit: 4096})
	someSecret := "ISSecretKey_test_" + strings.Repeat("a", 64)

	t.Run("UnknownPathIsJSON404", func(t *testing.T) {
		r := bare.Do("GET", "/api/v1/nothing-here/", nil)
		if _, code, _ := errorBody(t, r); r.Status != 404 || code != "not_found" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("WrongMethodIsJSON", func(t *testing.T) {
		r := bare.Do("DELETE", "/api/v1/wallets/", nil, servicetest.Bearer(someSecret)...)
		if r.Status < 400 || r.Status >= 500 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})
	t.Run("BodyTooLarge", func(t *testing.T) {
		big := `{"label":"` + strings.Repeat("a", 5000) + `","currency":"KES"}`
		r := bare.Do("POST", "/api/v1/wallets/", big, servicetest.Bearer(someSecret)...)
		if _, _, _ = errorBody(t, r); r.Status != 413 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("RequestIDEchoed", func(t *testing.T) {
		r := bare.Do("GET", "/api/v1/wallets/NOPE", nil, "X-Request-Id", "my-trace-123")
		if r.Header.Get("X-Request-Id") != "my-trace-123" || !strings.Contains(string(r.Body), "my-trace-123") {
			t.Fatalf("request id not echoed: %v %s", r.Header, r.Body)
		}
		r = bare.Do("GET", "/api/v1/wallets/", nil, "X-Request-Id", "bad id with spaces")
		if id := r.Header.Get("X-Request-Id"); id == "" || strings.Contains(id, " ") {
			t.Fatalf("insane request id kept: %q", id)
		}
	})
	t.Run("InterfaceVersion", func(t *testing.T) {
		// The spec's Versioning: the interface is /api/v1, its description 1.0.0. Stated
		// at the prefix, with and without the trailing slash, to anyone (no key, or a
		// wrong one: nothing is checked), as JSON.
		for _, c := range []struct {
			path    string
			headers []string
		}{
			{"/api/v1/", nil}, {"/api/v1", nil},
			{"/api/v1/", []string{"Authorization", "Bearer not-a-key"}},
			{"/api/v1/", []string{"INTASEND_PUBLIC_API_KEY", "ISPubKey_test_" + strings.Repeat("b", 64)}},
		} {
			r := bare.Do("GET", c.path, nil, c.headers...)
			if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("GET %s: %d %s %s", c.path, r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			var v map[string]any
			r.JSON(t, &v)
			if v["name"] != "paysvc" || v["version"] != "1.0.0" || v["api"] != "v1" || v["environment"] != "sandbox" {
				t.Fatalf("GET %s: %v", c.path, v)
			}
		}
		if r := bare.Do("POST", "/api/v1/", map[string]any{}); r.Status < 400 || r.Status >= 500 {
			t.Fatalf("POST /api/v1/: %d %s", r.Status, r.Body)
		}
	})
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.API.RateLimit = 1; c.API.RateBurst = 3 })
	b := newBundle(t, env, "Acme") // spends one request
	var limited servicetest.Response
	for i := 0; i < 10; i++ {
		if r := b.get("/api/v1/wallets/"); r.Status == 429 {
			limited = r
			break
		}
	}
	if limited.Status != 429 || limited.Header.Get("Retry-After") == "" {
		t.Fatalf("no 429 with Retry-After within 10 quick requests: %d %v", limited.Status, limited.Header)
	}
	if _, code, _ := errorBody(t, limited); code != "throttled" {
		t.Fatalf("code %s", code)
	}
	// Another key has its own bucket.
	other := env.Merchant("Other")
	if r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(other.SecretKey)...); r.Status != 200 {
		t.Fatalf("other key limited too: %d", r.Status)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.wallet(t, "KES", "Target")
	b.deposit(t, b.settlement, "50.00")

	t.Run("ReplaySameBody", func(t *testing.T) {
		r1 := b.transfer(b.settlement, w, "10.00", "Idempotency-Key", "k-1")
		r2 := b.transfer(b.settlement, w, "10.00", "Idempotency-Key", "k-1")
		if r1.Status != 200 || r2.Status != 200 || string(r1.Body) != string(r2.Body) {
			t.Fatalf("replay: %d %s / %d %s", r1.Status, r1.Body, r2.Status, r2.Body)
		}
		if r1.Header.Get("Idempotent-Replayed") != "" || r2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("Idempotent-Replayed headers: %q %q", r1.Header.Get("Idempotent-Replayed"), r2.Header.Get("Idempotent-Replayed"))
		}
		if cur, _ := b.balance(t, w); cur != "10.00" {
			t.Fatalf("applied twice: %s", cur)
		}
	})
	t.Run("RefusalIsStoredToo", func(t *testing.T) {
		r1 := b.transfer(b.settlement, w, "1000.00", "Idempotency-Key", "k-2")
		b.deposit(t, b.settlement, "2000.00")
		r2 := b.transfer(b.settlement, w, "1000.00", "Idempotency-Key", "k-2")
		if r1.Status != 400 || r2.Status != 400 || r2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("stored refusal: %d / %d %s", r1.Status, r2.Status, r2.Body)
		}
	})
	t.Run("DifferentBody", func(t *testing.T) {
		b.transfer(b.settlement, w, "1.00", "Idempotency-Key", "k-3")
		r := b.transfer(b.settlement, w, "2.00", "Idempotency-Key", "k-3")
		if _, code, _ := errorBody(t, r); r.Status != 422 || code != "idempotency_key_reused" {
			t.Fatalf("different body: %d %s", r.Status, r.Body)
		}
	})
	t.Run("InFlight", func(t *testing.T) {
		body := `{"wallet_id":"` + w + `","amount":"1.00","narrative":"x"}`
		path := "/api/v1/wallets/" + b.settlement + "/intra_transfer/"
		h := sha256.New()
		h.Write([]byte("POST " + strings.TrimSuffix(path, "/") + "\n" + body))
		// Another request holds the key right now.
		if out, _, err := storage.BeginIdempotent(context.Background(), b.env.Schema.DB, b.merchant, "k-4", h.Sum(nil),
			"cmd-x", time.Minute, 24*time.Hour); err != nil || out != storage.IdemProceed {
			t.Fatalf("hold key: %v %v", out, err)
		}
		r := b.post(path, body, "Idempotency-Key", "k-4")
		if _, code, _ := errorBody(t, r); r.Status != 409 || code != "idempotency_key_in_use" {
			t.Fatalf("in flight: %d %s", r.Status, r.Body)
		}
	})
	t.Run("ScopedPerMerchant", func(t *testing.T) {
		other := newBundle(t, b.env, "Other")
		ow := other.wallet(t, "KES", "OW")
		other.deposit(t, other.settlement, "5.00")
		r := other.transfer(other.settlement, ow, "5.00", "Idempotency-Key", "k-1")
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("another merchant's key k-1 must be independent: %d %s", r.Status, r.Body)
		}
	})
	t.Run("ConcurrentSameKeyAppliesOnce", func(t *testing.T) {
		before, _ := b.balance(t, w)
		var wg sync.WaitGroup
		statuses := make([]int, 10)
		for i := range statuses {
			wg.Go(func() { statuses[i] = b.transfer(b.settlement, w, "3.00", "Idempotency-Key", "k-5").Status })
		}
		wg.Wait()
		for _, s := range statuses {
			if s != 200 && s != 409 {
				t.Fatalf("statuses %v", statuses)
			}
		}
		after, _ := b.balance(t, w)
		if !money.MustParse(after).Sub(money.MustParse(before)).Equal(money.MustParse("3.00")) {
			t.Fatalf("balance moved %s -> %s; want exactly +3.00", before, after)
		}
	})
}

// No input yields a 500: random and hostile bodies get a 4xx JSON error or a
// normal answer, and never move money they should not.
func TestGarbageInputNever500(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.wallet(t, "KES", "G")
	rng := rand.New(rand.NewPCG(1, 2))
	values := []any{nil, true, 0, -1, 1.5, "", "1.00", "99999999999999999999", "1e5", " 1", []any{1}, map[string]any{"a": 1},
		strings.Repeat("x", 300), "\u0000", "NaN", "-0.00", "0.001", w, b.settlement, "../../etc"}
	fields := []string{"wallet_id", "amount", "narrative", "label", "currency", "wallet_type", "can_disburse", "public_key"}
	paths := []string{"/api/v1/wallets/", "/api/v1/wallets/" + b.settlement + "/intra_transfer/",
		"/api/v1/sandbox/wallets/" + w + "/deposit/", "/api/v1/wallets/%00/intra_transfer/"}
	raw := []string{"", "{", "[]", "null", "\"s\"", "{\"amount\":}", "\xff\xfe", "{\"amount\":1e400}", strings.Repeat("[", 10000)}
	for i := 0; i < 300; i++ {
		var body any
		if i < len(raw) {
			body = raw[i]
		} else {
			m := map[string]any{}
			for j := 0; j < 1+rng.IntN(4); j++ {
				m[fields[rng.IntN(len(fields))]] = values[rng.IntN(len(values))]
			}
			enc, _ := json.Marshal(m)
			body = string(enc)
		}
		path := paths[rng.IntN(len(paths))]
		r := b.post(path, body)
		if r.Status >= 500 {
			t.Fatalf("POST %s %v -> %d %s", path, body, r.Status, r.Body)
		}
		if r.Status >= 400 {
			errorBody(t, r)
		}
	}
	rep, err := storage.CheckLedger(context.Background(), b.env.Schema.DB)
	if err != nil || !rep.OK {
		t.Fatalf("ledger after garbage: %+v %v", rep, err)
	}
}
