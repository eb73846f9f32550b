package telemetry_test

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// sdkGoroutines counts the goroutines running code of the OpenTelemetry SDK.
func sdkGoroutines(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	return strings.Count(b.String(), "go.opentelemetry.io/otel/sdk/trace.")
}

func TestSetupOn(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			before := sdkGoroutines(t)
			p, err := telemetry.Setup(t.Context(), telemetry.Config{Service: telemetry.ServiceBroker, Getenv: envOf(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
			})})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Enabled() || p.TracerProvider() == nil {
				t.Fatal("tracing is off with an endpoint")
			}
			testenv.WaitFor(t, 5*time.Second, "the batch span processor's goroutine", func() bool { return sdkGoroutines(t) > before })
			ctx, cancel := context.WithTimeout(t.Context(), telemetry.ShutdownTimeout)
			defer cancel()
			_ = p.Shutdown(ctx) // nothing listens on port 9: the export may fail, within the deadline
		})
	}
}
