// Package directory holds who is who: users, teams and their members, organisations and
// agents (each agent belongs to one team, one organisation and one environment). It is
// kept in Redis, namespaced by deployment, each record hash-tagged by its own id.
package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"

	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/wire"
	"github.com/redis/go-redis/v9"
)

// ErrNotFound is returned for an unknown user, team, organisation or agent.
var ErrNotFound = errors.New("directory: not found")

// MaxSeedBytes bounds a seed file.
const MaxSeedBytes = 4 << 20 // 4 MiB

var idRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidID reports whether id may name a record: 1 to 64 of letters, digits, '_' and '-'.
func ValidID(id string) bool { return idRe.MatchString(id) }

// User is a human.
type User struct {
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	Teams []string `json:"teams"`
}

// Team groups users and agents.
type Team struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Org is a partner organisation.
type Org struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Environments []string `json:"environments"`
}

// Agent is an AI agent of a team, billed to an organisation and run in one of its
// environments.
type Agent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	TeamID      string `json:"team"`
	OrgID       string `json:"org"`
	Environment string `json:"environment"`
}

// Seed is the JSON document the operator CLI loads.
type Seed struct {
	Teams  []Team  `json:"teams"`
	Users  []User  `json:"users"`
	Orgs   []Org   `json:"orgs"`
	Agents []Agent `json:"agents"`
}

// ParseSeed reads and validates a seed of at most MaxSeedBytes: one JSON object read
// with wire.DecodeStrict (no member it does not name, none twice, names in their exact
// case), every id well formed and unique per kind, every reference resolvable, every
// agent's environment one of its organisation's.
func ParseSeed(r io.Reader) (Seed, error) {
	var s Seed
	b, err := io.ReadAll(io.LimitReader(r, MaxSeedBytes+1))
	switch {
	case err != nil:
		return Seed{}, fmt.Errorf("directory: seed: %w", err)
	case len(b) > MaxSeedBytes:
		return Seed{}, fmt.Errorf("directory: seed: larger than %d bytes", MaxSeedBytes)
	}
	if err := wire.DecodeStrict(b, &s); err != nil {
		return Seed{}, fmt.Errorf("directory: seed: %w", err)
	}
	teams := map[string]bool{}
	for _, t := range s.Teams {
		if !ValidID(t.ID) || teams[t.ID] {
			return Seed{}, fmt.Errorf("directory: seed: bad or duplicate team id %q", t.ID)
		}
		teams[t.ID] = true
	}
	users := map[string]bool{}
	for _, u := range s.Users {
		if !ValidID(u.ID) || users[u.ID] {
			return Seed{}, fmt.Errorf("directory: seed: bad or duplicate user id %q", u.ID)
		}
		users[u.ID] = true
		for _, t := range u.Teams {
			if !teams[t] {
				return Seed{}, fmt.Errorf("directory: seed: user %q in unknown team %q", u.ID, t)
			}
		}
	}
	orgs := map[string]map[string]bool{}
	for _, o := range s.Orgs {
		if !ValidID(o.ID) || orgs[o.ID] != nil {
			return Seed{}, fmt.Errorf("directory: seed: bad or duplicate org id %q", o.ID)
		}
		orgs[o.ID] = map[string]bool{}
		for _, e := range o.Environments {
			if !ValidID(e) {
				return Seed{}, fmt.Errorf("directory: seed: org %q: bad environment %q", o.ID, e)
			}
			orgs[o.ID][e] = true
		}
	}
	agents := map[string]bool{}
	for _, a := range s.Agents {
		if !ValidID(a.ID) || agents[a.ID] {
			return Seed{}, fmt.Errorf("directory: seed: bad or duplicate agent id %q", a.ID)
		}
		agents[a.ID] = true
		if !teams[a.TeamID] {
			return Seed{}, fmt.Errorf("directory: seed: agent %q in unknown team %q", a.ID, a.TeamID)
		}
		if envs := orgs[a.OrgID]; envs == nil || !envs[a.Environment] {
			return Seed{}, fmt.Errorf("directory: seed: agent %q: unknown org %q or environment %q", a.ID, a.OrgID, a.Environment)
		}
	}
	return s, nil
}

// Store reads and writes the directory.
type Store struct {
	rdb   redis.UniversalClient
	keys  keyspace.Keys
	hints hints
}

// NewStore returns a Store for one deployment.
func NewStore(rdb redis.UniversalClient, deployment string) *Store {
	return &Store{rdb: rdb, keys: keyspace.For(deployment)}
}

func (s *Store) agentKey(id string) string   { return s.keys.Agent(id) }
func (s *Store) userKey(id string) string    { return s.keys.User(id) }
func (s *Store) orgKey(id string) string     { return s.keys.Org(id) }
func (s *Store) teamKey(id string) string    { return s.keys.Team(id) }
func (s *Store) membersKey(id string) string { return s.keys.TeamMembers(id) }

// userTeamsKey and teamAgentsKey are indices for listing (VisibleAgents): the teams a
// user was made a member of, and the agents a seed put in a team. Neither grants
// anything: VisibleAgents checks each against the member set and the agent's record.
func (s *Store) userTeamsKey(id string) string  { return s.keys.UserTeams(id) }
func (s *Store) teamAgentsKey(id string) string { return s.keys.TeamAgents(id) }

// Load writes a parsed seed. It is idempotent: records are overwritten and team
// memberships replaced by the seed's. Each record is one key, so a Cluster is fine.
func (s *Store) Load(ctx context.Context, seed Seed) error {
	members := map[string][]any{}
	for _, u := range seed.Users {
		for _, t := range u.Teams {
			members[t] = append(members[t], u.ID)
		}
	}
	agents := map[string][]any{}
	for _, a := range seed.Agents {
		agents[a.TeamID] = append(agents[a.TeamID], a.ID)
	}
	for _, t := range seed.Teams {
		if err := s.rdb.HSet(ctx, s.teamKey(t.ID), "name", t.Name).Err(); err != nil {
			return fmt.Errorf("directory: load team: %w", err)
		}
		// One slot per team: replace the member set and the agent index atomically.
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, s.membersKey(t.ID), s.teamAgentsKey(t.ID))
			if len(members[t.ID]) > 0 {
				p.SAdd(ctx, s.membersKey(t.ID), members[t.ID]...)
			}
			if len(agents[t.ID]) > 0 {
				p.SAdd(ctx, s.teamAgentsKey(t.ID), agents[t.ID]...)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("directory: load members: %w", err)
		}
	}
	for _, u := range seed.Users {
		// One slot per user: the record and its team index together.
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, s.userKey(u.ID), "name", u.Name)
			p.Del(ctx, s.userTeamsKey(u.ID))
			if len(u.Teams) > 0 {
				teams := make([]any, len(u.Teams))
				for i, t := range u.Teams {
					teams[i] = t
				}
				p.SAdd(ctx, s.userTeamsKey(u.ID), teams...)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("directory: load user: %w", err)
		}
	}
	for _, o := range seed.Orgs {
		envs, _ := json.Marshal(o.Environments)
		if err := s.rdb.HSet(ctx, s.orgKey(o.ID), "name", o.Name, "environments", string(envs)).Err(); err != nil {
			return fmt.Errorf("directory: load org: %w", err)
		}
	}
	inSeed := map[string]bool{}
	for _, t := range seed.Teams {
		inSeed[t.ID] = true
	}
	for _, a := range seed.Agents {
		err := s.rdb.HSet(ctx, s.agentKey(a.ID), "name", a.Name, "team", a.TeamID, "org", a.OrgID, "env", a.Environment).Err()
		if err != nil {
			return fmt.Errorf("directory: load agent: %w", err)
		}
		// A team of this seed had its index replaced above; a team loaded earlier (a
		// partial seed adding an agent) gains it.
		if !inSeed[a.TeamID] {
			if err := s.rdb.SAdd(ctx, s.teamAgentsKey(a.TeamID), a.ID).Err(); err != nil {
				return fmt.Errorf("directory: load agent: index: %w", err)
			}
		}
	}
	return s.bump(ctx)
}

// Agent returns an agent, ErrNotFound, or a wrapped Redis error.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	if !ValidID(id) {
		return Agent{}, ErrNotFound
	}
	return s.agentFrom(id, s.rdb.HGetAll(ctx, s.agentKey(id)))
}

// User returns a user's name, ErrNotFound, or a wrapped Redis error.
func (s *Store) User(ctx context.Context, id string) (User, error) {
	if !ValidID(id) {
		return User{}, ErrNotFound
	}
	m, err := s.rdb.HGetAll(ctx, s.userKey(id)).Result()
	if err != nil {
		return User{}, fmt.Errorf("directory: user: %w", err)
	}
	if len(m) == 0 {
		return User{}, ErrNotFound
	}
	return User{ID: id, Name: m["name"]}, nil
}

// IsMember reports whether userID is a member of teamID.
func (s *Store) IsMember(ctx context.Context, teamID, userID string) (bool, error) {
	ok, err := s.rdb.SIsMember(ctx, s.membersKey(teamID), userID).Result()
	if err != nil {
		return false, fmt.Errorf("directory: membership: %w", err)
	}
	return ok, nil
}

// MaxVisibleAgents bounds what VisibleAgents returns.
const MaxVisibleAgents = 500

// VisibleAgents returns the agents userID may see, sorted by id, at most
// MaxVisibleAgents: those of every team the user is a member of. The indices only say
// where to look; each team is checked against its member set and each agent against its
// own record (its team now), so a revoked membership or a moved agent is never listed.
func (s *Store) VisibleAgents(ctx context.Context, userID string) ([]Agent, error) {
	if !ValidID(userID) {
		return nil, nil
	}
	teams, err := s.rdb.SMembers(ctx, s.userTeamsKey(userID)).Result()
	if err != nil {
		return nil, fmt.Errorf("directory: user teams: %w", err)
	}
	slices.Sort(teams)
	member := map[string]bool{}
	var ids []string
	for _, team := range teams {
		if !ValidID(team) {
			continue
		}
		ok, err := s.IsMember(ctx, team, userID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		member[team] = true
		members, err := s.rdb.SMembers(ctx, s.teamAgentsKey(team)).Result()
		if err != nil {
			return nil, fmt.Errorf("directory: team agents: %w", err)
		}
		for _, id := range members {
			if ValidID(id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// One round trip for the records (a Cluster client splits it by slot).
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.agentKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("directory: agents: %w", err)
	}
	agents := make([]Agent, 0, len(ids))
	for i, id := range ids {
		m := cmds[i].Val()
		// Listed only while its record names a team the user is a member of (checked
		// above, in this call).
		if len(m) == 0 || !member[m["team"]] {
			continue
		}
		agents = append(agents, Agent{ID: id, Name: m["name"], TeamID: m["team"], OrgID: m["org"], Environment: m["env"]})
		if len(agents) == MaxVisibleAgents {
			break
		}
	}
	return agents, nil
}
