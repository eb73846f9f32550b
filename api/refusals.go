package api

import (
	"time"

	"github.com/agentfy/agentfy/internal/ttlmap"
)

// A replica remembers, for RefusalTTL, that a user was refused an agent's view (no such
// agent, or not a member of its team), and answers that user's next requests for the
// agent 404 without a Redis round trip: a flood of them (a dashboard pointed at another
// team's agent, a stranger polling) costs the store nothing after the first. Only
// refusals are remembered, never a grant, and only the first check of a view reads them
// (the re-check before a frame leaves reads Redis): a refusal shows nobody anything, and
// RefusalTTL is the longest a user just added to the agent's team waits for access.
const (
	RefusalTTL  = 2 * time.Second
	MaxRefusals = 4096
)

// refusals is the bounded set of remembered refusals, by agent and user.
type refusals struct{ ttlmap.Map[refusal, struct{}] }

type refusal struct{ agent, user string }

func (r *refusals) has(k refusal, now time.Time) bool {
	_, ok := r.Get(k, now)
	return ok
}

func (r *refusals) add(k refusal, now time.Time) {
	r.Put(k, struct{}{}, now.Add(RefusalTTL), now, MaxRefusals)
}
