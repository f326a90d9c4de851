package tracing_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics/tracing"
)

// One transfer, traced through the whole service (every role in one process, as
// servicetest runs it; the hops between roles are Kafka records and outbox rows
// all the same): the request's server span, the command's produce span, the
// engine's apply span, the relay's publish span and the dispatcher's delivery
// span are one trace, each the child of the one before, and the commit's span
// links to the apply span.
func TestTransferTracedFromRequestToWebhook(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(tracing.Use(tp))
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	m := env.Merchant("Traced")
	auth := servicetest.Bearer(m.SecretKey)

	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	if r := env.Do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": hook.URL + "/hook", "challenge": "trace-secret",
		"wallet_transfer_event": true}, auth...); r.Status != 201 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	var list struct{ Results []map[string]any }
	env.Do("GET", "/api/v1/wallets/", nil, auth...).JSON(t, &list)
	settlement := list.Results[0]["wallet_id"].(string)
	r := env.Do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "W"}, auth...)
	if r.Status != 201 {
		t.Fatalf("wallet: %d %s", r.Status, r.Body)
	}
	wallet := r.Map(t)["wallet_id"].(string)
	if r := env.Do("POST", fmt.Sprintf("/api/v1/sandbox/wallets/%s/deposit/", settlement), map[string]any{"amount": "10.00"}, auth...); r.Status != 200 {
		t.Fatalf("deposit: %d %s", r.Status, r.Body)
	}

	const requestID = "traced-transfer-1"
	r = env.Do("POST", fmt.Sprintf("/api/v1/wallets/%s/intra_transfer/", settlement),
		map[string]any{"wallet_id": wallet, "amount": "1.00", "narrative": "traced"}, append(auth, "X-Request-Id", requestID)...)
	if r.Status != 200 {
		t.Fatalf("transfer: %d %s", r.Status, r.Body)
	}

	// The request's span names the trace.
	var root tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if attr(s, "paysvc.request_id") == requestID {
			root = s
		}
	}
	if !root.SpanContext.IsValid() {
		t.Fatalf("no server span for request %s among %d spans", requestID, len(exp.GetSpans()))
	}
	traceID := root.SpanContext.TraceID()
	if root.SpanKind != trace.SpanKindServer || root.Parent.IsValid() || root.Name != "POST /api/v1/wallets/:wallet_id/intra_transfer" {
		t.Fatalf("server span: %s kind %v parent %v", root.Name, root.SpanKind, root.Parent)
	}

	// Wait for the webhook delivery of the transfer's event, in the same trace.
	var spans []tracetest.SpanStub
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		spans = spans[:0]
		delivered := false
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == traceID {
				spans = append(spans, s)
				delivered = delivered || strings.HasPrefix(s.Name, "deliver ") && attr(s, "paysvc.delivery.status") == "DELIVERED"
			}
		}
		return delivered, fmt.Sprintf("no delivered webhook span in trace %s; its spans: %s", traceID, names(spans))
	})
	mu.Lock()
	if len(got) == 0 || !strings.Contains(got[len(got)-1], "wallet_transfer_event") {
		t.Errorf("receiver got %q", got)
	}
	mu.Unlock()

	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	// Every span but the root has its parent in the trace, and the chain from a
	// delivery to the root is deliver <- publish <- apply <- produce <- request.
	for _, s := range spans {
		if s.SpanContext.SpanID() == root.SpanContext.SpanID() {
			continue
		}
		if _, ok := byID[s.Parent.SpanID()]; !ok {
			t.Errorf("span %q: parent %s not in the trace", s.Name, s.Parent.SpanID())
		}
	}
	want := []string{"deliver ", "publish ", "apply wallet.transfer", "produce paysvc.commands.v1", root.Name}
	var apply tracetest.SpanStub
	chains := 0
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "deliver ") {
			continue
		}
		chains++
		cur := s
		for i, w := range want {
			if !strings.HasPrefix(cur.Name, w) {
				t.Fatalf("step %d from the delivery: span %q, want %q (chain of %s)", i, cur.Name, w, names(spans))
			}
			if strings.HasPrefix(w, "apply ") {
				apply = cur
			}
			if i < len(want)-1 {
				cur = byID[cur.Parent.SpanID()]
			}
		}
	}
	if chains == 0 {
		t.Fatal("no delivery span")
	}
	// The batch's commit span (a root of its own: it commits many traces) links
	// to the command's apply span.
	var commit tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "commit batch" && linksTo(s, apply) {
			commit = s
		}
	}
	if !commit.SpanContext.IsValid() {
		t.Fatal("no commit span links to the transfer's apply span")
	}
	// Its PostgreSQL statement is a client span under it, linked to the apply
	// span too, naming the commit function and no SQL values.
	var db tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Parent.SpanID() == commit.SpanContext.SpanID() && strings.HasPrefix(s.Name, "db ") {
			db = s
		}
	}
	if db.Name != "db paysvc_commit_batches_v4" || db.SpanKind != trace.SpanKindClient || !linksTo(db, apply) {
		t.Fatalf("commit's db span: %q kind %v linked %v (spans under the commit: %s)", db.Name, db.SpanKind, linksTo(db, apply), names(exp.GetSpans()))
	}
	if attr(db, "db.system") != "postgresql" || attr(db, "db.operation.name") != "paysvc_commit_batches_v4" || attr(db, "paysvc.commands") == "" {
		t.Errorf("commit's db span attributes: %v", db.Attributes)
	}
	for _, a := range db.Attributes {
		if strings.Contains(a.Value.String(), "1.00") || strings.Contains(a.Value.String(), "traced") {
			t.Errorf("commit's db span carries a value: %s=%s", a.Key, a.Value.String())
		}
	}
	// A list request's read is a db span under the request's server span.
	listRead := false
	for _, s := range exp.GetSpans() {
		if s.Name == "db SELECT" && attr(s, "db.system") == "postgresql" && s.SpanKind == trace.SpanKindClient {
			for _, p := range exp.GetSpans() {
				listRead = listRead || p.SpanContext.SpanID() == s.Parent.SpanID() && p.Name == "GET /api/v1/wallets"
			}
		}
	}
	if !listRead {
		t.Errorf("no db span under the wallets list request: %s", names(exp.GetSpans()))
	}
	// The request's log line carries the trace id.
	if !strings.Contains(env.Logs.String(), `"trace_id":"`+traceID.String()+`"`) {
		t.Error("no log line carries the trace id")
	}
}

func linksTo(s, to tracetest.SpanStub) bool {
	for _, l := range s.Links {
		if l.SpanContext.SpanID() == to.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

func names(spans []tracetest.SpanStub) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "[%s %s<-%s] ", s.Name, s.SpanContext.SpanID(), s.Parent.SpanID())
	}
	return b.String()
}
