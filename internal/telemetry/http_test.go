package telemetry_test

import (
	"crypto/rand"
	"errors"
	"fmt"
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

// newOutsider is a trace context from outside the deployment: a trace and a parent span
// of the outsider's choosing, and a tracestate of about 16 KB, the most the standard
// allows (32 members, 256-character keys and values).
func newOutsider(t *testing.T) (traceID trace.TraceID, parent trace.SpanID, tracestate string) {
	t.Helper()
	_, _ = rand.Read(traceID[:])
	_, _ = rand.Read(parent[:])
	members := make([]string, 32)
	for i := range members {
		key := fmt.Sprintf("k%02d", i) + strings.Repeat("a", 253)
		members[i] = key + "=" + strings.Repeat("v", 256)
	}
	tracestate = strings.Join(members, ",")
	if _, err := trace.ParseTraceState(tracestate); err != nil || len(tracestate) < 16<<10 {
		t.Fatalf("the outsider's tracestate (%d bytes) is not a valid one of 16 KB: %v", len(tracestate), err)
	}
	return traceID, parent, tracestate
}

// An edge (EdgeHandler) continues a caller's trace context only when Continue says the
// request comes from inside; any other request starts a trace of the deployment's own,
// sampled by the deployment's sampler whatever the caller's flags say, and neither the
// caller's traceparent nor its tracestate reaches the handler or the next hop.
func TestEdgeHandlerStartsItsOwnTrace(t *testing.T) {
	all := sdktrace.ParentBased(sdktrace.AlwaysSample())
	// OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.
	none := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))
	tests := []struct {
		name        string
		sampler     sdktrace.Sampler
		flags       string // the caller's trace flags
		trusted     bool   // what Continue answers
		wantParent  bool   // the server span is the caller's span's child
		wantSampled bool
	}{
		{name: "a sampled outsider", sampler: all, flags: "01", wantSampled: true},
		{name: "a sampled outsider at ratio 0", sampler: none, flags: "01"},
		{name: "an outsider's flags 00", sampler: all, flags: "00", wantSampled: true},
		{name: "a trusted front end", sampler: all, flags: "01", trusted: true, wantParent: true, wantSampled: true},
		{name: "a trusted front end's flags 00", sampler: all, flags: "00", trusted: true, wantParent: true},
		{name: "a trusted front end at ratio 0", sampler: none, flags: "01", trusted: true, wantParent: true, wantSampled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(tt.sampler))
			t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
			traceID, parent, tracestate := newOutsider(t)

			// The next hop, inside the deployment: what reaches it on the wire.
			type headers struct{ traceparent, tracestate string }
			next := make(chan headers, 1)
			inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next <- headers{r.Header.Get("traceparent"), r.Header.Get("tracestate")}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer inner.Close()
			hc := &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport.(*http.Transport).Clone(), route)}

			type seen struct {
				sc                      trace.SpanContext
				traceparent, tracestate string
			}
			seens := make(chan seen, 1)
			asked := 0
			edge := httptest.NewServer(telemetry.EdgeHandler(tp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seens <- seen{trace.SpanContextFromContext(r.Context()), r.Header.Get("traceparent"), r.Header.Get("tracestate")}
				req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, inner.URL+"/observe", http.NoBody)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
				w.WriteHeader(http.StatusOK)
			}), route, func(*http.Request) bool { asked++; return tt.trusted }))
			defer edge.Close()

			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, edge.URL+"/observe", http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("traceparent", "00-"+traceID.String()+"-"+parent.String()+"-"+tt.flags)
			req.Header.Set("tracestate", tracestate)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			got, hop := <-seens, <-next
			if asked != 1 {
				t.Errorf("Continue asked %d times, want once", asked)
			}

			if continued := got.sc.TraceID() == traceID; continued != tt.wantParent {
				t.Errorf("the handler's trace is %s, the caller's %s: continued %v, want %v", got.sc.TraceID(), traceID, continued, tt.wantParent)
			}
			if got.sc.IsSampled() != tt.wantSampled {
				t.Errorf("the request's span sampled %v, want %v", got.sc.IsSampled(), tt.wantSampled)
			}
			if tt.wantParent {
				if got.traceparent == "" || got.tracestate != tracestate {
					t.Error("a trusted caller's trace context was taken off the request")
				}
			} else if got.traceparent != "" || got.tracestate != "" {
				t.Errorf("the handler still sees the outsider's traceparent %q and a tracestate of %d bytes", got.traceparent, len(got.tracestate))
			}
			// The next hop carries the deployment's context, never the outsider's.
			wantNext := "00-" + got.sc.TraceID().String() + "-"
			if !strings.HasPrefix(hop.traceparent, wantNext) || strings.Contains(hop.traceparent, parent.String()) {
				t.Errorf("the next hop's traceparent %q, want one of trace %s", hop.traceparent, got.sc.TraceID())
			}
			if tt.wantParent != (hop.tracestate == tracestate) || (!tt.wantParent && hop.tracestate != "") {
				t.Errorf("the next hop got a tracestate of %d bytes (continued %v)", len(hop.tracestate), tt.wantParent)
			}

			var server sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanContext().TraceID() == traceID && !tt.wantParent {
					t.Errorf("span %q is in the outsider's trace", s.Name())
				}
				if s.Parent().SpanID() == parent && !tt.wantParent {
					t.Errorf("span %q is the outsider's span's child", s.Name())
				}
				if s.SpanKind() == trace.SpanKindServer {
					server = s
				}
			}
			switch {
			case !tt.wantSampled && len(rec.Ended()) != 0:
				t.Errorf("%d spans recorded of a request the deployment does not sample", len(rec.Ended()))
			case tt.wantSampled && server == nil:
				t.Fatalf("no server span among %d", len(rec.Ended()))
			case tt.wantSampled && tt.wantParent && server.Parent().SpanID() != parent:
				t.Errorf("the server span's parent %s, want the trusted caller's %s", server.Parent().SpanID(), parent)
			case tt.wantSampled && !tt.wantParent && server.Parent().IsValid():
				t.Errorf("the server span has a parent %s: want a root", server.Parent().SpanID())
			}
		})
	}
}

// Continue is asked only about a request that carries a trace context, and a nil one
// continues none: a request from outside costs no check when it carries nothing.
func TestEdgeHandlerAsksOnlyWhenThereIsAContext(t *testing.T) {
	rec, tp := recorded(t)
	asked := 0
	sampled := make(chan trace.SpanContext, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sampled <- trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(telemetry.EdgeHandler(tp, h, route, func(*http.Request) bool { asked++; return true }))
	defer srv.Close()
	nilCont := httptest.NewServer(telemetry.EdgeHandler(tp, h, route, nil))
	defer nilCont.Close()
	traceID, parent, _ := newOutsider(t)
	for _, tc := range []struct{ url, traceparent string }{
		{srv.URL, ""},
		{nilCont.URL, "00-" + traceID.String() + "-" + parent.String() + "-01"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tc.url+"/observe", http.NoBody)
		if tc.traceparent != "" {
			req.Header.Set("traceparent", tc.traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if sc := <-sampled; sc.TraceID() == traceID || !sc.IsSampled() {
			t.Errorf("request to %s: trace %s sampled %v, want a sampled trace of the deployment's own", tc.url, sc.TraceID(), sc.IsSampled())
		}
	}
	if asked != 0 {
		t.Errorf("Continue asked %d times about a request without a trace context", asked)
	}
	if n := len(rec.Ended()); n != 2 {
		t.Errorf("%d spans, want 2 roots", n)
	}
	if h := (*noContent)(nil); telemetry.EdgeHandler(nil, h, route, nil) != http.Handler(h) {
		t.Error("EdgeHandler wraps with tracing off")
	}
}

func TestParseTrustedSources(t *testing.T) {
	many := strings.TrimSuffix(strings.Repeat("10.0.0.1,", telemetry.MaxTrustedSources+1), ",")
	tests := []struct {
		name    string
		in      string
		want    string // the prefixes, comma-separated
		wantErr bool
	}{
		{name: "unset", in: "", want: ""},
		{name: "blanks", in: " , ", want: ""},
		{name: "ranges and addresses", in: "10.0.4.0/24, 10.0.5.7 ,fd00::/64,::1", want: "10.0.4.0/24,10.0.5.7/32,fd00::/64,::1/128"},
		{name: "host bits masked", in: "10.0.4.9/24", want: "10.0.4.0/24"},
		{name: "an IPv4 range written in IPv6", in: "::ffff:10.0.0.0/104,::ffff:10.1.2.3", want: "10.0.0.0/8,10.1.2.3/32"},
		{name: "every IPv4 address", in: "0.0.0.0/0", wantErr: true},
		{name: "every IPv6 address", in: "::/0", wantErr: true},
		{name: "every IPv4 address written in IPv6", in: "::ffff:0.0.0.0/96", wantErr: true},
		{name: "a host name", in: "proxy.internal", wantErr: true},
		{name: "a port", in: "10.0.0.1:8080", wantErr: true},
		{name: "a zone", in: "fe80::1%eth0", wantErr: true},
		{name: "a bad range", in: "10.0.0.0/33", wantErr: true},
		{name: "too many", in: many, wantErr: true},
		{name: "as many as allowed", in: strings.TrimSuffix(strings.Repeat("10.0.0.1,", telemetry.MaxTrustedSources), ","),
			want: strings.TrimSuffix(strings.Repeat("10.0.0.1/32,", telemetry.MaxTrustedSources), ",")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := telemetry.ParseTrustedSources(tt.in)
			if tt.wantErr {
				if !errors.Is(err, telemetry.ErrTrustedSources) {
					t.Fatalf("ParseTrustedSources(%q) = %v, %v; want ErrTrustedSources", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if strings.Join(s, ",") != tt.want {
				t.Errorf("ParseTrustedSources(%q) = %v, want %s", tt.in, s, tt.want)
			}
		})
	}
}

// A request is from a trusted source by its connection's peer address alone.
func TestTrustedSourcesContains(t *testing.T) {
	sources, err := telemetry.ParseTrustedSources("10.0.4.0/24,fd00::/64")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		remoteAddr string
		forwarded  string // X-Forwarded-For, which changes nothing
		want       bool
	}{
		{name: "in the range", remoteAddr: "10.0.4.17:51000", want: true},
		{name: "IPv4 mapped into IPv6", remoteAddr: "[::ffff:10.0.4.17]:51000", want: true},
		{name: "IPv6 in the range", remoteAddr: "[fd00::5]:443", want: true},
		{name: "IPv6 with a zone", remoteAddr: "[fd00::5%eth0]:443", want: true},
		{name: "outside the range", remoteAddr: "10.0.5.1:51000"},
		{name: "outside, claiming to be forwarded by the front end", remoteAddr: "203.0.113.9:4000", forwarded: "10.0.4.17"},
		{name: "no port", remoteAddr: "10.0.4.17"},
		{name: "empty", remoteAddr: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remoteAddr
			if tt.forwarded != "" {
				r.Header.Set("X-Forwarded-For", tt.forwarded)
			}
			if got := sources.Contains(r); got != tt.want {
				t.Errorf("Contains(%q) = %v, want %v", tt.remoteAddr, got, tt.want)
			}
		})
	}
	if telemetry.TrustedSources(nil).Contains(httptest.NewRequest(http.MethodGet, "/", nil)) {
		t.Error("no sources trust a request")
	}
}
