package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"paysvc/api"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage/storagetest"
)

// requestLines are the "request" records the handler wrote to sink.
func requestLines(sink *servicetest.LogBuffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(sink.String()), "\n") {
		var m map[string]any
		if l != "" && json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

func sampledTotal(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "paysvc_api_request_logs_sampled_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// Every request is a line at info with what an SRE filters on; a storm of 4xx is
// all in the log even past the rate at which successful requests are sampled.
func TestRequestLog(t *testing.T) {
	schema := storagetest.New(t)
	var sink servicetest.LogBuffer
	srv := api.New(api.Config{RequestLogRate: 2}, api.Deps{DB: schema.DB, Log: slog.New(slog.NewJSONHandler(&sink, nil))})
	before := sampledTotal(t)

	const n = 6
	for range n {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/wallets/", nil)
		req.Header.Set("Authorization", "Bearer ISSecretKey_test_0123456789abcdef0123456789abcdef")
		req.RemoteAddr = "198.51.100.7:40000"
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("unknown key: %d %s", rec.Code, rec.Body)
		}
	}
	for range n {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("healthz: %d %s", rec.Code, rec.Body)
		}
	}

	var unauthorized, healthy int
	for _, l := range requestLines(&sink) {
		for _, k := range []string{"request_id", "method", "route", "status", "duration_ms", "client"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %v has no %s", l, k)
			}
		}
		if l["level"] != "INFO" {
			t.Errorf("line %v: level %v, want INFO", l, l["level"])
		}
		switch l["status"] {
		case float64(401):
			unauthorized++
			if l["client"] != "198.51.100.7" || l["route"] != "/api/v1/wallets" {
				t.Errorf("401 line %v: want client 198.51.100.7 and the route", l)
			}
		case float64(200):
			healthy++
		}
	}
	if unauthorized != n {
		t.Errorf("%d of %d refused requests logged; every 4xx must be", unauthorized, n)
	}
	// A burst of 2 at 2 a second: the six quick successes leave at most a few lines.
	if healthy == 0 || healthy >= n {
		t.Errorf("%d of %d successful requests logged at a rate of 2/s; want some, sampled", healthy, n)
	}
	if got := sampledTotal(t) - before; got != float64(n-healthy) {
		t.Errorf("sampled counter moved by %v, want %d (the successes not logged)", got, n-healthy)
	}
	if strings.Contains(sink.String(), "ISSecretKey_test_0123") {
		t.Error("the log holds the key the request sent")
	}
}
