package stack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
)

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
		return nil, fmt.Errorf("redis topology %q: want server, cluster or sentinel", kind)
	}
	return t, nil
}
