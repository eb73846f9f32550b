package redisserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Admin is the Redis administrator of a test Cluster or Sentinel set: the user the
// servers replicate and the sentinels monitor with, and that the harness creates the
// cluster and injects faults as. It is the operator's account of their Redis, not an
// Agentfy role: no Agentfy process logs in with it.
type Admin struct {
	User, Password string
}

// ACLLine is the ACL file line of the administrator (every key, channel and command).
func (a Admin) ACLLine() string {
	sum := sha256.Sum256([]byte(a.Password))
	return fmt.Sprintf("user %s on #%s ~* &* +@all", a.User, hex.EncodeToString(sum[:]))
}

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Masters is the number of masters; 0 means 3. Each gets one replica.
	Masters int
	// ACL is the deployment's ACL file (deploy.RedisACL); the administrator's line is
	// added to it on every node.
	ACL   string
	Admin Admin
	// NodeTimeout is cluster-node-timeout: how long a master may be unreachable before
	// its replica takes over. 0 means 1 s.
	NodeTimeout time.Duration
}

// Cluster is a running Redis Cluster of loopback servers.
type Cluster struct {
	opts  ClusterOptions
	mu    sync.Mutex
	Nodes []*Server
}

// StartCluster starts Masters×2 servers in cluster mode and joins them with
// `redis-cli --cluster create … --cluster-replicas 1`, then waits until every node
// says the cluster is ok.
func StartCluster(ctx context.Context, o ClusterOptions) (_ *Cluster, err error) {
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Second
	}
	if o.Admin.User == "" {
		return nil, errors.New("redis cluster: an administrator is required")
	}
	c := &Cluster{opts: o}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	acl := strings.TrimRight(o.ACL, "\n") + "\n" + o.Admin.ACLLine() + "\n"
	args := []string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
		"--masteruser", o.Admin.User, "--masterauth", o.Admin.Password,
		// A replica of a failed master takes over without waiting for a manual failover.
		"--cluster-replica-validity-factor", "0",
		"--databases", "1",
	}
	for range o.Masters * 2 {
		n, err := Start(ctx, Options{ACL: acl, Args: args})
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not found (it comes with redis-server; run scripts/setup.sh): %w", err)
	}
	create := []string{"--user", o.Admin.User, "--pass", o.Admin.Password, "--no-auth-warning", "--cluster", "create"}
	create = append(create, c.Addrs()...)
	create = append(create, "--cluster-replicas", "1", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(cctx, cli, create...).CombinedOutput(); err != nil { //nolint:gosec // the harness's redis-cli
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Addrs are the nodes' host:port, masters first as created.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// AdminClient is a client of one node as the administrator; the caller closes it.
func (c *Cluster) AdminClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Username: c.opts.Admin.User, Password: c.opts.Admin.Password, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1, DisableIdentity: true})
}

// WaitHealthy waits (at most 60 s) until every running node reports cluster_state:ok,
// every slot is served, and every master's replicas are in sync.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return waitUntil(ctx, "redis cluster not healthy", c.healthy)
}

// waitUntil polls ok every 50 ms (at most 60 s) until it returns nil.
func waitUntil(ctx context.Context, what string, ok func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ok(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	running := map[string]bool{}
	for _, n := range c.running() {
		running[n.Addr()] = true
	}
	for _, n := range c.running() {
		// Every slot's master is a node that runs (a stopped master was replaced).
		rdb := c.AdminClient(n.Addr())
		slots, err := rdb.ClusterSlots(ctx).Result() //nolint:staticcheck // what go-redis's ClusterClient reads too
		_ = rdb.Close()
		if err != nil {
			return err
		}
		covered := 0
		for _, r := range slots {
			if len(r.Nodes) == 0 || !running[r.Nodes[0].Addr] {
				return fmt.Errorf("%s: slots %d-%d served by a stopped node", n.Addr(), r.Start, r.End)
			}
			covered += r.End - r.Start + 1
		}
		if covered != 16384 {
			return fmt.Errorf("%s: %d slots covered", n.Addr(), covered)
		}
	}
	for _, n := range c.running() {
		rdb := c.AdminClient(n.Addr())
		info, err := rdb.ClusterInfo(ctx).Result()
		_ = rdb.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return fmt.Errorf("%s: %s", n.Addr(), strings.Fields(info)[0])
		}
		// A master with a replica has it in sync (a failover then loses nothing acked).
		rdb = c.AdminClient(n.Addr())
		repl, err := rdb.Info(ctx, "replication").Result()
		_ = rdb.Close()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:master") && !strings.Contains(repl, "connected_slaves:0") && !strings.Contains(repl, "state=online") {
			return fmt.Errorf("%s: replica not in sync", n.Addr())
		}
	}
	return nil
}

func (c *Cluster) running() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Server
	for _, n := range c.Nodes {
		select {
		case <-n.Done():
		default:
			out = append(out, n)
		}
	}
	return out
}

// MasterOf returns the running node that serves key as master now.
func (c *Cluster) MasterOf(ctx context.Context, key string) (*Server, error) {
	for _, n := range c.running() {
		rdb := c.AdminClient(n.Addr())
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			_ = rdb.Close()
			continue
		}
		slots, err := rdb.ClusterSlots(ctx).Result() //nolint:staticcheck // what go-redis's ClusterClient reads too
		_ = rdb.Close()
		if err != nil {
			continue
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				for _, m := range c.running() {
					if m.Addr() == r.Nodes[0].Addr {
						return m, nil
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("redis cluster: no running master serves %q", key)
}

// Stop stops every node.
func (c *Cluster) Stop() {
	c.mu.Lock()
	nodes := c.Nodes
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
}
