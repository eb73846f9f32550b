package stack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
)

// TopologyEnv names the Redis topology the integration suites run on: "" or "server"
// (one redis-server, the default), "cluster" (three masters, three replicas) or
// "sentinel" (a master, a replica, three sentinels). scripts/test.sh runs the suites
// on each.
const TopologyEnv = "AGENTFY_TEST_REDIS"

// Topology is a Redis Cluster or Sentinel set started for a stack.
type Topology struct {
	Target   *RedisTarget
	Cluster  *redisserver.Cluster     // with kind "cluster"
	Sentinel *redisserver.SentinelSet // with kind "sentinel"
	Admin    redisserver.Admin
}

// Stop stops its servers.
func (t *Topology) Stop() {
	if t == nil {
		return
	}
	if t.Cluster != nil {
		t.Cluster.Stop()
	}
	if t.Sentinel != nil {
		t.Sentinel.Stop()
	}
}

// StartTopology starts kind ("cluster" or "sentinel") with the ACL users of deployment
// and secrets (and an administrator of its own). "" and "server" return nil: the stack
// starts its own redis-server.
func StartTopology(ctx context.Context, kind, deployment string, secrets deploy.Secrets) (*Topology, error) {
	if kind == "" || kind == "server" {
		return nil, nil
	}
	ns, err := bus.NewNamespace(deployment, 0) // a Cluster has database 0 only
	if err != nil {
		return nil, err
	}
	acl, err := deploy.RedisACL(ns, secrets)
	if err != nil {
		return nil, err
	}
	pw := make([]byte, 32)
	if _, err := rand.Read(pw); err != nil {
		return nil, err
	}
	t := &Topology{Admin: redisserver.Admin{User: "agentfy-test-admin", Password: base64.RawURLEncoding.EncodeToString(pw)}}
	switch kind {
	case "cluster":
		if t.Cluster, err = redisserver.StartCluster(ctx, redisserver.ClusterOptions{ACL: acl, Admin: t.Admin}); err != nil {
			return nil, err
		}
		t.Target = &RedisTarget{Addrs: t.Cluster.Addrs(), Cluster: true, Kind: kind, Admin: &t.Admin}
	case "sentinel":
		if t.Sentinel, err = redisserver.StartSentinel(ctx, redisserver.SentinelOptions{ACL: acl, Admin: t.Admin, Users: secrets.Redis}); err != nil {
			return nil, err
		}
		t.Target = &RedisTarget{Addrs: t.Sentinel.SentinelAddrs(), MasterName: t.Sentinel.MasterName(), Kind: kind, Admin: &t.Admin}
	default:
		return nil, fmt.Errorf("%s=%q: want server, cluster or sentinel", TopologyEnv, kind)
	}
	return t, nil
}

// TopologyFromEnv starts the topology TopologyEnv names (nil for the default).
func TopologyFromEnv(ctx context.Context, deployment string, secrets deploy.Secrets) (*Topology, error) {
	return StartTopology(ctx, os.Getenv(TopologyEnv), deployment, secrets)
}

// StartOnTopology starts a stack on the Redis topology TopologyEnv names: it starts the
// Cluster or Sentinel set first (with o.Secrets, fresh ones when nil) and points o at
// it. Close stops the stack and then the topology.
func StartOnTopology(ctx context.Context, o Options) (*Stack, *Topology, error) {
	if o.Secrets == nil {
		s, err := deploy.GenerateSecrets()
		if err != nil {
			return nil, nil, err
		}
		o.Secrets = &s
	}
	dep := o.Deployment
	if dep == "" {
		dep = "dev"
	}
	topo, err := TopologyFromEnv(ctx, dep, *o.Secrets)
	if err != nil {
		return nil, nil, fmt.Errorf("start redis: %w", err)
	}
	if topo != nil {
		o.Redis = topo.Target
	}
	st, err := Start(ctx, o)
	if err != nil {
		topo.Stop()
		return nil, nil, err
	}
	st.closers = append([]func(){topo.Stop}, st.closers...) // the last to stop
	return st, topo, nil
}
