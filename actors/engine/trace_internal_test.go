package engine

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"paysvc/topics"
	"paysvc/topics/tracing"
)

// The engine applies ~10k commands/s: with tracing off, a command's tracing
// (traceApply, and endApply only behind its span) must cost no allocation. With
// it on the same call allocates, which shows the measure can see one.
func TestTraceApplyOffAllocatesNothing(t *testing.T) {
	e := &Engine{}
	p := newPartition(0, 1, 0)
	c := &topics.Command{ID: "c1", Type: topics.CmdWalletTransfer, MerchantID: "m1"}
	rec := &kgo.Record{Topic: topics.CommandsTopic, Headers: []kgo.RecordHeader{{Key: tracing.Header,
		Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	ctx := context.Background()
	apply := func() {
		actx, span := e.traceApply(ctx, p, c, rec)
		if span != nil {
			endApply(actx, span, nil, topics.Reply{}, false, nil, nil)
		}
	}
	if tracing.On() {
		t.Fatal("tracing is on in a process that installed nothing")
	}
	if n := testing.AllocsPerRun(1000, apply); n != 0 {
		t.Fatalf("tracing off: %.1f allocations per command, want 0", n)
	}
	restore := tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter())))
	defer restore()
	if n := testing.AllocsPerRun(100, apply); n == 0 {
		t.Fatal("tracing on: no allocation measured; the measure sees nothing")
	}
}
