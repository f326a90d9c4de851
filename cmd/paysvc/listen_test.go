package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
)

// syncBuffer is a bytes.Buffer a running command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hookReceiver is the developer's local endpoint: it keeps what it got.
type hookReceiver struct {
	mu  sync.Mutex
	got []hookRequest
	srv *httptest.Server
}

type hookRequest struct {
	headers map[string]string
	body    []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		h := map[string]string{}
		for _, k := range []string{"Content-Type", "X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"} {
			h[k] = req.Header.Get(k)
		}
		r.mu.Lock()
		r.got = append(r.got, hookRequest{h, b})
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

// cliWait bounds the waits of the command tests for what a command or the
// service it talks to does (a line printed, a delivery, a file's status).
const cliWait = 20 * time.Second

// startListen runs `paysvc listen` until the test ends.
func startListen(t *testing.T, env map[string]string, args ...string) (stdout, stderr *syncBuffer) {
	t.Helper()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"paysvc", "listen"}, args...), func(k string) string { return env[k] }, stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("listen ended with %v; stderr %s", err, stderr)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("listen did not stop on cancel")
		}
	})
	return stdout, stderr
}

var readyLine = regexp.MustCompile(`Ready! Your webhook signing secret is (whsec_[A-Za-z0-9+/]{43}=)`)

func TestListenAndTrigger(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, nil)
	m := svc.Merchant("Dev")
	env := envWith(noDatabase, "PAYSVC_SECRET_KEY", m.SecretKey)
	rcv := newHookReceiver(t)
	stdout, stderr := startListen(t, env, "--forward-to", rcv.srv.URL+"/hook", "--api", svc.BaseURL)
	var secret string
	waittest.Eventually(t, cliWait, func() (bool, string) {
		if s := readyLine.FindStringSubmatch(stdout.String()); s != nil {
			secret = s[1]
			return true, ""
		}
		return false, "no ready line"
	})

	r := runCLI(t, env, "trigger", "collection_event", "--api", svc.BaseURL)
	if r.err != nil {
		t.Fatalf("trigger: %v", r)
	}
	out := decodeOne(t, r.stdout, "event_id", "topic")
	eventID := str(t, out, "event_id")
	if !strings.HasPrefix(eventID, "evt_sample_") {
		t.Fatalf("event id %q", eventID)
	}

	waittest.Eventually(t, cliWait, func() (bool, string) { return len(rcv.requests()) > 0, "no forwarded event" })
	got := rcv.requests()[0]
	key, err := webhooks.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	if !webhooks.VerifyDelivery(secret, key, got.headers, got.body, time.Now(), 5*time.Minute) {
		t.Fatalf("the delivery does not verify with the printed secret: %v", got.headers)
	}
	if got.headers["webhook-id"] != eventID || got.headers["Content-Type"] != "application/json" {
		t.Fatalf("headers %v", got.headers)
	}
	for _, want := range []string{`"topic":"collection_event"`, `"id":"sample_`} {
		if !strings.Contains(string(got.body), want) {
			t.Fatalf("body lacks %s: %s", want, got.body)
		}
	}
	if strings.Contains(string(got.body), `"challenge"`) || strings.Contains(string(got.body), secret) {
		t.Fatalf("the body carries a secret, as a webhook that did not opt in must not: %s", got.body)
	}
	line := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  collection_event +` + eventID + `  \[200\] POST ` +
		regexp.QuoteMeta(rcv.srv.URL+"/hook") + ` \(\d+ms\)$`)
	waittest.Eventually(t, cliWait, func() (bool, string) { return line.MatchString(stdout.String()), "no delivery line" })
	t.Logf("listen printed:\n%s", stdout)
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("%d deliveries, want 1; stderr %s", n, stderr)
	}
}

// A stream that drops is reopened from where it was (since=), and an event the
// server sends again is forwarded once.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/api/v1/events/listen/" || req.Header.Get("Authorization") != "Bearer ISSecretKey_test_abc" {
			http.Error(w, `{"detail":"no"}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		queries = append(queries, req.URL.RawQuery)
		n := len(queries)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		body := `{"topic":"send_money_event","data":{"id":"sample_1"},"challenge":"` + req.Header.Get("X-Paysvc-Listen-Challenge") + `"}`
		fmt.Fprintf(w, ": listening\n\nid: evt_1\nevent: send_money_event\ndata: %s\n\n", body)
		if n > 1 {
			fmt.Fprintf(w, "id: evt_2\nevent: send_money_event\ndata: %s\n\n", strings.Replace(body, "sample_1", "sample_2", 1))
			w.(http.Flusher).Flush()
			<-req.Context().Done()
		}
		// The first stream ends here: the connection drops.
	}))
	t.Cleanup(api.Close)
	rcv := newHookReceiver(t)
	stdout, _ := startListen(t, envWith(noDatabase), "--forward-to", rcv.srv.URL, "--api", api.URL, "--key", "ISSecretKey_test_abc",
		"--events", "send_money_event")
	// evt_2 is the last event the server sends, after evt_1 again: listen forwards
	// one event at a time in stream order, so once evt_2 is here, what it did with
	// the repeated evt_1 is done, and nothing follows.
	waittest.Eventually(t, cliWait, func() (bool, string) {
		return slices.ContainsFunc(rcv.requests(), func(r hookRequest) bool { return r.headers["webhook-id"] == "evt_2" }), "evt_2 not forwarded"
	})
	if got := rcv.requests(); len(got) != 2 || got[0].headers["webhook-id"] != "evt_1" || got[1].headers["webhook-id"] != "evt_2" {
		t.Fatalf("forwarded %d: %v", len(got), got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(queries[0], "events=send_money_event") || strings.Contains(queries[0], "since=") ||
		!strings.Contains(queries[1], "since=") {
		t.Fatalf("queries %q", queries)
	}
	if strings.Count(stdout.String(), "Ready!") != 1 {
		t.Fatalf("stdout %s", stdout)
	}
}

func TestListenAndTriggerRefusals(t *testing.T) {
	t.Parallel()
	live := "ISSecretKey_live_" + strings.Repeat("a", 64)
	test := "ISSecretKey_test_" + strings.Repeat("a", 64)
	cases := []struct {
		name      string
		env       []string
		args      []string
		wantUsage bool
		errSubstr string
	}{
		{name: "listen_without_forward_to", env: []string{"PAYSVC_SECRET_KEY", test}, args: []string{"listen"}, wantUsage: true,
			errSubstr: "--forward-to"},
		{name: "listen_forward_to_not_a_url", env: []string{"PAYSVC_SECRET_KEY", test}, args: []string{"listen", "--forward-to", "localhost:3000"},
			wantUsage: true, errSubstr: "--forward-to"},
		{name: "listen_without_key", args: []string{"listen", "--forward-to", "http://localhost:3000/hook"}, wantUsage: true,
			errSubstr: "PAYSVC_SECRET_KEY"},
		{name: "listen_live_key_refused", env: []string{"PAYSVC_SECRET_KEY", live}, args: []string{"listen", "--forward-to", "http://localhost:3000/hook"},
			errSubstr: "live key"},
		{name: "listen_unknown_event", env: []string{"PAYSVC_SECRET_KEY", test},
			args: []string{"listen", "--forward-to", "http://localhost:3000/hook", "--events", "charge.succeeded"}, wantUsage: true,
			errSubstr: "charge.succeeded"},
		{name: "trigger_live_key_refused", args: []string{"trigger", "collection_event", "--key", live}, errSubstr: "live key"},
		{name: "trigger_unknown_topic", env: []string{"PAYSVC_SECRET_KEY", test}, args: []string{"trigger", "charge.succeeded"},
			wantUsage: true, errSubstr: "wallet_transfer_event"},
		{name: "trigger_without_topic", env: []string{"PAYSVC_SECRET_KEY", test}, args: []string{"trigger"}, wantUsage: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, envWith(noDatabase, tc.env...), tc.args...)
			if !tc.wantUsage {
				wantFailure(t, r, tc.errSubstr)
				return
			}
			wantUsage(t, r)
			if !strings.Contains(r.err.Error(), tc.errSubstr) {
				t.Fatalf("error %q lacks %q", r.err, tc.errSubstr)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
}
