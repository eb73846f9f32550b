// Package traces tests a view's trace end to end: a real stack (two API replicas, NATS,
// Redis, a worker and a broker with Chromium) exporting its spans over OTLP to a real
// Jaeger v2 (servers.BuildJaeger's binary), read back from Jaeger's query API.
package traces

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/dev/servers"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

var (
	jaeger *testenv.Jaeger
	st     *stack.Stack        // its parts export their spans to jaeger
	client *stacktest.Client   // on st
	logs   = &testenv.Buffer{} // every log line of every part of st, at debug level
	// traceEnv is the OTEL_* environment the stack's parts read: the OTLP endpoint
	// alone, and a service name the stack must not let any part take (each keeps its
	// own in one process).
	traceEnv map[string]string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// Every test reads its spans back from the shared Jaeger.
	if testenv.SkipMainUnderShort("e2e/traces", testenv.NeedsJaeger) {
		return m.Run()
	}
	bin, err := servers.BuildJaeger(context.Background(), func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "agentfy-jaeger-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if jaeger, err = servers.RunJaeger(ctx, bin, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer jaeger.Stop()
	validator, err := oas.New(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	traceEnv = map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLPHTTP,
		"OTEL_SERVICE_NAME":           "one-name-for-all",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=test",
	}
	st, err = stacktest.StartShared(ctx, stack.Options{
		Log:    zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger(),
		Traces: func(name string) string { return traceEnv[name] },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start stack:", err)
		return 1
	}
	defer st.Close()
	client = &stacktest.Client{St: st, Validator: validator, Timeout: time.Minute}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "jaeger log (tail):\n%s\n", jaeger.LogTail())
	}
	return code
}
