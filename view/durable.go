package view

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotDurable is returned when a write that guards a view (the gate's window, a
// grant's consumption) was not acknowledged by enough replicas in time: after a
// failover it could be lost, letting a second view through the gate or a grant be
// redeemed twice, so the view fails (503) instead.
var ErrNotDurable = errors.New("view: a guarding write was not replicated in time")

// Acks is how durable the writes that guard a view must be before it goes on. With a
// Redis Cluster or Sentinel set (where a replica takes over from a failed master and
// replication is asynchronous) each such write is followed, on the same connection, by
// WAIT Replicas Timeout; fewer acknowledgements fail the view. The zero value waits for
// nothing (one server, whose loss loses every key anyway).
type Acks struct {
	Replicas int
	Timeout  time.Duration
}

// DefaultAcks are the Acks of a Cluster or Sentinel deployment.
var DefaultAcks = Acks{Replicas: 1, Timeout: 500 * time.Millisecond}

// runScript runs script on keys[0]'s master and, with acks, makes its write durable:
// on the same connection (WAIT counts that connection's own writes) it reads ROLE before
// and after it and, when the master's replication offset moved (the script, or another
// client meanwhile, wrote), WAITs for as many of the master's connected replicas as
// acks asks, at most; a script that wrote nothing (a refusal) waits for none. A master
// with no replica connected (one just promoted, its old master gone) waits for none:
// there is no replica that a failover could promote without the write. A reply that was
// not acknowledged by enough replicas in time is ErrNotDurable.
func runScript(ctx context.Context, rdb redis.UniversalClient, acks Acks, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if acks.Replicas <= 0 {
		return script.Run(ctx, rdb, keys, args...)
	}
	fail := func(err error) *redis.Cmd {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	var node *redis.Client
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, keys[0])
		if err != nil {
			return fail(err)
		}
		node = m
	case *redis.Client:
		node = c
	default:
		return fail(fmt.Errorf("view: durable writes need a *redis.Client or *redis.ClusterClient, not %T", rdb))
	}
	conn := node.Conn()
	defer func() { _ = conn.Close() }()
	var cmd, before, role *redis.Cmd
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		before = p.Do(ctx, "role")
		cmd = script.Eval(ctx, p, keys, args...)
		role = p.Do(ctx, "role")
		return nil
	})
	if cmd.Err() != nil && !errors.Is(cmd.Err(), redis.Nil) {
		return cmd
	}
	replicas, offset, err := masterRole(role)
	if err != nil {
		cmd.SetErr(fmt.Errorf("%w: role: %v", ErrNotDurable, err))
		return cmd
	}
	if _, was, err := masterRole(before); err == nil && was == offset {
		// The replication stream did not move across the script: it wrote nothing
		// (a refusal), and there is nothing to make durable.
		return cmd
	}
	want := min(acks.Replicas, replicas)
	if want == 0 {
		return cmd
	}
	n, err := conn.Do(ctx, "wait", want, acks.Timeout.Milliseconds()).Int64()
	if err != nil {
		cmd.SetErr(fmt.Errorf("wait for replicas: %w", err))
		return cmd
	}
	if n < int64(want) {
		cmd.SetErr(fmt.Errorf("%w: %d of %d replicas in %v", ErrNotDurable, n, want, acks.Timeout))
	}
	return cmd
}

// masterRole reads a master's ROLE reply: ["master", offset, [[ip, port, offset], …]],
// its connected replicas and its replication offset.
func masterRole(role *redis.Cmd) (replicas int, offset int64, err error) {
	v, err := role.Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(v) < 3 || v[0] != "master" {
		return 0, 0, fmt.Errorf("not a master: %v", v)
	}
	offset, ok := v[1].(int64)
	if !ok {
		return 0, 0, fmt.Errorf("replication offset %T", v[1])
	}
	list, ok := v[2].([]any)
	if !ok {
		return 0, 0, fmt.Errorf("replica list %T", v[2])
	}
	return len(list), offset, nil
}
