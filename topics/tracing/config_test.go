package tracing_test

import (
	"testing"

	"paysvc/topics/tracing"
)

// Tracing is off unless the standard variables ask for an OTLP exporter, and a
// variable paysvc cannot honour is refused, never ignored.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  bool
	}{
		{"Unset_Off", nil, false, false},
		{"Endpoint_On", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true, false},
		{"TracesEndpoint_On", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true, false},
		{"ExporterOTLP_On", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"ExporterNone_Off", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, false},
		{"SDKDisabled_Off", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, false},
		{"ExporterZipkin_Refused", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
		{"ProtocolGRPC_On", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, true, false},
		{"TracesProtocolGRPC_On", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, true, false},
		{"ProtocolJSON_Refused", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, true},
		{"ProtocolHTTP_On", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.FromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && c.Enabled() != tc.on {
				t.Fatalf("Enabled() = %v, want %v", c.Enabled(), tc.on)
			}
		})
	}
}
