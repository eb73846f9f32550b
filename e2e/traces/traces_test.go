package traces

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// The spans of the hops, as (service, span name), in the order a view crosses them.
var (
	spanView          = hop{telemetry.ServiceAPI, "GET /v1/agents/:id/worker/view"}
	spanPartnerView   = hop{telemetry.ServiceAPI, "GET /v1/orgs/:orgId/agents/:id/worker/view"}
	spanRequest       = hop{telemetry.ServiceAPI, telemetry.SpanViewRequest}
	spanRelay         = hop{telemetry.ServiceAPI, telemetry.SpanViewRelay}
	spanWorker        = hop{telemetry.ServiceWorker, telemetry.SpanWorkerView}
	spanWorkerCapture = hop{telemetry.ServiceWorker, "POST " + wire.CapturePath}
	spanCapture       = hop{telemetry.ServiceBroker, "POST " + wire.CapturePath}
	spanConsumeCall   = hop{telemetry.ServiceBroker, "POST " + wire.ConsumePath}
	spanConsumeRoute  = hop{telemetry.ServiceAPI, "POST " + wire.ConsumePath}
)

type hop struct{ service, name string }

func (h hop) String() string { return h.service + ": " + h.name }

// traceResponse is the W3C Trace Context Level 2 traceresponse header of a sampled
// request.
var traceResponse = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// traceOf reads the trace of a view's answer back from Jaeger: the id its traceresponse
// header names, once want spans arrived (every part's spans are flushed first). The
// trace must hold exactly want spans, all of that trace.
func traceOf(t *testing.T, r stacktest.Response, want int) (testenv.JaegerTrace, string) {
	t.Helper()
	m := traceResponse.FindStringSubmatch(r.Header.Get(telemetry.HeaderTraceResponse))
	if m == nil {
		t.Fatalf("traceresponse %q, want 00-<trace id>-<span id>-01 (%s)", r.Header.Get(telemetry.HeaderTraceResponse), r.Summary())
	}
	traceID, spanID := m[1], m[2]
	return waitTrace(t, traceID, want), spanID
}

// waitTrace flushes every part's spans and waits until Jaeger holds want spans of
// traceID; then it must hold exactly those.
func waitTrace(t *testing.T, traceID string, want int) testenv.JaegerTrace {
	t.Helper()
	ctx := client.Context(t)
	if err := st.FlushTraces(ctx); err != nil {
		t.Fatal(err)
	}
	var tr testenv.JaegerTrace
	var err error
	testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("%d spans of trace %s in Jaeger", want, traceID), func() bool {
		tr, err = jaeger.Trace(ctx, traceID)
		if err != nil && !errors.Is(err, testenv.ErrTraceNotFound) {
			t.Fatal(err)
		}
		return err == nil && len(tr.Spans) >= want
	})
	if len(tr.Spans) != want {
		t.Fatalf("trace %s has %d spans, want %d:\n%s", traceID, len(tr.Spans), want, describe(tr))
	}
	for _, s := range tr.Spans {
		if s.TraceID != traceID {
			t.Fatalf("span %s of trace %s in the answer for %s", s.OperationName, s.TraceID, traceID)
		}
	}
	return tr
}

// describe lists a trace's spans for a failure message.
func describe(tr testenv.JaegerTrace) string {
	var b strings.Builder
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "  %s %s: %q parent %s start %d tags %v\n", s.SpanID, tr.Service(s), s.OperationName, s.Parent(), s.StartTime, s.Tags)
	}
	return b.String()
}

// chain checks that the trace's spans are exactly hops, each the child of the one
// before (the first a root, or the child of root when set), each starting no earlier
// than its parent, and returns them in that order.
func chain(t *testing.T, tr testenv.JaegerTrace, root string, hops ...hop) []testenv.JaegerSpan {
	t.Helper()
	byHop := map[hop]testenv.JaegerSpan{}
	for _, s := range tr.Spans {
		h := hop{tr.Service(s), s.OperationName}
		if _, dup := byHop[h]; dup {
			t.Fatalf("two spans %s:\n%s", h, describe(tr))
		}
		byHop[h] = s
	}
	out := make([]testenv.JaegerSpan, len(hops))
	parent, start := root, int64(0)
	for i, h := range hops {
		s, ok := byHop[h]
		if !ok {
			t.Fatalf("no span %s:\n%s", h, describe(tr))
		}
		if s.Parent() != parent {
			t.Fatalf("span %s has parent %q, want %q (the hop before):\n%s", h, s.Parent(), parent, describe(tr))
		}
		if s.StartTime < start {
			t.Fatalf("span %s starts before its parent:\n%s", h, describe(tr))
		}
		out[i], parent, start = s, s.SpanID, s.StartTime
	}
	return out
}

// wantTags fails the test unless span has each of want's attributes with its value
// ("" means absent).
func wantTags(t *testing.T, h hop, s testenv.JaegerSpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := s.Tag(k); got != v {
			t.Errorf("span %s: %s = %q, want %q", h, k, got, v)
		}
	}
}

// processTag is a tag of the process (the resource) of span s.
func processTag(tr testenv.JaegerTrace, s testenv.JaegerSpan, key string) string {
	for _, tag := range tr.Processes[s.ProcessID].Tags {
		if tag.Key == key {
			return fmt.Sprint(tag.Value)
		}
	}
	return ""
}

// page is a page of the test's own, with text found nowhere else: its URL, title and
// a marker in its body must never reach a span or a log line. addr is its host:port,
// which the agent's browser is allowed to reach (SessionOptions.BrowserAllow).
type page struct{ addr, url, title, marker string }

// servePage serves a fresh page on a loopback port until the test ends.
func servePage(t *testing.T) page {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	p := page{title: "Ledger title " + token, marker: "marker-" + token}
	path := "/private-" + token + ".html"
	html := "<!doctype html><html><head><meta charset=utf-8><title>" + p.title + "</title></head>" +
		"<body style='font:40px sans-serif'><p>" + p.marker + "</p></body></html>"
	var lc net.ListenConfig
	ln, err := lc.Listen(client.Context(t), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.addr = ln.Addr().String()
	p.url = "http://" + p.addr + path
	return p
}

// startSession starts a session of agent, stopped when the test ends.
func startSession(t *testing.T, agent string, o stack.SessionOptions) *stack.Session {
	t.Helper()
	ss := stacktest.StartSession(client.Context(t), t, st, agent, o)
	return ss
}

// A view asked at replica A of an agent whose worker is attached to replica B comes
// back from Jaeger as one trace whose spans, from the api, the worker and the broker,
// form one chain in the order of the hops, with the attributes an operator filters on;
// every process's log lines of the view carry its trace id; no span and no log line
// holds the page's URL, title or text, nor a credential.
func TestViewTraceAcrossReplicas(t *testing.T) {
	ctx := client.Context(t)
	p := servePage(t)
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{Replica: 1, BrowserAllow: []string{p.addr}})
	if _, err := ss.Tool(ctx, "browser_open", map[string]string{"url": p.url}); err != nil {
		t.Fatal(err)
	}
	member := client.Token(t, "u-alice")
	client.OpenGate(t, agent)
	// The audit trail's reader, subscribed before the view (issue 37: the event names
	// the view's trace).
	auditConn, err := st.ConnectNATS(bus.RoleAudit, "traces-test-audit")
	if err != nil {
		t.Fatal(err)
	}
	defer auditConn.Close()
	events, err := auditConn.SubscribeSync(st.NS.AuditView(agent))
	if err != nil {
		t.Fatal(err)
	}
	if err := auditConn.Flush(); err != nil {
		t.Fatal(err)
	}
	r := client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(agent), member)
	if res := r.Result(t); r.Status != http.StatusOK || res.Page == nil || res.Page.Title != p.title {
		t.Fatalf("view: %s", r.Summary())
	}
	tr, rootSpan := traceOf(t, r, 8)
	traceID := tr.TraceID

	t.Run("the audit event names the trace", func(t *testing.T) {
		msg, err := events.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("no audit event of the view: %v", err)
		}
		var ev audit.View
		if err := wire.DecodeStrict(msg.Data, &ev); err != nil {
			t.Fatalf("audit event %s: %v", msg.Data, err)
		}
		if ev.TraceID != traceID || ev.Outcome != "frame" || ev.ViewerID != "u-alice" || ev.Session != ss.ID {
			t.Errorf("audit event %s, want trace %s, outcome frame, viewer u-alice, session %s", msg.Data, traceID, ss.ID)
		}
	})
	spans := chain(t, tr, "", spanView, spanRequest, spanRelay, spanWorker, spanWorkerCapture, spanCapture, spanConsumeCall, spanConsumeRoute)
	if spans[0].SpanID != rootSpan {
		t.Errorf("traceresponse names span %s, want the view route's %s", rootSpan, spans[0].SpanID)
	}
	// The trace as docs/operating.md shows it: each hop, its offset and its duration.
	var tree strings.Builder
	for i, s := range spans {
		fmt.Fprintf(&tree, "%s%-16s %-47s +%6.1f ms %7.1f ms\n", strings.Repeat("  ", i), tr.Service(s), s.OperationName,
			float64(s.StartTime-spans[0].StartTime)/1000, float64(s.Duration)/1000)
	}
	t.Logf("trace %s:\n%s", traceID, tree.String())

	t.Run("attributes", func(t *testing.T) {
		wantTags(t, spanView, spans[0], map[string]string{
			"agentfy.agent.id": agent, "agentfy.session.id": ss.ID, "agentfy.viewer.kind": "member",
			"agentfy.viewer.id": "u-alice", "agentfy.outcome": "frame", "agentfy.reason": "",
			"http.route": "/v1/agents/:id/worker/view", "http.response.status_code": "200",
		})
		// The NATS spans name the subject's template, never the session's subject.
		subject := st.NS.SubjectTemplate(bus.VerbView)
		wantTags(t, spanRequest, spans[1], map[string]string{
			"agentfy.agent.id": agent, "agentfy.session.id": ss.ID, "agentfy.outcome": "ok", "messaging.system": "nats",
			"messaging.operation.type": "send", "messaging.destination.name": subject,
		})
		wantTags(t, spanRelay, spans[2], map[string]string{
			"agentfy.session.id": ss.ID, "agentfy.outcome": "ok", "messaging.system": "nats",
			"messaging.operation.type": "process", "messaging.destination.name": subject,
		})
		wantTags(t, spanWorker, spans[3], map[string]string{"agentfy.session.id": ss.ID, "agentfy.outcome": "ok", "rpc.method": "agentfy/browserView"})
		wantTags(t, spanCapture, spans[5], map[string]string{"agentfy.outcome": "ok", "http.response.status_code": "200"})
		wantTags(t, spanConsumeRoute, spans[7], map[string]string{"agentfy.session.id": ss.ID, "agentfy.outcome": "ok", "http.response.status_code": "200"})
		// Replica A asked, replica B relayed; each part is its own service in one process.
		if a, b := processTag(tr, spans[0], "service.instance.id"), processTag(tr, spans[2], "service.instance.id"); a != "replica-a" || b != "replica-b" {
			t.Errorf("view asked at %q and relayed by %q, want replica-a and replica-b", a, b)
		}
		if env := processTag(tr, spans[4], "deployment.environment.name"); env != "test" {
			t.Errorf("OTEL_RESOURCE_ATTRIBUTES not in the resource: deployment.environment.name = %q", env)
		}
	})

	t.Run("trace id in every process's log lines", func(t *testing.T) {
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"trace_id":"`+traceID+`"`) {
				lines = append(lines, l)
			}
		}
		for _, want := range []struct{ what, a, b string }{
			{"replica A's line of the view", `"replica":"replica-a"`, `"route":"/v1/agents/:id/worker/view"`},
			{"the worker's line", `"component":"worker"`, `"message":"view relayed"`},
			{"the broker's line of the capture", `"component":"broker"`, `"route":"` + wire.CapturePath + `"`},
			{"a replica's line of the consume call", `"replica":"replica-`, `"route":"` + wire.ConsumePath + `"`},
		} {
			found := false
			for _, l := range lines {
				found = found || strings.Contains(l, want.a) && strings.Contains(l, want.b)
			}
			if !found {
				t.Errorf("no %s with trace_id %s; the lines with it:\n%s", want.what, traceID, strings.Join(lines, "\n"))
			}
		}
	})

	t.Run("no page text or credential in spans or logs", func(t *testing.T) {
		secrets := map[string]string{
			"the page's URL": p.url, "the page's path": strings.TrimPrefix(p.url, "http://"), "the page's title": p.title,
			"the page's marker": p.marker, "the member's token": member, "the worker pass": ss.Passes.Worker,
			"the broker pass": ss.Passes.Broker,
		}
		sources := map[string]string{"the run's log": logs.String()}
		for _, service := range []string{telemetry.ServiceAPI, telemetry.ServiceWorker, telemetry.ServiceBroker} {
			raw, err := jaeger.RawTraces(ctx, service, 1000)
			if err != nil {
				t.Fatal(err)
			}
			sources["the spans of "+service] = string(raw)
		}
		if !strings.Contains(sources["the spans of "+telemetry.ServiceBroker], traceID) {
			t.Fatal("the broker's traces do not hold the view's: the search below would prove nothing")
		}
		for where, text := range sources {
			for what, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("%s holds %s", where, what)
				}
			}
		}
	})
}

// A partner's view names the organisation key's id as the viewer, never the key.
func TestPartnerViewTrace(t *testing.T) {
	agent := client.NewAgent(t, "")
	startSession(t, agent, stack.SessionOptions{Replica: 1})
	key, meta, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	client.OpenGate(t, agent)
	r := client.Get(t, st.Replicas[0].URL, stacktest.PartnerViewPath("org-acme", agent), key)
	if r.Status != http.StatusOK {
		t.Fatalf("view: %s", r.Summary())
	}
	tr, _ := traceOf(t, r, 8)
	spans := chain(t, tr, "", spanPartnerView, spanRequest, spanRelay, spanWorker, spanWorkerCapture, spanCapture, spanConsumeCall, spanConsumeRoute)
	wantTags(t, spanPartnerView, spans[0], map[string]string{
		"agentfy.agent.id": agent, "agentfy.viewer.kind": "partner", "agentfy.viewer.id": meta.ID, "agentfy.outcome": "no_tab",
	})
	raw, err := jaeger.RawTraces(client.Context(t), telemetry.ServiceAPI, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), key) {
		t.Error("a span holds the organisation key")
	}
}

// A 404, a 429 and a 503 each come back as one trace with its outcome and reason.
func TestFailedViewTraces(t *testing.T) {
	member := client.Token(t, "u-alice")
	replicaA := st.Replicas[0].URL

	t.Run("404", func(t *testing.T) {
		r := client.Get(t, replicaA, stacktest.ViewPath("agent-nobody-knows"), member)
		if r.Status != http.StatusNotFound {
			t.Fatalf("%s", r.Summary())
		}
		// A refusal carries no traceresponse: its trace is found from its request line.
		tr := traceOfLine(t, r, 1)
		spans := chain(t, tr, "", spanView)
		wantTags(t, spanView, spans[0], map[string]string{"agentfy.outcome": "not_found", "agentfy.agent.id": "agent-nobody-knows", "http.response.status_code": "404"})
	})

	t.Run("429 after a 503 no_channel", func(t *testing.T) {
		// A session no worker attached to: the first view takes the window and finds
		// no one on the bus (503 no_channel), the second finds the window taken (429).
		agent := client.NewAgent(t, "")
		if _, _, err := st.Sess.Start(client.Context(t), agent); err != nil {
			t.Fatal(err)
		}
		client.OpenGate(t, agent)
		first := client.Get(t, replicaA, stacktest.ViewPath(agent), member)
		second := client.Get(t, replicaA, stacktest.ViewPath(agent), member)
		if first.Status != http.StatusServiceUnavailable || second.Status != http.StatusTooManyRequests {
			t.Fatalf("first %s, second %s", first.Summary(), second.Summary())
		}
		tr, _ := traceOf(t, first, 2)
		spans := chain(t, tr, "", spanView, spanRequest)
		wantTags(t, spanView, spans[0], map[string]string{"agentfy.outcome": "unavailable", "agentfy.reason": wire.ReasonNoChannel})
		wantTags(t, spanRequest, spans[1], map[string]string{"agentfy.outcome": "unavailable", "agentfy.reason": wire.ReasonNoChannel})
		tr, _ = traceOf(t, second, 1)
		spans = chain(t, tr, "", spanView)
		wantTags(t, spanView, spans[0], map[string]string{"agentfy.outcome": "rate_limited", "agentfy.reason": "", "http.response.status_code": "429"})
	})

	t.Run("503 broker_down", func(t *testing.T) {
		// The worker's hello listed browserView, but its broker's socket is gone.
		agent := client.NewAgent(t, "")
		ss := startSession(t, agent, stack.SessionOptions{Replica: 1, BrokerHandler: http.NotFoundHandler()})
		if err := os.Remove(filepath.Join(ss.IPCDir, wire.SocketName)); err != nil {
			t.Fatal(err)
		}
		client.OpenGate(t, agent)
		r := client.Get(t, replicaA, stacktest.ViewPath(agent), member)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s", r.Summary())
		}
		tr, _ := traceOf(t, r, 5)
		spans := chain(t, tr, "", spanView, spanRequest, spanRelay, spanWorker, spanWorkerCapture)
		for i, h := range []hop{spanView, spanRequest, spanRelay, spanWorker} {
			wantTags(t, h, spans[i], map[string]string{"agentfy.outcome": "unavailable", "agentfy.reason": wire.ReasonBrokerDown})
		}
		wantTags(t, spanView, spans[0], map[string]string{"agentfy.session.id": ss.ID, "http.response.status_code": "503"})
	})
}

// sdkGoroutines counts the goroutines running the OpenTelemetry SDK's code (a batch
// span processor, an exporter).
func sdkGoroutines(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	return strings.Count(b.String(), "go.opentelemetry.io/otel/sdk/trace.")
}

// With no OTEL endpoint or exporter set, a stack exports nothing and runs no SDK
// goroutine: no traceresponse, no trace context on any hop (the broker's request
// carries no traceparent), and the goroutines of the SDK are the traced stack's alone.
func TestTracingOff(t *testing.T) {
	ctx := client.Context(t)
	before := sdkGoroutines(t)
	offEnv := map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on", "OTEL_RESOURCE_ATTRIBUTES": "a=b"}
	off := stacktest.Start(t, stack.Options{
		Log:    zerolog.New(logs).Level(zerolog.WarnLevel),
		Traces: func(name string) string { return offEnv[name] },
	}).St
	agent := "agent-scout"
	headers := make(chan string, 1)
	ss, err := off.StartSession(ctx, agent, stack.SessionOptions{Replica: 1, BrokerHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case headers <- r.Header.Get("traceparent") + "|" + r.Header.Get("tracestate"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"busy","message":"busy"}}`))
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ss.Close)
	token, err := off.Token("u-alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := off.OpenGate(ctx, agent); err != nil {
		t.Fatal(err)
	}
	offClient := &stacktest.Client{St: off, Timeout: time.Minute}
	r := offClient.Get(t, off.Replicas[0].URL, stacktest.ViewPath(agent), token)
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("view: %s", r.Summary())
	}
	if h := r.Header.Get(telemetry.HeaderTraceResponse); h != "" {
		t.Errorf("traceresponse %q with tracing off", h)
	}
	select {
	case h := <-headers:
		if h != "|" {
			t.Errorf("the broker got trace context %q with tracing off", h)
		}
	case <-ctx.Done():
		t.Fatal("the broker was never asked")
	}
	if err := off.FlushTraces(ctx); err != nil {
		t.Fatal(err)
	}
	if after := sdkGoroutines(t); after != before {
		t.Errorf("SDK goroutines %d → %d: the untraced stack runs some", before, after)
	}
}

// The traced stack's parts are the three services, never OTEL_SERVICE_NAME's one name.
func TestServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(client.Context(t), 20*time.Second)
	defer cancel()
	if err := st.FlushTraces(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	testenv.WaitFor(t, 20*time.Second, "the services in Jaeger", func() bool {
		var err error
		got, err = jaeger.Services(ctx)
		return err == nil && len(got) >= 1
	})
	for _, s := range got {
		if s == traceEnv["OTEL_SERVICE_NAME"] {
			t.Errorf("a part took OTEL_SERVICE_NAME's name %q: services %v", s, got)
		}
		if !strings.HasPrefix(s, "agentfy-") {
			t.Errorf("unknown service %q", s)
		}
	}
}

// TestTracingCost measures what tracing adds to a view: the same views (no tab open,
// so every hop runs — the grant, NATS, the relay, the worker, the broker and its consume
// call — but no screenshot, whose tens of milliseconds of noise would hide the cost), at
// replica A of an agent whose worker is on replica B, interleaved between this suite's
// traced stack (every view sampled and exported to Jaeger) and an untraced one, in the
// same run. It logs the medians; it asserts that every traced view was sampled and no
// untraced one was.
func TestTracingCost(t *testing.T) {
	const views = 60
	ctx := client.Context(t)
	// Logged as the traced stack is (debug lines into a buffer), so that only tracing
	// differs.
	off := stacktest.Start(t, stack.Options{Log: zerolog.New(&testenv.Buffer{}).Level(zerolog.DebugLevel).With().Timestamp().Logger()}).St
	type side struct {
		name  string
		st    *stack.Stack
		agent string
		token string
		took  []time.Duration
	}
	sides := []*side{{name: "traced", st: st, agent: client.NewAgent(t, "")}, {name: "untraced", st: off, agent: "agent-scout"}}
	for _, s := range sides {
		stacktest.StartSession(ctx, t, s.st, s.agent, stack.SessionOptions{Replica: 1})
		var err error
		if s.token, err = s.st.Token("u-alice", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	httpc := &http.Client{}
	for i := range views + 5 {
		// Each goes first every other time, so that neither always finds the other's
		// aftermath (the export of the traced view's spans, a GC).
		order := sides
		if i%2 == 1 {
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			if err := s.st.OpenGateFor(ctx, s.agent, "user:u-alice"); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.st.Replicas[0].URL+stacktest.ViewPath(s.agent), nil)
			req.Header.Set("Authorization", "Bearer "+s.token)
			start := time.Now()
			resp, err := httpc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s view: status %d", s.name, resp.StatusCode)
			}
			if sampled := resp.Header.Get(telemetry.HeaderTraceResponse) != ""; sampled != (s.st == st) {
				t.Fatalf("%s view: traceresponse %q", s.name, resp.Header.Get(telemetry.HeaderTraceResponse))
			}
			if i >= 5 { // the first few warm connections and caches up
				s.took = append(s.took, took)
			}
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	on, offMedian := median(sides[0].took), median(sides[1].took)
	t.Logf("view without a tab, p50 of %d interleaved: traced %v, untraced %v, difference %v", views, on, offMedian, on-offMedian)
}
