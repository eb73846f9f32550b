// Package testenv starts the real servers integration tests need — redis-server and an
// embedded NATS server — on free loopback ports, and stops them when the test ends.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/redisserver"
)

// Redis starts a redis-server for the test and stops it at cleanup.
func Redis(tb testing.TB) *redisserver.Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), redisserver.StartTimeout)
	defer cancel()
	s, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		tb.Fatalf("start redis: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// RedisClient connects to db of s through the UniversalClient interface production uses.
func RedisClient(tb testing.TB, s *redisserver.Server, db int) redis.UniversalClient {
	tb.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs: []string{s.Addr()}, DB: db,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1,
	})
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redis ping: %v", err)
	}
	return c
}

// NATS starts an embedded NATS server for the test and shuts it down at cleanup.
func NATS(tb testing.TB) *server.Server {
	tb.Helper()
	s, err := bus.RunEmbedded(bus.EmbeddedOptions{Name: "test-" + Deployment(tb), Port: -1})
	if err != nil {
		tb.Fatalf("start nats: %v", err)
	}
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// NATSConn connects to s and closes the connection at cleanup.
func NATSConn(tb testing.TB, s *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := bus.Connect(bus.Config{Servers: []string{s.ClientURL()}, Name: tb.Name()}, Logger(tb))
	if err != nil {
		tb.Fatalf("connect nats: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Deployment returns a fresh deployment name, so tests sharing a server never collide.
func Deployment(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return "t" + hex.EncodeToString(b)
}

// Logger writes through tb.Log, so a failing test shows its logs and a passing one does not.
func Logger(tb testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(tb)).With().Timestamp().Logger()
}

// Context returns a context that ends with the test or after d.
func Context(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond — a condition on a real server or process, not a timing guess —
// every 10 ms until it holds, and fails the test if it does not within d.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("no %s within %v", what, d)
		}
		<-tick.C
	}
}
