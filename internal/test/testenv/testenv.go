// Package testenv is the lower layer of the project's one test harness: what a test
// needs that is not a running stack. It starts the real servers through the development
// layer's launchers — redis-server (internal/dev/redisserver, with an ACL if asked), an
// embedded NATS server (internal/dev/natsserver, with a configuration, cluster routes or
// a platform's JetStream if asked), Ory Hydra and Jaeger (internal/dev/servers) — and an
// IDP whose key set the test controls, on free loopback ports, and stops them when the
// test ends; under -short it skips the tests that need Chromium, Docker, Hydra or
// Jaeger (SkipUnderShort). It gives tests a logger, contexts and WaitFor, a fake Clock,
// a Buffer for what a process logs, ConsumeAPI (the replicas' consume route as a broker
// meets it, for a broker tested alone), and the Node reference of the envelope
// (NodeOpen, NodeSeal). It imports only leaf packages (bus, deploy, wire, envelope) and
// internal/dev's launchers, so any package's own tests may use it — internal/dev/stack
// imports the broker, which tests itself with this.
//
// The upper layer, internal/test/stacktest, drives a whole stack (internal/dev/stack) for the
// api, e2e and reliability suites. Where a case lives: a route's table of answers in
// api/, one happy path per route in e2e/, faults and attacks in reliability/.
package testenv

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
)

// Redis starts a redis-server for the test and stops it at cleanup. Without options its
// default user has no password; opts, at most one, sets what the test needs instead (an
// ACL file, say: deploy.RedisACL, or the compose stack's).
func Redis(tb testing.TB, opts ...redisserver.Options) *redisserver.Server {
	tb.Helper()
	o := oneOption(tb, opts)
	ctx, cancel := context.WithTimeout(context.Background(), redisserver.StartTimeout)
	defer cancel()
	s, err := redisserver.Start(ctx, o)
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

// NATS starts an embedded NATS server for the test and shuts it down at cleanup. Without
// options it has a fresh name and no accounts or authentication; opts, at most one,
// gives it a configuration (deploy.NATSConfig) or joins it to a cluster. An empty Name
// is still a fresh one, and a zero Port or ClusterPort a free one.
func NATS(tb testing.TB, opts ...natsserver.Options) *server.Server {
	tb.Helper()
	o := oneOption(tb, opts)
	o.Name = cmp.Or(o.Name, "test-"+Deployment(tb))
	o.Port = cmp.Or(o.Port, -1)
	if o.ClusterName != "" {
		o.ClusterPort = cmp.Or(o.ClusterPort, -1)
	}
	s, err := natsserver.Run(o)
	if err != nil {
		tb.Fatalf("start nats: %v", err)
	}
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// oneOption returns the one options value of a variadic starter, or the zero value.
func oneOption[O any](tb testing.TB, opts []O) O {
	tb.Helper()
	var o O
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		tb.Fatalf("testenv: %d options given, want at most one", len(opts))
	}
	return o
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

// Logger writes through tb.Log, so a failing test shows its logs and a passing one does
// not. Lines logged after the test ended (a NATS connection's asynchronous close
// callback, say) are dropped: testing panics on a Log after completion.
func Logger(tb testing.TB) zerolog.Logger {
	w := &endedWriter{w: zerolog.NewTestWriter(tb)}
	tb.Cleanup(func() {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	return zerolog.New(w).With().Timestamp().Logger()
}

// endedWriter forwards to w until the test ends.
type endedWriter struct {
	mu    sync.Mutex
	ended bool
	w     io.Writer
}

func (e *endedWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return len(p), nil
	}
	return e.w.Write(p)
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
