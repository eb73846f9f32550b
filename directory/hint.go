package directory

import (
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

// AgentFromRecord returns the agent that id's record holds, given as HGETALL reads that
// hash (keyspace.Keys.Agent; empty when there is none), or ErrNotFound when there is
// none. It reads nothing itself, and refreshes the agent's hint as every read of the
// record does (Agent, and a view's checks, which read the record beside other reads).
func (s *Store) AgentFromRecord(id string, record map[string]string) (Agent, error) {
	if len(record) == 0 {
		s.hints.drop(id)
		return Agent{}, ErrNotFound
	}
	a := Agent{ID: id, Name: record["name"], TeamID: record["team"], OrgID: record["org"], Environment: record["env"]}
	s.hints.put(a, time.Now())
	return a, nil
}

// agentFrom reads an agent's HGETALL (Agent's read).
func (s *Store) agentFrom(id string, cmd *redis.MapStringStringCmd) (Agent, error) {
	record, err := cmd.Result()
	if err != nil {
		return Agent{}, fmt.Errorf("directory: agent: %w", err)
	}
	return s.AgentFromRecord(id, record)
}
