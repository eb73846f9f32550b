package directory_test

import (
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

// readAgent reads id's record as a view's check does (view/check.go): HGETALL of its
// key, then AgentFromRecord.
func (e hintEnv) readAgent(t *testing.T, id string) (directory.Agent, error) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	record, err := e.rdb.HGetAll(ctx, keyspace.For(e.dep).Agent(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return e.st.AgentFromRecord(id, record)
}

func TestAgentFromRecordMatchesAgent(t *testing.T) {
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)

	for _, want := range e.seed.Agents {
		got, err := e.readAgent(t, want.ID)
		if err != nil || got != want {
			t.Fatalf("AgentFromRecord(%q) = %+v, %v; want %+v", want.ID, got, err, want)
		}
		if a, err := e.st.Agent(ctx, want.ID); err != nil || a != got {
			t.Fatalf("Agent(%q) = %+v, %v; AgentFromRecord gave %+v", want.ID, a, err, got)
		}
	}
	if got, err := e.readAgent(t, "agent-missing"); !errors.Is(err, directory.ErrNotFound) || got != (directory.Agent{}) {
		t.Fatalf("AgentFromRecord of no record = %+v, %v; want ErrNotFound", got, err)
	}
	if _, err := e.st.Agent(ctx, "agent-missing"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Agent(agent-missing) = %v", err)
	}
	for _, record := range []map[string]string{nil, {}} {
		if got, err := e.st.AgentFromRecord("a", record); !errors.Is(err, directory.ErrNotFound) || got != (directory.Agent{}) {
			t.Fatalf("AgentFromRecord(%v) = %+v, %v; want ErrNotFound", record, got, err)
		}
	}
}

func TestParseGeneration(t *testing.T) {
	for _, tt := range []struct {
		name    string
		value   string
		want    int64
		wantErr bool
	}{
		{name: "no key", value: "", want: 0},
		{name: "counted", value: "42", want: 42},
		{name: "not a number", value: "x", wantErr: true},
		{name: "too large", value: "9223372036854775808", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := directory.ParseGeneration(tt.value)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("ParseGeneration(%q) = %d, %v; want %d, error %v", tt.value, got, err, tt.want, tt.wantErr)
			}
		})
	}
	// And as Generation reads it.
	e := newHintEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	v, err := e.rdb.Get(ctx, keyspace.For(e.dep).DirectoryGeneration()).Result()
	if err != nil {
		t.Fatal(err)
	}
	parsed, perr := directory.ParseGeneration(v)
	if g, err := e.st.Generation(ctx); err != nil || perr != nil || g != parsed || g == 0 {
		t.Fatalf("Generation = %d, %v; ParseGeneration of its value = %d, %v", g, err, parsed, perr)
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

	// A check's read and a direct read each leave the record as the hint.
	if _, err := e.readAgent(t, a.ID); err != nil {
		t.Fatal(err)
	}
	if h, ok := e.st.AgentHint(a.ID); !ok || h != a {
		t.Fatalf("hint after AgentFromRecord = %+v, %v; want %+v", h, ok, a)
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
	if got, err := e.readAgent(t, a.ID); err != nil || got.TeamID != "t2" {
		t.Fatalf("AgentFromRecord after the move = %+v, %v", got, err)
	}
	if h, ok := e.st.AgentHint(a.ID); !ok || h != moved.Agents[0] {
		t.Fatalf("hint after the move = %+v, %v; want %+v", h, ok, moved.Agents[0])
	}

	// The agents are deleted: each hint lasts until a read finds nothing, through
	// AgentFromRecord for one and Agent for the other.
	keys := keyspace.For(e.dep)
	if err := e.rdb.Del(ctx, keys.Agent(a.ID), keys.Agent(b.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.st.AgentHint(a.ID); !ok {
		t.Fatal("hint dropped before any read saw the deletion")
	}
	if _, err := e.readAgent(t, a.ID); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("AgentFromRecord of a deleted agent: %v", err)
	}
	if h, ok := e.st.AgentHint(a.ID); ok {
		t.Fatalf("hint after AgentFromRecord found nothing: %+v", h)
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
	if _, err := e.readAgent(t, "agent-missing"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatal(err)
	}
	if h, ok := e.st.AgentHint("agent-missing"); ok {
		t.Fatalf("hint for an unknown agent: %+v", h)
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
	dep := testenv.Deployment(t)
	st := directory.NewStore(rdb, dep)
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
	keys := keyspace.For(dep)
	p := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, n)
	for i, a := range seed.Agents {
		cmds[i] = p.HGetAll(ctx, keys.Agent(a.ID))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		got, err := st.AgentFromRecord(seed.Agents[i].ID, cmd.Val())
		if err != nil || got != seed.Agents[i] {
			t.Fatalf("AgentFromRecord(%q) = %+v, %v", seed.Agents[i].ID, got, err)
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
