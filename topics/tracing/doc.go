// Package tracing is paysvc's OpenTelemetry tracing: one trace follows a request
// from the HTTP edge through its command in the Kafka command log, the engine
// batch that applied it, the outbox relay's publish of its events and the webhook
// dispatcher's delivery of each event.
//
// It is off unless the standard OTEL_* variables ask for an exporter (FromEnv):
// OTLP over HTTP or gRPC. PostgreSQL calls get client spans of their own (DBSpan)
// that say what the call is and never its values.
// Off, nothing is installed: the global tracer provider stays OpenTelemetry's
// no-op, and every hot path asks On() (one atomic load) before doing any tracing
// work at all, so the engine's hot path allocates nothing for it
// (actors/engine/trace_internal_test.go counts it).
//
// The context crosses process boundaries as a W3C traceparent: in a Kafka
// record's "traceparent" header (commands, events), and in the outbox row, which
// keeps each event's traceparent between the engine's commit and the relay's
// publish (migration 0048). Log lines written with a context carry its trace id
// (LogHandler).
//
// It lives beside the topics because the trace context travels in the commands' and
// events' record headers; like the topics, it imports no other layer, so every layer
// may use it.
package tracing
