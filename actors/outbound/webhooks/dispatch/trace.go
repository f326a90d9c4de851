package dispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"paysvc/storage"
	"paysvc/topics/tracing"
)

// tracedAttempt is attempt inside a delivery span, the last of the trace that
// began with the merchant's request: its parent is the relay's publish span, from
// the event record's traceparent header. A delivery without a context (tracing
// off, or claimed from the table) is attempted as it is. The trace context is not
// sent to the merchant's endpoint: the request is signed as the spec defines it,
// and a trace id is paysvc's own business.
func (d *Dispatcher) tracedAttempt(ctx context.Context, dl storage.Delivery, until time.Time) (storage.Outcome, bool) {
	if dl.TraceParent == "" || !tracing.On() {
		return d.attempt(ctx, dl, until)
	}
	ctx, span := tracing.Tracer().Start(tracing.WithTraceParent(ctx, dl.TraceParent), "deliver "+dl.Topic,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("paysvc.event.id", dl.EventID), attribute.String("paysvc.webhook.id", dl.WebhookID),
			attribute.String("paysvc.merchant_id", dl.MerchantID), attribute.Int("paysvc.delivery.attempt", dl.Attempts+1)))
	defer span.End()
	o, ok := d.attempt(ctx, dl, until)
	span.SetAttributes(attribute.String("paysvc.delivery.status", o.Status))
	if o.HTTPStatus != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", *o.HTTPStatus))
	}
	if o.Status != "DELIVERED" {
		span.SetStatus(codes.Error, o.Status)
	}
	return o, ok
}
