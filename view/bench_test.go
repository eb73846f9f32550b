package view_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/view"
)

// The grant and the gate are one or two Redis round trips each, so their physical
// limit is a Redis round trip: BenchmarkRedisPing measures it on the same server and
// connection pool, to read the others against.

func benchRedis(b *testing.B) redis.UniversalClient {
	b.Helper()
	return testenv.RedisClient(b, testenv.Redis(b), 3)
}

// benchRequestIDs returns a function that makes distinct valid request ids (64
// lowercase hex): a random prefix and a counter, cheaper than crypto/rand per id.
func benchRequestIDs(b *testing.B) func() string {
	b.Helper()
	p := make([]byte, 24)
	if _, err := rand.Read(p); err != nil {
		b.Fatal(err)
	}
	prefix := hex.EncodeToString(p)
	var n uint64
	return func() string {
		n++
		return fmt.Sprintf("%s%016x", prefix, n)
	}
}

// BenchmarkRedisPing is one round trip to redis-server: the floor of every benchmark
// below.
func BenchmarkRedisPing(b *testing.B) {
	rdb := benchRedis(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGrantPutConsume stores a grant (SET NX PX) and redeems it with the
// consume script (EVALSHA), as one view does: two round trips.
func BenchmarkGrantPutConsume(b *testing.B) {
	rdb := benchRedis(b)
	ctx := b.Context()
	grants := view.NewGrants(rdb, testenv.Deployment(b), testKeys, 0)
	next := benchRequestIDs(b)
	const pk = "04" + "ab" // opaque to the store
	b.ReportAllocs()
	for b.Loop() {
		id := next()
		if err := grants.Put(ctx, id, "sess-bench", pk); err != nil {
			b.Fatal(err)
		}
		got, err := grants.Consume(ctx, id, "sess-bench")
		if err != nil || got != pk {
			b.Fatalf("consume = %q, %v", got, err)
		}
	}
}

// BenchmarkGrantConsumeRefused redeems a grant for another session: the
// script reads it, refuses, and leaves it (one round trip).
func BenchmarkGrantConsumeRefused(b *testing.B) {
	rdb := benchRedis(b)
	ctx := b.Context()
	grants := view.NewGrants(rdb, testenv.Deployment(b), testKeys, time.Minute)
	id := benchRequestIDs(b)()
	if err := grants.Put(ctx, id, "sess-owner", "04ab"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grants.Consume(ctx, id, "sess-other"); !errors.Is(err, view.ErrGrantNotFound) {
			b.Fatalf("consume by another session: %v", err)
		}
	}
}

// BenchmarkGateAllow takes the gate of a fresh agent every time (won) or of one agent
// over and over (lost after the first): one script of two SET NX PX either way.
func BenchmarkGateAllow(b *testing.B) {
	rdb := benchRedis(b)
	gate := view.NewGate(rdb, testenv.Deployment(b), 0, 0)
	b.Run("won", func(b *testing.B) {
		ctx := b.Context()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			d, err := gate.Decide(ctx, fmt.Sprintf("agent-b%08d", i), "bench")
			if err != nil || !d.Allowed {
				b.Fatalf("decide = %+v, %v", d, err)
			}
		}
	})
	b.Run("lost", func(b *testing.B) {
		ctx := b.Context()
		if _, err := gate.Decide(ctx, "agent-busy", "bench"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			// Once in a long run the 2 s window ends and one call wins: same cost.
			if _, err := gate.Decide(ctx, "agent-busy", "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
