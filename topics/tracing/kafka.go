package tracing

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordHeader is the record header of the context in ctx, and false when ctx
// carries no span.
func RecordHeader(ctx context.Context) (kgo.RecordHeader, bool) {
	tp := TraceParent(ctx)
	return kgo.RecordHeader{Key: Header, Value: []byte(tp)}, tp != ""
}

// FromRecord is ctx carrying the remote span context of the record's
// traceparent header, if it has one.
func FromRecord(ctx context.Context, r *kgo.Record) context.Context {
	return WithTraceParent(ctx, HeaderValue(r))
}

// HeaderValue is the record's traceparent header ("" if none).
func HeaderValue(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == Header {
			return string(h.Value)
		}
	}
	return ""
}
