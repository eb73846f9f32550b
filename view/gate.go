package view

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/bus"
)

// GateWindow is the spacing of view requests per agent across all replicas.
const GateWindow = 2 * time.Second

// CallerPace is the least time between two view requests of one caller (a user or an
// organisation key) for one agent. The per-agent gate alone lets a caller who polls as
// fast as it allows take every window, and two pollers whose 5-s periods line up
// within 2 s leave the later one a 429 on every poll; the pace keeps each caller to a
// share, and clients add jitter to their interval.
const CallerPace = 3 * time.Second

// Gate lets at most one view request per agent through per window, and one per caller
// and agent per CallerPace, across every replica, in one atomic Redis script over two
// keys of the agent's slot.
type Gate struct {
	rdb    redis.UniversalClient
	keys   bus.Keys
	window time.Duration
	pace   time.Duration
	acks   Acks
}

// WithAcks makes each window the gate grants wait for acks (see Acks) and returns g.
func (g *Gate) WithAcks(acks Acks) *Gate {
	g.acks = acks
	return g
}

// NewGate returns the gate of one deployment; window 0 means GateWindow and pace 0
// CallerPace (tests shorten both).
func NewGate(rdb redis.UniversalClient, deployment string, window, pace time.Duration) *Gate {
	if window == 0 {
		window = GateWindow
	}
	if pace == 0 {
		pace = CallerPace
	}
	return &Gate{rdb: rdb, keys: bus.KeysFor(deployment), window: window, pace: pace}
}

// Window is the gate's window.
func (g *Gate) Window() time.Duration { return g.window }

// gateScript takes the caller's pace (KEYS[1]) and then the agent's window (KEYS[2]);
// a caller refused by its pace never takes the agent's window from another caller.
var gateScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 0 end
return 1`)

// Allow reports whether caller (who asks: a user or an organisation key, any string)
// may view agentID now: its own pace is free and it won the agent's current window. A
// Redis error is returned as such (the caller answers 503), never as a refusal.
func (g *Gate) Allow(ctx context.Context, agentID, caller string) (bool, error) {
	keys := []string{g.PaceKey(agentID, caller), g.Key(agentID)}
	// Durable, so that a failover cannot lose a granted window and let a second view in.
	n, err := runScript(ctx, g.rdb, g.acks, gateScript, keys, g.pace.Milliseconds(), g.window.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("view gate: %w", err)
	}
	return n == 1, nil
}

// Key is the Redis key of agentID's window.
func (g *Gate) Key(agentID string) string { return g.keys.Gate(agentID) }

// PaceKey is the Redis key of caller's pace for agentID; the caller appears only as a
// hash.
func (g *Gate) PaceKey(agentID, caller string) string { return g.keys.Pace(agentID, caller) }
