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

const hopRoute = telemetry.SpanCapture // "POST /observe"

// routed is a router with the broker's traced route: POST /observe, wrapped by wrap, and
// an untraced GET /healthz.
func routed(wrap func(http.Handler) http.Handler, h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(hopRoute, wrap(h))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return mux
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

// serverAttributes are all a server span may carry: what otelhttp makes of the method,
// protocol, host and route it is shown, and of the answer.
var serverAttributes = map[string]bool{
	"http.request.method": true, "url.scheme": true, "server.address": true, "server.port": true,
	"network.protocol.version": true, "http.route": true, "http.response.status_code": true,
	"http.response.body.size": true,
}

// One traced hop over loopback, Transport to Handler: a client span and a server span
// beneath it, in the caller's trace, each with the method and the status code, the
// traceparent on the wire being the client span's. The server span is named by the
// route the router matched, and carries nothing but serverAttributes: no path, query,
// peer, user agent or forwarded-for address; the client span's URL has no query.
// The handler gets the request as it came.
func TestTracedHop(t *testing.T) {
	for _, tt := range []struct {
		status      int
		serverError bool // a server span is an error for a 5xx only
		clientError bool // a client span for a 4xx too
	}{{http.StatusOK, false, false}, {http.StatusNotFound, false, true}, {http.StatusServiceUnavailable, true, true}} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			rec, tp := recorded(t)
			type seen struct{ traceparent, query, userAgent, remoteAddr string }
			seens := make(chan seen, 1)
			srv := httptest.NewServer(routed(func(h http.Handler) http.Handler { return telemetry.Handler(tp, h) },
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seens <- seen{r.Header.Get("traceparent"), r.URL.RawQuery, r.UserAgent(), r.RemoteAddr}
					if !trace.SpanFromContext(r.Context()).IsRecording() {
						t.Error("the handler's context has no recording span")
					}
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, `{"page":"secret"}`)
				})))
			defer srv.Close()
			hc := &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport.(*http.Transport).Clone(), hopRoute)}

			ctx, parent := telemetry.Tracer(tp).Start(t.Context(), "caller")
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/observe?agent=x", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("User-Agent", "ua-of-the-caller")
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
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
			got := <-seens
			if want := "00-" + client.SpanContext().TraceID().String() + "-" + client.SpanContext().SpanID().String() + "-01"; got.traceparent != want {
				t.Errorf("traceparent on the wire %q is not the client span's %s", got.traceparent, want)
			}
			if got.query != "agent=x" || got.userAgent != "ua-of-the-caller" || got.remoteAddr == "" {
				t.Errorf("the handler got the request without its query, user agent or peer: %+v", got)
			}
			serverAttrs, clientAttrs := attrsOf(server), attrsOf(client)
			for k := range serverAttrs {
				if !serverAttributes[k] {
					t.Errorf("server span attribute %s = %q", k, serverAttrs[k])
				}
			}
			if serverAttrs["http.route"] != "/observe" {
				t.Errorf("server span http.route %q", serverAttrs["http.route"])
			}
			if want := srv.URL + "/observe"; clientAttrs["url.full"] != want {
				t.Errorf("client span url.full %q, want %q", clientAttrs["url.full"], want)
			}
			for kind, attrs := range map[string]map[string]string{"server": serverAttrs, "client": clientAttrs} {
				if attrs["http.request.method"] != "POST" || attrs["http.response.status_code"] != strconv.Itoa(tt.status) {
					t.Errorf("%s span method %q, status %q", kind, attrs["http.request.method"], attrs["http.response.status_code"])
				}
				for k, v := range attrs {
					for _, secret := range []string{"agent=x", "ua-of-the-caller", "203.0.113.9", got.remoteAddr, "secret"} {
						if strings.Contains(v, secret) {
							t.Errorf("%s span attribute %s = %q holds %q", kind, k, v, secret)
						}
					}
				}
			}
			if (server.Status().Code == codes.Error) != tt.serverError || (client.Status().Code == codes.Error) != tt.clientError {
				t.Errorf("error status: server %v, client %v", server.Status(), client.Status())
			}
		})
	}
}

// A request to a route its router does not trace gets no server span; with tracing off
// (a nil provider) the wrappers are the handler and transport themselves.
func TestUntracedRequest(t *testing.T) {
	rec, tp := recorded(t)
	srv := httptest.NewServer(routed(func(h http.Handler) http.Handler { return telemetry.Handler(tp, h) }, &noContent{}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans of an untraced route", n)
	}
	if telemetry.Transport(nil, http.DefaultTransport, hopRoute) != http.DefaultTransport {
		t.Error("Transport wraps with tracing off")
	}
	if h := (*noContent)(nil); telemetry.Handler(nil, h) != http.Handler(h) {
		t.Error("Handler wraps with tracing off")
	}
}

// A round trip that fails ends its span at once, as an error; one whose body is closed
// unread ends it at the close, once.
func TestTransportEndsItsSpan(t *testing.T) {
	rec, tp := recorded(t)
	failing := telemetry.Transport(tp, roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("dial unix /run/broker.sock: connection refused")
	}), hopRoute)
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
	rt := telemetry.Transport(tp, http.DefaultTransport, hopRoute)
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
			hc := &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport.(*http.Transport).Clone(), hopRoute)}

			type seen struct {
				sc                      trace.SpanContext
				traceparent, tracestate string
			}
			seens := make(chan seen, 1)
			asked := 0
			cont := func(*http.Request) bool { asked++; return tt.trusted }
			edge := httptest.NewServer(routed(func(h http.Handler) http.Handler { return telemetry.EdgeHandler(tp, h, cont) }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			})))
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
	srv := httptest.NewServer(routed(func(h http.Handler) http.Handler {
		return telemetry.EdgeHandler(tp, h, func(*http.Request) bool { asked++; return true })
	}, h))
	defer srv.Close()
	nilCont := httptest.NewServer(routed(func(h http.Handler) http.Handler { return telemetry.EdgeHandler(tp, h, nil) }, h))
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
	if h := (*noContent)(nil); telemetry.EdgeHandler(nil, h, nil) != http.Handler(h) {
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
