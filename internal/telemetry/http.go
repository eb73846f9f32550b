package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The HTTP hops of a view are traced by otelhttp. Three things it cannot be told are
// kept here:
//
//   - what a span records of a request. A server span of otelhttp records the path,
//     the peer's address, the user agent and the first X-Forwarded-For address: input
//     from outside (tens of kilobytes of it, a forwarded-for address of the caller's
//     choosing) that a span of Agentfy does not carry. It is shown the request's
//     method, protocol, host, route and trace context alone (shown); the handler gets
//     the request itself. A client span records the URL with its query (withoutQuery).
//   - whose trace context an edge continues (EdgeHandler). otelhttp's public endpoint
//     option starts a new trace but links the caller's span, which would still put a
//     trace id of the caller's choosing into the trace backend.
//   - which requests are traced: the router decides, by the route it matched (the
//     API's gin engine, the broker's http.ServeMux), and wraps those routes alone; a
//     client traces the calls it makes through Transport and no other.

// Handler wraps h, the handler of one route a router matched, so that each request gets
// a server span (otelhttp's) named by its method and the route's template, which the
// router puts in Request.Pattern ("POST /observe"); its parent extracted from the
// request's traceparent, its status code recorded and an error status for a 5xx. It is
// for a listener only the deployment reaches (the broker's socket, which its worker
// calls inside a view): a listener that outsiders reach takes EdgeHandler. With a nil
// tp it returns h as it is: tracing off costs nothing.
func Handler(tp trace.TracerProvider, h http.Handler) http.Handler {
	return handler(tp, h, nil, false)
}

// Continue reports whether a traced request that carries a trace context comes from
// inside the deployment, or from a front end it trusts, so that its server span
// continues the caller's trace.
type Continue func(r *http.Request) bool

// EdgeHandler is Handler for a listener that outsiders reach (the API replica's public
// one), where a request's trace context is input to judge, never a parent to trust. A
// request that carries a traceparent continues it (and its tracestate) only when cont
// says the request comes from inside; any other request's span is the root of a new
// trace, which this deployment's sampler samples or not — an outsider's sampled flag
// does not get a request traced, nor its flags 00 keep one out — and its traceparent and
// tracestate are taken off the request, so that nothing behind the edge passes them on.
// The caller's context is not kept as a span link either: a link would still put a
// trace id of the caller's choosing into the trace backend, beside another viewer's
// trace. A nil cont continues no request's context. With a nil tp it returns h as it is.
func EdgeHandler(tp trace.TracerProvider, h http.Handler, cont Continue) http.Handler {
	return handler(tp, h, cont, true)
}

// handler is Handler, and with edge set EdgeHandler.
func handler(tp trace.TracerProvider, h http.Handler, cont Continue, edge bool) http.Handler {
	if tp == nil {
		return h
	}
	traced := otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, s *http.Request) {
		r, ok := s.Context().Value(requestKey{}).(*http.Request)
		if !ok {
			r = s
		}
		h.ServeHTTP(w, r.WithContext(s.Context()))
	}), "", options(tp)...)
	fields := Propagator().Fields()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if edge && (r.Header.Get(headerTraceParent) == "" || cont == nil || !cont(r)) {
			for _, f := range fields {
				r.Header.Del(f)
			}
		}
		traced.ServeHTTP(w, shown(r, fields))
	})
}

// headerTraceParent is the W3C Trace Context header of the caller's span.
const headerTraceParent = "traceparent"

// requestKey holds, in the context of a request shown to otelhttp, the request itself.
type requestKey struct{}

// shown is what otelhttp makes a server span of: r's method, protocol, host, TLS state
// and route, and the trace context's header fields. r itself travels in its context
// (requestKey), for the handler.
func shown(r *http.Request, fields []string) *http.Request {
	s := &http.Request{
		Method: r.Method, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		Host: r.Host, TLS: r.TLS, Pattern: r.Pattern, Header: make(http.Header, len(fields)),
	}
	for _, f := range fields {
		if v := r.Header.Values(f); len(v) > 0 {
			s.Header[http.CanonicalHeaderKey(f)] = v
		}
	}
	return s.WithContext(context.WithValue(r.Context(), requestKey{}, r))
}

// Transport wraps rt so that each request made through it gets a client span
// (otelhttp's) named name (SpanCapture, SpanConsume), its context injected as
// traceparent, its status code recorded and an error status for a failed round trip or
// a 4xx or 5xx answer; the span ends when the answer's body is read to its end or
// closed. It records the request's URL without its user info and its query (url.full):
// the deployment's own address of the route. With a nil tp it returns rt as it is.
func Transport(tp trace.TracerProvider, rt http.RoundTripper, name string) http.RoundTripper {
	if tp == nil {
		return rt
	}
	return otelhttp.NewTransport(withoutQuery{rt}, append(options(tp),
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return name }))...)
}

// withoutQuery is the transport beneath otelhttp's. otelhttp records url.full with the
// request's query, which a span of Agentfy does not carry: withoutQuery records it again
// without (the span keeps the last value of an attribute) before the request goes out.
type withoutQuery struct{ rt http.RoundTripper }

func (t withoutQuery) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.RawQuery != "" || r.URL.ForceQuery || r.URL.Fragment != "" {
		u := *r.URL
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		trace.SpanFromContext(r.Context()).SetAttributes(semconv.URLFull(u.String()))
	}
	return t.rt.RoundTrip(r)
}

// options are otelhttp's settings of every HTTP span: the part's provider, the W3C
// propagator, and no metrics (the parts count their requests themselves; otelhttp's
// would go to the global meter provider).
func options(tp trace.TracerProvider) []otelhttp.Option {
	return []otelhttp.Option{
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(Propagator()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
}

// TrustedSources are the addresses of a front end whose trace context an edge
// continues (EdgeHandler): a platform's own proxy or web app that traces its requests
// and passes its context on. Such a front end must set traceparent itself, never pass on
// a caller's: whoever reaches the replicas through it speaks with its voice.
type TrustedSources []netip.Prefix

// MaxTrustedSources bounds the addresses and ranges of TrustedSources.
const MaxTrustedSources = 64

// ErrTrustedSources is ParseTrustedSources' error for a list it refuses.
var ErrTrustedSources = errors.New("telemetry: trusted sources")

// ParseTrustedSources reads a comma-separated list of addresses and CIDR ranges
// ("10.0.4.0/24, 10.0.5.7, fd00::/64"); "" means none. It refuses anything else, more
// than MaxTrustedSources entries, and a range of every address (0.0.0.0/0, ::/0), which
// would let any caller steer the traces again.
func ParseTrustedSources(s string) (TrustedSources, error) {
	var out TrustedSources
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if len(out) == MaxTrustedSources {
			return nil, fmt.Errorf("%w: more than %d entries", ErrTrustedSources, MaxTrustedSources)
		}
		var p netip.Prefix
		if strings.Contains(entry, "/") {
			var err error
			if p, err = netip.ParsePrefix(entry); err != nil {
				return nil, fmt.Errorf("%w: %q is neither an address nor a CIDR range", ErrTrustedSources, entry)
			}
		} else {
			a, err := netip.ParseAddr(entry)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%w: %q is neither an address nor a CIDR range", ErrTrustedSources, entry)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		// An IPv4 range written as IPv6 (::ffff:10.0.0.0/104) is the IPv4 range:
		// Contains compares unmapped addresses.
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Bits() == 0 {
			return nil, fmt.Errorf("%w: %q is every address: name the front end's", ErrTrustedSources, entry)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Contains reports whether r came from one of the sources: its connection's peer
// address, never a header (X-Forwarded-For, Forwarded), which any caller can write.
func (s TrustedSources) Contains(r *http.Request) bool {
	if len(s) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap().WithZone("")
	for _, p := range s {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// LogField is the log field of the trace id.
const LogField = "trace_id"

// WithTraceID adds ctx's trace id to a logger's context (the logger of one request),
// so that every line of a view carries it; l unchanged when ctx has no trace.
func WithTraceID(ctx context.Context, l zerolog.Logger) zerolog.Logger {
	if id := TraceID(ctx); id != "" {
		return l.With().Str(LogField, id).Logger()
	}
	return l
}
