package api_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// ambiguous is one request that could be read two ways: its path as written (an
// encoded slash stays in it) and its Authorization headers, one per bearer.
type ambiguous struct {
	name, method, path string
	bearers            []string
	contentType, body  string
}

// answer is what a server answered a request.
type answer struct {
	req    *http.Request
	status int
	header http.Header
	body   []byte
}

// send sends r to base and returns the answer, its body read.
func (r ambiguous) send(t *testing.T, ctx context.Context, base string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range r.bearers {
		req.Header.Add("Authorization", "Bearer "+b)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return answer{req: req, status: resp.StatusCode, header: resp.Header, body: b}
}

// wantRefused checks that an ambiguous request was answered 400 with no-store and the
// error body (wire.ErrorBody, exactly), and, when v is set, that the answer conforms to
// v's document.
func wantRefused(t *testing.T, ctx context.Context, v *oas.Validator, r ambiguous, a answer) {
	t.Helper()
	if a.status != http.StatusBadRequest {
		t.Fatalf("%s %s: status %d, want 400: %.300s", r.method, r.path, a.status, a.body)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	var eb wire.ErrorBody
	if err := wire.DecodeStrict(a.body, &eb); err != nil || eb.Error.Code != "bad_request" || eb.Error.Message == "" {
		t.Errorf("body %.300q is not the error body of a bad request (%v)", a.body, err)
	}
	if v != nil {
		if err := v.Validate(ctx, a.req, a.status, a.header, a.body); err != nil {
			t.Errorf("%v\nbody: %.300s", err, a.body)
		}
	}
}

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
	tests := []ambiguous{
		{name: "the admin key twice", method: "PUT", path: "/v1/admin/users/u9", bearers: []string{e.key, e.key}, contentType: js, body: `{"name":"N"}`},
		{name: "the admin key then a JWT", method: "PUT", path: "/v1/admin/teams/t1/members/u2", bearers: []string{e.key, member}},
		{name: "a JWT then the admin key", method: "DELETE", path: "/v1/admin/agents/a1", bearers: []string{member, e.key}},
		{name: "two headers on a read", method: "GET", path: "/v1/admin/teams/t1/members", bearers: []string{e.key, "nope"}},
		{name: "encoded slash into a member's route", method: "PUT", path: "/v1/admin/teams/t1%2Fmembers/u2", bearers: []string{e.key}},
		{name: "lower-case encoded slash", method: "PUT", path: "/v1/admin/teams/t1%2fmembers/u2", bearers: []string{e.key}},
		{name: "encoded slash into the member list", method: "PUT", path: "/v1/admin/teams/t1%2Fmembers", bearers: []string{e.key}, contentType: js, body: `{"members":["u2"]}`},
		{name: "encoded slash on a read", method: "GET", path: "/v1/admin/orgs/o1%2Fkeys", bearers: []string{e.key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.snapshot(t, ctx)
			a := tt.send(t, ctx, e.url)
			// A path with an id holding '/' is none of the document's: only the answer's
			// shape is checked then.
			doc := e.oas
			if strings.Contains(strings.ToLower(tt.path), "%2f") {
				doc = nil
			}
			wantRefused(t, ctx, doc, tt, a)
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
		ambiguous
		documented bool // the route is in openapi/openapi.yaml
	}{
		{ambiguous{name: "agents, the token twice", method: "GET", path: "/v1/agents", bearers: []string{s.token, s.token}}, true},
		{ambiguous{name: "view, token and garbage", method: "GET", path: "/v1/agents/idle/worker/view", bearers: []string{s.token, "nope"}}, true},
		{ambiguous{name: "view, garbage and token", method: "GET", path: "/v1/agents/idle/worker/view", bearers: []string{"nope", s.token}}, true},
		{ambiguous{name: "partner view, key and token", method: "GET", path: "/v1/orgs/o1/agents/idle/worker/view", bearers: []string{key, s.token}}, true},
		{ambiguous{name: "status, the token twice", method: "GET", path: "/v1/agents/idle/worker/status", bearers: []string{s.token, s.token}}, false},
		{ambiguous{name: "consume, broker pass and worker pass", method: "POST", path: wire.ConsumePath, bearers: []string{passes.Broker, passes.Worker}, contentType: "application/json", body: `{"requestId":"` + strings.Repeat("a", 64) + `"}`}, false},
		{ambiguous{name: "worker channel, the pass twice", method: "GET", path: wire.ChannelPath, bearers: []string{passes.Worker, passes.Worker}}, false},
		{ambiguous{name: "healthz with two headers", method: "GET", path: "/healthz", bearers: []string{"a", "b"}}, false},
		{ambiguous{name: "encoded slashes into a view", method: "GET", path: "/v1/agents/idle%2Fworker%2Fview", bearers: []string{s.token}}, false},
		{ambiguous{name: "lower-case encoded slash into a view", method: "GET", path: "/v1/agents/idle%2fworker/view", bearers: []string{s.token}}, false},
		{ambiguous{name: "encoded slash into a partner view", method: "GET", path: "/v1/orgs/o1%2Fagents/idle/worker/view", bearers: []string{key}}, false},
		{ambiguous{name: "encoded slash into the status", method: "GET", path: "/v1/agents/idle%2Fworker%2Fstatus", bearers: []string{s.token}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc *oas.Validator
			if tt.documented {
				doc = v
			}
			wantRefused(t, ctx, doc, tt.ambiguous, tt.send(t, ctx, s.base))
		})
	}
	// The worker channel with one header still opens: the refusal is of two.
	if a := (ambiguous{method: "GET", path: wire.ChannelPath, bearers: []string{passes.Worker}}).send(t, ctx, s.base); a.status == http.StatusBadRequest {
		t.Fatalf("one Authorization header refused: %s", a.body)
	}
	// And nothing was taken of the view's gate by the refused views.
	if status, _, body := s.get(t, ctx, "/v1/agents/idle/worker/view"); status != http.StatusOK {
		t.Fatalf("the member's view after the refusals: %d %s", status, body)
	}
}
