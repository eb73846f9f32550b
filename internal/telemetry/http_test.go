package telemetry_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/internal/telemetry"
)

const hopRoute = "POST /observe"

// route traces POST /observe and nothing else, as the broker does.
func route(r *http.Request) string {
	if r.Method == http.MethodPost && r.URL.Path == "/observe" {
		return hopRoute
	}
	return ""
}

func recorded(t *testing.T) (*tracetest.SpanRecorder, trace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return rec, tp
}

func attrsOf(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// One traced hop over loopback, Transport to Handler: a client span and a server span
// beneath it, in the caller's trace, each with the method and the status code, the
// traceparent on the wire being the client span's, and no URL, peer or user agent.
func TestTracedHop(t *testing.T) {
	for _, tt := range []struct {
		status      int
		serverError bool // a server span is an error for a 5xx only
		clientError bool // a client span for a 4xx too
	}{{http.StatusOK, false, false}, {http.StatusNotFound, false, true}, {http.StatusServiceUnavailable, true, true}} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			rec, tp := recorded(t)
			traceparents := make(chan string, 1)
			srv := httptest.NewServer(telemetry.Handler(tp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				traceparents <- r.Header.Get("traceparent")
				if !trace.SpanFromContext(r.Context()).IsRecording() {
					t.Error("the handler's context has no recording span")
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, `{"page":"secret"}`)
			}), route))
			defer srv.Close()
			hc := &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport.(*http.Transport).Clone(), route)}

			ctx, parent := telemetry.Tracer(tp).Start(t.Context(), "caller")
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/observe?agent=x", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("User-Agent", "ua")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if req.Header.Get("traceparent") != "" {
				t.Error("Transport changed the caller's request header")
			}
			// The client span lasts until the body is read.
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindClient {
					t.Error("the client span ended before its answer's body was read")
				}
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != `{"page":"secret"}` {
				t.Errorf("body %q", b)
			}
			_ = resp.Body.Close()
			parent.End()

			var client, server sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				switch s.SpanKind() {
				case trace.SpanKindClient:
					if client != nil {
						t.Error("two client spans")
					}
					client = s
				case trace.SpanKindServer:
					server = s
				}
			}
			if client == nil || server == nil {
				t.Fatalf("spans %v", rec.Ended())
			}
			if client.Name() != hopRoute || server.Name() != hopRoute {
				t.Errorf("span names %q, %q", client.Name(), server.Name())
			}
			if client.Parent().SpanID() != parent.SpanContext().SpanID() || server.Parent().SpanID() != client.SpanContext().SpanID() ||
				server.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Error("the spans are not caller > client > server in one trace")
			}
			if want := "00-" + client.SpanContext().TraceID().String() + "-" + client.SpanContext().SpanID().String() + "-01"; <-traceparents != want {
				t.Errorf("traceparent on the wire is not the client span's %s", want)
			}
			for _, s := range []sdktrace.ReadOnlySpan{client, server} {
				want := map[string]string{"http.request.method": "POST", "http.response.status_code": strconv.Itoa(tt.status)}
				if got := attrsOf(s); len(got) != len(want) || got["http.request.method"] != want["http.request.method"] || got["http.response.status_code"] != want["http.response.status_code"] {
					t.Errorf("%s span attributes %v, want exactly %v", s.SpanKind(), got, want)
				}
			}
			if (server.Status().Code == codes.Error) != tt.serverError || (client.Status().Code == codes.Error) != tt.clientError {
				t.Errorf("error status: server %v, client %v", server.Status(), client.Status())
			}
		})
	}
}

// A request to a route that is not traced gets no span and no traceparent; nor does any
// request with tracing off (a nil provider: the wrappers are the handler and transport
// themselves).
func TestUntracedRequest(t *testing.T) {
	rec, tp := recorded(t)
	traceparents := make(chan string, 1)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents <- r.Header.Get("traceparent")
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(telemetry.Handler(tp, inner, route))
	defer srv.Close()
	client := &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport, route)}
	ctx, parent := telemetry.Tracer(tp).Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/healthz", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	parent.End()
	if h := <-traceparents; h != "" {
		t.Errorf("traceparent %q on an untraced route", h)
	}
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans, want the caller's alone", n)
	}
	if telemetry.Transport(nil, http.DefaultTransport, route) != http.DefaultTransport {
		t.Error("Transport wraps with tracing off")
	}
	if h := (*noContent)(nil); telemetry.Handler(nil, h, route) != http.Handler(h) {
		t.Error("Handler wraps with tracing off")
	}
}

// A round trip that fails ends its span at once, as an error; one whose body is closed
// unread ends it at the close, once.
func TestTransportEndsItsSpan(t *testing.T) {
	rec, tp := recorded(t)
	failing := telemetry.Transport(tp, roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("dial unix /run/broker.sock: connection refused")
	}), route)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://broker/observe", http.NoBody)
	resp, err := failing.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("no error")
	}
	if n := len(rec.Ended()); n != 1 || rec.Ended()[0].Status().Code != codes.Error {
		t.Fatalf("%d spans after a failed round trip, want one error span", n)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, 64<<10))
	}))
	defer srv.Close()
	rt := telemetry.Transport(tp, http.DefaultTransport, route)
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/observe", http.NoBody)
	resp, err = rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans before the body is closed", n)
	}
	_ = resp.Body.Close()
	_ = resp.Body.Close()
	if n := len(rec.Ended()); n != 2 {
		t.Errorf("%d spans after the body is closed twice, want 2", n)
	}
}

// noContent is a comparable handler, to see Handler return it as it is.
type noContent struct{}

func (*noContent) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
