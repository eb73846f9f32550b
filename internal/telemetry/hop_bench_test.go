package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// discardExporter drops what the batch span processor hands it: the benchmarks price
// the spans on the request's path, not the export.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// benchmarkHop times one HTTP request on loopback through a transport and a route's
// handler, as a traced hop of a view is made (the worker's POST /observe, the broker's
// consume call), inside a span of the caller's when tp is set. handler and transport
// are the wrappers under test.
func benchmarkHop(b *testing.B, tp trace.TracerProvider, handler func(trace.TracerProvider, http.Handler) http.Handler, transport func(trace.TracerProvider, http.RoundTripper) http.RoundTripper) {
	mux := http.NewServeMux()
	mux.Handle(SpanCapture, handler(tp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(make([]byte, 1<<10))
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: transport(tp, http.DefaultTransport.(*http.Transport).Clone())}
	ctx, span := Tracer(tp).Start(b.Context(), SpanWorkerView)
	defer span.End()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/observe", http.NoBody)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// captureTransport is Transport as the worker's capture client has it.
func captureTransport(tp trace.TracerProvider, rt http.RoundTripper) http.RoundTripper {
	return Transport(tp, rt, SpanCapture)
}

// otelHandler and otelTransport are otelhttp's wrappers as they come, with the same
// options: the baseline that prices what Handler adds to them (shown, the request it
// shows otelhttp).
func otelHandler(tp trace.TracerProvider, h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "", options(tp)...)
}

func otelTransport(tp trace.TracerProvider, rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt, append(options(tp),
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return SpanCapture }))...)
}

// BenchmarkHop prices tracing on one HTTP hop: off (no wrapper) against on (a client
// and a server span, sampled, batched and dropped), with Agentfy's wrappers and with
// otelhttp's as they come.
func BenchmarkHop(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchmarkHop(b, nil, Handler, captureTransport) })
	for _, w := range []struct {
		name      string
		handler   func(trace.TracerProvider, http.Handler) http.Handler
		transport func(trace.TracerProvider, http.RoundTripper) http.RoundTripper
	}{{"on", Handler, captureTransport}, {"otelhttp", otelHandler, otelTransport}} {
		b.Run(w.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
			defer func() { _ = tp.Shutdown(context.WithoutCancel(b.Context())) }()
			benchmarkHop(b, tp, w.handler, w.transport)
		})
	}
}

// BenchmarkSpan prices one of Agentfy's own spans, sampled, with its attributes.
func BenchmarkSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	defer func() { _ = tp.Shutdown(context.WithoutCancel(b.Context())) }()
	tracer := Tracer(tp)
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracer.Start(b.Context(), SpanViewRequest, trace.WithAttributes(AttrAgentID.String("agent-scout"), AttrSessionID.String("s-1")))
		End(span, OutcomeOK, "")
	}
}
