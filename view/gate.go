package view

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// GateWindow is the spacing of view requests per agent across all replicas.
const GateWindow = 2 * time.Second

// Gate lets at most one view request per agent through per window, across every replica,
// with one atomic Redis command (SET NX PX).
type Gate struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
}

// NewGate returns the gate of one deployment; window 0 means GateWindow.
func NewGate(rdb redis.UniversalClient, deployment string, window time.Duration) *Gate {
	if window == 0 {
		window = GateWindow
	}
	return &Gate{rdb: rdb, prefix: "agentfy:" + deployment + ":", window: window}
}

// Window is the gate's window.
func (g *Gate) Window() time.Duration { return g.window }

// Allow reports whether this caller won agentID's current window. A Redis error is
// returned as such (the caller answers 503), never as a refusal.
func (g *Gate) Allow(ctx context.Context, agentID string) (bool, error) {
	ok, err := g.rdb.SetNX(ctx, g.prefix+"gate:{a:"+agentID+"}", "1", g.window).Result()
	if err != nil {
		return false, fmt.Errorf("view gate: %w", err)
	}
	return ok, nil
}
