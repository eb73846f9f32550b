package testenv

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/dev/servers"
	"github.com/agentfy/agentfy/internal/telemetry"
)

// TestJaegerBinary builds (or finds) the Jaeger binary of the pinned release.
func TestJaegerBinary(t *testing.T) {
	bin := JaegerBinary(t)
	dir, err := servers.ToolDir("jaeger")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod")) //nolint:gosec // the tool module's own file
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/jaegertracing/jaeger " + JaegerVersion; !strings.Contains(string(gomod), want) {
		t.Errorf("internal/tools/jaeger/go.mod does not require %s", want)
	}
	// Static, as Jaeger's releases are: the compose stack's stand-in image runs it on
	// any base, with no C library.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the jaeger binary is dynamically linked (it names a program interpreter)")
		}
	}
	out, err := exec.CommandContext(Context(t, 30*time.Second), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("jaeger version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), JaegerVersion) {
		t.Errorf("jaeger version does not say %s:\n%s", JaegerVersion, out)
	}
}

// TestStartJaeger: a span exported over OTLP, by HTTP and by gRPC, comes back from the
// query API as one trace of one span, with its service and attributes.
func TestStartJaeger(t *testing.T) {
	j := StartJaeger(t)
	for _, tc := range []struct{ protocol, endpoint string }{
		{"http/protobuf", j.OTLPHTTP},
		{"grpc", j.OTLPGRPC},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			ctx := Context(t, 30*time.Second)
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": tc.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": tc.protocol}
			p, err := telemetry.Setup(ctx, telemetry.Config{Service: telemetry.ServiceBroker, Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			_, span := telemetry.Tracer(p.TracerProvider()).Start(ctx, "probe "+tc.protocol)
			span.SetAttributes(telemetry.AttrSessionID.String("s-1"))
			span.End()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			id := span.SpanContext().TraceID().String()
			var tr JaegerTrace
			WaitFor(t, 10*time.Second, "the span in Jaeger", func() bool {
				tr, err = j.Trace(ctx, id)
				if err != nil && !errors.Is(err, ErrTraceNotFound) {
					t.Fatal(err)
				}
				return err == nil
			})
			if len(tr.Spans) != 1 {
				t.Fatalf("%d spans, want 1", len(tr.Spans))
			}
			s := tr.Spans[0]
			if s.OperationName != "probe "+tc.protocol || tr.Service(s) != telemetry.ServiceBroker || s.Tag(string(telemetry.AttrSessionID)) != "s-1" {
				t.Fatalf("span %+v of %s", s, tr.Service(s))
			}
		})
	}
}
