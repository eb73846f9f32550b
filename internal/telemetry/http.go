package telemetry

import (
	"context"
	"net/http"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// RouteOf names the traced route of a request ("POST /observe"), "" for a request that
// is not traced (health checks, metrics, long-lived streams).
type RouteOf func(r *http.Request) string

// Handler wraps h so that each request RouteOf names gets a server span of that name,
// its parent extracted from the request's traceparent. With a nil tp it returns h as
// it is: tracing off costs nothing.
func Handler(tp trace.TracerProvider, h http.Handler, route RouteOf) http.Handler {
	if tp == nil {
		return h
	}
	return otelhttp.NewHandler(h, "",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(Propagator()),
		otelhttp.WithFilter(func(r *http.Request) bool { return route(r) != "" }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return route(r) }),
	)
}

// Transport wraps rt so that each request RouteOf names gets a client span of that
// name, its context injected as traceparent. With a nil tp it returns rt as it is.
func Transport(tp trace.TracerProvider, rt http.RoundTripper, route RouteOf) http.RoundTripper {
	if tp == nil {
		return rt
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(Propagator()),
		otelhttp.WithFilter(func(r *http.Request) bool { return route(r) != "" }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return route(r) }),
	)
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
