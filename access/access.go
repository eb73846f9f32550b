// Package access decides who may see an agent, for every route that shows one: a member
// of the agent's team (a human JWT's user) or an organisation key with the route's
// scope, of the agent's organisation and environment. A view route's check (Check) is
// rules over records read for it: it names what it needs (Reads), the view service reads
// that in the same Redis round trip as its own reads, and the check judges the values
// read (Facts). The status route reads the same truth at once (IsMember). The HTTP layer
// parses, calls and renders: it holds no rule and no Redis client.
package access

import (
	"context"
	"errors"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
)

// Rules are one replica's access rules, with what it remembers of recent refusals
// (refusals.go).
type Rules struct {
	dir     *directory.Store
	refused refusals
}

// New returns the rules that read dir.
func New(dir *directory.Store) *Rules {
	return &Rules{dir: dir}
}

// Check is one caller's access to one agent on a view route (Member, Partner). A view
// checks twice: before the gate, and again before a frame leaves, reading every record
// anew (a key revoked since the first check, a membership removed while the capture
// ran). Each time the view asks Reads what to read, reads it in one round trip beside
// its own reads, and hands the values to Decide. A Check serves one request, one check
// at a time: Decide judges what the last Reads asked for.
type Check interface {
	// Reads names what the check reads, first (recheck false) or again (recheck true).
	// It returns the answer instead, auth.ErrNotFound, when no read could change it: an
	// agent id that no record can have.
	Reads(recheck bool) (Reads, error)
	// Decide judges what was read: nil, auth.ErrNotFound or auth.ErrForbidden for a
	// refusal, another error when it cannot decide (then 503). A member's check may
	// read more itself, one round trip at a time: the member set of a team other than
	// the one it guessed (one), or the truth once a remembered refusal's generation
	// moved (two).
	Decide(ctx context.Context, f Facts) error
}

// Reads names the records a check reads. The zero Reads reads nothing.
type Reads struct {
	Agent      bool   // the agent's record
	Team, User string // whether User is in Team's member set; nothing when Team is ""
	Generation bool   // the directory's generation
	Token      string // an organisation key, verified again; nothing when ""
}

// Facts are the values Reads read, each with its own error: a Redis error, or the
// store's answer (directory.ErrNotFound for an unknown agent, auth.ErrUnauthenticated
// for a key that is no longer valid). What was not asked for is left zero.
type Facts struct {
	Agent         directory.Agent
	AgentErr      error
	Member        bool
	MemberErr     error
	Generation    int64
	GenerationErr error
	Key           auth.OrgKey
	KeyErr        error
}

// Member is the check of a member of the agent's team: the agent exists and userID is
// in its team's member set. Unknown agent and foreign team are the same ErrNotFound. A
// first check after a refusal reads only the directory's generation while it is the one
// the refusal was based on (refusals.go). Every other check reads the truth, the
// agent's record and its team's member set, in one round trip when the team is known
// beforehand: the team the last check saw, or the directory's hint of the agent's
// record, names the set to read beside the record; if the record says another team,
// Decide reads that team's set after it. A hint never decides an answer.
func (r *Rules) Member(userID, agentID string) Check {
	return &member{rules: r, key: refusal{agentID, userID}}
}

// member is Member's check for one request.
type member struct {
	rules *Rules
	key   refusal
	team  string // the agent's team as the last check saw it
	guess string // the team whose member set the last Reads asked for
	// The remembered refusal whose generation the last Reads asked for, if it did.
	prev       refused
	remembered bool
}

func (m *member) Reads(recheck bool) (Reads, error) {
	m.remembered = false
	if !recheck {
		if prev, ok := m.rules.refused.get(m.key, time.Now()); ok {
			m.prev, m.remembered = prev, true
			return Reads{Generation: true}, nil
		}
	}
	if !directory.ValidID(m.key.agent) {
		m.rules.refused.add(m.key, refused{}, time.Now())
		return Reads{}, auth.ErrNotFound
	}
	m.guess = m.team
	if m.guess == "" {
		if a, ok := m.rules.dir.AgentHint(m.key.agent); ok {
			m.guess = a.TeamID
		}
	}
	return Reads{Agent: true, Team: m.guess, User: m.key.user}, nil
}

func (m *member) Decide(ctx context.Context, f Facts) error {
	if m.remembered {
		return m.rules.rememberedRefusal(ctx, m.key, m.prev, f)
	}
	if errors.Is(f.AgentErr, directory.ErrNotFound) {
		m.rules.refused.add(m.key, refused{}, time.Now())
		return auth.ErrNotFound
	}
	if f.AgentErr != nil {
		return f.AgentErr
	}
	m.team = f.Agent.TeamID
	ok, err := f.Member, f.MemberErr
	if m.guess == "" || f.Agent.TeamID != m.guess {
		// The set read, if any, was another team's: read the record's team's.
		ok, err = m.rules.dir.IsMember(ctx, f.Agent.TeamID, m.key.user)
	}
	if err != nil {
		return err
	}
	if !ok {
		m.rules.refused.add(m.key, refused{}, time.Now())
		return auth.ErrNotFound
	}
	return nil
}

// rememberedRefusal checks a remembered refusal against the directory's generation read
// in f: the same generation refuses again; another (or one not known yet) reads the
// truth after the generation, and a refusal then is remembered with that generation.
func (r *Rules) rememberedRefusal(ctx context.Context, key refusal, prev refused, f Facts) error {
	if f.GenerationErr != nil {
		return f.GenerationErr
	}
	g := f.Generation
	if prev.known && prev.generation == g {
		return auth.ErrNotFound
	}
	err := r.IsMember(ctx, key.user, key.agent)
	if errors.Is(err, auth.ErrNotFound) {
		r.refused.add(key, refused{generation: g, known: true}, time.Now())
	} else if err == nil {
		r.refused.Delete(key)
	}
	return err
}

// IsMember is Member's truth, read at once (the status route's check): the agent's
// record, then the member set of its team.
func (r *Rules) IsMember(ctx context.Context, userID, agentID string) error {
	agent, err := r.dir.Agent(ctx, agentID)
	if errors.Is(err, directory.ErrNotFound) {
		return auth.ErrNotFound
	}
	if err != nil {
		return err
	}
	ok, err := r.dir.IsMember(ctx, agent.TeamID, userID)
	if err != nil {
		return err
	}
	if !ok {
		return auth.ErrNotFound
	}
	return nil
}

// Partner is the check every partner route that reads a worker shares, for the
// organisation key key that the route has just verified from token: the key and the
// agent are of orgID and of one environment, and the key has scope. The first check
// trusts key and reads the agent's record; the re-check verifies token again (the key
// may have been revoked meanwhile) beside the agent's record, in one round trip.
func Partner(token string, key auth.OrgKey, orgID, agentID, scope string) Check {
	return &partner{token: token, key: key, orgID: orgID, agentID: agentID, scope: scope}
}

// partner is Partner's check for one request.
type partner struct {
	token                 string
	key                   auth.OrgKey
	orgID, agentID, scope string
	reverified            bool // the last Reads asked for the key again
}

func (c *partner) Reads(recheck bool) (Reads, error) {
	if !directory.ValidID(c.agentID) {
		return Reads{}, auth.ErrNotFound
	}
	c.reverified = recheck
	if recheck {
		return Reads{Agent: true, Token: c.token}, nil
	}
	return Reads{Agent: true}, nil
}

func (c *partner) Decide(_ context.Context, f Facts) error {
	key := c.key
	if c.reverified {
		if errors.Is(f.KeyErr, auth.ErrUnauthenticated) {
			// The key was revoked while the frame was captured. The caller was
			// authenticated when it asked, so this is access revoked meanwhile: 404, as
			// SPEC §3.9 answers it, not a 401 that ends a partner's watch as if its key
			// had never been valid.
			return auth.ErrNotFound
		}
		if f.KeyErr != nil {
			return f.KeyErr
		}
		key = f.Key
	}
	if errors.Is(f.AgentErr, directory.ErrNotFound) {
		return auth.ErrNotFound
	}
	if f.AgentErr != nil {
		return f.AgentErr
	}
	return orgAgent(key, c.orgID, f.Agent.OrgID, f.Agent.Environment, c.scope)
}

// orgAgent is the partner rule: the key must belong to orgID, and the agent must be of
// the same organisation and environment; otherwise auth.ErrNotFound (one answer for "no
// such agent" and "not yours"). A key that passes that but lacks scope gets
// auth.ErrForbidden.
func orgAgent(key auth.OrgKey, orgID, agentOrgID, agentEnvironment, scope string) error {
	if key.OrgID != orgID || agentOrgID != orgID || key.Environment != agentEnvironment {
		return auth.ErrNotFound
	}
	if !key.HasScope(scope) {
		return auth.ErrForbidden
	}
	return nil
}
