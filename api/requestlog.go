package api

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"golang.org/x/time/rate"

	"paysvc/api/edge"
)

var requestLogsSampled = promauto.NewCounter(prometheus.CounterOpts{
	Name: "paysvc_api_request_logs_sampled_total",
	Help: "Successful requests not logged because the instance was past PAYSVC_REQUEST_LOG_RATE lines per second (errors and slow requests are always logged).",
})

// requestLog writes one line per request at info: method, route, status,
// latency, client address, merchant and request id, so a storm of 4xx from a
// broken client or an attack is in the log and not only in the metrics. Past
// perSecond lines a second on this instance, successful requests are sampled
// out (and counted); a 4xx, a 5xx and a request slower than a second are always
// written, whatever the rate. Headers and bodies are never logged, so no key is.
type requestLog struct {
	log    *slog.Logger
	budget *rate.Limiter // nil: every request is logged
}

func newRequestLog(log *slog.Logger, perSecond float64) *requestLog {
	l := &requestLog{log: log}
	if perSecond > 0 {
		l.budget = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))
	}
	return l
}

// slow is a request always worth a line.
const slowRequest = time.Second

func (l *requestLog) record(c echo.Context, client, route string, status int, d time.Duration) {
	ctx := c.Request().Context()
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	if !l.log.Enabled(ctx, level) {
		return
	}
	if status < 400 && d < slowRequest && l.budget != nil && !l.budget.Allow() {
		requestLogsSampled.Inc()
		return
	}
	attrs := []slog.Attr{slog.String("request_id", edge.RequestID(c)), slog.String("method", c.Request().Method),
		slog.String("route", route), slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("client", client)}
	if p := edge.PrincipalOf(c); p != nil {
		attrs = append(attrs, slog.String("merchant_id", p.MerchantID))
	}
	// With the request's context: its trace id goes on the line (tracing.LogHandler).
	l.log.LogAttrs(ctx, level, "request", attrs...)
}
