package api

import (
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"paysvc/api/edge"
	"paysvc/topics/tracing"
)

// traceRequest opens the request's server span, the root of the trace that its
// command, the engine batch applying it, its events and their webhook deliveries
// continue (package tracing). It runs after routing, so the span is named by the
// route template, never by a path holding ids.
//
// A client's own traceparent is linked, not continued: the API is public, and a
// caller must not choose the trace ids (or the sampling) of paysvc's traces.
func (s *Server) traceRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !tracing.On() {
			return next(c)
		}
		req := c.Request()
		route := c.Path()
		if route == "" || route == "/*" {
			route = "unmatched"
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot(),
			trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route),
				attribute.String("paysvc.request_id", edge.RequestID(c)))}
		if tp := req.Header.Get(tracing.Header); tp != "" {
			if sc := trace.SpanContextFromContext(tracing.WithTraceParent(req.Context(), tp)); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
		}
		ctx, span := tracing.Tracer().Start(req.Context(), req.Method+" "+route, opts...)
		defer span.End()
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if p := edge.PrincipalOf(c); p != nil {
			span.SetAttributes(attribute.String("paysvc.merchant_id", p.MerchantID))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		return err
	}
}
