package change

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/session"
)

// Changer makes the changes through the stores, each checked and applied exactly as
// the store says, and returns the Change to record. It records nothing itself: the
// admin API and the operator CLI record in their own ways (a buffered event and a log
// line; an acknowledged event). A method's error means nothing is to be recorded; the
// errors are the stores', passed on unwrapped unless a method says otherwise, so the
// callers' tables (the admin API's HTTP statuses) read them as before.
type Changer struct {
	Dir   *directory.Store
	Creds *auth.Store
	// Sessions is needed by StartSession and StopSession only.
	Sessions *session.Store
}

// PutUser creates a user or renames one (directory.Store.PutUser).
func (c Changer) PutUser(ctx context.Context, u directory.User) (Change, error) {
	if err := c.Dir.PutUser(ctx, u); err != nil {
		return Change{}, err
	}
	return newChange(UserPut, "user", u.ID), nil
}

// PutTeam creates a team or renames one (directory.Store.PutTeam).
func (c Changer) PutTeam(ctx context.Context, t directory.Team) (Change, error) {
	if err := c.Dir.PutTeam(ctx, t); err != nil {
		return Change{}, err
	}
	return newChange(TeamPut, "team", t.ID), nil
}

// PutOrg creates an organisation or replaces its name and environments
// (directory.Store.PutOrg).
func (c Changer) PutOrg(ctx context.Context, o directory.Org) (Change, error) {
	if err := c.Dir.PutOrg(ctx, o); err != nil {
		return Change{}, err
	}
	return newChange(OrgPut, "org", o.ID), nil
}

// SetMembers replaces a team's members (directory.Store.SetMembers) and returns who was
// added and who removed; the Change lists each, comma-separated.
func (c Changer) SetMembers(ctx context.Context, team string, users []string) (ch Change, added, removed []string, err error) {
	added, removed, err = c.Dir.SetMembers(ctx, team, users)
	if err != nil {
		return Change{}, nil, nil, err
	}
	ch = newChange(MembersSet, "team", team, "added", strings.Join(added, ","), "removed", strings.Join(removed, ","))
	return ch, added, removed, nil
}

// AddMember makes a user a member of a team (directory.Store.AddMember); adding a
// member twice is a change made twice.
func (c Changer) AddMember(ctx context.Context, team, user string) (Change, error) {
	if err := c.Dir.AddMember(ctx, team, user); err != nil {
		return Change{}, err
	}
	return newChange(MemberAdd, "team", team, "user", user), nil
}

// RemoveMember ends a user's membership of a team (directory.Store.RemoveMember);
// removing a user who is no member is a change made too.
func (c Changer) RemoveMember(ctx context.Context, team, user string) (Change, error) {
	if err := c.Dir.RemoveMember(ctx, team, user); err != nil {
		return Change{}, err
	}
	return newChange(MemberRemove, "team", team, "user", user), nil
}

// PutAgent creates an agent or moves it (directory.Store.PutAgent) and returns the team
// it was in before ("" for a new agent), which the Change names as previousTeam.
func (c Changer) PutAgent(ctx context.Context, a directory.Agent) (ch Change, previousTeam string, err error) {
	previousTeam, err = c.Dir.PutAgent(ctx, a)
	if err != nil {
		return Change{}, "", err
	}
	ch = newChange(AgentPut, "agent", a.ID, "team", a.TeamID, "previousTeam", previousTeam, "org", a.OrgID, "environment", a.Environment)
	return ch, previousTeam, nil
}

// DeleteAgent deletes an agent's record (directory.Store.DeleteAgent); deleting an
// unknown agent is a change made too.
func (c Changer) DeleteAgent(ctx context.Context, id string) (Change, error) {
	if err := c.Dir.DeleteAgent(ctx, id); err != nil {
		return Change{}, err
	}
	return newChange(AgentDelete, "agent", id), nil
}

// OrgKeyRequest is an organisation key to create.
type OrgKeyRequest struct {
	Org         string
	Environment string
	Scopes      []string
	// OrgField and EnvironmentField are what the caller's user calls Org and
	// Environment (a body's field, a flag): the refusal of an unknown organisation or
	// environment names it.
	OrgField, EnvironmentField string
}

// CreateOrgKey mints an organisation key once the organisation is known to have the
// environment (directory.Store.CheckEnvironment; its refusal is wrapped "orgkey: …"
// and names r's fields), and returns the key's token, shown once, and its record. The
// Change names the key by id, never by token.
func (c Changer) CreateOrgKey(ctx context.Context, r OrgKeyRequest) (ch Change, token string, key auth.OrgKey, err error) {
	if err := c.Dir.CheckEnvironment(ctx, r.Org, r.Environment, r.OrgField, r.EnvironmentField); err != nil {
		return Change{}, "", auth.OrgKey{}, fmt.Errorf("orgkey: %w", err)
	}
	token, key, err = c.Creds.CreateOrgKey(ctx, r.Org, r.Environment, r.Scopes)
	if err != nil {
		return Change{}, "", auth.OrgKey{}, err
	}
	ch = newChange(OrgKeyCreate, "org", r.Org, "key", key.ID, "environment", key.Environment, "scopes", strings.Join(key.Scopes, " "))
	return ch, token, key, nil
}

// RevokeOrgKey deletes org's key id (auth.Store.RevokeOrgKey) and reports whether a
// key was deleted: only then is the Change made, and to be recorded.
func (c Changer) RevokeOrgKey(ctx context.Context, org, id string) (ch Change, deleted bool, err error) {
	deleted, err = c.Creds.RevokeOrgKey(ctx, org, id)
	if err != nil || !deleted {
		return Change{}, false, err
	}
	return newChange(OrgKeyRevoke, "org", org, "key", id), true, nil
}

// CreateAdminKey mints an admin key labelled name (auth.Store.CreateAdminKey) and
// returns its token, shown once, and its record. The Change names the key by id.
func (c Changer) CreateAdminKey(ctx context.Context, name string) (ch Change, token string, key auth.AdminKey, err error) {
	token, key, err = c.Creds.CreateAdminKey(ctx, name)
	if err != nil {
		return Change{}, "", auth.AdminKey{}, err
	}
	return newChange(AdminKeyCreate, "adminKey", key.ID), token, key, nil
}

// RevokeAdminKey deletes admin key id (auth.Store.RevokeAdminKey) and reports whether a
// key was deleted: only then is the Change made, and to be recorded.
func (c Changer) RevokeAdminKey(ctx context.Context, id string) (ch Change, deleted bool, err error) {
	deleted, err = c.Creds.RevokeAdminKey(ctx, id)
	if err != nil || !deleted {
		return Change{}, false, err
	}
	return newChange(AdminKeyRevoke, "adminKey", id), true, nil
}

// Seed loads a seed into the directory (directory.Store.Load). Its Change counts the
// records of each kind rather than naming them: a seed may hold thousands.
func (c Changer) Seed(ctx context.Context, seed directory.Seed) (Change, error) {
	if err := c.Dir.Load(ctx, seed); err != nil {
		return Change{}, err
	}
	return newChange(DirectorySeed,
		"teams", strconv.Itoa(len(seed.Teams)), "users", strconv.Itoa(len(seed.Users)),
		"orgs", strconv.Itoa(len(seed.Orgs)), "agents", strconv.Itoa(len(seed.Agents))), nil
}

// StartSession starts a session of an agent of the directory (session.Store.Start,
// which stops the agent's previous one) and returns it with its passes, shown once. An
// agent the directory does not hold is refused, wrapped "session start: agent …",
// before anything is written.
func (c Changer) StartSession(ctx context.Context, agent string) (ch Change, sess session.Session, passes session.Passes, err error) {
	if _, err := c.Dir.Agent(ctx, agent); err != nil {
		return Change{}, session.Session{}, session.Passes{}, fmt.Errorf("session start: agent %q: %w", agent, err)
	}
	sess, passes, err = c.Sessions.Start(ctx, agent)
	if err != nil {
		return Change{}, session.Session{}, session.Passes{}, err
	}
	return newChange(SessionStart, "agent", agent, "session", sess.ID), sess, passes, nil
}

// StopSession stops session id for reason (session.Store.Stop, which revokes its
// passes; stopping a stopped session is a change made too) and returns it.
func (c Changer) StopSession(ctx context.Context, id, reason string) (Change, session.Session, error) {
	sess, err := c.Sessions.Stop(ctx, id, reason)
	if err != nil {
		return Change{}, session.Session{}, err
	}
	return newChange(SessionStop, "agent", sess.AgentID, "session", sess.ID), sess, nil
}
