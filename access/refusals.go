package access

import (
	"time"

	"github.com/agentfy/agentfy/internal/ttlmap"
)

// A replica remembers, for RefusalTTL, that a user was refused an agent's view (no such
// agent, or not a member of its team), with the directory's generation it read before
// the refusal. A later request of that user for the agent reads only the generation, one
// small GET instead of the agent's record and its team's member set: while it is
// unchanged the refusal stands (404), and once anything in the directory changed (a
// member added, an agent created or moved: directory.Store increments the generation
// after every write) the truth is read again. So a grant takes effect at the very next
// request on every replica, and a flood of refused requests (a dashboard pointed at
// another team's agent, a stranger polling) costs one GET each. Only refusals are
// remembered, never a grant, and only the first check of a view reads them (the re-check
// before a frame leaves reads the truth).
const (
	RefusalTTL  = 2 * time.Second
	MaxRefusals = 4096
)

// refusals is the bounded set of remembered refusals, by agent and user.
type refusals struct{ ttlmap.Map[refusal, refused] }

type refusal struct{ agent, user string }

// refused is what a refusal was based on: the directory's generation read strictly
// before the reads that refused (known), or nothing yet (a first refusal, whose reads
// shared a round trip with everything else and may have run in any order on a Cluster).
type refused struct {
	generation int64
	known      bool
}

func (r *refusals) get(k refusal, now time.Time) (refused, bool) { return r.Get(k, now) }

func (r *refusals) add(k refusal, v refused, now time.Time) {
	r.Put(k, v, now.Add(RefusalTTL), now, MaxRefusals)
}
