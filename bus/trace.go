package bus

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/internal/telemetry"
)

// HeaderCarrier carries a W3C trace context in a NATS message's headers under the
// names the standard gives (traceparent, tracestate), in their exact case: NATS headers,
// unlike HTTP's, are not case-folded.
type HeaderCarrier nats.Header

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set sets key to the one value.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// injectTrace puts ctx's trace context into msg's headers; a context without a span
// (tracing off) leaves msg without headers.
func injectTrace(ctx context.Context, msg *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	telemetry.Propagator().Inject(ctx, HeaderCarrier(msg.Header))
}

// TraceContext returns ctx with the remote trace context msg's headers carry, if any:
// the parent of the span that handles msg.
func TraceContext(ctx context.Context, msg *nats.Msg) context.Context {
	if len(msg.Header) == 0 {
		return ctx
	}
	return telemetry.Propagator().Extract(ctx, HeaderCarrier(msg.Header))
}
