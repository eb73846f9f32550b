package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// newStores returns the stores on a fake clock the test advances: Redis itself keeps no
// session timers.
func newStores(t *testing.T) (*session.Store, *auth.Store, *testenv.Clock) {
	t.Helper()
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 2)
	dep := testenv.Deployment(t)
	clk := testenv.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	creds := auth.NewStore(rdb, dep, clk.Now)
	return session.NewStore(rdb, creds, dep, session.Policy{IdleAfter: time.Minute, StopAfter: 5 * time.Minute}, clk.Now), creds, clk
}

func TestLifecycle(t *testing.T) {
	st, creds, clk := newStores(t)
	ctx := testenv.Context(t, 30*time.Second)

	if _, err := st.Current(ctx, "agent-1"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("before start: %v", err)
	}
	sess, passes, err := st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := creds.VerifyPass(ctx, passes.Worker, auth.RoleWorker); err != nil || p.SessionID != sess.ID {
		t.Fatalf("worker pass: %+v %v", p, err)
	}
	if p, err := creds.VerifyPass(ctx, passes.Broker, auth.RoleBroker); err != nil || p.SessionID != sess.ID {
		t.Fatalf("broker pass: %+v %v", p, err)
	}
	cur, err := st.Current(ctx, "agent-1")
	if err != nil || cur.ID != sess.ID || st.Status(cur) != session.Running {
		t.Fatalf("current = %+v %v", cur, err)
	}

	hello := session.Hello{ImageTag: "browser:1.4.2", BootstrapRevision: 2, Features: []string{wire.FeatureBrowserView}}
	if err := st.Attach(ctx, sess.ID, "replica-b", "04ab", hello); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Get(ctx, sess.ID)
	if got.Owner != "replica-b" || got.OwnerKey != "04ab" || !got.HasFeature(wire.FeatureBrowserView) || got.Hello.ImageTag != "browser:1.4.2" {
		t.Fatalf("after attach: %+v", got)
	}
	if err := st.Detach(ctx, sess.ID, "replica-a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Get(ctx, sess.ID); got.Owner != "replica-b" {
		t.Fatalf("detach by a non-owner cleared the owner: %+v", got)
	}
	if err := st.Detach(ctx, sess.ID, "replica-b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Get(ctx, sess.ID); got.Owner != "" {
		t.Fatalf("owner after detach = %q", got.Owner)
	}

	// Quiet for a minute: idle. A tool call: running again, and logged.
	clk.Advance(time.Minute)
	cur, _ = st.Current(ctx, "agent-1")
	if s := st.Status(cur); s != session.Idle {
		t.Fatalf("after a quiet minute: %s", s)
	}
	if err := st.RecordTool(ctx, sess.ID, session.Activity{At: clk.Now(), Tool: "browser_open", OK: true}); err != nil {
		t.Fatal(err)
	}
	cur, _ = st.Current(ctx, "agent-1")
	if s := st.Status(cur); s != session.Running {
		t.Fatalf("after a tool call: %s", s)
	}
	log, err := st.ActivityLog(ctx, sess.ID)
	if err != nil || len(log) != 1 || log[0].Tool != "browser_open" {
		t.Fatalf("activity = %+v %v", log, err)
	}

	// The idle timeout stops it, even before anyone records the stop.
	clk.Advance(5 * time.Minute)
	if _, err := st.Current(ctx, "agent-1"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("after the idle timeout: %v", err)
	}
}

func TestStopRevokesPassesAndStartReplaces(t *testing.T) {
	st, creds, _ := newStores(t)
	ctx := testenv.Context(t, 30*time.Second)
	first, passes, err := st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	second, passes2, err := st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if old, _ := st.Get(ctx, first.ID); !old.Stopped || old.StopReason != "replaced" {
		t.Fatalf("first session after a new start: %+v", old)
	}
	if _, err := creds.VerifyPass(ctx, passes.Broker, auth.RoleBroker); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("replaced session's broker pass: %v", err)
	}
	// Stopping the old session again must not clear the new one's pointer.
	if _, err := st.Stop(ctx, first.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	if cur, err := st.Current(ctx, "agent-1"); err != nil || cur.ID != second.ID {
		t.Fatalf("current = %+v %v", cur, err)
	}
	stopped, err := st.Stop(ctx, second.ID, "operator")
	if err != nil || !stopped.Stopped {
		t.Fatalf("stop = %+v %v", stopped, err)
	}
	if _, err := st.Current(ctx, "agent-1"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("after stop: %v", err)
	}
	for _, tok := range []string{passes2.Worker, passes2.Broker} {
		if _, err := creds.VerifyPass(ctx, tok, auth.RoleWorker); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("pass after stop: %v", err)
		}
	}
	if _, err := st.Stop(ctx, "nope", "operator"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("stop unknown: %v", err)
	}
}

func TestActivityLogBounded(t *testing.T) {
	st, _, clk := newStores(t)
	ctx := testenv.Context(t, 60*time.Second)
	sess, _, err := st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	for range session.ActivityLogMax + 5 {
		if err := st.RecordTool(ctx, sess.ID, session.Activity{At: clk.Now(), Tool: "browser_tabs", OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	log, err := st.ActivityLog(ctx, sess.ID)
	if err != nil || len(log) != session.ActivityLogMax {
		t.Fatalf("len = %d, %v", len(log), err)
	}
}

// Liveness reads, in one round trip, what Status needs of each session: the same status
// Get gives, for a running, an idle and a stopped session, and nothing for an id with
// no record.
func TestLiveness(t *testing.T) {
	st, _, clk := newStores(t)
	ctx := testenv.Context(t, 30*time.Second)
	running, _, err := st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	idle, _, err := st.Start(ctx, "agent-2")
	if err != nil {
		t.Fatal(err)
	}
	stopped, _, err := st.Start(ctx, "agent-3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stop(ctx, stopped.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if err := st.RecordTool(ctx, running.ID, session.Activity{At: clk.Now(), Tool: "browser_open", OK: true}); err != nil {
		t.Fatal(err)
	}
	live, err := st.Liveness(ctx, []string{running.ID, idle.ID, stopped.ID, "no-such-session"})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]session.Status{running.ID: session.Running, idle.ID: session.Idle, stopped.ID: session.Stopped} {
		full, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := live[id]
		if !ok || st.Status(l) != want || st.Status(full) != want || l.Stopped != full.Stopped || !l.LastToolAt.Equal(full.LastToolAt) {
			t.Errorf("%s: liveness %+v (%v), want status %v as Get's %+v", id, l, ok, want, full)
		}
	}
	if _, ok := live["no-such-session"]; ok || len(live) != 3 {
		t.Errorf("liveness %v: want the three sessions only", live)
	}
}

// Liveness works as the replica's Redis user, whose ACL (deploy.RedisACL) allows only
// the commands the replicas use: a read it may not make fails every session check, and
// no session would ever turn idle or stop (CI caught an HMGET that way).
func TestLivenessAsTheReplica(t *testing.T) {
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	ns, err := bus.NewNamespace(dep, 0)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	acl, err := deploy.RedisACL(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.Redis(t, redisserver.Options{ACL: acl})
	client := func(user string) redis.UniversalClient {
		c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}, Username: user, Password: secrets.Redis[user]})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	operator := client(deploy.RedisOperator)
	started, _, err := session.NewStore(operator, auth.NewStore(operator, dep, nil), dep, session.Policy{}, nil).Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	replica := client(deploy.RedisReplica)
	st := session.NewStore(replica, auth.NewStore(replica, dep, nil), dep, session.Policy{}, nil)
	live, err := st.Liveness(ctx, []string{started.ID})
	if err != nil || st.Status(live[started.ID]) != session.Running {
		t.Fatalf("liveness as the replica: %+v, %v", live, err)
	}
}

// TestRecordsReadStrictly: the JSON in a session record (the worker's hello, which a
// replica stored) and in its activity log is read with wire.DecodeStrict, as JSON from
// another process: a member twice or in another case than the field's is an error,
// where encoding/json took the last of two, or "Capabilities" for "capabilities".
func TestRecordsReadStrictly(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 2)
	dep := testenv.Deployment(t)
	clk := testenv.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	st := session.NewStore(rdb, auth.NewStore(rdb, dep, clk.Now), dep, session.Policy{IdleAfter: time.Minute, StopAfter: 5 * time.Minute}, clk.Now)
	ctx := testenv.Context(t, 30*time.Second)
	sess, _, err := st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	keys := keyspace.For(dep)
	tests := []struct {
		name, hello, activity string
		wantErr               bool
	}{
		{name: "as a replica writes them", hello: `{"imageTag":"w:1","bootstrapRevision":2,"capabilities":["browserView"]}`, activity: `{"at":"2026-11-30T12:00:00Z","tool":"browser_open","ok":true}`},
		{name: "hello tool list twice", hello: `{"imageTag":"w:1","bootstrapRevision":2,"capabilities":[],"capabilities":["browserView"]}`, wantErr: true},
		{name: "hello tool list capitalised", hello: `{"imageTag":"w:1","bootstrapRevision":2,"Capabilities":["browserView"]}`, wantErr: true},
		{name: "activity tool twice", activity: `{"at":"2026-11-30T12:00:00Z","tool":"browser_open","tool":"browser_close","ok":true}`, wantErr: true},
		{name: "activity OK", activity: `{"at":"2026-11-30T12:00:00Z","tool":"browser_open","OK":true}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.hello != "" {
				if err := rdb.HSet(ctx, keys.Session(sess.ID), "hello", tt.hello).Err(); err != nil {
					t.Fatal(err)
				}
				got, err := st.Get(ctx, sess.ID)
				if (err != nil) != tt.wantErr {
					t.Fatalf("Get with hello %s: %+v, %v; wantErr %v", tt.hello, got.Hello, err, tt.wantErr)
				}
			}
			if tt.activity != "" {
				if err := rdb.Del(ctx, keys.SessionActivity(sess.ID)).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.RPush(ctx, keys.SessionActivity(sess.ID), tt.activity).Err(); err != nil {
					t.Fatal(err)
				}
				got, err := st.ActivityLog(ctx, sess.ID)
				if (err != nil) != tt.wantErr {
					t.Fatalf("ActivityLog with %s: %+v, %v; wantErr %v", tt.activity, got, err, tt.wantErr)
				}
			}
		})
	}
}

// A Start that did not see the agent's current session (here a replica whose clock puts
// it past the stop timeout; beside another Start, a read made before that Start's
// pointer) still stops the session its pointer displaces: a session stops being the
// agent's current one only by being stopped, which the view's re-check relies on
// (StillCurrent reads the record alone).
func TestStartStopsTheSessionItDisplaces(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 2)
	dep := testenv.Deployment(t)
	policy := session.Policy{IdleAfter: time.Minute, StopAfter: 5 * time.Minute}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clkA, clkB := testenv.NewClock(now), testenv.NewClock(now.Add(10*time.Minute))
	credsA := auth.NewStore(rdb, dep, clkA.Now)
	a := session.NewStore(rdb, credsA, dep, policy, clkA.Now)
	b := session.NewStore(rdb, auth.NewStore(rdb, dep, clkB.Now), dep, policy, clkB.Now)
	ctx := testenv.Context(t, 30*time.Second)

	first, passes, err := a.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Current(ctx, "agent-1"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("the second replica sees %v; the test needs it to miss the first session", err)
	}
	second, _, err := b.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if old, err := a.Get(ctx, first.ID); err != nil || !old.Stopped || old.StopReason != "replaced" {
		t.Fatalf("displaced session: %+v, %v; want stopped, replaced", old, err)
	}
	if _, err := credsA.VerifyPass(ctx, passes.Broker, auth.RoleBroker); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("displaced session's broker pass: %v", err)
	}
	record, err := rdb.HGetAll(ctx, keyspace.For(dep).Session(first.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.StillCurrent("agent-1", first.ID, record); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("re-check of the displaced session = %+v, %v; want ErrNoSession", got, err)
	}
	if cur, err := a.Current(ctx, "agent-1"); err != nil || cur.ID != second.ID {
		t.Fatalf("current = %+v, %v; want %s", cur, err, second.ID)
	}
}
