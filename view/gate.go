package view

import (
	"context"
	"fmt"
	"time"

	"github.com/agentfy/agentfy/keyspace"
	"github.com/redis/go-redis/v9"
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
	keys   keyspace.Keys
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
	return &Gate{rdb: rdb, keys: keyspace.For(deployment), window: window, pace: pace}
}

// gateScript decides one request in one step on two keys of the agent's slot: the
// agent's window (KEYS[2]) is tried first and, when won, the caller's pace (KEYS[1]); a
// caller whose pace still runs gives the window back and is refused with the
// milliseconds left of its pace, which it is also told when the window was taken. So
// only a caller who wins the window takes its pace, a caller who loses the window
// keeps its pace free (it may try again as soon as the window ends), and a paced caller
// never takes the window from another. The window goes first because the requests that
// reach the gate mostly find their pace free: a view let through costs three commands
// (the script and its two SETs), a window taken three (the script, the SET and the
// pace's PTTL); only a paced caller who found the window free costs five.
// The reply is {1, 0} (allowed), {0, ms} (the pace refused: ms left) or {0, -1} (the
// window was taken).
var gateScript = redis.NewScript(`
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return {1, 0} end
  redis.call('DEL', KEYS[2])
end
local left = redis.call('PTTL', KEYS[1])
if left == -1 then left = tonumber(ARGV[1]) end
if left > 0 then return {0, left} end
return {0, -1}`)

// Decision is the gate's answer to one request.
type Decision struct {
	// Allowed: the request won the agent's window and took the caller's pace.
	Allowed bool
	// RetryAfter, when refused, is how long the caller should wait: the time really left
	// of its own pace, or the window (GateWindow) when another caller took it.
	RetryAfter time.Duration
}

// Decide reports whether caller (who asks: a user or an organisation key, any string)
// may view agentID now: its own pace is free and it won the agent's current window. A
// Redis error is returned as such (the caller answers 503), never as a refusal.
//
// With a grant (at most one: the view's, Grants.New), Decide writes it in the same
// round trip as the decision, and deletes it again when the request is refused. The
// grant lives in its broker pass's slot and the gate in the agent's, so the two are a
// pipeline rather than one script; a refused request's grant is never sent anywhere
// before it is deleted, and expires in GrantTTL if the delete fails. With Acks, the
// gate's durable write goes first on a connection of its own and the grant follows.
func (g *Gate) Decide(ctx context.Context, agentID, caller string, grants ...Grant) (Decision, error) {
	if len(grants) > 1 {
		return Decision{}, fmt.Errorf("view gate: %d grants, at most one", len(grants))
	}
	// The caller's pace and the agent's window (keyspace.Keys.Pace, Gate): the caller
	// appears in its key only as a hash.
	keys := []string{g.keys.Pace(agentID, caller), g.keys.Gate(agentID)}
	args := []any{g.pace.Milliseconds(), g.window.Milliseconds()}
	var (
		cmd     *redis.Cmd
		written func() error
	)
	switch {
	case len(grants) == 1 && g.acks.Replicas <= 0:
		p := g.rdb.Pipeline()
		cmd = gateScript.EvalSha(ctx, p, keys, args...)
		written = grants[0].queue(ctx, p)
		_, _ = p.Exec(ctx) // each command's error is its own
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			// The server has not seen the script yet (a restart, a new master): once.
			cmd = gateScript.Eval(ctx, g.rdb, keys, args...)
		}
	default:
		// Durable, so that a failover cannot lose a granted window and let a second view in.
		cmd = runScript(ctx, g.rdb, g.acks, gateScript, keys, args...)
	}
	d, err := decision(cmd, g.window)
	if err != nil || len(grants) == 0 {
		return d, err
	}
	switch {
	case written == nil && d.Allowed:
		p := g.rdb.Pipeline()
		written = grants[0].queue(ctx, p)
		_, _ = p.Exec(ctx)
	case written == nil:
		return d, nil
	case !d.Allowed:
		if written() == nil {
			_ = g.rdb.Del(ctx, grants[0].key).Err() // if it fails, the grant expires unused
		}
		return d, nil
	}
	if err := written(); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// decision reads the gate script's reply.
func decision(cmd *redis.Cmd, window time.Duration) (Decision, error) {
	reply, err := cmd.Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("view gate: %w", err)
	}
	if len(reply) != 2 {
		return Decision{}, fmt.Errorf("view gate: a reply of %d values", len(reply))
	}
	switch {
	case reply[0] == 1:
		return Decision{Allowed: true}, nil
	case reply[1] > 0:
		return Decision{RetryAfter: time.Duration(reply[1]) * time.Millisecond}, nil
	default:
		return Decision{RetryAfter: window}, nil
	}
}
