package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/wire"
)

// Changes of one record at a time, for the admin API and the operator CLI. Each is
// checked before anything is written (a refused change changes nothing) and is one
// atomic step on the record that decides access: an agent's team, organisation and
// environment are one hash written by one HSET, so a moved agent is in exactly one
// team at every instant; a team's member set is replaced in one transaction. The
// listing indices (a user's teams, a team's agents) follow the record; they never grant
// anything (VisibleAgents checks every entry against the records). After a change the
// directory's generation is incremented, which ends every replica's memory of the
// refusals it gave before (api's refusal memory).

// Bounds of a change.
const (
	// MaxNameLen bounds a display name, in bytes of UTF-8.
	MaxNameLen = 200
	// MaxEnvironments bounds an organisation's environments.
	MaxEnvironments = 64
	// MaxMembers bounds a team's member list set in one change.
	MaxMembers = 10000
)

// ErrInvalid is wrapped by every FieldError: a change was refused and nothing changed.
var ErrInvalid = errors.New("directory: invalid change")

// FieldError is a change refused because of one field: malformed, or naming a record
// that does not exist (Unknown).
type FieldError struct {
	Field   string
	Reason  string
	Unknown bool // the field names a user, team, organisation or environment that does not exist
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) hold, and errors.Is(err, ErrNotFound) for an
// unknown reference.
func (e *FieldError) Unwrap() []error {
	if e.Unknown {
		return []error{ErrInvalid, ErrNotFound}
	}
	return []error{ErrInvalid}
}

func badField(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

func unknown(field, kind, id string) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf("no %s %q", kind, id), Unknown: true}
}

func checkID(field, id string) error {
	if !ValidID(id) {
		return badField(field, "must be 1 to 64 of A-Z, a-z, 0-9, '_' and '-'")
	}
	return nil
}

// checkName accepts a display name: valid UTF-8, at most MaxNameLen bytes, no control
// characters, not blank.
func checkName(field, name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return badField(field, "is required")
	case len(name) > MaxNameLen:
		return badField(field, fmt.Sprintf("is longer than %d bytes", MaxNameLen))
	case !utf8.ValidString(name):
		return badField(field, "is not valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return badField(field, "contains a control character")
	}
	return nil
}

// bump records that the directory changed (see DirectoryGeneration).
func (s *Store) bump(ctx context.Context) error {
	if err := s.rdb.Incr(ctx, s.keys.DirectoryGeneration()).Err(); err != nil {
		return fmt.Errorf("directory: generation: %w", err)
	}
	return nil
}

// Generation returns the directory's generation (0 before any change).
func (s *Store) Generation(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.DirectoryGeneration()).Result()
	if errors.Is(err, redis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		return 0, fmt.Errorf("directory: generation: %w", err)
	}
	return ParseGeneration(v)
}

// ParseGeneration returns the generation that the value of its key holds
// (keyspace.Keys.DirectoryGeneration), given as GET reads it, "" when there is none:
// 0 before any change. It reads nothing itself.
func ParseGeneration(value string) (int64, error) {
	if value == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("directory: generation: %w", err)
	}
	return n, nil
}

func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	n, err := s.rdb.Exists(ctx, key).Result()
	if err != nil {
		return false, fmt.Errorf("directory: read: %w", err)
	}
	return n > 0, nil
}

// mustExist returns an unknown-reference error naming field when key has no record.
func (s *Store) mustExist(ctx context.Context, key, field, kind, id string) error {
	ok, err := s.exists(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return unknown(field, kind, id)
	}
	return nil
}

// PutUser creates a user or renames one.
func (s *Store) PutUser(ctx context.Context, u User) error {
	if err := checkID("id", u.ID); err != nil {
		return err
	}
	if err := checkName("name", u.Name); err != nil {
		return err
	}
	if err := s.rdb.HSet(ctx, s.userKey(u.ID), "name", u.Name).Err(); err != nil {
		return fmt.Errorf("directory: put user: %w", err)
	}
	return s.bump(ctx)
}

// PutTeam creates a team or renames one.
func (s *Store) PutTeam(ctx context.Context, t Team) error {
	if err := checkID("id", t.ID); err != nil {
		return err
	}
	if err := checkName("name", t.Name); err != nil {
		return err
	}
	if err := s.rdb.HSet(ctx, s.teamKey(t.ID), "name", t.Name).Err(); err != nil {
		return fmt.Errorf("directory: put team: %w", err)
	}
	return s.bump(ctx)
}

// PutOrg creates an organisation or replaces its name and environments. An agent keeps
// the environment it has; a new or moved agent must name one of the list.
func (s *Store) PutOrg(ctx context.Context, o Org) error {
	if err := checkID("id", o.ID); err != nil {
		return err
	}
	if err := checkName("name", o.Name); err != nil {
		return err
	}
	if len(o.Environments) == 0 || len(o.Environments) > MaxEnvironments {
		return badField("environments", fmt.Sprintf("must list 1 to %d environments", MaxEnvironments))
	}
	seen := map[string]bool{}
	for _, e := range o.Environments {
		if !ValidID(e) || seen[e] {
			return badField("environments", fmt.Sprintf("bad or repeated environment %q", e))
		}
		seen[e] = true
	}
	envs, err := json.Marshal(o.Environments)
	if err != nil {
		return fmt.Errorf("directory: put org: %w", err)
	}
	if err := s.rdb.HSet(ctx, s.orgKey(o.ID), "name", o.Name, "environments", string(envs)).Err(); err != nil {
		return fmt.Errorf("directory: put org: %w", err)
	}
	return s.bump(ctx)
}

// Org returns an organisation, ErrNotFound, or a wrapped Redis error.
func (s *Store) Org(ctx context.Context, id string) (Org, error) {
	if !ValidID(id) {
		return Org{}, ErrNotFound
	}
	m, err := s.rdb.HGetAll(ctx, s.orgKey(id)).Result()
	if err != nil {
		return Org{}, fmt.Errorf("directory: org: %w", err)
	}
	if len(m) == 0 {
		return Org{}, ErrNotFound
	}
	o := Org{ID: id, Name: m["name"]}
	// Written by a replica or the operator CLI (json.Marshal of a []string), read as any
	// JSON from another process is (wire.DecodeStrict).
	if err := wire.DecodeStrict([]byte(m["environments"]), &o.Environments); err != nil {
		return Org{}, fmt.Errorf("directory: org %q: environments: %w", id, err)
	}
	return o, nil
}

// CheckEnvironment returns nil when orgID exists and has environment, an unknown
// reference naming orgField or envField otherwise.
func (s *Store) CheckEnvironment(ctx context.Context, orgID, environment, orgField, envField string) error {
	if err := checkID(orgField, orgID); err != nil {
		return err
	}
	if err := checkID(envField, environment); err != nil {
		return err
	}
	o, err := s.Org(ctx, orgID)
	if errors.Is(err, ErrNotFound) {
		return unknown(orgField, "organisation", orgID)
	}
	if err != nil {
		return err
	}
	if !slices.Contains(o.Environments, environment) {
		return unknown(envField, "environment of "+orgID, environment)
	}
	return nil
}

// AddMember makes an existing user a member of an existing team. Adding a member twice
// changes nothing.
func (s *Store) AddMember(ctx context.Context, teamID, userID string) error {
	if err := s.checkMembership(ctx, teamID, userID); err != nil {
		return err
	}
	if err := s.rdb.SAdd(ctx, s.membersKey(teamID), userID).Err(); err != nil {
		return fmt.Errorf("directory: add member: %w", err)
	}
	if err := s.rdb.SAdd(ctx, s.userTeamsKey(userID), teamID).Err(); err != nil {
		return fmt.Errorf("directory: add member: index: %w", err)
	}
	return s.bump(ctx)
}

// RemoveMember revokes a membership at once: the next access check sees it. The member
// set, which every check reads, changes first; the listing index follows. Removing a
// user who is not a member changes nothing; the team must exist.
func (s *Store) RemoveMember(ctx context.Context, teamID, userID string) error {
	if err := checkID("user", userID); err != nil {
		return err
	}
	if err := checkID("team", teamID); err != nil {
		return err
	}
	if err := s.mustExist(ctx, s.teamKey(teamID), "team", "team", teamID); err != nil {
		return err
	}
	if err := s.rdb.SRem(ctx, s.membersKey(teamID), userID).Err(); err != nil {
		return fmt.Errorf("directory: remove member: %w", err)
	}
	if err := s.rdb.SRem(ctx, s.userTeamsKey(userID), teamID).Err(); err != nil {
		return fmt.Errorf("directory: remove member: index: %w", err)
	}
	return s.bump(ctx)
}

func (s *Store) checkMembership(ctx context.Context, teamID, userID string) error {
	if err := checkID("team", teamID); err != nil {
		return err
	}
	if err := checkID("user", userID); err != nil {
		return err
	}
	if err := s.mustExist(ctx, s.teamKey(teamID), "team", "team", teamID); err != nil {
		return err
	}
	return s.mustExist(ctx, s.userKey(userID), "user", "user", userID)
}

// SetMembers replaces a team's members with users, all of which must exist, in one
// transaction on the team's member set (a platform that reconciles periodically sends
// the whole list). It returns who was added and who was removed.
func (s *Store) SetMembers(ctx context.Context, teamID string, users []string) (added, removed []string, err error) {
	if err := checkID("team", teamID); err != nil {
		return nil, nil, err
	}
	if len(users) > MaxMembers {
		return nil, nil, badField("members", fmt.Sprintf("at most %d members", MaxMembers))
	}
	want := map[string]bool{}
	for _, u := range users {
		if !ValidID(u) {
			return nil, nil, badField("members", fmt.Sprintf("bad user id %q", u))
		}
		want[u] = true
	}
	if err := s.mustExist(ctx, s.teamKey(teamID), "team", "team", teamID); err != nil {
		return nil, nil, err
	}
	ids := make([]string, 0, len(want))
	for u := range want {
		ids = append(ids, u)
	}
	slices.Sort(ids)
	// Every user must exist: one round trip (a Cluster client splits it by slot).
	cmds := make([]*redis.IntCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range ids {
			cmds[i] = p.Exists(ctx, s.userKey(u))
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("directory: set members: users: %w", err)
	}
	for i, u := range ids {
		if cmds[i].Val() == 0 {
			return nil, nil, unknown("members", "user", u)
		}
	}
	var before *redis.StringSliceCmd
	// One slot: read the old set and replace it in one transaction.
	if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		before = p.SMembers(ctx, s.membersKey(teamID))
		p.Del(ctx, s.membersKey(teamID))
		if len(ids) > 0 {
			members := make([]any, len(ids))
			for i, u := range ids {
				members[i] = u
			}
			p.SAdd(ctx, s.membersKey(teamID), members...)
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("directory: set members: %w", err)
	}
	had := map[string]bool{}
	for _, u := range before.Val() {
		had[u] = true
		if !want[u] {
			removed = append(removed, u)
		}
	}
	for _, u := range ids {
		if !had[u] {
			added = append(added, u)
		}
	}
	slices.Sort(removed)
	// The indices follow, one user's slot at a time.
	for _, u := range removed {
		if ValidID(u) {
			if err := s.rdb.SRem(ctx, s.userTeamsKey(u), teamID).Err(); err != nil {
				return nil, nil, fmt.Errorf("directory: set members: index: %w", err)
			}
		}
	}
	for _, u := range added {
		if err := s.rdb.SAdd(ctx, s.userTeamsKey(u), teamID).Err(); err != nil {
			return nil, nil, fmt.Errorf("directory: set members: index: %w", err)
		}
	}
	return added, removed, s.bump(ctx)
}

// Members returns a team's members, sorted, or ErrNotFound for an unknown team.
func (s *Store) Members(ctx context.Context, teamID string) ([]string, error) {
	if !ValidID(teamID) {
		return nil, ErrNotFound
	}
	if ok, err := s.exists(ctx, s.teamKey(teamID)); err != nil {
		return nil, err
	} else if !ok {
		return nil, ErrNotFound
	}
	m, err := s.rdb.SMembers(ctx, s.membersKey(teamID)).Result()
	if err != nil {
		return nil, fmt.Errorf("directory: members: %w", err)
	}
	slices.Sort(m)
	return m, nil
}

// PutAgent creates an agent or moves it: its team, organisation and environment are
// written together in one HSET on its record, the only thing an access check reads, so
// the agent is never in two teams nor in none. The team must exist and the environment
// must be one of the organisation's. It returns the team the agent was in before ("" for
// a new agent).
func (s *Store) PutAgent(ctx context.Context, a Agent) (previousTeam string, err error) {
	if err := checkID("id", a.ID); err != nil {
		return "", err
	}
	if err := checkName("name", a.Name); err != nil {
		return "", err
	}
	if err := checkID("team", a.TeamID); err != nil {
		return "", err
	}
	if err := s.mustExist(ctx, s.teamKey(a.TeamID), "team", "team", a.TeamID); err != nil {
		return "", err
	}
	if err := s.CheckEnvironment(ctx, a.OrgID, a.Environment, "org", "environment"); err != nil {
		return "", err
	}
	old, err := s.rdb.HGet(ctx, s.agentKey(a.ID), "team").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("directory: put agent: %w", err)
	}
	err = s.rdb.HSet(ctx, s.agentKey(a.ID), "name", a.Name, "team", a.TeamID, "org", a.OrgID, "env", a.Environment).Err()
	if err != nil {
		return "", fmt.Errorf("directory: put agent: %w", err)
	}
	if err := s.rdb.SAdd(ctx, s.teamAgentsKey(a.TeamID), a.ID).Err(); err != nil {
		return "", fmt.Errorf("directory: put agent: index: %w", err)
	}
	if old != "" && old != a.TeamID && ValidID(old) {
		if err := s.rdb.SRem(ctx, s.teamAgentsKey(old), a.ID).Err(); err != nil {
			return "", fmt.Errorf("directory: put agent: index: %w", err)
		}
	}
	return old, s.bump(ctx)
}

// DeleteAgent removes an agent's record: from the next check on, it is unknown to
// every caller. Its session, if one runs, is left to end as sessions do. Deleting an
// unknown agent changes nothing.
func (s *Store) DeleteAgent(ctx context.Context, id string) error {
	if err := checkID("id", id); err != nil {
		return err
	}
	team, err := s.rdb.HGet(ctx, s.agentKey(id), "team").Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("directory: delete agent: %w", err)
	}
	if err := s.rdb.Del(ctx, s.agentKey(id)).Err(); err != nil {
		return fmt.Errorf("directory: delete agent: %w", err)
	}
	s.hints.drop(id)
	if ValidID(team) {
		if err := s.rdb.SRem(ctx, s.teamAgentsKey(team), id).Err(); err != nil {
			return fmt.Errorf("directory: delete agent: index: %w", err)
		}
	}
	return s.bump(ctx)
}
