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
	"github.com/agentfy/agentfy/internal/testenv"
	"github.com/agentfy/agentfy/keyspace"
)

// The first access check reads the agent's record beside the member set of the team its
// hint names, in one round trip; the record decides. An agent moved to another team
// after the hint was taken: the old team's member is refused at once, and the new team's
// member is let in (the set of the right team read after the record).
func TestViewAccessWithAStaleHint(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	keys := keyspace.For(s.dep)
	openGate := func() {
		t.Helper()
		if err := s.r.Redis.Del(ctx, keys.Gate("idle"), keys.Pace("idle", "user:u1"), keys.Pace("idle", "user:u2")).Err(); err != nil {
			t.Fatal(err)
		}
	}
	u2, err := auth.MintHS256([]byte("0123456789abcdef0123456789abcdef"), "agentfy-test", "agentfy-api", "u2", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
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
	err = s.r.Dir.Load(ctx, directory.Seed{
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
	if err := s.r.Dir.RemoveMember(ctx, "t2", "u2"); err != nil {
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
	err := s.r.Dir.Load(ctx, directory.Seed{
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
	if err := s.r.Dir.AddMember(ctx, "t2", "u1"); err != nil {
		t.Fatal(err)
	}
	if status, _, body := s.get(t, ctx, "/v1/agents/elsewhere/worker/view"); status != http.StatusOK || body != "{\"live\":false}\n" {
		t.Fatalf("the stranger made a member, at the next request: %d %s, want live:false", status, body)
	}
	u2, err := auth.MintHS256([]byte("0123456789abcdef0123456789abcdef"), "agentfy-test", "agentfy-api", "u2", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.token = u2
	keys := keyspace.For(s.dep)
	if err := s.r.Redis.Del(ctx, keys.Gate("elsewhere")).Err(); err != nil { // the window the stranger's view took
		t.Fatal(err)
	}
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
