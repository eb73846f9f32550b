package telemetry

import (
	"context"
	"io"
	"net/http"
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
// error status for a 5xx. With a nil tp it returns h as it is: tracing off costs nothing.
func Handler(tp trace.TracerProvider, h http.Handler, route RouteOf) http.Handler {
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
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method)))
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
