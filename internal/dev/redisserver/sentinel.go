package redisserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions configures StartSentinel.
type SentinelOptions struct {
	// MasterName is what the sentinels monitor; empty means "agentfy".
	MasterName string
	// ACL is the deployment's ACL file (deploy.RedisACL), on the master and the
	// replica with the administrator's line added.
	ACL   string
	Admin Admin
	// Users may ask the sentinels where the master is (name → password): the
	// deployment's roles. The sentinels let them run only that.
	Users map[string]string
	// DownAfter is how long the master may be unreachable before the sentinels fail it
	// over; 0 means 1 s.
	DownAfter time.Duration
}

// SentinelSet is a master, one replica and three sentinels on loopback ports.
type SentinelSet struct {
	opts      SentinelOptions
	mu        sync.Mutex
	Data      []*Server // the master as started, then the replica
	Sentinels []*Server
}

// sentinelCommands are what a client of the sentinels runs (go-redis FailoverClient).
const sentinelCommands = "+ping +hello +auth +client|setname +sentinel|get-master-addr-by-name +sentinel|replicas +sentinel|slaves +sentinel|sentinels +subscribe +unsubscribe +psubscribe +punsubscribe"

// StartSentinel starts the set and waits until the sentinels agree on the master and
// see its replica and each other.
func StartSentinel(ctx context.Context, o SentinelOptions) (_ *SentinelSet, err error) {
	if o.MasterName == "" {
		o.MasterName = "agentfy"
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	if o.Admin.User == "" {
		return nil, errors.New("redis sentinel: an administrator is required")
	}
	s := &SentinelSet{opts: o}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	acl := strings.TrimRight(o.ACL, "\n") + "\n" + o.Admin.ACLLine() + "\n"
	auth := []string{"--masteruser", o.Admin.User, "--masterauth", o.Admin.Password}
	master, err := Start(ctx, Options{ACL: acl, Args: auth})
	if err != nil {
		return nil, err
	}
	s.Data = append(s.Data, master)
	host, port, _ := net.SplitHostPort(master.Addr())
	replica, err := Start(ctx, Options{ACL: acl, Args: append([]string{"--replicaof", host, port}, auth...)})
	if err != nil {
		return nil, err
	}
	s.Data = append(s.Data, replica)

	var users strings.Builder
	users.WriteString("user default off\n")
	users.WriteString(o.Admin.ACLLine() + "\n")
	for name, pw := range o.Users {
		sum := sha256.Sum256([]byte(pw))
		fmt.Fprintf(&users, "user %s on #%s resetchannels &* -@all %s\n", name, hex.EncodeToString(sum[:]), sentinelCommands)
	}
	for range 3 {
		conf := fmt.Sprintf(`sentinel monitor %[1]s %[2]s %[3]s 2
sentinel down-after-milliseconds %[1]s %[4]d
sentinel failover-timeout %[1]s 10000
sentinel parallel-syncs %[1]s 1
sentinel auth-user %[1]s %[5]s
sentinel auth-pass %[1]s %[6]s
sentinel sentinel-user %[5]s
sentinel sentinel-pass %[6]s
sentinel resolve-hostnames no
%[7]s`, o.MasterName, host, port, o.DownAfter.Milliseconds(), o.Admin.User, o.Admin.Password, users.String())
		sn, err := Start(ctx, Options{Sentinel: true, Config: conf})
		if err != nil {
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, sn)
	}
	if err := s.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// SentinelAddrs are the sentinels' host:port.
func (s *SentinelSet) SentinelAddrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr()
	}
	return out
}

// MasterName is the monitored master's name.
func (s *SentinelSet) MasterName() string { return s.opts.MasterName }

func (s *SentinelSet) sentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, Username: s.opts.Admin.User, Password: s.opts.Admin.Password, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1, DisableIdentity: true})
}

// MasterAddr is the master's host:port as the first sentinel that answers says.
func (s *SentinelSet) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, a := range s.SentinelAddrs() {
		sc := s.sentinelClient(a)
		hp, err := sc.GetMasterAddrByName(ctx, s.opts.MasterName).Result()
		_ = sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("redis sentinel: no master: %w", last)
}

// Master returns the data server that is master now.
func (s *SentinelSet) Master(ctx context.Context) (*Server, error) {
	addr, err := s.MasterAddr(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.Data {
		if d.Addr() == addr {
			return d, nil
		}
	}
	return nil, fmt.Errorf("redis sentinel: master %s is not one of the set", addr)
}

// WaitHealthy waits (at most 60 s) until every sentinel names the same master, knows
// one replica and the two other sentinels, and the master has a replica in sync that
// acknowledges a write within 100 ms.
func (s *SentinelSet) WaitHealthy(ctx context.Context) error {
	return waitUntil(ctx, "redis sentinel set not healthy", s.healthy)
}

func (s *SentinelSet) healthy(ctx context.Context) error {
	master := ""
	for _, a := range s.SentinelAddrs() {
		sc := s.sentinelClient(a)
		m, err := sc.Master(ctx, s.opts.MasterName).Result()
		_ = sc.Close()
		if err != nil {
			return err
		}
		addr := net.JoinHostPort(m["ip"], m["port"])
		if master != "" && addr != master {
			return fmt.Errorf("sentinels disagree: %s and %s", master, addr)
		}
		master = addr
		if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || strings.Contains(m["flags"], "down") {
			return fmt.Errorf("sentinel %s: flags %s, %s replicas, %s other sentinels", a, m["flags"], m["num-slaves"], m["num-other-sentinels"])
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: master, Username: s.opts.Admin.User, Password: s.opts.Admin.Password, DialTimeout: time.Second, MaxRetries: -1, DisableIdentity: true})
	defer func() { _ = rdb.Close() }()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
		return fmt.Errorf("master %s: replica not in sync", master)
	}
	// And the replica acknowledges a write at once, as the replicas' durable writes
	// (view.Acks) need: a write on this connection, then WAIT for it.
	conn := rdb.Conn()
	defer func() { _ = conn.Close() }()
	if err := conn.Set(ctx, "agentfy:redisserver:health", "1", 5*time.Second).Err(); err != nil {
		return err
	}
	if n, err := conn.Do(ctx, "wait", 1, 100).Int64(); err != nil || n < 1 {
		return fmt.Errorf("master %s: the replica did not acknowledge a write (%d, %v)", master, n, err)
	}
	return nil
}

// Stop stops the sentinels, then the data servers.
func (s *SentinelSet) Stop() {
	s.mu.Lock()
	sentinels, data := s.Sentinels, s.Data
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range sentinels {
		wg.Go(n.Stop)
	}
	wg.Wait()
	for _, n := range data {
		wg.Go(n.Stop)
	}
	wg.Wait()
}
