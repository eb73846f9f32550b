package directory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/internal/ttlmap"
)

// Agent records as this replica last read them. A hint never answers an access check:
// it only names, before the agent's record is read, the team whose member set to read
// in the same round trip (access.Rules.Member), and the record read beside it decides. A
// wrong hint (the agent changed team) costs one more round trip, never a wrong answer.
const (
	HintTTL  = time.Minute
	MaxHints = 4096
)

// hints are the agent records this replica read last, by agent id.
type hints struct{ ttlmap.Map[string, Agent] }

func (h *hints) get(id string, now time.Time) (Agent, bool) { return h.Get(id, now) }
func (h *hints) put(a Agent, now time.Time)                 { h.Put(a.ID, a, now.Add(HintTTL), now, MaxHints) }
func (h *hints) drop(id string)                             { h.Delete(id) }

// AgentHint returns the agent's record as this replica read it less than HintTTL ago,
// if it did: a guess, never an answer (see HintTTL).
func (s *Store) AgentHint(id string) (Agent, bool) {
	return s.hints.get(id, time.Now())
}

// QueueAgent queues on p the read of an agent's record, so that it can share a round
// trip with the reads of other stores (a view's access check, view.Service); the
// function, called after p ran, returns what Agent would. An id no record can have
// queues nothing. Each read refreshes the agent's hint.
func (s *Store) QueueAgent(ctx context.Context, p redis.Pipeliner, id string) func() (Agent, error) {
	if !ValidID(id) {
		return func() (Agent, error) { return Agent{}, ErrNotFound }
	}
	cmd := p.HGetAll(ctx, s.agentKey(id))
	return func() (Agent, error) { return s.agentFrom(id, cmd) }
}

// agentFrom reads an agent's HGETALL and keeps the hint up to date.
func (s *Store) agentFrom(id string, cmd *redis.MapStringStringCmd) (Agent, error) {
	m, err := cmd.Result()
	if err != nil {
		return Agent{}, fmt.Errorf("directory: agent: %w", err)
	}
	if len(m) == 0 {
		s.hints.drop(id)
		return Agent{}, ErrNotFound
	}
	a := Agent{ID: id, Name: m["name"], TeamID: m["team"], OrgID: m["org"], Environment: m["env"]}
	s.hints.put(a, time.Now())
	return a, nil
}

// QueueIsMember queues on p the read of one membership (the team's member set, the
// truth); the function, called after p ran, returns what IsMember would.
func (s *Store) QueueIsMember(ctx context.Context, p redis.Pipeliner, teamID, userID string) func() (bool, error) {
	cmd := p.SIsMember(ctx, s.membersKey(teamID), userID)
	return func() (bool, error) {
		ok, err := cmd.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return false, fmt.Errorf("directory: membership: %w", err)
		}
		return ok, nil
	}
}
