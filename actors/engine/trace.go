package engine

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/tracing"
)

// A command's trace goes on in the engine as one short span per applied command,
// the child of the API's produce span (the record's traceparent header), and the
// events the command wrote carry that span's context in the outbox (storage
// OutboxEvent.TraceParent) to the relay. A batch commits many commands of many
// traces at once, so its commit span is a root of its own, linked to each
// command's span. With tracing off none of this runs: applyBatch asks On() once
// per command and allocates nothing for it.

// traceApply starts the span of one command's apply; nil (and ctx unchanged) when
// tracing is off.
func (e *Engine) traceApply(ctx context.Context, p *partition, c *topics.Command, rec *kgo.Record) (context.Context, trace.Span) {
	if !tracing.On() {
		return ctx, nil
	}
	ctx = tracing.FromRecord(ctx, rec)
	return tracing.Tracer().Start(ctx, "apply "+c.Type, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"), attribute.String("messaging.destination.name", e.cfg.Namespace.Logical(rec.Topic)),
			attribute.Int("messaging.destination.partition.id", int(p.id)), attribute.Int64("messaging.kafka.offset", rec.Offset),
			attribute.String("paysvc.command.id", c.ID), attribute.String("paysvc.command.type", c.Type),
			attribute.String("paysvc.merchant_id", c.MerchantID)))
}

// endApply ends a command's span: the events it wrote take its context, and the
// batch's links (returned) take the span.
func endApply(ctx context.Context, span trace.Span, events []storage.OutboxEvent, reply topics.Reply, refused bool, err error, links []trace.Link) []trace.Link {
	if len(events) > 0 {
		tp := tracing.TraceParent(ctx)
		for i := range events {
			events[i].TraceParent = tp
		}
	}
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "failed" // the batch fails with it
		span.SetStatus(codes.Error, err.Error())
	case refused:
		outcome = "refused"
	case reply.Error != nil:
		outcome = "rejected"
		span.SetAttributes(attribute.String("paysvc.reply.code", reply.Error.Code))
	}
	span.SetAttributes(attribute.String("paysvc.command.outcome", outcome), attribute.Int("paysvc.events", len(events)))
	span.End()
	return append(links, trace.Link{SpanContext: span.SpanContext()})
}

// traceCommit starts the span of one commit (nil when tracing is off), linked to
// the span of every command it commits.
func traceCommit(ctx context.Context, prs []*prepared) (context.Context, trace.Span) {
	if !tracing.On() {
		return ctx, nil
	}
	var links []trace.Link
	parts := make([]string, 0, len(prs))
	for _, pr := range prs {
		links = append(links, pr.links...)
		parts = append(parts, strconv.Itoa(int(pr.batch.Partition)))
	}
	return tracing.Tracer().Start(ctx, "commit batch", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.StringSlice("paysvc.partitions", parts), attribute.Int("paysvc.commands", len(links))))
}
