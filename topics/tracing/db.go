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
// A caller adds the id of the command the call serves (CommandAttr).
func DBSpan(ctx context.Context, operation string) (context.Context, trace.Span) {
	if !On() {
		return ctx, nil
	}
	return Tracer().Start(ctx, "db "+operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.String("db.operation.name", operation)))
}

// BatchDBSpan is DBSpan for a call that commits a batch of commands: it counts
// them and takes the links of the span in ctx, the engine's commit span, which
// link each command's apply span.
func BatchDBSpan(ctx context.Context, operation string, commands int) (context.Context, trace.Span) {
	if !On() {
		return ctx, nil
	}
	links := linksOf(ctx)
	ctx, span := DBSpan(ctx, operation)
	for _, l := range links {
		span.AddLink(l)
	}
	span.SetAttributes(attribute.Int("paysvc.commands", commands))
	return ctx, span
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
