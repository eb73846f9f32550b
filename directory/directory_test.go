package directory_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/testenv"
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

func TestParseSeedRejects(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
	}{
		{"unknown field", `{"teams":[],"extra":1}`, "unknown field"},
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
