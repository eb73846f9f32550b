// Package access decides who may see an agent, for every route that shows one: a member
// of the agent's team (a human JWT's user) or an organisation key with the route's
// scope, of the agent's organisation and environment. The view service runs its checks
// (view.Authorize) in the same Redis round trip as its own reads; the status route reads
// the same truth at once (IsMember). The HTTP layer parses, calls and renders: it holds
// no rule and no Redis client.
package access

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/view"
)

// Rules are one replica's access rules, with what it remembers of recent refusals
// (refusals.go).
type Rules struct {
	dir     *directory.Store
	creds   *auth.Store
	refused refusals
}

// New returns the rules that read dir and creds.
func New(dir *directory.Store, creds *auth.Store) *Rules {
	return &Rules{dir: dir, creds: creds}
}

// Member: the agent exists and the user is a member of its team. Unknown agent and
// foreign team are the same ErrNotFound. A first check after a refusal reads only the
// directory's generation while it is the one the refusal was based on (refusals.go).
// Every other check reads the truth, the agent's record and its team's member set, in
// one round trip when the team is known beforehand: the team the last check saw, or the
// directory's hint of the agent's record, names the set to read beside the record; if
// the record says another team, that team's set is read after it. A hint never decides
// an answer.
func (r *Rules) Member(userID, agentID string) view.Authorize {
	var team string // the agent's team as the last check saw it
	key := refusal{agentID, userID}
	return func(p redis.Pipeliner, recheck bool) func(context.Context) error {
		if !recheck {
			if prev, ok := r.refused.get(key, time.Now()); ok {
				return r.rememberedRefusal(p, key, prev)
			}
		}
		agent := r.dir.QueueAgent(p, agentID)
		guess := team
		if guess == "" {
			if a, ok := r.dir.AgentHint(agentID); ok {
				guess = a.TeamID
			}
		}
		var member func() (bool, error)
		if guess != "" {
			member = r.dir.QueueIsMember(p, guess, userID)
		}
		return func(ctx context.Context) error {
			a, err := agent()
			if errors.Is(err, directory.ErrNotFound) {
				r.refused.add(key, refused{}, time.Now())
				return auth.ErrNotFound
			}
			if err != nil {
				return err
			}
			team = a.TeamID
			var ok bool
			if member != nil && a.TeamID == guess {
				ok, err = member()
			} else {
				ok, err = r.dir.IsMember(ctx, a.TeamID, userID)
			}
			if err != nil {
				return err
			}
			if !ok {
				r.refused.add(key, refused{}, time.Now())
				return auth.ErrNotFound
			}
			return nil
		}
	}
}

// rememberedRefusal checks a remembered refusal against the directory's generation: the
// same generation refuses again; another (or one not known yet) reads the truth after
// the generation, and a refusal then is remembered with that generation.
func (r *Rules) rememberedRefusal(p redis.Pipeliner, key refusal, prev refused) func(context.Context) error {
	generation := r.dir.QueueGeneration(p)
	return func(ctx context.Context) error {
		g, err := generation()
		if err != nil {
			return err
		}
		if prev.known && prev.generation == g {
			return auth.ErrNotFound
		}
		err = r.IsMember(ctx, key.user, key.agent)
		if errors.Is(err, auth.ErrNotFound) {
			r.refused.add(key, refused{generation: g, known: true}, time.Now())
		} else if err == nil {
			r.refused.Delete(key)
		}
		return err
	}
}

// IsMember is Member's truth, read at once (the status route's check): the agent's record, then the member
// set of its team.
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

// Partner applies the check every partner route that reads a worker shares. The
// first check trusts the key the route has just verified and reads the agent; the
// re-check verifies the key again (it may have been revoked meanwhile) beside the
// agent's record, in one round trip.
func (r *Rules) Partner(token string, key auth.OrgKey, orgID, agentID, scope string) view.Authorize {
	return func(p redis.Pipeliner, recheck bool) func(context.Context) error {
		verified := func() (auth.OrgKey, error) { return key, nil }
		if recheck {
			verified = r.creds.QueueVerifyOrgKey(p, token)
		}
		agent := r.dir.QueueAgent(p, agentID)
		return func(context.Context) error {
			k, err := verified()
			if recheck && errors.Is(err, auth.ErrUnauthenticated) {
				// The key was revoked while the frame was captured. The caller was
				// authenticated when it asked, so this is access revoked meanwhile:
				// 404, as SPEC §3.9 answers it, not a 401 that ends a partner's watch
				// as if its key had never been valid.
				return auth.ErrNotFound
			}
			if err != nil {
				return err
			}
			a, err := agent()
			if errors.Is(err, directory.ErrNotFound) {
				return auth.ErrNotFound
			}
			if err != nil {
				return err
			}
			return orgAgent(k, orgID, a.OrgID, a.Environment, scope)
		}
	}
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
