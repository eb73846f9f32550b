// Package redisclient makes the Redis client every Agentfy process uses, from the
// options cmd/internal/apiconf builds: a single server, a Sentinel set (MasterName) or a
// Cluster (several addresses, or IsClusterMode), as redis.NewUniversalClient would,
// with one change for a Cluster: the client learns a failover at once.
//
// go-redis reloads a Cluster's slot map on MOVED, or when it is older than
// ClusterStateReloadInterval (60 s by default); a master that stopped answers neither,
// so without this every command for its slots would fail for up to a minute after its
// replica took over. Here a command that fails on the network asks for a reload (go-redis
// coalesces them), and the map is refreshed at least every ReloadInterval.
package redisclient

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReloadInterval bounds the age of a Cluster client's slot map.
const ReloadInterval = 5 * time.Second

// New returns the client for opts.
func New(opts *redis.UniversalOptions) redis.UniversalClient {
	if opts.MasterName != "" || (len(opts.Addrs) <= 1 && !opts.IsClusterMode) {
		return redis.NewUniversalClient(opts)
	}
	co := opts.Cluster()
	co.ClusterStateReloadInterval = ReloadInterval
	c := redis.NewClusterClient(co)
	c.AddHook(reloadHook{c})
	return c
}

// reloadHook asks the cluster client for a new slot map after a network failure.
type reloadHook struct{ c *redis.ClusterClient }

func (reloadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.reloadOn(ctx, err)
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.reloadOn(ctx, err)
		return err
	}
}

func (h reloadHook) reloadOn(ctx context.Context, err error) {
	var ne net.Error
	if err != nil && (errors.As(err, &ne) || isClusterDown(err)) {
		h.c.ReloadState(ctx)
	}
}

// isClusterDown matches the CLUSTERDOWN error a node answers while its slots are
// being failed over.
func isClusterDown(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "CLUSTERDOWN")
}
