package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DBSpan starts the client span of one PostgreSQL call, named "db <operation>",
// the child of the span in ctx; nil (and ctx unchanged) when tracing is off, so
// a caller asks nothing else and allocates nothing. The span carries what the
// call is, never its SQL values: they hold amounts, phone numbers and secrets.
// A caller adds the command id(s) the call serves (CommandAttr, CommandsAttr).
func DBSpan(ctx context.Context, operation string) (context.Context, trace.Span) {
	if !On() {
		return ctx, nil
	}
	return Tracer().Start(ctx, "db "+operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(linksOf(ctx)...),
		trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.String("db.operation.name", operation)))
}

// EndDB ends a database span (nil: tracing off) with err's outcome: an error
// status without the driver's message, which may quote the statement's values.
func EndDB(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "database call failed")
	}
	span.End()
}

// CommandAttr is the id of the one command a database call serves.
func CommandAttr(id string) attribute.KeyValue { return attribute.String("paysvc.command_id", id) }

// CommandsAttr is how many commands a batch's database call serves; the span's
// links (the parent's, see linksOf) name each one's apply span.
func CommandsAttr(n int) attribute.KeyValue { return attribute.Int("paysvc.commands", n) }

// linksOf is the links of the recording span in ctx: a batch's commit span links
// each command's apply span, and its database span links them too, so a
// command's trace leads to the statement that made it durable without the
// storage layer knowing about the engine's spans.
func linksOf(ctx context.Context) []trace.Link {
	ro, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
	if !ok {
		return nil
	}
	ls := ro.Links()
	out := make([]trace.Link, len(ls))
	for i, l := range ls {
		out[i] = trace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes}
	}
	return out
}
