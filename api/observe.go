package api

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	httpRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_http_requests_total",
		Help: "HTTP requests by route template, method and status.",
	}, []string{"route", "method", "status"})
	httpSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paysvc_http_request_duration_seconds",
		Help:    "HTTP request latency by route template, method and status.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method", "status"})
	commandsProduced = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_api_commands_produced_total",
		Help: "Commands produced to paysvc.commands.v1, by type and result (ok, error).",
	}, []string{"type", "result"})
	commandsWaiting = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_api_commands_in_flight",
		Help: "Commands produced and waiting for their reply on this instance.",
	})
	replyTimeouts = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_api_reply_timeouts_total",
		Help: "Writes whose reply did not arrive in time (answered from the stored reply, or 504).",
	})
	idempotentReplays = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_api_idempotent_replays_total",
		Help: "Responses replayed for a repeated Idempotency-Key.",
	})
	rateLimited = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_api_rate_limited_total",
		Help: "Requests refused with 429 by a rate limit (per key, per client address or the callbacks' budget).",
	})
)

// observe records metrics and one structured log line per request (requestlog.go).
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			s.handleError(err, c)
		}
		route := c.Path()
		if route == "" || route == "/*" {
			route = "unmatched"
		}
		status := c.Response().Status
		d := time.Since(start)
		m := httpMetricsFor(route, c.Request().Method, status)
		m.requests.Inc()
		m.seconds.Observe(d.Seconds())
		s.reqlog.record(c, s.clientIP(c), route, status, d)
		return nil
	}
}

// httpMetric is the resolved counter and histogram of one (route, method, status).
type httpMetric struct {
	requests prometheus.Counter
	seconds  prometheus.Observer
}

type httpMetricKey struct {
	route, method string
	status        int
}

// httpMetricCache keeps resolved children so a request does not hash its three
// labels twice and format its status (docs/benchmarks-history.md). Bounded: methods
// come from clients, and past the bound a request resolves its children as before.
var (
	httpMetricCache     sync.Map // httpMetricKey -> httpMetric
	httpMetricCacheSize atomic.Int64
)

const httpMetricCacheMax = 4096

func httpMetricsFor(route, method string, status int) httpMetric {
	k := httpMetricKey{route, method, status}
	if v, ok := httpMetricCache.Load(k); ok {
		return v.(httpMetric)
	}
	st := strconv.Itoa(status)
	m := httpMetric{requests: httpRequests.WithLabelValues(route, method, st), seconds: httpSeconds.WithLabelValues(route, method, st)}
	if httpMetricCacheSize.Load() < httpMetricCacheMax {
		if _, loaded := httpMetricCache.LoadOrStore(k, m); !loaded {
			httpMetricCacheSize.Add(1)
		}
	}
	return m
}

// commandMetric caches commandsProduced's children by (type, result), like
// httpMetricsFor; command types are the handlers' constants, a small set.
var commandMetricCache sync.Map // [2]string -> prometheus.Counter

func commandProduced(typ, result string) prometheus.Counter {
	k := [2]string{typ, result}
	if v, ok := commandMetricCache.Load(k); ok {
		return v.(prometheus.Counter)
	}
	ctr := commandsProduced.WithLabelValues(typ, result)
	commandMetricCache.Store(k, ctr)
	return ctr
}
