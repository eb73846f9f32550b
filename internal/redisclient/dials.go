package redisclient

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Dials counts the connections a client opened and failed to open. A client dials when
// its pool needs one more connection, and again after each connection it lost: a burst
// of dials is Redis coming back, failed dials are Redis unreachable.
type Dials struct {
	ok, failed atomic.Uint64
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

// ProcessHook leaves commands alone.
func (*Dials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (*Dials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
