package telemetry

import (
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// sdkGoroutines counts the goroutines running code of the OpenTelemetry SDK (the batch
// span processor's loop, the exporter's).
func sdkGoroutines(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	return strings.Count(b.String(), "go.opentelemetry.io/otel/sdk/trace.")
}

func TestSetupOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"no variables", nil},
		{"service and sampler only", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := sdkGoroutines(t)
			p, err := Setup(t.Context(), Config{Service: ServiceAPI, Getenv: envOf(tc.env)})
			if err != nil {
				t.Fatal(err)
			}
			if p.Enabled() || p.TracerProvider() != nil {
				t.Fatal("tracing is on without an endpoint or exporter")
			}
			if after := sdkGoroutines(t); after != before {
				t.Fatalf("SDK goroutines %d → %d with tracing off", before, after)
			}
			if err := p.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSetupUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}},
		{"protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}},
		{"sampler", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "sometimes"}},
		{"sampler arg", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}},
		{"resource", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_RESOURCE_ATTRIBUTES": "novalue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Setup(t.Context(), Config{Service: ServiceAPI, Getenv: envOf(tc.env)})
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("err = %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestResourceServiceName(t *testing.T) {
	env := envOf(map[string]string{"OTEL_SERVICE_NAME": "platform-name", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod,team=a%20b"})
	for _, tc := range []struct {
		name   string
		shared bool
		want   string
	}{
		{"own process: OTEL_SERVICE_NAME wins", false, "platform-name"},
		{"shared process: the part's name", true, ServiceWorker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := resourceOf(Config{Service: ServiceWorker, Instance: "w1", Shared: tc.shared}, func(k string) string { return strings.TrimSpace(env(k)) })
			if err != nil {
				t.Fatal(err)
			}
			got := map[attribute.Key]string{}
			for _, kv := range res.Attributes() {
				got[kv.Key] = kv.Value.String()
			}
			if got[semconv.ServiceNameKey] != tc.want || got[semconv.ServiceInstanceIDKey] != "w1" || got["team"] != "a b" || got["deployment.environment.name"] != "prod" {
				t.Fatalf("resource %v", got)
			}
		})
	}
}

func TestSamplerParentBasedByDefault(t *testing.T) {
	s, err := samplerOf("", "")
	if err != nil {
		t.Fatal(err)
	}
	// A parent that was not sampled keeps its children out, one that was keeps them in.
	for _, sampled := range []bool{false, true} {
		flags := trace.TraceFlags(0)
		if sampled {
			flags = trace.FlagsSampled
		}
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: flags, Remote: true})
		res := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: trace.ContextWithRemoteSpanContext(context.Background(), parent), TraceID: parent.TraceID(), Name: "x"})
		if got := res.Decision == sdktrace.RecordAndSample; got != sampled {
			t.Fatalf("parent sampled %v: child sampled %v", sampled, got)
		}
	}
}

func TestTraceResponse(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for _, tc := range []struct {
		name  string
		flags trace.TraceFlags
		want  string
	}{
		{"sampled", trace.FlagsSampled, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"not sampled", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: tc.flags}))
			if got := TraceResponse(ctx); got != tc.want {
				t.Fatalf("TraceResponse = %q, want %q", got, tc.want)
			}
			if got := TraceID(ctx); got != tid.String() {
				t.Fatalf("TraceID = %q", got)
			}
		})
	}
	if TraceResponse(context.Background()) != "" || TraceID(context.Background()) != "" {
		t.Fatal("a context without a span has a trace")
	}
}

// A JSON-RPC call's _meta carries the caller's span to the callee, and nothing when
// the caller has none (tracing off).
func TestRPCMeta(t *testing.T) {
	if m := RPCMeta(t.Context()); m != nil {
		t.Errorf("_meta %+v without a span", m)
	}
	if ctx := RPCContext(t.Context(), nil); trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("a span context from no _meta")
	}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.WithoutCancel(t.Context())) })
	ctx, span := Tracer(tp).Start(t.Context(), SpanViewRelay)
	defer span.End()
	m := RPCMeta(ctx)
	if m == nil || m.TraceParent != "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01" {
		t.Fatalf("_meta %+v, want the relay's span", m)
	}
	got := trace.SpanContextFromContext(RPCContext(t.Context(), m))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("the callee's parent %v, want the caller's span", got)
	}
}
