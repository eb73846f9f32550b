package redisclient

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestCountDials: against a real redis-server, the first command dials once and
// succeeds; with the server stopped, dials fail and are counted; started again, the
// client dials anew and succeeds.
func TestCountDials(t *testing.T) {
	srv := testenv.Redis(t)
	c := New(&redis.UniversalOptions{Addrs: []string{srv.Addr()}, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	d := CountDials(c)
	ctx := testenv.Context(t, 30*time.Second)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, failed := d.Counts(); ok != 1 || failed != 0 {
		t.Fatalf("after the first command: %d ok, %d failed dials, want 1, 0", ok, failed)
	}
	srv.Halt()
	testenv.WaitFor(t, 10*time.Second, "a failed dial", func() bool {
		_ = c.Ping(ctx).Err()
		_, failed := d.Counts()
		return failed > 0
	})
	next, err := srv.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Stop)
	before, _ := d.Counts()
	testenv.WaitFor(t, 10*time.Second, "a new connection", func() bool {
		return c.Ping(ctx).Err() == nil
	})
	if ok, _ := d.Counts(); ok <= before {
		t.Errorf("Redis back: %d ok dials, want more than %d", ok, before)
	}
}

// TestCountRoundTrips: a command alone and a pipeline are one round trip each on a real
// redis-server, whatever the pipeline holds; opening a connection (HELLO, CLIENT
// SETINFO) is not counted.
func TestCountRoundTrips(t *testing.T) {
	srv := testenv.Redis(t)
	c := New(&redis.UniversalOptions{Addrs: []string{srv.Addr()}, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	d := CountDials(c)
	ctx := testenv.Context(t, 30*time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil { // dials first
		t.Fatal(err)
	}
	if n := d.RoundTrips(); n != 1 {
		t.Fatalf("one command: %d round trips, want 1", n)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "k")
		p.Incr(ctx, "n")
		p.Del(ctx, "k")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := d.RoundTrips(); n != 2 {
		t.Fatalf("a pipeline of three after it: %d round trips, want 2", n)
	}
}
