package directory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
)

const hintSeed = `{
	"teams": [{"id": "t1", "name": "One"}, {"id": "t2", "name": "Two"}],
	"users": [{"id": "u1", "teams": ["t1"]}, {"id": "u2", "teams": ["t1", "t2"]}, {"id": "u3", "teams": []}],
	"orgs": [{"id": "o", "environments": ["p", "q"]}],
	"agents": [
		{"id": "a", "name": "A", "team": "t1", "org": "o", "environment": "p"},
		{"id": "b", "name": "B", "team": "t2", "org": "o", "environment": "q"}
	]}`

// hintEnv is a loaded directory with the client and deployment under it.
type hintEnv struct {
	st   *directory.Store
	rdb  redis.UniversalClient
	dep  string
	seed directory.Seed
}

func newHintEnv(t *testing.T) hintEnv {
	t.Helper()
	seed, err := directory.ParseSeed(strings.NewReader(hintSeed))
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	dep := testenv.Deployment(t)
	st := directory.NewStore(rdb, dep)
	if err := st.Load(testenv.Context(t, 30*time.Second), seed); err != nil {
		t.Fatal(err)
	}
	return hintEnv{st: st, rdb: rdb, dep: dep, seed: seed}
}

// queuedAgent runs QueueAgent through a pipeline of its own.
func (e hintEnv) queuedAgent(t *testing.T, id string) (directory.Agent, error) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	p := e.rdb.Pipeline()
	f := e.st.QueueAgent(ctx, p, id)
	_, _ = p.Exec(ctx)
	return f()
}

func TestQueueAgentMatchesAgent(t *testing.T) {
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)

	for _, want := range e.seed.Agents {
		got, err := e.queuedAgent(t, want.ID)
		if err != nil || got != want {
			t.Fatalf("QueueAgent(%q) = %+v, %v; want %+v", want.ID, got, err, want)
		}
		if a, err := e.st.Agent(ctx, want.ID); err != nil || a != got {
			t.Fatalf("Agent(%q) = %+v, %v; QueueAgent gave %+v", want.ID, a, err, got)
		}
	}
	for _, id := range []string{"agent-missing", "bad id!", "", strings.Repeat("x", 65)} {
		p := e.rdb.Pipeline()
		f := e.st.QueueAgent(ctx, p, id)
		queued := p.Len()
		_, _ = p.Exec(ctx)
		got, err := f()
		if !errors.Is(err, directory.ErrNotFound) || got != (directory.Agent{}) {
			t.Fatalf("QueueAgent(%q) = %+v, %v; want ErrNotFound", id, got, err)
		}
		if _, err := e.st.Agent(ctx, id); !errors.Is(err, directory.ErrNotFound) {
			t.Fatalf("Agent(%q) = %v", id, err)
		}
		// A malformed id is refused before anything is queued.
		wantQueued := 0
		if directory.ValidID(id) {
			wantQueued = 1
		}
		if queued != wantQueued {
			t.Fatalf("QueueAgent(%q) queued %d commands; want %d", id, queued, wantQueued)
		}
	}
}

func TestQueueAgentSharesPipeline(t *testing.T) {
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	// Both reads and a membership, in one pipeline, each answered on its own.
	p := e.rdb.Pipeline()
	a := e.st.QueueAgent(ctx, p, "a")
	missing := e.st.QueueAgent(ctx, p, "agent-missing")
	b := e.st.QueueAgent(ctx, p, "b")
	member := e.st.QueueIsMember(ctx, p, "t2", "u2")
	if n := p.Len(); n != 4 {
		t.Fatalf("queued %d commands; want 4", n)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := a(); err != nil || got != e.seed.Agents[0] {
		t.Fatalf("a = %+v, %v", got, err)
	}
	if _, err := missing(); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("missing = %v", err)
	}
	if got, err := b(); err != nil || got != e.seed.Agents[1] {
		t.Fatalf("b = %+v, %v", got, err)
	}
	if ok, err := member(); err != nil || !ok {
		t.Fatalf("member = %v, %v", ok, err)
	}
}

func TestAgentHint(t *testing.T) {
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	a, b := e.seed.Agents[0], e.seed.Agents[1]

	// Nothing read yet: no hint, though the agents exist.
	for _, id := range []string{a.ID, b.ID, "agent-missing"} {
		if h, ok := e.st.AgentHint(id); ok {
			t.Fatalf("hint for %q before any read: %+v", id, h)
		}
	}

	// A queued read and a direct read each leave the record as the hint.
	if _, err := e.queuedAgent(t, a.ID); err != nil {
		t.Fatal(err)
	}
	if h, ok := e.st.AgentHint(a.ID); !ok || h != a {
		t.Fatalf("hint after QueueAgent = %+v, %v; want %+v", h, ok, a)
	}
	if h, ok := e.st.AgentHint(b.ID); ok {
		t.Fatalf("hint for an agent not read: %+v", h)
	}
	if _, err := e.st.Agent(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if h, ok := e.st.AgentHint(b.ID); !ok || h != b {
		t.Fatalf("hint after Agent = %+v, %v; want %+v", h, ok, b)
	}

	// Hints are this store's (this replica's): another store has read nothing.
	if h, ok := directory.NewStore(e.rdb, e.dep).AgentHint(a.ID); ok {
		t.Fatalf("a fresh store has a hint: %+v", h)
	}

	// The agent moves team: the hint is a guess and stays stale until the next read,
	// which refreshes it.
	moved := e.seed
	moved.Agents = []directory.Agent{a, b}
	moved.Agents[0].TeamID = "t2"
	if err := e.st.Load(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if h, ok := e.st.AgentHint(a.ID); !ok || h.TeamID != "t1" {
		t.Fatalf("hint before the next read = %+v, %v; want the old record", h, ok)
	}
	if got, err := e.queuedAgent(t, a.ID); err != nil || got.TeamID != "t2" {
		t.Fatalf("QueueAgent after the move = %+v, %v", got, err)
	}
	if h, ok := e.st.AgentHint(a.ID); !ok || h != moved.Agents[0] {
		t.Fatalf("hint after the move = %+v, %v; want %+v", h, ok, moved.Agents[0])
	}

	// The agents are deleted: each hint lasts until a read finds nothing, through
	// QueueAgent for one and Agent for the other.
	keys := keyspace.For(e.dep)
	if err := e.rdb.Del(ctx, keys.Agent(a.ID), keys.Agent(b.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.st.AgentHint(a.ID); !ok {
		t.Fatal("hint dropped before any read saw the deletion")
	}
	if _, err := e.queuedAgent(t, a.ID); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("QueueAgent of a deleted agent: %v", err)
	}
	if h, ok := e.st.AgentHint(a.ID); ok {
		t.Fatalf("hint after QueueAgent found nothing: %+v", h)
	}
	if _, ok := e.st.AgentHint(b.ID); !ok {
		t.Fatal("dropping one hint dropped another")
	}
	if _, err := e.st.Agent(ctx, b.ID); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Agent of a deleted agent: %v", err)
	}
	if h, ok := e.st.AgentHint(b.ID); ok {
		t.Fatalf("hint after Agent found nothing: %+v", h)
	}

	// An unknown agent never gets a hint.
	if _, err := e.queuedAgent(t, "agent-missing"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatal(err)
	}
	if h, ok := e.st.AgentHint("agent-missing"); ok {
		t.Fatalf("hint for an unknown agent: %+v", h)
	}
}

func TestQueueIsMemberMatchesIsMember(t *testing.T) {
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	queued := func(team, user string) (bool, error) {
		t.Helper()
		p := e.rdb.Pipeline()
		f := e.st.QueueIsMember(ctx, p, team, user)
		_, _ = p.Exec(ctx)
		return f()
	}
	check := func(when string, want map[string]bool) {
		t.Helper()
		for _, team := range []string{"t1", "t2", "t-missing"} {
			for _, user := range []string{"u1", "u2", "u3", "nobody"} {
				got, err := queued(team, user)
				direct, derr := e.st.IsMember(ctx, team, user)
				if err != nil || derr != nil || got != direct || got != want[team+"/"+user] {
					t.Fatalf("%s: QueueIsMember(%s, %s) = %v, %v; IsMember = %v, %v; want %v",
						when, team, user, got, err, direct, derr, want[team+"/"+user])
				}
			}
		}
	}
	check("seeded", map[string]bool{"t1/u1": true, "t1/u2": true, "t2/u2": true})
	if err := e.st.RemoveMember(ctx, "t1", "u2"); err != nil {
		t.Fatal(err)
	}
	check("after removal", map[string]bool{"t1/u1": true, "t2/u2": true})
	if err := e.st.AddMember(ctx, "t2", "u3"); err != nil {
		t.Fatal(err)
	}
	check("after adding", map[string]bool{"t1/u1": true, "t2/u2": true, "t2/u3": true})

	// Queued before a removal, run after it: the removal counts.
	p := e.rdb.Pipeline()
	f := e.st.QueueIsMember(ctx, p, "t1", "u1")
	if err := e.st.RemoveMember(ctx, "t1", "u1"); err != nil {
		t.Fatal(err)
	}
	_, _ = p.Exec(ctx)
	if ok, err := f(); err != nil || ok {
		t.Fatalf("membership removed between queue and Exec: %v, %v", ok, err)
	}
}

func TestQueuedReadsRedisError(t *testing.T) {
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := e.queuedAgent(t, "a"); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	p := e.rdb.Pipeline()
	agent := e.st.QueueAgent(ctx, p, "a")
	member := e.st.QueueIsMember(ctx, p, "t1", "u1")
	if _, err := p.Exec(cancelled); err == nil {
		t.Fatal("Exec with a cancelled context succeeded")
	}
	if got, err := agent(); err == nil || errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("QueueAgent after a failed Exec = %+v, %v; want a Redis error", got, err)
	}
	if ok, err := member(); err == nil || ok {
		t.Fatalf("QueueIsMember after a failed Exec = %v, %v; want a Redis error", ok, err)
	}
	// A read that could not tell neither drops nor changes the hint.
	if h, ok := e.st.AgentHint("a"); !ok || h != e.seed.Agents[0] {
		t.Fatalf("hint after a failed read = %+v, %v", h, ok)
	}
}

func TestAgentHintsBounded(t *testing.T) {
	n := directory.MaxHints + 10
	seed := directory.Seed{
		Teams: []directory.Team{{ID: "t", Name: "T"}},
		Orgs:  []directory.Org{{ID: "o", Environments: []string{"p"}}},
	}
	for i := range n {
		seed.Agents = append(seed.Agents, directory.Agent{ID: fmt.Sprintf("agent-%05d", i), Name: "A", TeamID: "t", OrgID: "o", Environment: "p"})
	}
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	st := directory.NewStore(rdb, testenv.Deployment(t))
	ctx := testenv.Context(t, 60*time.Second)
	if err := st.Load(ctx, seed); err != nil {
		t.Fatal(err)
	}
	hinted := func() int {
		c := 0
		for _, a := range seed.Agents {
			if _, ok := st.AgentHint(a.ID); ok {
				c++
			}
		}
		return c
	}
	// Read every agent in one pipeline, checking the bound after each answer.
	p := rdb.Pipeline()
	fs := make([]func() (directory.Agent, error), n)
	for i, a := range seed.Agents {
		fs[i] = st.QueueAgent(ctx, p, a.ID)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		got, err := f()
		if err != nil || got != seed.Agents[i] {
			t.Fatalf("QueueAgent(%q) = %+v, %v", seed.Agents[i].ID, got, err)
		}
		// The agent just read is always hinted.
		if h, ok := st.AgentHint(got.ID); !ok || h != got {
			t.Fatalf("no hint for %q just read", got.ID)
		}
		if i == directory.MaxHints-1 {
			if c := hinted(); c != directory.MaxHints {
				t.Fatalf("after reading MaxHints agents, %d hints; want %d", c, directory.MaxHints)
			}
		}
	}
	if c := hinted(); c > directory.MaxHints || c == 0 {
		t.Fatalf("after reading %d agents, %d hints; want 1..%d", n, c, directory.MaxHints)
	}
	// And through Agent too.
	for _, a := range seed.Agents {
		if _, err := st.Agent(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c := hinted(); c > directory.MaxHints || c == 0 {
		t.Fatalf("after reading %d agents with Agent, %d hints; want 1..%d", n, c, directory.MaxHints)
	}
}
