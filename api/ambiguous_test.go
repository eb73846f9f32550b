package api_test

import (
	"maps"
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

// TestAdminRefusesAmbiguousRequests: on the admin listener, two Authorization headers
// and an encoded slash in the path are 400, before the credential or the route is
// looked at, and change nothing (issue 35 item 6). The encoded slashes below decode to
// real routes — t1%2Fmembers/u2 to "add u2 to t1", which it did.
func TestAdminRefusesAmbiguousRequests(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	e := startAdmin(t, ctx)
	member, err := auth.MintHS256(jwtSecret, jwtIssuer, jwtAudience, "u1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const js = "application/json"
	tests := []stacktest.Ambiguous{
		{Name: "the admin key twice", Method: "PUT", Path: "/v1/admin/users/u9", Bearers: []string{e.key, e.key}, ContentType: js, Body: `{"name":"N"}`},
		{Name: "the admin key then a JWT", Method: "PUT", Path: "/v1/admin/teams/t1/members/u2", Bearers: []string{e.key, member}},
		{Name: "a JWT then the admin key", Method: "DELETE", Path: "/v1/admin/agents/a1", Bearers: []string{member, e.key}},
		{Name: "two headers on a read", Method: "GET", Path: "/v1/admin/teams/t1/members", Bearers: []string{e.key, "nope"}},
		{Name: "encoded slash into a member's route", Method: "PUT", Path: "/v1/admin/teams/t1%2Fmembers/u2", Bearers: []string{e.key}},
		{Name: "lower-case encoded slash", Method: "PUT", Path: "/v1/admin/teams/t1%2fmembers/u2", Bearers: []string{e.key}},
		{Name: "encoded slash into the member list", Method: "PUT", Path: "/v1/admin/teams/t1%2Fmembers", Bearers: []string{e.key}, ContentType: js, Body: `{"members":["u2"]}`},
		{Name: "encoded slash on a read", Method: "GET", Path: "/v1/admin/orgs/o1%2Fkeys", Bearers: []string{e.key}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			before := e.snapshot(t, ctx)
			a := tt.Send(ctx, t, e.url)
			// A path with an id holding '/' is none of the document's: only the answer's
			// shape is checked then.
			doc := e.oas
			if strings.Contains(strings.ToLower(tt.Path), "%2f") {
				doc = nil
			}
			stacktest.WantRefused(ctx, t, doc, tt, a)
			if after := e.snapshot(t, ctx); !maps.Equal(before, after) {
				t.Errorf("a refused request changed Redis:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	if ok, err := e.dir.IsMember(ctx, "t1", "u2"); err != nil || ok {
		t.Fatalf("u2 a member of t1 after the refusals: %v %v", ok, err)
	}
}

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
