package traces

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// traceContext is a W3C trace context as a caller sends it.
type traceContext struct{ traceparent, tracestate string }

// outsiderMarker ends every member of an outsider's tracestate: no span, log line or
// hop may carry it.
const outsiderMarker = "outsidermarker"

// outsiderContext is an outsider's trace context: a traceparent naming traceID and
// parent with flags, and a tracestate of about 16 KB, the most the standard allows (32
// members of 256-character keys and values).
func outsiderContext(traceID, parent, flags string) traceContext {
	members := make([]string, 32)
	for i := range members {
		members[i] = fmt.Sprintf("k%02d", i) + strings.Repeat("a", 253) + "=" +
			strings.Repeat("v", 256-len(outsiderMarker)) + outsiderMarker
	}
	return traceContext{traceparent: "00-" + traceID + "-" + parent + "-" + flags, tracestate: strings.Join(members, ",")}
}

// newID is n random bytes in hex: a trace id (16) or a span id (8) of the outsider's.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// send asks url with bearer (none when empty), tc and body, as an outsider does.
func send(t *testing.T, method, url, bearer string, tc traceContext, body string) stacktest.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(client.Context(t), method, url, strings.NewReader(body))
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
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	return stacktest.Response{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// loggedTrace is the trace_id of the request line (the one naming its route) that a
// replica logged in buf for the answer r (its X-Request-Id), once it is written: an
// answer without traceresponse is found so.
func loggedTrace(t *testing.T, buf *testenv.Buffer, r stacktest.Response) string {
	t.Helper()
	id := r.Header.Get("X-Request-Id")
	var traceID string
	testenv.WaitFor(t, 10*time.Second, "the request line of "+id, func() bool {
		for l := range strings.Lines(buf.String()) {
			var m struct {
				Request string `json:"request"`
				Route   string `json:"route"`
				TraceID string `json:"trace_id"`
			}
			if json.Unmarshal([]byte(l), &m) == nil && m.Request == id && m.Route != "" {
				traceID = m.TraceID
				return true
			}
		}
		return false
	})
	return traceID
}

// traceOfLine reads the trace of an answer that carries no traceresponse (a refusal)
// back from Jaeger: the trace its request line names, once want spans arrived.
func traceOfLine(t *testing.T, r stacktest.Response, want int) testenv.JaegerTrace {
	t.Helper()
	if h := r.Header.Get(telemetry.HeaderTraceResponse); h != "" {
		t.Errorf("traceresponse %q on a %d", h, r.Status)
	}
	traceID := loggedTrace(t, logs, r)
	if traceID == "" {
		t.Fatalf("the request line of the %d names no trace", r.Status)
	}
	return waitTrace(t, traceID, want)
}

// allSpans is every span of every service that Jaeger holds.
func allSpans(t *testing.T) []testenv.JaegerSpan {
	t.Helper()
	var out []testenv.JaegerSpan
	for _, service := range []string{telemetry.ServiceAPI, telemetry.ServiceWorker, telemetry.ServiceBroker} {
		raw, err := jaeger.RawTraces(client.Context(t), service, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Data []testenv.JaegerTrace `json:"data"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		for _, tr := range page.Data {
			out = append(out, tr.Spans...)
		}
	}
	return out
}

// hopHeaders serves a session's broker socket: it answers every capture 503 busy and
// hands on the trace context the worker's request carried.
func hopHeaders() (http.Handler, <-chan traceContext) {
	got := make(chan traceContext, 4)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- traceContext{r.Header.Get("traceparent"), r.Header.Get("tracestate")}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"busy","message":"busy"}}`))
	}), got
}

// An outsider's trace context steers nothing (issue 50, goal 3). A member's view is
// asked, then an outsider sends requests whose traceparent names that view's trace and
// its root span, sampled, with a 16 KB tracestate: another member's view, the same
// with flags 00, another team's member's 404, a 401 and a consume call without a
// broker pass. Each is the root of a trace of the deployment's own, read back from the
// real Jaeger: a view's spans still form one chain down to the consume route (inside
// the deployment the context flows as before); the member's view's trace keeps its 8
// spans; no span in Jaeger has the outsider's spans as parent or link, its own trace
// ids are not there, and neither they nor its tracestate reach a log line, a hop or an
// audit event, which carry the deployment's trace ids. Only the views of a viewer let
// in carry traceresponse.
func TestOutsiderCannotSteerTheTrace(t *testing.T) {
	ctx := client.Context(t)
	replicaA := st.Replicas[0].URL
	agent := client.NewAgent(t, "")
	startSession(t, agent, stack.SessionOptions{Replica: 1}) // no tab open: every hop, no frame
	busy := client.NewAgent(t, "")
	handler, hops := hopHeaders()
	startSession(t, busy, stack.SessionOptions{Replica: 1, BrokerHandler: handler})
	alice, carol := client.Token(t, "u-alice"), client.Token(t, "u-carol") // carol is of another team
	auditConn, err := st.ConnectNATS(bus.RoleAudit, "traces-test-outsider")
	if err != nil {
		t.Fatal(err)
	}
	defer auditConn.Close()
	// Every event, whatever its subject: a refusal that learnt no agent has the
	// subject of the rest.
	events, err := auditConn.SubscribeSync(st.NS.AuditWildcard())
	if err != nil {
		t.Fatal(err)
	}
	if err := auditConn.Flush(); err != nil {
		t.Fatal(err)
	}

	client.OpenGate(t, agent)
	victim := client.Get(t, replicaA, stacktest.ViewPath(agent), alice)
	if victim.Status != http.StatusOK {
		t.Fatalf("the member's view: %s", victim.Summary())
	}
	victimTrace, victimRoot := traceOf(t, victim, 8)
	stolen := outsiderContext(victimTrace.TraceID, victimRoot, "01")
	ownTrace, ownSpan := newID(16), newID(8)
	unsampled := outsiderContext(ownTrace, ownSpan, "00")
	unauthTrace, unauthSpan := newID(16), newID(8)
	unauth := outsiderContext(unauthTrace, unauthSpan, "01")

	viewHops := []hop{spanView, spanRequest, spanRelay, spanWorker, spanWorkerCapture, spanCapture, spanConsumeCall, spanConsumeRoute}
	deployment := map[string]string{} // the deployment's trace id of each request, by name
	t.Run("a member's view", func(t *testing.T) {
		client.OpenGate(t, agent)
		r := send(t, http.MethodGet, replicaA+stacktest.ViewPath(agent), alice, stolen, "")
		if r.Status != http.StatusOK {
			t.Fatalf("%s", r.Summary())
		}
		tr, root := traceOf(t, r, 8)
		spans := chain(t, tr, "", viewHops...)
		if tr.TraceID == victimTrace.TraceID || spans[0].SpanID != root {
			t.Errorf("the view is in trace %s, root %s", tr.TraceID, spans[0].SpanID)
		}
		deployment["view"] = tr.TraceID
	})
	t.Run("flags 00 keep no view out", func(t *testing.T) {
		client.OpenGate(t, agent)
		r := send(t, http.MethodGet, replicaA+stacktest.ViewPath(agent), alice, unsampled, "")
		if r.Status != http.StatusOK {
			t.Fatalf("%s", r.Summary())
		}
		tr, _ := traceOf(t, r, 8)
		chain(t, tr, "", viewHops...)
		deployment["flags 00"] = tr.TraceID
	})
	t.Run("another team's member's 404", func(t *testing.T) {
		r := send(t, http.MethodGet, replicaA+stacktest.ViewPath(agent), carol, stolen, "")
		if r.Status != http.StatusNotFound {
			t.Fatalf("%s", r.Summary())
		}
		tr := traceOfLine(t, r, 1)
		chain(t, tr, "", spanView)
		deployment["404"] = tr.TraceID
	})
	t.Run("a 401", func(t *testing.T) {
		r := send(t, http.MethodGet, replicaA+stacktest.ViewPath(agent), "", unauth, "")
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("%s", r.Summary())
		}
		tr := traceOfLine(t, r, 1)
		chain(t, tr, "", spanView)
		deployment["401"] = tr.TraceID
	})
	t.Run("a consume call without a broker pass", func(t *testing.T) {
		r := send(t, http.MethodPost, replicaA+wire.ConsumePath, alice, stolen, stacktest.ConsumeRequest("req-outsider"))
		if r.Status != http.StatusForbidden {
			t.Fatalf("%s", r.Summary())
		}
		tr := traceOfLine(t, r, 1)
		chain(t, tr, "", spanConsumeRoute)
	})
	t.Run("the tracestate rides no hop", func(t *testing.T) {
		client.OpenGate(t, busy)
		r := send(t, http.MethodGet, replicaA+stacktest.ViewPath(busy), alice, stolen, "")
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s", r.Summary())
		}
		m := traceResponse.FindStringSubmatch(r.Header.Get(telemetry.HeaderTraceResponse))
		if m == nil {
			t.Fatalf("traceresponse %q on a 503 of a member let in", r.Header.Get(telemetry.HeaderTraceResponse))
		}
		var got traceContext
		select {
		case got = <-hops:
		case <-ctx.Done():
			t.Fatal("the broker was never asked")
		}
		if got.tracestate != "" || !strings.HasPrefix(got.traceparent, "00-"+m[1]+"-") {
			t.Errorf("the worker's call to its broker carried traceparent %q and a tracestate of %d bytes; want the view's trace %s and none",
				got.traceparent, len(got.tracestate), m[1])
		}
	})

	// The member's view's trace is as it was: nothing joined it.
	waitTrace(t, victimTrace.TraceID, 8)
	t.Run("Jaeger holds nothing of the outsider's", func(t *testing.T) {
		for _, id := range []string{ownTrace, unauthTrace} {
			if _, err := jaeger.Trace(ctx, id); !errors.Is(err, testenv.ErrTraceNotFound) {
				t.Errorf("the outsider's trace %s is in Jaeger (err %v)", id, err)
			}
		}
		spans := allSpans(t)
		if len(spans) == 0 {
			t.Fatal("Jaeger lists no span: the search below would prove nothing")
		}
		for _, s := range spans {
			for _, ref := range s.References {
				if ref.TraceID == ownTrace || ref.TraceID == unauthTrace || ref.SpanID == ownSpan || ref.SpanID == unauthSpan {
					t.Errorf("span %s %q refers to the outsider's %s %s (%s)", s.SpanID, s.OperationName, ref.TraceID, ref.SpanID, ref.RefType)
				}
				if ref.SpanID == victimRoot && s.TraceID != victimTrace.TraceID {
					t.Errorf("span %s %q of trace %s refers to the member's view's span (%s)", s.SpanID, s.OperationName, s.TraceID, ref.RefType)
				}
			}
		}
	})
	t.Run("no log line holds the outsider's context", func(t *testing.T) {
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, ownTrace) || strings.Contains(l, unauthTrace) || strings.Contains(l, outsiderMarker) {
				t.Errorf("log line %s holds the outsider's trace context", strings.TrimSpace(l))
			}
		}
	})
	t.Run("the audit events carry the deployment's trace ids", func(t *testing.T) {
		want := map[string]bool{victimTrace.TraceID: true}
		for _, id := range deployment {
			want[id] = true
		}
		seen := map[string]bool{}
		for len(want) > 0 {
			msg, err := events.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no audit event names the traces %v (the requests' %v): %v", want, deployment, err)
			}
			if seen[string(msg.Data)] {
				continue // published again
			}
			seen[string(msg.Data)] = true
			var ev struct {
				TraceID string `json:"traceId"`
			}
			if err := json.Unmarshal(msg.Data, &ev); err != nil {
				t.Fatalf("audit event %s: %v", msg.Data, err)
			}
			switch {
			case ev.TraceID == ownTrace || ev.TraceID == unauthTrace:
				t.Errorf("audit event %s names the outsider's trace", msg.Data)
			case ev.TraceID == victimTrace.TraceID && !want[ev.TraceID]:
				t.Errorf("audit event %s names the member's view's trace: a second event of it", msg.Data)
			}
			delete(want, ev.TraceID)
		}
	})
}

// With OTEL_TRACES_SAMPLER=parentbased_traceidratio and a ratio of 0, an outsider's
// sampled flag gets no view traced: the answer carries no traceresponse, the view's
// hops carry the deployment's unsampled context (flags 00, no tracestate), and Jaeger
// receives nothing of it or of the outsider's trace.
func TestOutsiderSampledFlagAtRatioZero(t *testing.T) {
	ctx := client.Context(t)
	zeroLogs := &testenv.Buffer{}
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLPHTTP,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0",
	}
	zero := stacktest.Start(t, stack.Options{
		Log:    zerolog.New(zeroLogs).Level(zerolog.DebugLevel),
		Traces: func(name string) string { return env[name] },
	}).St
	agent := "agent-scout"
	handler, hops := hopHeaders()
	stacktest.StartSession(ctx, t, zero, agent, stack.SessionOptions{Replica: 1, BrokerHandler: handler})
	token, err := zero.Token("u-alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := zero.OpenGate(ctx, agent); err != nil {
		t.Fatal(err)
	}
	outsiderTrace := newID(16)
	r := send(t, http.MethodGet, zero.Replicas[0].URL+stacktest.ViewPath(agent), token, outsiderContext(outsiderTrace, newID(8), "01"), "")
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("view: %s", r.Summary())
	}
	if h := r.Header.Get(telemetry.HeaderTraceResponse); h != "" {
		t.Errorf("traceresponse %q at ratio 0", h)
	}
	var got traceContext
	select {
	case got = <-hops:
	case <-ctx.Done():
		t.Fatal("the broker was never asked")
	}
	own := loggedTrace(t, zeroLogs, r)
	if own == "" || own == outsiderTrace {
		t.Fatalf("the view's log line names trace %q, want the deployment's own", own)
	}
	if want := "00-" + own + "-"; !strings.HasPrefix(got.traceparent, want) || !strings.HasSuffix(got.traceparent, "-00") || got.tracestate != "" {
		t.Errorf("the worker's call to its broker carried traceparent %q and a tracestate of %d bytes; want %s…-00 and none",
			got.traceparent, len(got.tracestate), want)
	}
	if strings.Contains(zeroLogs.String(), outsiderTrace) || strings.Contains(zeroLogs.String(), outsiderMarker) {
		t.Error("a log line holds the outsider's trace context")
	}
	if err := zero.FlushTraces(ctx); err != nil {
		t.Fatal(err)
	}
	// Flushed: had anything been sampled, Jaeger would hold it (it stores what it is
	// sent at once).
	for _, id := range []string{outsiderTrace, own} {
		if _, err := jaeger.Trace(ctx, id); !errors.Is(err, testenv.ErrTraceNotFound) {
			t.Errorf("trace %s is in Jaeger at ratio 0 (err %v)", id, err)
		}
	}
}
