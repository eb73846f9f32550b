package jsonrpc

// Meta is the _meta member of a request's params, as MCP carries it: here the W3C trace
// context of the caller's span, so that the callee's span joins the caller's trace. Its
// members are known ones like every other (wire.DecodeStrict refuses any other), and
// both are optional. It is a propagation.TextMapCarrier; package telemetry fills and
// reads it (telemetry.RPCMeta, telemetry.RPCContext), and names the call's span by its
// method, which it can only do while this package does not import it.
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
