package bench

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/cmd/paysvc/service"
)

func TestScenarios_WebhooksIsKnownButNotDefault(t *testing.T) {
	t.Parallel()
	if slices.Contains(Scenarios, ScenarioWebhooks) {
		t.Fatal("webhooks is in the default run")
	}
	if !slices.Contains(KnownScenarios(), ScenarioWebhooks) || !strings.Contains(ScenarioHelp(), ScenarioWebhooks) {
		t.Fatal("webhooks is not selectable or not in the help")
	}
	opts := func(mut func(*Options)) error {
		o := Options{Scenarios: []string{ScenarioWebhooks}, Merchants: 8, Wallets: 16, HotSources: 64, Concurrency: 64,
			Duration: time.Second, BaselineConns: 16, Deposit: "1.00", DatabaseURL: "postgres://x/y", WebhookBacklog: 10}
		mut(&o)
		return o.Validate()
	}
	if err := opts(func(*Options) {}); err != nil {
		t.Fatalf("webhooks refused: %v", err)
	}
	if err := opts(func(o *Options) { o.URL = "http://127.0.0.1:1" }); err == nil {
		t.Fatal("webhooks accepted with --url: it must start its own dispatcher")
	}
	if err := opts(func(o *Options) { o.WebhookBacklog = 0 }); err == nil || !strings.Contains(err.Error(), "--webhook-backlog") {
		t.Fatalf("an empty backlog: %v", err)
	}
}

func TestWebhookChildEnv(t *testing.T) {
	t.Parallel()
	env := webhookChildEnv(func(string) string { return "" })
	roles := strings.Split(env["PAYSVC_ROLES"], ",")
	if slices.Contains(roles, service.RoleDispatcher) || !slices.Contains(roles, service.RoleAPI) || !slices.Contains(roles, service.RoleRelay) {
		t.Fatalf("roles %v: the scenario starts its own dispatcher, the service needs the rest", roles)
	}
	if env["PAYSVC_WEBHOOK_ALLOW_PRIVATE"] != "true" {
		t.Fatal("loopback receivers need PAYSVC_WEBHOOK_ALLOW_PRIVATE")
	}
	env = webhookChildEnv(func(k string) string {
		if k == "PAYSVC_ROLES" {
			return "api,engine"
		}
		return ""
	})
	if _, set := env["PAYSVC_ROLES"]; set {
		t.Fatal("the caller's PAYSVC_ROLES overridden")
	}
}

// The receivers count each event once, check both signatures (challenge and
// signing key) and the body ({topic, data}), and keep the event's commit time.
func TestHookReceiver(t *testing.T) {
	t.Parallel()
	h, err := newHookReceiver([]string{"secret-one", "secret-two"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	keys := map[string][]byte{"secret-one": []byte("key-one-0123456789abcdefghijklm"), "secret-two": []byte("key-two-0123456789abcdefghijklm")}
	h.keys["secret-one"], h.keys["secret-two"] = keys["secret-one"], keys["secret-two"]
	committed := time.Now().Add(-30 * time.Millisecond).UTC().Truncate(time.Microsecond)
	post := func(url, secret, id string) int {
		body, _ := webhooks.Body("wallet_transfer_event", []byte(`{"created_at":"`+committed.Format(time.RFC3339Nano)+`"}`), "")
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		for k, v := range webhooks.DeliveryHeaders(secret, keys[secret], id, time.Now(), body) {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post(h.urls[0], "secret-one", "evt_1"); s != 200 {
		t.Fatalf("good delivery: %d", s)
	}
	if s := post(h.urls[1], "secret-two", "evt_2"); s != 200 {
		t.Fatalf("good delivery to the second merchant: %d", s)
	}
	if s := post(h.urls[0], "secret-one", "evt_1"); s != 200 {
		t.Fatalf("repeated delivery: %d", s)
	}
	if s := post(h.urls[1], "secret-one", "evt_3"); s != 400 {
		t.Fatalf("a delivery signed with another merchant's secret answered %d", s)
	}
	recs := h.since(0)
	if len(recs) != 2 || h.dupes != 1 || h.bad != 1 || !strings.Contains(h.badWhy, "signature") {
		t.Fatalf("recs %d dupes %d bad %d (%s)", len(recs), h.dupes, h.bad, h.badWhy)
	}
	if !recs[0].Committed.Equal(committed) || recs[0].At.Sub(recs[0].Committed) < 30*time.Millisecond {
		t.Fatalf("commit time %v, arrival %v", recs[0].Committed, recs[0].At)
	}
}
