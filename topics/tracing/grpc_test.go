package tracing_test

import (
	"context"
	"net"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"paysvc/topics/tracing"
)

// receiver is an OTLP/gRPC trace receiver, what a collector listens with on 4317.
type receiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (r *receiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, req.GetResourceSpans()...)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// With OTEL_EXPORTER_OTLP_PROTOCOL=grpc, Start exports over gRPC to the endpoint
// the standard variables name: a span reaches a real gRPC receiver with paysvc's
// service.name on its resource.
func TestStartExportsOverGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := &receiver{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, rcv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	env := map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://" + lis.Addr().String(),
		"OTEL_EXPORTER_OTLP_INSECURE":        "true",
		"OTEL_SERVICE_NAME":                  "",
		"OTEL_RESOURCE_ATTRIBUTES":           "",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := tracing.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop, err := tracing.Start(ctx, c, "grpc-test")
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.On() {
		t.Fatal("tracing.On() = false after Start")
	}
	_, span := tracing.Tracer().Start(ctx, "grpc export probe")
	span.End()
	if err := stop(ctx); err != nil { // Shutdown flushes the batch to the receiver
		t.Fatalf("stop: %v", err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var service string
	var names []string
	for _, rs := range rcv.spans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				names = append(names, s.GetName())
			}
		}
	}
	if service != "paysvc" {
		t.Errorf("service.name = %q, want paysvc", service)
	}
	if len(names) != 1 || names[0] != "grpc export probe" {
		t.Errorf("spans = %q, want [grpc export probe]", names)
	}
}
