package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// TestOpenAPIWebhookDeliveriesMatchDocument validates what the dispatcher really
// POSTs (headers and body) against the document's webhooks object, with every
// object schema closed as TestOpenAPIResponsesMatchDocument closes them: a sample
// event of every topic, and the event of a real intra transfer.
func TestOpenAPIWebhookDeliveriesMatchDocument(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	b := newBundle(t, env, "Documented Hooks")
	var mu sync.Mutex
	var got []*http.Request
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = r.Header.Clone()
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)

	hook := map[string]any{"endpoint": rcv.URL + "/hook", "challenge": "documented-secret", "include_challenge": true}
	for _, topic := range webhooks.Topics {
		hook[topic] = true
	}
	if r := b.post("/api/v1/webhooks/", hook); r.Status != 201 {
		t.Fatalf("create webhook: %d %s", r.Status, r.Body)
	}
	for _, topic := range webhooks.Topics {
		if r := b.post("/api/v1/events/trigger/", map[string]any{"topic": topic}); r.Status != 201 {
			t.Fatalf("trigger %s: %d %s", topic, r.Status, r.Body)
		}
	}
	w := b.wallet(t, "KES", "Hooked")
	b.deposit(t, b.settlement, "10.00")
	if r := b.transfer(b.settlement, w, "1.00"); r.Status != 200 {
		t.Fatalf("transfer: %d %s", r.Status, r.Body)
	}
	want := len(webhooks.Topics) + 1
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= want, fmt.Sprintf("%d of %d deliveries", len(got), want)
	})

	doc := strictWebhooks(t)
	mu.Lock()
	defer mu.Unlock()
	byTopic := map[string]int{}
	for _, req := range got {
		raw, _ := io.ReadAll(req.Body)
		var body struct {
			Topic string `json:"topic"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("a delivery body is not JSON: %v %s", err, raw)
			continue
		}
		byTopic[body.Topic]++
		item := doc.Webhooks[body.Topic]
		if item == nil || item.Post == nil {
			t.Errorf("a delivery of %q, which the document's webhooks do not name", body.Topic)
			continue
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		in := &openapi3filter.RequestValidationInput{Request: req,
			Route:   &routers.Route{Spec: doc, Path: "/", PathItem: item, Method: http.MethodPost, Operation: item.Post},
			Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		err := openapi3filter.ValidateRequest(context.Background(), in)
		if err != nil {
			t.Errorf("the %s delivery does not match webhooks.%s: %v\nbody: %s", body.Topic, body.Topic, err, raw)
		}
	}
	for _, topic := range webhooks.Topics {
		if byTopic[topic] == 0 {
			t.Errorf("no %s delivery arrived (%v)", topic, byTopic)
		}
	}
	if byTopic["wallet_transfer_event"] < 2 {
		t.Errorf("the intra transfer's wallet_transfer_event was not delivered (%v)", byTopic)
	}
}

// strictWebhooks is the served document with its object schemas closed.
func strictWebhooks(t *testing.T) *openapi3.T {
	t.Helper()
	srv, _ := servedDescription(t, "/api/v1/openapi.json")
	strict, err := strictDocument(srv.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(strict)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
