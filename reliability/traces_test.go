package reliability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// traceResponse reads a traceresponse header: version, trace id, span id, flags.
var traceResponse = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// TestOutsiderTraceContext runs a stack of its own whose parts export their spans to a
// real Jaeger, and sends views carrying an outsider's trace context — sampled and
// naming a member's view's trace, or with flags 00 — each with a 16 KB tracestate:
// the deployment starts traces of its own and samples them itself, and neither the
// outsider's ids nor its tracestate reach Jaeger, a log line or an audit event.
func TestOutsiderTraceContext(t *testing.T) {
	observed := ""
	record(t, "Traces no outsider can steer", "an outsider's traceparent (sampled and naming a member's view's trace, or flags 00) with a 16 KB tracestate: the member's trace keeps its spans; no span, log line or audit event carries the outsider's ids or tracestate; flags 00 do not untrace a view", &observed)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jaeger := testenv.StartJaeger(t)
	logs := &testenv.Buffer{}
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLPHTTP}
	traced := stacktest.Start(t, stack.Options{
		Log: zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger(), Traces: func(k string) string { return env[k] },
	}).St
	c := &stacktest.Client{St: traced}
	agent := c.NewAgent(t, "")
	stacktest.LiveSession(ctx, t, traced, agent, stack.SessionOptions{Replica: 1}, "/")
	alice := c.Token(t, "u-alice")
	url := traced.Replicas[0].URL + stacktest.ViewPath(agent)

	// spans waits until Jaeger holds a trace of id with at least min spans.
	spans := func(id string, min int) int {
		if err := traced.FlushTraces(ctx); err != nil {
			t.Fatal(err)
		}
		n := 0
		testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("trace %s in Jaeger", id), func() bool {
			tr, err := jaeger.Trace(ctx, id)
			if err != nil && !errors.Is(err, testenv.ErrTraceNotFound) {
				t.Fatal(err)
			}
			n = len(tr.Spans)
			return err == nil && n >= min
		})
		return n
	}
	view := func(bearer, traceparent, tracestate string) (stacktest.Response, string) {
		c.OpenGate(t, agent)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("traceparent", traceparent)
		req.Header.Set("tracestate", tracestate)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		r := stacktest.Response{Status: resp.StatusCode, Header: resp.Header}
		m := traceResponse.FindStringSubmatch(resp.Header.Get(telemetry.HeaderTraceResponse))
		if m == nil {
			return r, ""
		}
		return r, m[1]
	}
	newID := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	const marker = "outsidermarker"
	members := make([]string, 32)
	for i := range members {
		members[i] = fmt.Sprintf("k%02d", i) + strings.Repeat("a", 253) + "=" + strings.Repeat("v", 256-len(marker)) + marker
	}
	state := strings.Join(members, ",")

	// The member's own view, and its trace.
	r, victim := view(alice, "", "")
	if r.Status != http.StatusOK || victim == "" {
		t.Fatalf("the member's view: %d, traceresponse %q", r.Status, r.Header.Get(telemetry.HeaderTraceResponse))
	}
	before := spans(victim, 1)
	// The outsider: a 401 made a child of the member's view, a member's view under a
	// trace id of the outsider's, and one with flags 00.
	stolen := "00-" + victim + "-" + newID(8) + "-01"
	if r, _ := view("not-a-token", stolen, state); r.Status != http.StatusUnauthorized {
		t.Fatalf("the outsider's 401: %d", r.Status)
	}
	own, unsampled := newID(16), newID(16)
	r1, first := view(alice, "00-"+own+"-"+newID(8)+"-01", state)
	r2, second := view(alice, "00-"+unsampled+"-"+newID(8)+"-00", state)
	if r1.Status != http.StatusOK || r2.Status != http.StatusOK || first == "" || second == "" {
		t.Fatalf("views under an outsider's context: %d (traceresponse %q), %d (%q)", r1.Status, first, r2.Status, second)
	}
	if first == own || second == unsampled || first == victim || second == victim {
		t.Fatalf("a view continued the outsider's trace: %s, %s", first, second)
	}
	// Both are traced (flags 00 untrace nothing), and once they are in Jaeger, so would
	// anything the outsider's requests made be.
	spans(first, 1)
	spans(second, 1)
	if after := spans(victim, before); after != before {
		t.Fatalf("the member's trace went from %d spans to %d", before, after)
	}
	for _, id := range []string{own, unsampled} {
		if _, err := jaeger.Trace(ctx, id); !errors.Is(err, testenv.ErrTraceNotFound) {
			t.Fatalf("Jaeger holds the outsider's trace %s: %v", id, err)
		}
	}
	for _, s := range []string{own, unsampled, marker} {
		if strings.Contains(logs.String(), s) {
			t.Fatalf("a log line carries the outsider's %q", s)
		}
	}
	stream := c.AuditStream(t)
	events := c.ViewEvents(t, stream, agent, 4, nil)
	for _, ev := range events {
		for _, s := range []string{own, unsampled, marker} {
			if strings.Contains(string(ev.Raw), s) {
				t.Fatalf("an audit event carries the outsider's %q: %s", s, ev.Raw)
			}
		}
		if ev.Outcome == "unauthenticated" && ev.TraceID == victim {
			t.Fatalf("the outsider's 401 joined the member's trace: %s", ev.Raw)
		}
	}
	frames := 0
	for _, ev := range events {
		if ev.Outcome == audit.OutcomeFrame && ev.TraceID != "" {
			frames++
		}
	}
	observed = fmt.Sprintf("the member's trace kept its %d spans; the outsider's views traced as %s… and %s… (flags 00 too); its ids and tracestate in no span, log line or audit event (%d events, %d frames with the deployment's trace ids)",
		before, first[:8], second[:8], len(events), frames)
}
