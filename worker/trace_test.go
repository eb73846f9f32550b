package worker

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// A traced view: the worker's span continues the trace its params' _meta carries, its
// request to /observe carries the trace on in its traceparent header (never in the
// body, which stays the request id alone), and each span names the outcome.
func TestCaptureContinuesTheTrace(t *testing.T) {
	t.Parallel()
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00f067aa0ba902b7"
	)
	for _, tt := range []struct {
		name, reason string
		handler      http.HandlerFunc
	}{
		{"frame", "", answer(http.StatusOK, `{"envelope":{}}`)},
		{"broker busy", wire.ReasonBusy, answer(http.StatusServiceUnavailable, `{"error":{"code":"busy","message":"m"}}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			headers := make(chan string, 1)
			b := startBroker(t, func(w http.ResponseWriter, r *http.Request) {
				headers <- r.Header.Get("traceparent")
				tt.handler(w, r)
			})
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			w, err := New(Config{APIURLs: []string{"http://127.0.0.1:1"}, Pass: "wp_test", IPCDir: b.dir, Log: testenv.Logger(t), Tracer: tp})
			if err != nil {
				t.Fatal(err)
			}
			params, _ := json.Marshal(jsonrpc.ViewParams{RequestID: requestID, Meta: &jsonrpc.Meta{TraceParent: "00-" + traceID + "-" + parent + "-01"}})
			got, err := w.capture(testenv.Context(t, 10*time.Second), 7, params)
			if err != nil {
				t.Fatal(err)
			}
			if m := parseResponse(t, got, 7); (m.Error == nil) != (tt.reason == "") {
				t.Fatalf("answer %s", got)
			}
			if r := b.seen(); len(r) != 1 || string(r[0].body) != `{"requestId":"`+requestID+`"}` {
				t.Fatalf("broker saw %+v, want the request id alone", r)
			}
			ended := spans.Ended()
			if len(ended) != 2 {
				t.Fatalf("%d spans, want the view's and its request to /capture", len(ended))
			}
			byName := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range ended {
				byName[s.Name()] = s
			}
			view, capture := byName[telemetry.SpanWorkerView], byName["POST "+wire.CapturePath]
			if view == nil || capture == nil {
				t.Fatalf("spans %v", byName)
			}
			if view.SpanContext().TraceID().String() != traceID || view.Parent().SpanID().String() != parent || view.SpanKind() != trace.SpanKindServer {
				t.Errorf("view span in trace %s under %s, want %s under %s", view.SpanContext().TraceID(), view.Parent().SpanID(), traceID, parent)
			}
			if capture.Parent().SpanID() != view.SpanContext().SpanID() || capture.SpanKind() != trace.SpanKindClient {
				t.Errorf("the capture span under %s, want under the view's %s", capture.Parent().SpanID(), view.SpanContext().SpanID())
			}
			if want := "00-" + traceID + "-" + capture.SpanContext().SpanID().String() + "-01"; <-headers != want {
				t.Errorf("broker's traceparent is not the capture span's %s", want)
			}
			attrs := map[string]string{}
			for _, kv := range view.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			wantOutcome := telemetry.OutcomeOK
			if tt.reason != "" {
				wantOutcome = telemetry.OutcomeUnavailable
			}
			if attrs[string(telemetry.AttrOutcome)] != wantOutcome || attrs[string(telemetry.AttrReason)] != tt.reason {
				t.Errorf("view span attributes %v, want outcome %s reason %q", attrs, wantOutcome, tt.reason)
			}
		})
	}
}

// Without a tracer the request to /observe carries no trace context, and the params'
// _meta changes nothing.
func TestCaptureUntraced(t *testing.T) {
	t.Parallel()
	headers := make(chan string, 1)
	b := startBroker(t, func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Get("traceparent")
		answer(http.StatusOK, `{"envelope":{}}`)(w, r)
	})
	w := newWorker(t, b.dir)
	params, _ := json.Marshal(jsonrpc.ViewParams{RequestID: requestID, Meta: &jsonrpc.Meta{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	got, err := w.capture(testenv.Context(t, 10*time.Second), 7, params)
	if err != nil {
		t.Fatal(err)
	}
	if m := parseResponse(t, got, 7); m.Error != nil {
		t.Fatalf("answer %s", got)
	}
	// Tracing off, the transport is the plain one: nothing is injected.
	if h := <-headers; h != "" {
		t.Errorf("traceparent %q with tracing off", h)
	}
}
