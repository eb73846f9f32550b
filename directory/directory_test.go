package directory_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
)

func TestShippedSeedLoads(t *testing.T) {
	f, err := os.Open("../testdata/directory.json")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	seed, err := directory.ParseSeed(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(seed.Teams) < 2 || len(seed.Orgs) < 2 {
		t.Fatalf("seed has %d teams and %d orgs; the tests need two of each", len(seed.Teams), len(seed.Orgs))
	}
	srv := testenv.Redis(t)
	st := directory.NewStore(testenv.RedisClient(t, srv, 0), testenv.Deployment(t))
	ctx := testenv.Context(t, 30*time.Second)
	if err := st.Load(ctx, seed); err != nil {
		t.Fatal(err)
	}
	// Loading twice changes nothing.
	if err := st.Load(ctx, seed); err != nil {
		t.Fatal(err)
	}
	for _, a := range seed.Agents {
		got, err := st.Agent(ctx, a.ID)
		if err != nil || got != a {
			t.Fatalf("Agent(%q) = %+v, %v; want %+v", a.ID, got, err, a)
		}
	}
	for _, u := range seed.Users {
		for _, team := range seed.Teams {
			want := strings.Contains(strings.Join(u.Teams, ","), team.ID)
			if got, err := st.IsMember(ctx, team.ID, u.ID); err != nil || got != want {
				t.Fatalf("IsMember(%s, %s) = %v, %v; want %v", team.ID, u.ID, got, err, want)
			}
		}
	}
	if _, err := st.Agent(ctx, "agent-missing"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
	if _, err := st.Agent(ctx, "bad id!"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("malformed agent id: %v", err)
	}
	u := seed.Users[0]
	if err := st.RemoveMember(ctx, u.Teams[0], u.ID); err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.IsMember(ctx, u.Teams[0], u.ID); ok {
		t.Fatal("membership survived removal")
	}
}

// TestParseSeedRejects: a seed is read with wire.DecodeStrict — a member unknown, given
// twice or in another case than the field's is refused, never taken for the field —
// then checked.
func TestParseSeedRejects(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
	}{
		{"unknown field", `{"teams":[],"extra":1}`, `unknown object member name "extra"`},
		{"teams twice", `{"teams":[{"id":"t"}],"teams":[]}`, `duplicate object member name "teams"`},
		{"Teams", `{"Teams":[{"id":"t"}]}`, `unknown object member name "Teams"`},
		{"agent's team twice", `{"teams":[{"id":"t"},{"id":"u"}],"orgs":[{"id":"o","environments":["p"]}],"agents":[{"id":"a","team":"t","team":"u","org":"o","environment":"p"}]}`, `duplicate object member name "team"`},
		{"agent's TEAM beside team", `{"teams":[{"id":"t"},{"id":"u"}],"orgs":[{"id":"o","environments":["p"]}],"agents":[{"id":"a","team":"t","TEAM":"u","org":"o","environment":"p"}]}`, `unknown object member name "TEAM"`},
		{"invalid UTF-8", "{\"teams\":[{\"id\":\"t\",\"name\":\"\xff\"}]}", "UTF-8"},
		{"larger than the bound", `{"teams":[` + strings.Repeat(" ", directory.MaxSeedBytes) + `]}`, "larger than"},
		{"duplicate team", `{"teams":[{"id":"t"},{"id":"t"}]}`, "duplicate team"},
		{"user in unknown team", `{"users":[{"id":"u","teams":["t"]}]}`, "unknown team"},
		{"agent of unknown org", `{"teams":[{"id":"t"}],"agents":[{"id":"a","team":"t","org":"o","environment":"p"}]}`, "unknown org"},
		{"agent in foreign environment", `{"teams":[{"id":"t"}],"orgs":[{"id":"o","environments":["p"]}],"agents":[{"id":"a","team":"t","org":"o","environment":"q"}]}`, "environment"},
		{"bad id", `{"teams":[{"id":"a b"}]}`, "bad or duplicate team"},
		{"not json", `{`, "seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := directory.ParseSeed(strings.NewReader(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestVisibleAgents(t *testing.T) {
	seed, err := directory.ParseSeed(strings.NewReader(`{
		"teams": [{"id": "t1", "name": "One"}, {"id": "t2", "name": "Two"}],
		"users": [{"id": "u1", "teams": ["t1"]}, {"id": "u2", "teams": ["t1", "t2"]}, {"id": "u3", "teams": []}],
		"orgs": [{"id": "o", "environments": ["p"]}],
		"agents": [
			{"id": "b", "name": "B", "team": "t1", "org": "o", "environment": "p"},
			{"id": "a", "name": "A", "team": "t1", "org": "o", "environment": "p"},
			{"id": "c", "name": "C", "team": "t2", "org": "o", "environment": "p"}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.Redis(t)
	st := directory.NewStore(testenv.RedisClient(t, srv, 0), testenv.Deployment(t))
	ctx := testenv.Context(t, 30*time.Second)
	if err := st.Load(ctx, seed); err != nil {
		t.Fatal(err)
	}
	ids := func(user string) string {
		t.Helper()
		agents, err := st.VisibleAgents(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range agents {
			out = append(out, a.ID+"/"+a.Name+"/"+a.TeamID)
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct{ user, want string }{
		{"u1", "a/A/t1,b/B/t1"},
		{"u2", "a/A/t1,b/B/t1,c/C/t2"},
		{"u3", ""},
		{"nobody", ""},
		{"bad id!", ""},
	} {
		if got := ids(tt.user); got != tt.want {
			t.Errorf("VisibleAgents(%s) = %q, want %q", tt.user, got, tt.want)
		}
	}
	// A revoked membership hides the team's agents at once; a new one shows them.
	if err := st.RemoveMember(ctx, "t1", "u2"); err != nil {
		t.Fatal(err)
	}
	if got := ids("u2"); got != "c/C/t2" {
		t.Fatalf("after removal from t1: %q", got)
	}
	if err := st.AddMember(ctx, "t2", "u1"); err != nil {
		t.Fatal(err)
	}
	if got := ids("u1"); got != "a/A/t1,b/B/t1,c/C/t2" {
		t.Fatalf("after joining t2: %q", got)
	}
	// An agent re-seeded into another team leaves the old team's listing. The seed
	// replaces memberships with its own, so u1 is in t1 only again.
	seed.Agents[0].TeamID = "t2"
	if err := st.Load(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if got := ids("u2"); got != "a/A/t1,b/B/t2,c/C/t2" {
		t.Fatalf("re-seeded u2: %q", got)
	}
	if got := ids("u1"); got != "a/A/t1" {
		t.Fatalf("re-seeded u1: %q", got)
	}
}

// TestOrgEnvironmentsReadStrictly: an organisation's environments, a JSON array that a
// replica or the operator CLI wrote into Redis, are read with wire.DecodeStrict like
// every body from another process: one that is not valid UTF-8 or has anything after
// the array is an error, not a list with a replacement character or a prefix. (An array
// of strings has no member names, so no case variant or duplicate can hide in it.)
func TestOrgEnvironmentsReadStrictly(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	dep := testenv.Deployment(t)
	st := directory.NewStore(rdb, dep)
	ctx := testenv.Context(t, 30*time.Second)
	if err := st.PutOrg(ctx, directory.Org{ID: "o1", Name: "Org", Environments: []string{"prod"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, environments string
		want               []string
		wantErr            bool
	}{
		{name: "as written", environments: `["prod","staging"]`, want: []string{"prod", "staging"}},
		{name: "invalid UTF-8", environments: "[\"pr\xffod\"]", wantErr: true},
		{name: "a second value", environments: `["prod"]["staging"]`, wantErr: true},
		{name: "an object", environments: `{"prod":true}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := rdb.HSet(ctx, keyspace.For(dep).Org("o1"), "environments", tt.environments).Err(); err != nil {
				t.Fatal(err)
			}
			o, err := st.Org(ctx, "o1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Org = %+v, %v; wantErr %v", o, err, tt.wantErr)
			}
			if err == nil && !slices.Equal(o.Environments, tt.want) {
				t.Fatalf("environments %q, want %q", o.Environments, tt.want)
			}
		})
	}
}
