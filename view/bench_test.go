package view_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
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
// consume script (EVALSHA: the broker pass checked and the grant redeemed), two round
// trips (a view writes the grant beside the gate's decision instead).
func BenchmarkGrantPutConsume(b *testing.B) {
	rdb := benchRedis(b)
	ctx := b.Context()
	dep := testenv.Deployment(b)
	grants := view.NewGrants(rdb, dep, testKeys, 0)
	broker := issue(b, ctx, rdb, dep, auth.RoleBroker, "sess-bench")
	next := benchRequestIDs(b)
	const pk = "04" + "ab" // opaque to the store
	b.ReportAllocs()
	for b.Loop() {
		id := next()
		if err := grants.Put(ctx, id, "sess-bench", broker.id, pk); err != nil {
			b.Fatal(err)
		}
		got, _, err := grants.Consume(ctx, broker.claim, id)
		if err != nil || got != pk {
			b.Fatalf("consume = %q, %v", got, err)
		}
	}
}

// BenchmarkGrantConsumeRefused redeems a grant with another session's broker pass:
// the script checks the pass, finds no grant of its own, and leaves the other's (one
// round trip).
func BenchmarkGrantConsumeRefused(b *testing.B) {
	rdb := benchRedis(b)
	ctx := b.Context()
	dep := testenv.Deployment(b)
	grants := view.NewGrants(rdb, dep, testKeys, time.Minute)
	owner := issue(b, ctx, rdb, dep, auth.RoleBroker, "sess-owner")
	other := issue(b, ctx, rdb, dep, auth.RoleBroker, "sess-other")
	id := benchRequestIDs(b)()
	if err := grants.Put(ctx, id, "sess-owner", owner.id, "04ab"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := grants.Consume(ctx, other.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
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
	b.Run("won, with its grant", func(b *testing.B) {
		// What a view does: the decision and the grant's write in one round trip.
		ctx := b.Context()
		grants := view.NewGrants(rdb, testenv.Deployment(b), testKeys, 0)
		next := benchRequestIDs(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			g, err := grants.New(next(), "sess-bench", "0123456789abcdef", "04ab")
			if err != nil {
				b.Fatal(err)
			}
			d, err := gate.Decide(ctx, fmt.Sprintf("agent-g%08d", i), "bench", g)
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
