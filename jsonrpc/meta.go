package jsonrpc

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/internal/telemetry"
)

// Meta is the _meta member of a request's params, as MCP carries it: here the W3C trace
// context of the caller's span, so that the callee's span joins the caller's trace. Its
// members are known ones like every other (wire.DecodeStrict refuses any other), and
// both are optional.
type Meta struct {
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// The trace context's names in Meta, as the W3C standard spells them.
const (
	metaTraceParent = "traceparent"
	metaTraceState  = "tracestate"
)

// Get returns the value of a trace context field (a propagation.TextMapCarrier).
func (m *Meta) Get(key string) string {
	switch key {
	case metaTraceParent:
		return m.TraceParent
	case metaTraceState:
		return m.TraceState
	}
	return ""
}

// Set sets a trace context field; other keys are dropped, as Meta holds no other.
func (m *Meta) Set(key, value string) {
	switch key {
	case metaTraceParent:
		m.TraceParent = value
	case metaTraceState:
		m.TraceState = value
	}
}

// Keys lists the fields set.
func (m *Meta) Keys() []string {
	var keys []string
	if m.TraceParent != "" {
		keys = append(keys, metaTraceParent)
	}
	if m.TraceState != "" {
		keys = append(keys, metaTraceState)
	}
	return keys
}

// TraceMeta is the _meta that carries ctx's trace context; nil, and so no _meta on the
// wire, when ctx has no span (tracing off).
func TraceMeta(ctx context.Context) *Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := &Meta{}
	telemetry.Propagator().Inject(ctx, m)
	return m
}

// TraceContext returns ctx with the remote trace context m carries, if any.
func (m *Meta) TraceContext(ctx context.Context) context.Context {
	if m == nil || m.TraceParent == "" {
		return ctx
	}
	return telemetry.Propagator().Extract(ctx, m)
}
