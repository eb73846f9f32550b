package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// TestAmbiguousRequestsAreRefused: on the main listener — the view routes, the agent
// list, the status stream, the consume route and the worker's channel — two
// Authorization headers and an encoded slash in the path are 400 with no-store and the
// error body, before any handler reads the credential (gin's GetHeader, net/http's
// Header.Get and channel.Hub read the first) or the route (matched on the decoded
// path: idle%2Fworker%2Fview was agent idle's view). Each answer of a documented route
// conforms to openapi/openapi.yaml.
func TestAmbiguousRequestsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	v, err := oas.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := s.c.St.Creds.CreateOrgKey(ctx, "o1", "prod", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	_, passes, err := s.c.St.Sess.Start(ctx, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		stacktest.Ambiguous
		documented bool // the route is in openapi/openapi.yaml
	}{
		{stacktest.Ambiguous{Name: "agents, the token twice", Method: "GET", Path: "/v1/agents", Bearers: []string{s.token, s.token}}, true},
		{stacktest.Ambiguous{Name: "view, token and garbage", Method: "GET", Path: "/v1/agents/idle/worker/view", Bearers: []string{s.token, "nope"}}, true},
		{stacktest.Ambiguous{Name: "view, garbage and token", Method: "GET", Path: "/v1/agents/idle/worker/view", Bearers: []string{"nope", s.token}}, true},
		{stacktest.Ambiguous{Name: "partner view, key and token", Method: "GET", Path: "/v1/orgs/o1/agents/idle/worker/view", Bearers: []string{key, s.token}}, true},
		{stacktest.Ambiguous{Name: "status, the token twice", Method: "GET", Path: "/v1/agents/idle/worker/status", Bearers: []string{s.token, s.token}}, false},
		{stacktest.Ambiguous{Name: "consume, broker pass and worker pass", Method: "POST", Path: wire.ConsumePath, Bearers: []string{passes.Broker, passes.Worker}, ContentType: "application/json", Body: `{"requestId":"` + strings.Repeat("a", 64) + `"}`}, false},
		{stacktest.Ambiguous{Name: "worker channel, the pass twice", Method: "GET", Path: wire.ChannelPath, Bearers: []string{passes.Worker, passes.Worker}}, false},
		{stacktest.Ambiguous{Name: "healthz with two headers", Method: "GET", Path: "/healthz", Bearers: []string{"a", "b"}}, false},
		{stacktest.Ambiguous{Name: "encoded slashes into a view", Method: "GET", Path: "/v1/agents/idle%2Fworker%2Fview", Bearers: []string{s.token}}, false},
		{stacktest.Ambiguous{Name: "lower-case encoded slash into a view", Method: "GET", Path: "/v1/agents/idle%2fworker/view", Bearers: []string{s.token}}, false},
		{stacktest.Ambiguous{Name: "encoded slash into a partner view", Method: "GET", Path: "/v1/orgs/o1%2Fagents/idle/worker/view", Bearers: []string{key}}, false},
		{stacktest.Ambiguous{Name: "encoded slash into the status", Method: "GET", Path: "/v1/agents/idle%2Fworker%2Fstatus", Bearers: []string{s.token}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			var doc *oas.Validator
			if tt.documented {
				doc = v
			}
			stacktest.WantRefused(ctx, t, doc, tt.Ambiguous, tt.Send(ctx, t, s.base))
		})
	}
	// The worker channel with one header still opens: the refusal is of two.
	if a := (stacktest.Ambiguous{Method: "GET", Path: wire.ChannelPath, Bearers: []string{passes.Worker}}).Send(ctx, t, s.base); a.Status == http.StatusBadRequest {
		t.Fatalf("one Authorization header refused: %s", a.Body)
	}
	// And nothing was taken of the view's gate by the refused views.
	if status, _, body := s.get(t, ctx, "/v1/agents/idle/worker/view"); status != http.StatusOK {
		t.Fatalf("the member's view after the refusals: %d %s", status, body)
	}
}
