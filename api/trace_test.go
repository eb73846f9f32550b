package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/api"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/wire"
)

// A replica traces the two view routes and the consume route alone. Each span is named
// by its method and the template of the route the router matched (and http.route is
// that template), never by the path with its ids; no other request gets a span: health
// checks, the agents list, a path the router does not match (a trailing slash), a
// method the route does not take.
func TestTracedRoutes(t *testing.T) {
	c := stacktest.Start(t, stack.Options{Replicas: -1, Deployment: traceDeployment, JetStreamDir: t.TempDir()})
	tr := startTracedReplica(t, c, "replica-routes", "")
	alice := c.Token(t, "u-alice")

	for _, u := range []struct{ method, path string }{
		{http.MethodGet, "/healthz"},
		{http.MethodGet, "/v1/agents"},
		{http.MethodGet, stacktest.ViewPath("agent-nobody-knows") + "/"},
		{http.MethodPost, stacktest.ViewPath("agent-nobody-knows")},
		{http.MethodGet, wire.ConsumePath},
	} {
		tr.ask(t, c, u.method, u.path, alice, traceContext{}, "", false)
	}

	tests := []struct {
		name, method, path, bearer, body string
		wantStatus                       int
		wantRoute                        string
	}{
		{name: "a member's view", method: http.MethodGet, path: stacktest.ViewPath("agent-nobody-knows"), bearer: alice,
			wantStatus: http.StatusNotFound, wantRoute: api.AgentViewRoute},
		{name: "a view through an encoded slash", method: http.MethodGet, path: "/v1/agents/agent-nobody-knows%2Fworker/view", bearer: alice,
			wantStatus: http.StatusBadRequest, wantRoute: api.AgentViewRoute},
		{name: "a partner's view", method: http.MethodGet, path: stacktest.PartnerViewPath("org-acme", "agent-nobody-knows"), bearer: "not-a-key",
			wantStatus: http.StatusUnauthorized, wantRoute: api.PartnerViewRoute},
		{name: "the consume route", method: http.MethodPost, path: wire.ConsumePath, bearer: alice, body: stacktest.ConsumeRequest("req-1"),
			wantStatus: http.StatusForbidden, wantRoute: wire.ConsumePath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tr.ask(t, c, tt.method, tt.path, tt.bearer, traceContext{}, tt.body, true)
			if a.status != tt.wantStatus {
				t.Fatalf("status %d, want %d", a.status, tt.wantStatus)
			}
			if want := tt.method + " " + tt.wantRoute; a.span.Name() != want {
				t.Errorf("span %q, want %q", a.span.Name(), want)
			}
			attrs := map[string]string{}
			for _, kv := range a.span.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["http.route"] != tt.wantRoute || attrs["http.response.status_code"] != strconv.Itoa(tt.wantStatus) {
				t.Errorf("http.route %q, status %q", attrs["http.route"], attrs["http.response.status_code"])
			}
			for k, v := range attrs {
				if strings.Contains(v, "agent-nobody-knows/") || strings.Contains(v, alice) || strings.Contains(v, "not-a-key") {
					t.Errorf("attribute %s = %q holds the path or the credential", k, v)
				}
			}
		})
	}

	servers := 0
	for _, s := range tr.rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			servers++
		}
	}
	if servers != len(tests) {
		t.Errorf("%d server spans, want %d: one per request to a traced route", servers, len(tests))
	}
}
