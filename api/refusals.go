package api

import (
	"sync"
	"time"
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
type refusals struct {
	mu sync.Mutex
	m  map[refusal]time.Time // until when; guarded by mu; at most MaxRefusals
}

type refusal struct{ agent, user string }

func (r *refusals) has(k refusal, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.m[k]
	return ok && !now.After(until)
}

func (r *refusals) add(k refusal, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[refusal]time.Time{}
	}
	if _, ok := r.m[k]; !ok && len(r.m) >= MaxRefusals {
		// Full: drop what expired, and unless that freed a quarter, forget them all (a
		// refusal forgotten costs one round trip), so that a full scan happens at most
		// once per MaxRefusals/4 new refusals.
		for key, until := range r.m {
			if now.After(until) {
				delete(r.m, key)
			}
		}
		if len(r.m) > MaxRefusals*3/4 {
			clear(r.m)
		}
	}
	r.m[k] = now.Add(RefusalTTL)
}
