package api_test

import (
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

func TestWebhookConfiguration(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.API.WebhookAllowPrivate = true })
	b := newBundle(t, env, "Hooks")
	r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": "http://127.0.0.1:9/hook", "challenge": "super-secret-1",
		"collection_event": true, "wallet_transfer_event": true})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), "super-secret-1") || strings.Contains(string(r.Body), `"challenge"`) {
		t.Fatalf("the secret came back: %s", r.Body)
	}
	w := r.Map(t)
	id := w["id"].(string)
	if w["is_active"] != true || w["collection_event"] != true || w["send_money_event"] != false || w["failures_count"] != float64(0) {
		t.Fatalf("webhook %v", w)
	}
	var l struct {
		Count   int              `json:"count"`
		Results []map[string]any `json:"results"`
	}
	b.get("/api/v1/webhooks/").JSON(t, &l)
	if l.Count != 1 || l.Results[0]["id"] != id {
		t.Fatalf("list %+v", l)
	}
	r = b.env.Do("PATCH", "/api/v1/webhooks/"+id+"/", map[string]any{"send_money_event": true, "is_active": false}, servicetest.Bearer(b.secret)...)
	if m := r.Map(t); r.Status != 200 || m["send_money_event"] != true || m["is_active"] != false || m["collection_event"] != true {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	r = b.env.Do("PATCH", "/api/v1/webhooks/"+id, map[string]any{"is_active": true}, servicetest.Bearer(b.secret)...)
	if r.Map(t)["is_active"] != true {
		t.Fatalf("re-enable: %s", r.Body)
	}
	r = b.post("/api/v1/webhooks/"+id+"/rotate-secret/", map[string]any{"challenge": "another-secret-2"})
	if r.Status != 200 || strings.Contains(string(r.Body), "another-secret-2") {
		t.Fatalf("rotate: %d %s", r.Status, r.Body)
	}
	var stored string
	if err := env.Schema.DB.Get(&stored, `SELECT challenge FROM webhooks WHERE webhook_id = $1`, id); err != nil || stored != "another-secret-2" {
		t.Fatalf("rotated secret not stored: %v", err)
	}

	t.Run("Refusals", func(t *testing.T) {
		for _, tc := range []struct {
			body map[string]any
			attr string
		}{
			{map[string]any{"challenge": "12345678"}, "endpoint"},
			{map[string]any{"endpoint": "ftp://example.com/x", "challenge": "12345678"}, "endpoint"},
			{map[string]any{"endpoint": "https://user:pw@example.com/x", "challenge": "12345678"}, "endpoint"},
			{map[string]any{"endpoint": "https://example.com/x"}, "challenge"},
			{map[string]any{"endpoint": "https://example.com/x", "challenge": "short"}, "challenge"},
			{map[string]any{"endpoint": "https://example.com/x", "challenge": "12345678", "collection_event": "yes"}, "collection_event"},
		} {
			r := b.post("/api/v1/webhooks/", tc.body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.attr {
				t.Errorf("%v: %d %s (want 400 on %s)", tc.body, r.Status, r.Body, tc.attr)
			}
		}
	})
	t.Run("MerchantIsolation", func(t *testing.T) {
		other := newBundle(t, env, "Other")
		for _, r := range []servicetest.Response{
			other.get("/api/v1/webhooks/" + id + "/"),
			other.env.Do("PATCH", "/api/v1/webhooks/"+id+"/", map[string]any{"is_active": false}, servicetest.Bearer(other.secret)...),
			other.env.Do("DELETE", "/api/v1/webhooks/"+id+"/", nil, servicetest.Bearer(other.secret)...),
			other.post("/api/v1/webhooks/"+id+"/rotate-secret/", map[string]any{"challenge": "hijacked-123"}),
		} {
			if r.Status != 404 {
				t.Fatalf("another merchant reached the webhook: %d %s", r.Status, r.Body)
			}
		}
		var ol struct{ Count int }
		other.get("/api/v1/webhooks/").JSON(t, &ol)
		if ol.Count != 0 {
			t.Fatalf("another merchant lists %d webhooks", ol.Count)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		r := b.env.Do("DELETE", "/api/v1/webhooks/"+id+"/", nil, servicetest.Bearer(b.secret)...)
		if r.Status != 200 || !r.Close {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := b.get("/api/v1/webhooks/" + id + "/"); r.Status != 404 {
			t.Fatalf("after delete: %d", r.Status)
		}
	})
}

// Without the sandbox switch, endpoints must be public HTTPS.
func TestWebhookEndpointsMustBePublicHTTPS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, ep := range []string{"http://example.com/hook", "https://127.0.0.1/hook", "https://10.1.2.3/hook", "https://169.254.169.254/latest"} {
		r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": ep, "challenge": "12345678"})
		detail, _, attr := errorBody(t, r)
		if r.Status != 400 || attr != "endpoint" || !strings.HasPrefix(detail, "Invalid endpoint: ") || strings.Contains(detail, "outbound:") {
			t.Errorf("%s: %d %s", ep, r.Status, r.Body)
		}
	}
	if r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": "https://example.com/hook", "challenge": "12345678"}); r.Status != 201 {
		t.Fatalf("public https endpoint: %d %s", r.Status, r.Body)
	}
}
