package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
)

// The first access check reads the agent's record beside the member set of the team its
// hint names, in one round trip; the record decides. An agent moved to another team
// after the hint was taken: the old team's member is refused at once, and the new team's
// member is let in (the set of the right team read after the record).
func TestViewAccessWithAStaleHint(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	openGate := func() { s.c.OpenGate(t, "idle") }
	u2 := s.c.Token(t, "u2")
	view := func(token string) (int, string) {
		t.Helper()
		saved := s.token
		s.token = token
		defer func() { s.token = saved }()
		status, _, body := s.get(t, ctx, "/v1/agents/idle/worker/view")
		return status, body
	}

	// u1 of t1 views: the replica now holds a hint of idle in t1.
	if status, body := view(s.token); status != http.StatusOK || body != "{\"live\":false}\n" {
		t.Fatalf("member of t1: %d %s", status, body)
	}
	if a, ok := s.r.Dir.AgentHint("idle"); !ok || a.TeamID != "t1" {
		t.Fatalf("hint %+v %v, want idle in t1", a, ok)
	}
	// idle moves to t2, whose only member is u2.
	err := s.c.St.Dir.Load(ctx, directory.Seed{
		Teams:  []directory.Team{{ID: "t1", Name: "Team"}, {ID: "t2", Name: "Other team"}},
		Users:  []directory.User{{ID: "u1", Name: "User", Teams: []string{"t1"}}, {ID: "u2", Name: "Other", Teams: []string{"t2"}}},
		Orgs:   []directory.Org{{ID: "o1", Name: "Org", Environments: []string{"prod"}}},
		Agents: []directory.Agent{{ID: "idle", Name: "No session", TeamID: "t2", OrgID: "o1", Environment: "prod"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	openGate()
	if status, body := view(s.token); status != http.StatusNotFound {
		t.Fatalf("member of the agent's old team, through a stale hint: %d %s, want 404", status, body)
	}
	if status, body := view(u2); status != http.StatusOK || body != "{\"live\":false}\n" {
		t.Fatalf("member of the agent's new team, through a stale hint: %d %s, want live:false", status, body)
	}
	if a, ok := s.r.Dir.AgentHint("idle"); !ok || a.TeamID != "t2" {
		t.Fatalf("hint %+v %v after the record was read, want idle in t2", a, ok)
	}
	// A membership removed is seen by the very next check, hint or not.
	if err := s.c.St.Dir.RemoveMember(ctx, "t2", "u2"); err != nil {
		t.Fatal(err)
	}
	openGate()
	if status, body := view(u2); status != http.StatusNotFound {
		t.Fatalf("revoked member: %d %s, want 404", status, body)
	}
}

// A user refused an agent's view is answered 404 from memory for RefusalTTL: the
// repeated request makes no Redis command. The memory is per user: a member of the
// agent's team is still let through.
func TestRepeatedRefusalReadsOnlyTheGeneration(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	err := s.c.St.Dir.Load(ctx, directory.Seed{
		Teams:  []directory.Team{{ID: "t1", Name: "Team"}, {ID: "t2", Name: "Other team"}},
		Users:  []directory.User{{ID: "u1", Name: "User", Teams: []string{"t1"}}, {ID: "u2", Name: "Other", Teams: []string{"t2"}}},
		Orgs:   []directory.Org{{ID: "o1", Name: "Org", Environments: []string{"prod"}}},
		Agents: []directory.Agent{{ID: "elsewhere", Name: "Other team's", TeamID: "t2", OrgID: "o1", Environment: "prod"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var commands atomic.Int64
	s.r.Redis.AddHook(countHook{&commands})
	// The first refusal reads the truth; the second reads the generation, then the truth
	// after it (the first refusal's reads may have run in any order on a Cluster), and
	// remembers the generation; every later one reads the generation alone, beside the
	// agent's current session id (one round trip of two commands).
	for i, want := range []int64{-1, -1, 2, 2, 2} {
		before := commands.Load()
		if status, _, body := s.get(t, ctx, "/v1/agents/elsewhere/worker/view"); status != http.StatusNotFound {
			t.Fatalf("request %d by a stranger: %d %s", i, status, body)
		}
		if n := commands.Load() - before; want >= 0 && n != want {
			t.Fatalf("request %d by a stranger made %d Redis commands, want %d", i, n, want)
		} else if want < 0 && n < 3 {
			t.Fatalf("request %d by a stranger made %d Redis commands: it did not read the truth", i, n)
		}
	}
	// A grant ends the refusal at the very next request: the stranger made a member of
	// the agent's team is let in by the replica that remembers refusing them.
	if err := s.c.St.Dir.AddMember(ctx, "t2", "u1"); err != nil {
		t.Fatal(err)
	}
	if status, _, body := s.get(t, ctx, "/v1/agents/elsewhere/worker/view"); status != http.StatusOK || body != "{\"live\":false}\n" {
		t.Fatalf("the stranger made a member, at the next request: %d %s, want live:false", status, body)
	}
	s.token = s.c.Token(t, "u2")
	s.c.OpenGate(t, "elsewhere") // the window the stranger's view took
	if status, _, body := s.get(t, ctx, "/v1/agents/elsewhere/worker/view"); status != http.StatusOK || body != "{\"live\":false}\n" {
		t.Fatalf("a member of the agent's team: %d %s", status, body)
	}
}

// countHook counts the commands a client sends, pipelined or not.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// The members' and partners' view routes' table of refusals, on the stack's shipped
// directory: every one answered before anything is read of a session, every 404 with
// one body, and none of them burns the agent's gate.
func TestViewRoutesRefuse(t *testing.T) {
	t.Parallel()
	s := startStack(t, testenv.Context(t, 60*time.Second))
	c := s.c
	agent := c.NewAgent(t, "")
	stagingAgent := c.NewAgentIn(t, "", "staging")
	ctx := c.Context(t)
	reader, _, _ := c.St.Creds.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	noScope, _, _ := c.St.Creds.CreateOrgKey(ctx, "org-acme", "production", []string{"agents:read"})
	otherOrg, _, _ := c.St.Creds.CreateOrgKey(ctx, "org-globex", "production", []string{auth.ScopeWorkerLogsRead})
	stagingKey, _, _ := c.St.Creds.CreateOrgKey(ctx, "org-acme", "staging", []string{auth.ScopeWorkerLogsRead})
	member, outsider := c.Token(t, "u-alice"), c.Token(t, "u-carol")

	tests := []struct {
		name, path, bearer string
		want               int
	}{
		{"no token", stacktest.ViewPath(agent), "", http.StatusUnauthorized},
		{"garbage token", stacktest.ViewPath(agent), "nope", http.StatusUnauthorized},
		{"org key on the human route", stacktest.ViewPath(agent), reader, http.StatusUnauthorized},
		{"unknown agent", stacktest.ViewPath("agent-nobody"), member, http.StatusNotFound},
		{"agent of another team", stacktest.ViewPath("agent-nova"), member, http.StatusNotFound},
		{"outsider on our agent", stacktest.ViewPath(agent), outsider, http.StatusNotFound},
		{"partner without scope", stacktest.PartnerViewPath("org-acme", agent), noScope, http.StatusForbidden},
		{"partner key of another org", stacktest.PartnerViewPath("org-globex", agent), otherOrg, http.StatusNotFound},
		{"partner key for another org's path", stacktest.PartnerViewPath("org-acme", agent), otherOrg, http.StatusNotFound},
		{"partner key of another environment", stacktest.PartnerViewPath("org-acme", agent), stagingKey, http.StatusNotFound},
		{"partner key of staging on a production agent", stacktest.PartnerViewPath("org-acme", agent), stagingKey, http.StatusNotFound},
		{"partner unknown agent", stacktest.PartnerViewPath("org-acme", "agent-nobody"), reader, http.StatusNotFound},
		{"partner JWT", stacktest.PartnerViewPath("org-acme", agent), member, http.StatusUnauthorized},
		{"partner no credential", stacktest.PartnerViewPath("org-acme", agent), "", http.StatusUnauthorized},
	}
	var notFound []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Get(t, s.base, tt.path, tt.bearer)
			if r.Status != tt.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.want, r.Body)
			}
			if r.Status == http.StatusNotFound {
				notFound = append(notFound, r.Body)
			}
		})
	}
	for _, b := range notFound {
		if b != notFound[0] {
			t.Fatalf("404 bodies differ: %q vs %q", b, notFound[0])
		}
	}
	// None of those burned the agent's gate: the staging key is right for its agent.
	if r := c.Get(t, s.base, stacktest.PartnerViewPath("org-acme", stagingAgent), stagingKey); r.Status != http.StatusOK || r.Body != "{\"live\":false}\n" {
		t.Fatalf("staging key on staging agent: %d %s", r.Status, r.Body)
	}
	if r := c.Get(t, s.base, stacktest.ViewPath(agent), member); r.Status != http.StatusOK {
		t.Fatalf("after refusals the member's first view: %d %s", r.Status, r.Body)
	}
}

// The status route's refusals: no token, and an agent the member may not see or that
// does not exist, each no-store.
func TestStatusRouteRefuses(t *testing.T) {
	t.Parallel()
	s := startStack(t, testenv.Context(t, 60*time.Second))
	c := s.c
	for name, tc := range map[string]struct {
		agent, bearer string
		want          int
	}{
		"no token":      {"agent-scout", "", http.StatusUnauthorized},
		"foreign agent": {"agent-nova", c.Token(t, "u-alice"), http.StatusNotFound},
		"unknown agent": {"agent-nobody", c.Token(t, "u-alice"), http.StatusNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(c.Context(t), http.MethodGet, s.base+stacktest.StatusPath(tc.agent), nil)
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want || resp.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d (Cache-Control %q), want %d", resp.StatusCode, resp.Header.Get("Cache-Control"), tc.want)
			}
		})
	}
}

// The status stream tells changes: an event that repeats the last one sent is left out.
// The route listens before it reads the current state, so a change that fell before the
// read (a worker's attach publishing "running") arrives after it too; CI once saw a
// second "running" where the next event was to be "stopped". The events travel through
// the feed and its check against the store, as a replica's own would.
func TestStatusStreamLeavesOutRepeats(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	sess, _, err := s.c.St.Sess.Start(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	stream := stacktest.StatusStream(ctx, t, s.base, "idle", s.token)
	first := <-stream
	if first.Err != nil || !first.Live || first.Status != session.Running || first.SessionID != sess.ID {
		t.Fatalf("first event %+v, want the running session", first)
	}
	s.r.Feed.Publish(ctx, session.Event{AgentID: "idle", SessionID: sess.ID, Status: session.Running, At: time.Now()})
	s.r.Feed.Publish(ctx, session.Event{AgentID: "idle", SessionID: sess.ID, Status: session.Idle, At: time.Now()})
	select {
	case ev := <-stream:
		if ev.Err != nil || ev.Status != session.Idle || !ev.Live || ev.SessionID != sess.ID {
			t.Fatalf("next event %+v, want idle (the repeated running left out)", ev)
		}
	case <-ctx.Done():
		t.Fatal("the stream said nothing after the repeat")
	}
}
