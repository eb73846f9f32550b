package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// RouteOf names the traced route of a request ("POST /observe"), "" for a request that
// is not traced (health checks, metrics, long-lived streams).
type RouteOf func(r *http.Request) string

// The HTTP hops of a view are traced by the two small wrappers below rather than by
// otelhttp: they make the same spans (kind, name, method, status code, error status,
// W3C traceparent in and out) and nothing else, and cost a view about half as much
// (BenchmarkHop; BENCHMARKS.md, "Tracing on against off"). What they leave out is what
// a span of Agentfy must not carry anyway: the request's URL, its peer and user agent.

// Handler wraps h so that each request RouteOf names gets a server span of that name,
// its parent extracted from the request's traceparent, its status code recorded and an
// error status for a 5xx. It is for a listener only the deployment reaches (the broker's
// socket, which its worker calls inside a view): a listener that outsiders reach takes
// EdgeHandler. With a nil tp it returns h as it is: tracing off costs nothing.
func Handler(tp trace.TracerProvider, h http.Handler, route RouteOf) http.Handler {
	return handler(tp, h, route, nil, false)
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
func EdgeHandler(tp trace.TracerProvider, h http.Handler, route RouteOf, cont Continue) http.Handler {
	return handler(tp, h, route, cont, true)
}

// handler is Handler, and with edge set EdgeHandler.
func handler(tp trace.TracerProvider, h http.Handler, route RouteOf, cont Continue, edge bool) http.Handler {
	if tp == nil {
		return h
	}
	tracer := Tracer(tp)
	prop := Propagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := route(r)
		if name == "" {
			h.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method))}
		switch {
		case !edge:
			ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		case r.Header.Get(headerTraceParent) != "" && cont != nil && cont(r):
			ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		default:
			opts = append(opts, trace.WithNewRoot())
			for _, f := range prop.Fields() {
				r.Header.Del(f)
			}
		}
		ctx, span := tracer.Start(ctx, name, opts...)
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, "")
		}
	})
}

// headerTraceParent is the W3C Trace Context header of the caller's span.
const headerTraceParent = "traceparent"

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

// statusWriter remembers the status code of a traced request's answer. Unwrap gives
// http.ResponseController the writer beneath (its Flush, its deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the writer beneath, when it can (gin's writer asks for it).
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Transport wraps rt so that each request RouteOf names gets a client span of that
// name, its context injected as traceparent, its status code recorded and an error
// status for a failed round trip or a 4xx or 5xx answer. The span ends when the
// answer's body is read to its end or closed. With a nil tp it returns rt as it is.
func Transport(tp trace.TracerProvider, rt http.RoundTripper, route RouteOf) http.RoundTripper {
	if tp == nil {
		return rt
	}
	return &transport{rt: rt, tracer: Tracer(tp), prop: Propagator(), route: route}
}

type transport struct {
	rt     http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	route  RouteOf
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	name := t.route(r)
	if name == "" {
		return t.rt.RoundTrip(r)
	}
	ctx, span := t.tracer.Start(r.Context(), name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method)))
	// A RoundTripper must not change the request it is given: the traceparent goes on
	// a copy of its header.
	r = r.WithContext(ctx)
	r.Header = r.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.rt.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= http.StatusBadRequest {
		span.SetStatus(codes.Error, "")
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		span.End()
		return resp, nil
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// spanBody ends a client span when its answer's body is read to the end or closed,
// whichever comes first, once.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *spanBody) end() { b.once.Do(func() { b.span.End() }) }

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
