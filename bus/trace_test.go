package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// A request carries its context's trace in the message's headers, named traceparent
// and tracestate as the W3C standard spells them; the responder's TraceContext
// continues it. A context without a span sends no header at all.
func TestRequestCarriesTheTrace(t *testing.T) {
	nc := testenv.NATSConn(t, testenv.NATS(t))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=abc")
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts,
	}))
	got := make(chan *nats.Msg, 1)
	if _, err := bus.Subscribe(nc, "trace.test", func(m *nats.Msg) {
		got <- m
		_ = bus.Respond(nc, m, []byte("ok"))
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		header nats.Header
	}{
		{"traced", traced, nats.Header{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "tracestate": {"vendor=abc"}}},
		{"untraced", context.Background(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(tc.ctx, 5*time.Second)
			defer cancel()
			if _, err := bus.Request(ctx, nc, "trace.test", []byte("x")); err != nil {
				t.Fatal(err)
			}
			m := <-got
			if len(m.Header) != len(tc.header) {
				t.Fatalf("headers %v, want %v", m.Header, tc.header)
			}
			for k, v := range tc.header {
				if m.Header.Get(k) != v[0] {
					t.Errorf("header %s = %q, want %q", k, m.Header.Get(k), v[0])
				}
			}
			sc := trace.SpanContextFromContext(bus.TraceContext(context.Background(), m))
			if tc.header == nil {
				if sc.IsValid() {
					t.Errorf("a trace from a message without headers: %v", sc)
				}
				return
			}
			if sc.TraceID() != tid || sc.SpanID() != sid || !sc.IsRemote() || !sc.IsSampled() || sc.TraceState().Get("vendor") != "abc" {
				t.Errorf("continued %v, want the requester's", sc)
			}
		})
	}
}
