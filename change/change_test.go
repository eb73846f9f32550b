package change_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/change"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
)

// TestActionsAreSubjectTokens: every action makes an audit subject of both sources, and
// no two actions are the same (a reader could not tell their events apart).
func TestActionsAreSubjectTokens(t *testing.T) {
	ns, err := bus.NewNamespace("prod-eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[change.Action]bool{}
	for _, a := range change.Actions {
		t.Run(string(a), func(t *testing.T) {
			if seen[a] {
				t.Fatalf("%q is listed twice", a)
			}
			seen[a] = true
			for _, source := range []string{bus.AuditSourceAPI, bus.AuditSourceCLI} {
				got, err := ns.AuditAdmin(source, string(a))
				if err != nil || !strings.HasSuffix(got, "."+source+"."+string(a)) {
					t.Fatalf("AuditAdmin(%s, %q) = %q, %v", source, a, got, err)
				}
			}
		})
	}
	if len(change.Actions) != 15 {
		t.Errorf("%d actions, want the 15 audit.Admin documents", len(change.Actions))
	}
}

func TestChangeIDs(t *testing.T) {
	ch := change.Change{Action: change.MemberAdd, IDs: []string{"team", "team-atlas", "user", "u-dave"}}
	var order []string
	for kind, id := range ch.All() {
		order = append(order, kind+"="+id)
	}
	if got, want := strings.Join(order, " "), "team=team-atlas user=u-dave"; got != want {
		t.Errorf("All = %s, want %s", got, want)
	}
	if m := ch.Map(); len(m) != 2 || m["team"] != "team-atlas" || m["user"] != "u-dave" {
		t.Errorf("Map = %v", m)
	}
}

// stores is a Changer over a redis-server of its own, with the records the changes
// below refer to: team-atlas with u-alice, org-acme with production and staging.
func stores(t *testing.T) (context.Context, change.Changer) {
	t.Helper()
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	dep := testenv.Deployment(t)
	ctx := testenv.Context(t, 30*time.Second)
	creds := auth.NewStore(rdb, dep, nil)
	c := change.Changer{
		Dir:      directory.NewStore(rdb, dep),
		Creds:    creds,
		Sessions: session.NewStore(rdb, creds, dep, session.Policy{}, nil),
	}
	seed := directory.Seed{
		Teams: []directory.Team{{ID: "team-atlas", Name: "Atlas"}},
		Users: []directory.User{{ID: "u-alice", Name: "Alice", Teams: []string{"team-atlas"}}},
		Orgs:  []directory.Org{{ID: "org-acme", Name: "Acme", Environments: []string{"production", "staging"}}},
	}
	ch, err := c.Seed(ctx, seed)
	if err != nil {
		t.Fatal(err)
	}
	want := change.Change{Action: change.DirectorySeed, IDs: []string{"teams", "1", "users", "1", "orgs", "1", "agents", "0"}}
	assertChange(t, ch, want)
	return ctx, c
}

func assertChange(t *testing.T, got, want change.Change) {
	t.Helper()
	if got.Action != want.Action || !slices.Equal(got.IDs, want.IDs) {
		t.Fatalf("change = %s %q, want %s %q", got.Action, got.IDs, want.Action, want.IDs)
	}
}

// TestChangerDirectory makes directory changes in turn, each on the records the ones
// before made, and checks the ids each records.
func TestChangerDirectory(t *testing.T) {
	ctx, c := stores(t)
	steps := []struct {
		name   string
		change func() (change.Change, error)
		want   change.Change
	}{
		{
			name:   "user put",
			change: func() (change.Change, error) { return c.PutUser(ctx, directory.User{ID: "u-erin", Name: "Erin"}) },
			want:   change.Change{Action: change.UserPut, IDs: []string{"user", "u-erin"}},
		},
		{
			name:   "team put",
			change: func() (change.Change, error) { return c.PutTeam(ctx, directory.Team{ID: "team-cedar", Name: "Cedar"}) },
			want:   change.Change{Action: change.TeamPut, IDs: []string{"team", "team-cedar"}},
		},
		{
			name: "org put",
			change: func() (change.Change, error) {
				return c.PutOrg(ctx, directory.Org{ID: "org-initech", Name: "Initech", Environments: []string{"production"}})
			},
			want: change.Change{Action: change.OrgPut, IDs: []string{"org", "org-initech"}},
		},
		{
			name:   "member add",
			change: func() (change.Change, error) { return c.AddMember(ctx, "team-cedar", "u-erin") },
			want:   change.Change{Action: change.MemberAdd, IDs: []string{"team", "team-cedar", "user", "u-erin"}},
		},
		{
			name: "members set",
			change: func() (change.Change, error) {
				ch, added, removed, err := c.SetMembers(ctx, "team-cedar", []string{"u-alice"})
				if !slices.Equal(added, []string{"u-alice"}) || !slices.Equal(removed, []string{"u-erin"}) {
					t.Errorf("SetMembers added %q, removed %q", added, removed)
				}
				return ch, err
			},
			want: change.Change{Action: change.MembersSet, IDs: []string{"team", "team-cedar", "added", "u-alice", "removed", "u-erin"}},
		},
		{
			name:   "member remove",
			change: func() (change.Change, error) { return c.RemoveMember(ctx, "team-cedar", "u-alice") },
			want:   change.Change{Action: change.MemberRemove, IDs: []string{"team", "team-cedar", "user", "u-alice"}},
		},
		{
			name: "agent put new",
			change: func() (change.Change, error) {
				ch, before, err := c.PutAgent(ctx, directory.Agent{ID: "agent-cedar", Name: "Cedar", TeamID: "team-cedar", OrgID: "org-acme", Environment: "staging"})
				if before != "" {
					t.Errorf("previous team of a new agent: %q", before)
				}
				return ch, err
			},
			want: change.Change{Action: change.AgentPut, IDs: []string{"agent", "agent-cedar", "team", "team-cedar", "previousTeam", "", "org", "org-acme", "environment", "staging"}},
		},
		{
			name: "agent put move",
			change: func() (change.Change, error) {
				ch, before, err := c.PutAgent(ctx, directory.Agent{ID: "agent-cedar", Name: "Cedar", TeamID: "team-atlas", OrgID: "org-initech", Environment: "production"})
				if before != "team-cedar" {
					t.Errorf("previous team: %q, want team-cedar", before)
				}
				return ch, err
			},
			want: change.Change{Action: change.AgentPut, IDs: []string{"agent", "agent-cedar", "team", "team-atlas", "previousTeam", "team-cedar", "org", "org-initech", "environment", "production"}},
		},
		{
			name:   "agent delete",
			change: func() (change.Change, error) { return c.DeleteAgent(ctx, "agent-cedar") },
			want:   change.Change{Action: change.AgentDelete, IDs: []string{"agent", "agent-cedar"}},
		},
	}
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.change()
			if err != nil {
				t.Fatal(err)
			}
			assertChange(t, got, tt.want)
		})
	}
}

// TestChangerRefusals: a refused change returns its store's error (the callers' tables
// read it) and no Change.
func TestChangerRefusals(t *testing.T) {
	ctx, c := stores(t)
	tests := []struct {
		name    string
		change  func() (change.Change, error)
		wantErr error
		wantMsg string
	}{
		{
			name:    "member add of an unknown user",
			change:  func() (change.Change, error) { return c.AddMember(ctx, "team-atlas", "u-nobody") },
			wantErr: directory.ErrNotFound,
			wantMsg: `user: no user "u-nobody"`,
		},
		{
			name: "agent put in an unknown team",
			change: func() (change.Change, error) {
				ch, _, err := c.PutAgent(ctx, directory.Agent{ID: "agent-x", Name: "X", TeamID: "team-nowhere", OrgID: "org-acme", Environment: "production"})
				return ch, err
			},
			wantErr: directory.ErrNotFound,
			wantMsg: `team: no team "team-nowhere"`,
		},
		{
			name: "orgkey create of an unknown environment",
			change: func() (change.Change, error) {
				ch, _, _, err := c.CreateOrgKey(ctx, change.OrgKeyRequest{Org: "org-acme", Environment: "mars", OrgField: "-org", EnvironmentField: "-env"})
				return ch, err
			},
			wantErr: directory.ErrNotFound,
			wantMsg: `orgkey: -env: no environment of org-acme "mars"`,
		},
		{
			name: "session start of an unknown agent",
			change: func() (change.Change, error) {
				ch, _, _, err := c.StartSession(ctx, "agent-missing")
				return ch, err
			},
			wantErr: directory.ErrNotFound,
			wantMsg: `session start: agent "agent-missing": `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.change()
			if !errors.Is(err, tt.wantErr) || !strings.HasPrefix(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v starting %q", err, tt.wantErr, tt.wantMsg)
			}
			assertChange(t, got, change.Change{})
		})
	}
}

// TestChangerKeys: the key changes name keys by id, never by token, and a revoke that
// deleted nothing is no change.
func TestChangerKeys(t *testing.T) {
	ctx, c := stores(t)
	ch, token, key, err := c.CreateOrgKey(ctx, change.OrgKeyRequest{
		Org: "org-acme", Environment: "staging", Scopes: []string{auth.ScopeWorkerLogsRead, "worker:tools:call"},
		OrgField: "org", EnvironmentField: "environment",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Creds.VerifyOrgKey(ctx, token); err != nil || got.ID != key.ID {
		t.Fatalf("VerifyOrgKey = %+v, %v; want key %s", got, err, key.ID)
	}
	assertChange(t, ch, change.Change{Action: change.OrgKeyCreate, IDs: []string{"org", "org-acme", "key", key.ID, "environment", "staging", "scopes", auth.ScopeWorkerLogsRead + " worker:tools:call"}})

	for _, tt := range []struct {
		name        string
		org         string
		wantDeleted bool
		want        change.Change
	}{
		{name: "another org's key", org: "org-initech"},
		{name: "its key", org: "org-acme", wantDeleted: true, want: change.Change{Action: change.OrgKeyRevoke, IDs: []string{"org", "org-acme", "key", key.ID}}},
		{name: "again", org: "org-acme"},
	} {
		t.Run("orgkey revoke "+tt.name, func(t *testing.T) {
			ch, deleted, err := c.RevokeOrgKey(ctx, tt.org, key.ID)
			if err != nil || deleted != tt.wantDeleted {
				t.Fatalf("RevokeOrgKey = %v, %v; want deleted %v", deleted, err, tt.wantDeleted)
			}
			assertChange(t, ch, tt.want)
		})
	}

	ch, token, admin, err := c.CreateAdminKey(ctx, "sync job")
	if err != nil {
		t.Fatal(err)
	}
	assertChange(t, ch, change.Change{Action: change.AdminKeyCreate, IDs: []string{"adminKey", admin.ID}})
	if slices.Contains(ch.IDs, token) {
		t.Fatal("the change holds the admin key's token")
	}
	ch, deleted, err := c.RevokeAdminKey(ctx, admin.ID)
	if err != nil || !deleted {
		t.Fatalf("RevokeAdminKey = %v, %v", deleted, err)
	}
	assertChange(t, ch, change.Change{Action: change.AdminKeyRevoke, IDs: []string{"adminKey", admin.ID}})
	if ch, deleted, err := c.RevokeAdminKey(ctx, admin.ID); err != nil || deleted {
		t.Fatalf("second RevokeAdminKey = %v, %v, %v", ch, deleted, err)
	}
}

func TestChangerSessions(t *testing.T) {
	ctx, c := stores(t)
	if _, _, err := c.PutAgent(ctx, directory.Agent{ID: "agent-scout", Name: "Scout", TeamID: "team-atlas", OrgID: "org-acme", Environment: "production"}); err != nil {
		t.Fatal(err)
	}
	ch, sess, passes, err := c.StartSession(ctx, "agent-scout")
	if err != nil {
		t.Fatal(err)
	}
	assertChange(t, ch, change.Change{Action: change.SessionStart, IDs: []string{"agent", "agent-scout", "session", sess.ID}})
	if _, err := c.Creds.VerifyPass(ctx, passes.Worker, auth.RoleWorker); err != nil {
		t.Fatalf("worker pass: %v", err)
	}
	ch, stopped, err := c.StopSession(ctx, sess.ID, "operator")
	if err != nil || !stopped.Stopped || stopped.StopReason != "operator" {
		t.Fatalf("StopSession = %+v, %v", stopped, err)
	}
	assertChange(t, ch, change.Change{Action: change.SessionStop, IDs: []string{"agent", "agent-scout", "session", sess.ID}})
	if _, _, err := c.StopSession(ctx, "0123456789abcdef0123456789abcdef", "operator"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("StopSession of an unknown session: %v", err)
	}
}
