package tracing

import (
	"context"
	"testing"
)

// With tracing off, a database call's span costs one atomic load: DBSpan and
// BatchDBSpan allocate nothing and hand back no span.
func TestDBSpanOffAllocatesNothing(t *testing.T) {
	if On() {
		t.Fatal("tracing is on")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, span := DBSpan(ctx, "SELECT"); span != nil {
			t.Fatal("a span with tracing off")
		}
		if _, span := BatchDBSpan(ctx, "paysvc_commit_batches_v3", 3); span != nil {
			t.Fatal("a batch span with tracing off")
		}
	})
	if allocs != 0 {
		t.Fatalf("DBSpan off allocates %v times per call", allocs)
	}
}
