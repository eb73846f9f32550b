package redisclient

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Dials counts the connections a client opened and failed to open, and its round trips.
// A client dials when its pool needs one more connection, and again after each
// connection it lost: a burst of dials is Redis coming back, failed dials are Redis
// unreachable. A round trip is a command sent alone or a pipeline (per node of a
// Cluster), not counting what opens a connection (HELLO, CLIENT SETINFO and the like).
type Dials struct {
	ok, failed atomic.Uint64
	trips      atomic.Uint64
}

// CountDials makes d count c's dials, on every node of a Cluster client; call it before
// c's first command.
func CountDials(c redis.UniversalClient) *Dials {
	d := &Dials{}
	switch c := c.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(d) })
	default:
		c.AddHook(d)
	}
	return d
}

// Counts returns the dials that succeeded and that failed so far.
func (d *Dials) Counts() (ok, failed uint64) { return d.ok.Load(), d.failed.Load() }

// DialHook counts each dial by its result.
func (d *Dials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			d.failed.Add(1)
		} else {
			d.ok.Add(1)
		}
		return conn, err
	}
}

// RoundTrips returns the round trips made so far.
func (d *Dials) RoundTrips() uint64 { return d.trips.Load() }

// ProcessHook counts a command sent alone.
func (d *Dials) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" {
			d.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline (MULTI … EXEC included).
func (d *Dials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			d.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}
