package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/openapi"
	"github.com/agentfy/agentfy/wire"
)

// traceDeployment is the deployment of the stack these tests start.
const traceDeployment = "tracetest"

// tracedReplica is a replica of the test's own on a stack's Redis and NATS, tracing
// every request it samples into rec, its log lines kept in logs.
type tracedReplica struct {
	url  string
	rec  *tracetest.SpanRecorder
	logs *testenv.Buffer
}

// startTracedReplica starts replica id, sampling with parentbased_always_on (the
// default), continuing the trace context of the sources trusted names
// (AGENTFY_TRACE_TRUSTED_SOURCES), until the test ends.
func startTracedReplica(t *testing.T, c *stacktest.Client, id, trusted string) *tracedReplica {
	t.Helper()
	sources, err := telemetry.ParseTrustedSources(trusted)
	if err != nil {
		t.Fatal(err)
	}
	st := c.St
	tr := &tracedReplica{rec: tracetest.NewSpanRecorder(), logs: &testenv.Buffer{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tr.rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx := c.Context(t)
	r, err := replica.New(ctx, replica.Options{
		ReplicaID: id, Deployment: traceDeployment, Redis: st.RedisOptions(deploy.RedisReplica),
		NATS: st.NATSConfig(bus.RoleReplica, "agentfy-api "+id), JWT: []auth.JWTConfig{st.JWTConfig()},
		GrantKeys: st.GrantKeys, OpenAPI: openapi.Document, Log: zerolog.New(tr.logs).Level(zerolog.DebugLevel),
		DrainTimeout: 5 * time.Second, Tracer: tp, TrustedTraceSources: sources,
	})
	if err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr.url = "http://" + ln.Addr().String()
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.ServeAll(rctx, replica.Listeners{Public: ln}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica %s: %v", id, err)
		}
	})
	return tr
}

// asked is one request to a traced replica and what came of it.
type asked struct {
	status    int
	header    http.Header
	requestID string
	span      sdktrace.ReadOnlySpan // the request's server span; nil when not sampled
	logTrace  string                // the trace_id of the request's log line
}

// traceContext is a W3C trace context a caller sends: traceparent and tracestate.
type traceContext struct{ traceparent, tracestate string }

// ask sends method path to tr with bearer (none when empty), tc and body, and waits for
// the request's log line and, when sampled, its server span.
func (tr *tracedReplica) ask(t *testing.T, c *stacktest.Client, method, path, bearer string, tc traceContext, body string, sampled bool) asked {
	t.Helper()
	before := len(tr.rec.Ended())
	req, err := http.NewRequestWithContext(c.Context(t), method, tr.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tc.traceparent != "" {
		req.Header.Set("traceparent", tc.traceparent)
	}
	if tc.tracestate != "" {
		req.Header.Set("tracestate", tc.tracestate)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	a := asked{status: resp.StatusCode, header: resp.Header, requestID: resp.Header.Get("X-Request-Id")}
	// The span ends, and the line is written, once the handler returned: after the
	// answer may have reached the client.
	testenv.WaitFor(t, 5*time.Second, "the request's log line", func() bool {
		line, ok := tr.requestLine(t, a.requestID)
		a.logTrace = line[telemetry.LogField]
		return ok
	})
	if sampled {
		testenv.WaitFor(t, 5*time.Second, "the request's server span", func() bool {
			for _, s := range tr.rec.Ended()[before:] {
				if s.SpanKind() == trace.SpanKindServer {
					a.span = s
					return true
				}
			}
			return false
		})
	}
	return a
}

// requestLine is the request line (the one with its route) of request id.
func (tr *tracedReplica) requestLine(t *testing.T, id string) (map[string]string, bool) {
	t.Helper()
	for l := range strings.Lines(tr.logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["request"] != id || m["route"] == nil {
			continue
		}
		out := map[string]string{}
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out, true
	}
	return nil, false
}

// outsiderContext is a sampled traceparent naming traceID and parent, with a tracestate
// of about 16 KB, the most the standard allows (32 members of 256-character keys and
// values), its members ending in marker.
func outsiderContext(traceID trace.TraceID, parent trace.SpanID, flags, marker string) traceContext {
	members := make([]string, 32)
	for i := range members {
		members[i] = fmt.Sprintf("k%02d", i) + strings.Repeat("a", 253) + "=" + strings.Repeat("v", 256-len(marker)) + marker
	}
	return traceContext{traceparent: "00-" + traceID.String() + "-" + parent.String() + "-" + flags, tracestate: strings.Join(members, ",")}
}

func randomTrace() (trace.TraceID, trace.SpanID) {
	var id trace.TraceID
	var span trace.SpanID
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(span[:])
	return id, span
}

// auditEvent is what these tests read of a view's audit event.
type auditEvent struct {
	Agent    string `json:"agent"`
	ViewerID string `json:"viewerId"`
	Outcome  string `json:"outcome"`
	TraceID  string `json:"traceId"`
}

// auditTrail reads the deployment's view events live, as the audit role may.
type auditTrail struct {
	sub  *nats.Subscription
	seen map[string]bool // events already read: a publisher may send one again
}

// subscribeAudit subscribes to every event of c's deployment, whatever its subject (a
// refusal that learnt no agent has the subject of the rest), until the test ends.
func subscribeAudit(t *testing.T, c *stacktest.Client) *auditTrail {
	t.Helper()
	nc, err := c.St.ConnectNATS(bus.RoleAudit, "trace-test-audit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(c.St.NS.AuditWildcard())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &auditTrail{sub: sub, seen: map[string]bool{}}
}

// each reads events until every one of traces was named by one, calling f with each
// event read (once, though a publisher may send one again).
func (a *auditTrail) each(t *testing.T, traces map[string]bool, f func(auditEvent)) {
	t.Helper()
	want := maps.Clone(traces)
	for len(want) > 0 {
		msg, err := a.sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("no audit event names the traces %v: %v", want, err)
		}
		if a.seen[string(msg.Data)] {
			continue
		}
		a.seen[string(msg.Data)] = true
		var ev auditEvent
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			t.Fatalf("audit event %s: %v", msg.Data, err)
		}
		f(ev)
		delete(want, ev.TraceID)
	}
}

// A replica that trusts no front end (AGENTFY_TRACE_TRUSTED_SOURCES unset) takes no
// trace context from outside. An outsider's traceparent — sampled, naming another
// member's view's trace and span, with a 16 KB tracestate — is the parent of no span:
// each request is the root of a trace of the deployment's own, whose id the request's
// log line and audit event carry, and neither the outsider's trace id nor its
// tracestate appears in any span, log line or event. Flags 00 from outside do not take
// a view out of the traces. Only the consume route called with a current broker pass
// continues its caller's context: a broker calls it inside a view. The traceresponse
// header goes only to an authenticated viewer who was let in (200, 429, 503), never on
// a 401, 403 or 404, nor on the consume route.
func TestOutsidersDoNotSteerTraces(t *testing.T) {
	c := stacktest.Start(t, stack.Options{Replicas: -1, Deployment: traceDeployment, JetStreamDir: t.TempDir()})
	st := c.St
	ctx := c.Context(t)
	edge := startTracedReplica(t, c, "replica-edge", "")
	idle := c.NewAgent(t, "")   // no session: a view is 200 live:false
	orphan := c.NewAgent(t, "") // a session without a worker: 503, then 429
	if _, _, err := st.Sess.Start(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	_, passes, err := st.Sess.Start(ctx, c.NewAgent(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	alice, carol := c.Token(t, "u-alice"), c.Token(t, "u-carol") // carol is in another team
	events := subscribeAudit(t, c)

	// The victim: a member's view, whose trace and span the outsider names.
	victim := edge.ask(t, c, http.MethodGet, stacktest.ViewPath(idle), alice, traceContext{}, "", true)
	if victim.status != http.StatusOK {
		t.Fatalf("the member's view: %d", victim.status)
	}
	victimTrace, victimSpan := victim.span.SpanContext().TraceID(), victim.span.SpanContext().SpanID()
	const marker = "outsidermarker"
	stolen := outsiderContext(victimTrace, victimSpan, "01", marker)
	ownTrace, ownSpan := randomTrace()
	unsampled := outsiderContext(ownTrace, ownSpan, "00", marker)

	tests := []struct {
		name         string
		method, path string
		bearer, body string
		tc           traceContext
		wantStatus   int
		wantResponse bool // traceresponse on the answer
		audited      bool // its audit event is looked for
	}{
		{name: "a member's view", method: http.MethodGet, path: stacktest.ViewPath(idle), bearer: alice, tc: stolen,
			wantStatus: http.StatusOK, wantResponse: true, audited: true},
		{name: "a member's view with flags 00", method: http.MethodGet, path: stacktest.ViewPath(idle), bearer: alice, tc: unsampled,
			wantStatus: http.StatusOK, wantResponse: true, audited: true},
		{name: "a 404 of another team's member", method: http.MethodGet, path: stacktest.ViewPath(idle), bearer: carol, tc: stolen,
			wantStatus: http.StatusNotFound, audited: true},
		{name: "a 404 of an unknown agent", method: http.MethodGet, path: stacktest.ViewPath("agent-nobody-knows"), bearer: alice, tc: stolen,
			wantStatus: http.StatusNotFound},
		{name: "a 401 without a credential", method: http.MethodGet, path: stacktest.ViewPath(idle), tc: stolen,
			wantStatus: http.StatusUnauthorized, audited: true},
		{name: "a partner's 401", method: http.MethodGet, path: stacktest.PartnerViewPath("org-acme", idle), bearer: "not-a-key", tc: stolen,
			wantStatus: http.StatusUnauthorized},
		{name: "a 503 of a member let in", method: http.MethodGet, path: stacktest.ViewPath(orphan), bearer: alice, tc: stolen,
			wantStatus: http.StatusServiceUnavailable, wantResponse: true},
		{name: "then its 429", method: http.MethodGet, path: stacktest.ViewPath(orphan), bearer: alice, tc: stolen,
			wantStatus: http.StatusTooManyRequests, wantResponse: true},
		{name: "the consume route with a member's token", method: http.MethodPost, path: wire.ConsumePath, bearer: alice,
			body: stacktest.ConsumeRequest("req-1"), tc: stolen, wantStatus: http.StatusForbidden},
		{name: "the consume route with a worker pass", method: http.MethodPost, path: wire.ConsumePath, bearer: passes.Worker,
			body: stacktest.ConsumeRequest("req-1"), tc: stolen, wantStatus: http.StatusForbidden},
	}
	c.OpenGate(t, orphan)
	outsiders := map[string]asked{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := edge.ask(t, c, tt.method, tt.path, tt.bearer, tt.tc, tt.body, true)
			outsiders[tt.name] = a
			if a.status != tt.wantStatus {
				t.Fatalf("status %d, want %d", a.status, tt.wantStatus)
			}
			sc := a.span.SpanContext()
			if a.span.Parent().IsValid() {
				t.Errorf("the request's span has parent %s in trace %s: want a root", a.span.Parent().SpanID(), a.span.Parent().TraceID())
			}
			if sc.TraceID() == victimTrace || sc.TraceID() == ownTrace {
				t.Errorf("the request's span is in the outsider's trace %s", sc.TraceID())
			}
			if !sc.IsSampled() {
				t.Error("the request was not sampled: the outsider's flags decided")
			}
			if a.logTrace != sc.TraceID().String() {
				t.Errorf("the log line's trace_id %q, want the deployment's %s", a.logTrace, sc.TraceID())
			}
			got := a.header.Get(telemetry.HeaderTraceResponse)
			want := ""
			if tt.wantResponse {
				want = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
			}
			if got != want {
				t.Errorf("traceresponse %q, want %q", got, want)
			}
		})
	}

	t.Run("the consume route continues a broker's context", func(t *testing.T) {
		viewTrace, brokerSpan := randomTrace()
		inside := traceContext{traceparent: "00-" + viewTrace.String() + "-" + brokerSpan.String() + "-01"}
		a := edge.ask(t, c, http.MethodPost, wire.ConsumePath, passes.Broker, inside, stacktest.ConsumeRequest("req-never-granted"), true)
		if a.status != http.StatusNotFound {
			t.Fatalf("status %d, want 404 (a grant that does not exist)", a.status)
		}
		if a.span.Parent().SpanID() != brokerSpan || a.span.SpanContext().TraceID() != viewTrace {
			t.Errorf("the consume span is in trace %s under %s, want the broker's call's %s under %s",
				a.span.SpanContext().TraceID(), a.span.Parent().SpanID(), viewTrace, brokerSpan)
		}
		if h := a.header.Get(telemetry.HeaderTraceResponse); h != "" {
			t.Errorf("traceresponse %q on the consume route", h)
		}
		// The same call without a pass of the broker's starts a trace of its own.
		a = edge.ask(t, c, http.MethodPost, wire.ConsumePath, "agentfy_pass_forged", inside, stacktest.ConsumeRequest("req-never-granted"), true)
		if a.span.Parent().IsValid() || a.span.SpanContext().TraceID() == viewTrace {
			t.Errorf("a consume call without a broker pass continued the caller's trace (status %d)", a.status)
		}
	})

	t.Run("no span under the outsider's", func(t *testing.T) {
		for _, s := range edge.rec.Ended() {
			if s.SpanContext().TraceID() == ownTrace || s.Parent().SpanID() == ownSpan {
				t.Errorf("span %q is in the outsider's own trace", s.Name())
			}
			if s.SpanContext().TraceID() == victimTrace && s.SpanContext().SpanID() != victimSpan && s.Parent().SpanID() != victimSpan {
				t.Errorf("span %q joined the member's view's trace", s.Name())
			}
			if s.SpanContext().TraceState().Len() != 0 {
				t.Errorf("span %q carries a tracestate", s.Name())
			}
		}
	})

	t.Run("no outsider's trace id or tracestate in a log line", func(t *testing.T) {
		for l := range strings.Lines(edge.logs.String()) {
			if strings.Contains(l, ownTrace.String()) || strings.Contains(l, marker) {
				t.Errorf("log line %s holds the outsider's trace context", strings.TrimSpace(l))
			}
			if strings.Contains(l, victimTrace.String()) && !strings.Contains(l, `"request":"`+victim.requestID+`"`) {
				t.Errorf("log line %s of another request names the member's view's trace", strings.TrimSpace(l))
			}
		}
	})

	t.Run("the audit events carry the deployment's trace ids", func(t *testing.T) {
		want := map[string]bool{victimTrace.String(): true}
		for _, tt := range tests {
			if tt.audited {
				want[outsiders[tt.name].span.SpanContext().TraceID().String()] = true
			}
		}
		victims := 0
		events.each(t, want, func(ev auditEvent) {
			switch ev.TraceID {
			case ownTrace.String():
				t.Errorf("audit event %+v names the outsider's trace", ev)
			case victimTrace.String():
				if victims++; victims > 1 {
					t.Errorf("audit event %+v names the member's view's trace: a second event of it", ev)
				}
			}
		})
	})
}

// A replica whose front end is trusted (AGENTFY_TRACE_TRUSTED_SOURCES names the
// loopback addresses the test's requests come from) continues its trace context: the
// view's span is the front end's span's child in the front end's trace, with its
// tracestate, and the log line and the audit event carry that trace's id; the front
// end's flags 00 keep the view out of the traces.
func TestTrustedFrontEndContinuesItsTrace(t *testing.T) {
	c := stacktest.Start(t, stack.Options{Replicas: -1, Deployment: traceDeployment, JetStreamDir: t.TempDir()})
	fronted := startTracedReplica(t, c, "replica-fronted", "127.0.0.0/8,::1")
	idle := c.NewAgent(t, "")
	alice := c.Token(t, "u-alice")
	events := subscribeAudit(t, c)

	traceID, parent := randomTrace()
	tc := traceContext{traceparent: "00-" + traceID.String() + "-" + parent.String() + "-01", tracestate: "platform=front-end"}
	a := fronted.ask(t, c, http.MethodGet, stacktest.ViewPath(idle), alice, tc, "", true)
	if a.status != http.StatusOK {
		t.Fatalf("status %d", a.status)
	}
	if a.span.Parent().SpanID() != parent || a.span.SpanContext().TraceID() != traceID {
		t.Errorf("the view's span is in trace %s under %s, want the front end's %s under %s",
			a.span.SpanContext().TraceID(), a.span.Parent().SpanID(), traceID, parent)
	}
	if ts := a.span.SpanContext().TraceState().String(); ts != tc.tracestate {
		t.Errorf("the view's tracestate %q, want the front end's %q", ts, tc.tracestate)
	}
	if a.logTrace != traceID.String() {
		t.Errorf("the log line's trace_id %q, want the front end's %s", a.logTrace, traceID)
	}
	if want := "00-" + traceID.String() + "-" + a.span.SpanContext().SpanID().String() + "-01"; a.header.Get(telemetry.HeaderTraceResponse) != want {
		t.Errorf("traceresponse %q, want %q", a.header.Get(telemetry.HeaderTraceResponse), want)
	}
	// The view's audit event names the front end's trace (each fails unless one does).
	events.each(t, map[string]bool{traceID.String(): true}, func(auditEvent) {})

	notSampled, notSampledParent := randomTrace()
	a = fronted.ask(t, c, http.MethodGet, stacktest.ViewPath(idle), alice,
		traceContext{traceparent: "00-" + notSampled.String() + "-" + notSampledParent.String() + "-00"}, "", false)
	if a.status != http.StatusOK {
		t.Fatalf("status %d", a.status)
	}
	if h := a.header.Get(telemetry.HeaderTraceResponse); h != "" {
		t.Errorf("traceresponse %q for the front end's trace that is not sampled", h)
	}
	if a.logTrace != notSampled.String() {
		t.Errorf("the log line's trace_id %q, want the front end's %s", a.logTrace, notSampled)
	}
	for _, s := range fronted.rec.Ended() {
		if s.SpanContext().TraceID() == notSampled {
			t.Errorf("span %q recorded in the front end's unsampled trace", s.Name())
		}
	}
}
