package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of paysvc's spans.
const Name = "paysvc"

// on is whether a recording tracer provider is installed (Start, Use).
var on atomic.Bool

// On reports whether tracing is on. Hot paths ask it before any tracing work, so
// that with tracing off they pay one atomic load and allocate nothing.
func On() bool { return on.Load() }

// Tracer is paysvc's tracer from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// Config is what the standard OTEL_* variables say about traces. Only what
// decides whether to trace is read here; the exporter reads the rest of
// OTEL_EXPORTER_OTLP_* (headers, timeout, TLS), the SDK OTEL_TRACES_SAMPLER* and
// OTEL_BSP_*, and the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES,
// each from the process environment, as the OpenTelemetry specification says.
type Config struct {
	Disabled bool   // OTEL_SDK_DISABLED=true
	Exporter string // OTEL_TRACES_EXPORTER: "", "otlp" or "none"
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT: with OTEL_TRACES_EXPORTER unset, tracing is on
	// only when one of them is set.
	Endpoint string
	Protocol string // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL
}

// FromEnv reads Config; an exporter or protocol paysvc does not have is an error
// that names the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Disabled: strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true"),
		Exporter: strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))),
		Endpoint: firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
		Protocol: firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
	}
	switch c.Exporter {
	case "", "otlp", "none":
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: paysvc exports traces with otlp only (or none)", c.Exporter)
	}
	switch c.Protocol {
	case "", "http/protobuf", "grpc":
	default:
		// http/json is the one standard value left out: neither Go exporter speaks it,
		// and failing at start beats a process that silently exports nothing.
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: paysvc exports OTLP over http/protobuf or grpc only", c.Protocol)
	}
	return c, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// Enabled says whether the configuration asks for traces: not disabled, not
// OTEL_TRACES_EXPORTER=none, and either OTEL_TRACES_EXPORTER=otlp (the endpoint
// then defaults to localhost:4318) or an OTLP endpoint set.
func (c Config) Enabled() bool {
	if c.Disabled || c.Exporter == "none" {
		return false
	}
	return c.Exporter == "otlp" || c.Endpoint != ""
}

// The provider Start installed, shared by every service of the process (tests run
// several), and shut down when the last of them stops.
var (
	mu       sync.Mutex
	users    int
	provider *sdktrace.TracerProvider
)

// Start installs the OTLP exporter (HTTP, or gRPC when c.Protocol says so) as the global tracer provider when c
// asks for traces, and returns what stops it (flushing the spans still queued).
// When c does not, it installs nothing and stop does nothing.
func Start(ctx context.Context, c Config, instance string) (stop func(context.Context) error, err error) {
	if !c.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if provider == nil {
		exp, err := newExporter(ctx, c.Protocol)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over
		// paysvc's own name and instance id.
		res, err := resource.New(ctx,
			resource.WithAttributes(semconv.ServiceName("paysvc"), semconv.ServiceInstanceID(instance)),
			resource.WithTelemetrySDK(), resource.WithFromEnv())
		if err != nil && !errors.Is(err, resource.ErrPartialResource) {
			return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
		}
		provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(provider)
		on.Store(true)
	}
	users++
	var once sync.Once
	return func(ctx context.Context) error {
		var err error
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if users--; users > 0 {
				return
			}
			otel.SetTracerProvider(noop.NewTracerProvider())
			on.Store(false)
			err = provider.Shutdown(ctx)
			provider = nil
		})
		return err
	}, nil
}

// newExporter is the OTLP exporter for protocol; each reads the endpoint,
// headers, TLS (insecure, certificates) and timeout from OTEL_EXPORTER_OTLP_*
// itself, so paysvc honours them exactly as the OpenTelemetry specification says.
func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	if protocol == "grpc" {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

// Use installs tp as the global tracer provider and turns tracing on, for tests
// (the SDK's in-memory exporter); restore turns it off again.
func Use(tp trace.TracerProvider) (restore func()) {
	otel.SetTracerProvider(tp)
	on.Store(true)
	return func() {
		on.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
	}
}

// propagator is W3C Trace Context, whatever the global one is: the headers it
// writes are the contract between paysvc's own processes.
var propagator = propagation.TraceContext{}

// Header is the Kafka record header (and HTTP header) that carries the context.
const Header = "traceparent"

// TraceParent is the W3C traceparent of the span in ctx ("" if none).
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c oneHeader
	propagator.Inject(ctx, &c)
	return c.value
}

// WithTraceParent is ctx carrying the remote span context of a W3C traceparent
// (ctx unchanged if tp is empty or malformed).
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagator.Extract(ctx, &oneHeader{value: tp})
}

// oneHeader is a carrier of the traceparent alone (paysvc sets no tracestate).
type oneHeader struct{ value string }

func (c *oneHeader) Get(key string) string {
	if key == Header {
		return c.value
	}
	return ""
}

func (c *oneHeader) Set(key, value string) {
	if key == Header {
		c.value = value
	}
}

func (c *oneHeader) Keys() []string { return []string{Header} }

// TraceID is the trace id of the span in ctx ("" if none).
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// LogHandler adds trace_id (and span_id) to every record logged with a context
// that carries a span (slog's *Context methods), so a log line can be found from
// its trace and the other way round.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
