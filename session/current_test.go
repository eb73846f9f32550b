package session_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

var currentPolicy = session.Policy{IdleAfter: time.Minute, StopAfter: 5 * time.Minute}

// currentEnv is a session store with the client and server under it, for tests that
// read and touch keys directly.
type currentEnv struct {
	st  *session.Store
	rdb redis.UniversalClient
	srv *redisserver.Server
	clk *testenv.Clock
	dep string
}

func newCurrentEnv(t *testing.T) currentEnv {
	t.Helper()
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	dep := testenv.Deployment(t)
	clk := testenv.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	creds := auth.NewStore(rdb, dep, clk.Now)
	return currentEnv{st: session.NewStore(rdb, creds, dep, currentPolicy, clk.Now), rdb: rdb, srv: srv, clk: clk, dep: dep}
}

// readCurrentID reads agentID's pointer as a view's first check does (view/check.go):
// GET of its key, then CurrentID.
func readCurrentID(ctx context.Context, t *testing.T, e currentEnv, agentID string) (string, error) {
	t.Helper()
	v, err := e.rdb.Get(ctx, keyspace.For(e.dep).CurrentSession(agentID)).Result()
	if errors.Is(err, redis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return session.CurrentID(v)
}

// readStillCurrent reads session id's record as a view's re-check does (view/check.go):
// HGETALL of its key, then StillCurrent.
func readStillCurrent(ctx context.Context, t *testing.T, e currentEnv, agentID, id string) (session.Session, error) {
	t.Helper()
	record, err := e.rdb.HGetAll(ctx, keyspace.For(e.dep).Session(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return e.st.StillCurrent(agentID, id, record)
}

// sameAnswer fails unless two (Session, error) answers agree: both the same session, or
// both errors that ErrNoSession matches alike.
func sameAnswer(t *testing.T, what string, got session.Session, gotErr error, want session.Session, wantErr error) {
	t.Helper()
	if (gotErr == nil) != (wantErr == nil) || errors.Is(gotErr, session.ErrNoSession) != errors.Is(wantErr, session.ErrNoSession) {
		t.Fatalf("%s: err = %v, Current's = %v", what, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %+v, Current's = %+v", what, got, want)
	}
}

// agreeWithCurrent checks, in the present state, that StillCurrent for id and Live
// for id answer what Current answers for agentID when id is what the agent's pointer
// names, and that CurrentID gives that pointer. It returns Current's answer.
func agreeWithCurrent(t *testing.T, ctx context.Context, e currentEnv, agentID, id string) (session.Session, error) {
	t.Helper()
	cur, curErr := e.st.Current(ctx, agentID)
	if curErr != nil && !errors.Is(curErr, session.ErrNoSession) {
		t.Fatalf("Current: %v", curErr)
	}
	still, stillErr := readStillCurrent(ctx, t, e, agentID, id)
	sameAnswer(t, "StillCurrent", still, stillErr, cur, curErr)
	live, liveErr := e.st.Live(ctx, id)
	sameAnswer(t, "Live", live, liveErr, cur, curErr)
	if curErr == nil {
		gotID, err := readCurrentID(ctx, t, e, agentID)
		if err != nil || gotID != cur.ID {
			t.Fatalf("CurrentID = %q, %v; Current names %q", gotID, err, cur.ID)
		}
	}
	return cur, curErr
}

func TestCurrentIDFollowsThePointer(t *testing.T) {
	e := newCurrentEnv(t)
	ctx := testenv.Context(t, 30*time.Second)

	if id, err := readCurrentID(ctx, t, e, "agent-1"); !errors.Is(err, session.ErrNoSession) || id != "" {
		t.Fatalf("no session: CurrentID = %q, %v; want ErrNoSession", id, err)
	}
	if _, err := e.st.Current(ctx, "agent-1"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("no session: Current = %v", err)
	}

	first, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := readCurrentID(ctx, t, e, "agent-1"); err != nil || id != first.ID {
		t.Fatalf("started: CurrentID = %q, %v; want %q", id, err, first.ID)
	}
	// Another agent's pointer is its own.
	if id, err := readCurrentID(ctx, t, e, "agent-2"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("other agent: CurrentID = %q, %v", id, err)
	}

	second, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID {
		t.Fatal("Start reused a session id")
	}
	if id, err := readCurrentID(ctx, t, e, "agent-1"); err != nil || id != second.ID {
		t.Fatalf("replaced: CurrentID = %q, %v; want %q", id, err, second.ID)
	}

	if _, err := e.st.Stop(ctx, second.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	if id, err := readCurrentID(ctx, t, e, "agent-1"); !errors.Is(err, session.ErrNoSession) || id != "" {
		t.Fatalf("stopped: CurrentID = %q, %v; want ErrNoSession", id, err)
	}
}

func TestStillCurrentMatchesCurrent(t *testing.T) {
	e := newCurrentEnv(t)
	ctx := testenv.Context(t, 30*time.Second)

	// No session at all: every answer is ErrNoSession.
	if _, err := agreeWithCurrent(t, ctx, e, "agent-1", "0123456789abcdef0123456789abcdef"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("no session: %v", err)
	}

	first, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	hello := session.Hello{ImageTag: "browser:1.4.2", BootstrapRevision: 2, Features: []string{wire.FeatureBrowserView}}
	if err := e.st.Attach(ctx, first.ID, "replica-a", "04ab", hello); err != nil {
		t.Fatal(err)
	}
	cur, err := agreeWithCurrent(t, ctx, e, "agent-1", first.ID)
	if err != nil {
		t.Fatalf("running: %v", err)
	}
	if cur.ID != first.ID || cur.AgentID != "agent-1" || cur.Owner != "replica-a" || !cur.HasFeature(wire.FeatureBrowserView) {
		t.Fatalf("running: StillCurrent = %+v", cur)
	}

	// Idle is still live.
	e.clk.Advance(currentPolicy.IdleAfter)
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", first.ID); err != nil || cur.ID != first.ID || e.st.Status(cur) != session.Idle {
		t.Fatalf("idle: %+v %v", cur, err)
	}

	// A known id the agent's pointer does not name: ErrNoSession, although that other
	// session is live (it is another agent's).
	other, _, err := e.st.Start(ctx, "agent-2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readStillCurrent(ctx, t, e, "agent-1", other.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("another agent's session: StillCurrent = %+v, %v", got, err)
	}
	if got, err := readStillCurrent(ctx, t, e, "agent-2", other.ID); err != nil || got.ID != other.ID || got.AgentID != "agent-2" {
		t.Fatalf("agent-2's own session: StillCurrent = %+v, %v", got, err)
	}
	// An id that names no record.
	if got, err := readStillCurrent(ctx, t, e, "agent-1", "nope"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("unknown id: StillCurrent = %+v, %v", got, err)
	}

	// Replaced: the old id is no longer current, the new one is.
	second, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readStillCurrent(ctx, t, e, "agent-1", first.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("replaced session: StillCurrent = %+v, %v", got, err)
	}
	if got, err := e.st.Live(ctx, first.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("replaced session: Live = %+v, %v", got, err)
	}
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", second.ID); err != nil || cur.ID != second.ID || cur.AgentID != "agent-1" {
		t.Fatalf("replacement: %+v %v", cur, err)
	}

	// Stopped: ErrNoSession everywhere.
	if _, err := e.st.Stop(ctx, second.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := agreeWithCurrent(t, ctx, e, "agent-1", second.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("stopped: %v", err)
	}
}

func TestStillCurrentIdleTimeout(t *testing.T) {
	e := newCurrentEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	sess, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}

	// One millisecond before the timeout: still live (idle).
	e.clk.Advance(currentPolicy.StopAfter - time.Millisecond)
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", sess.ID); err != nil || cur.ID != sess.ID {
		t.Fatalf("just before the timeout: %+v %v", cur, err)
	}
	// At the timeout: stopped, though nothing recorded it and the pointer still names
	// the session.
	e.clk.Advance(time.Millisecond)
	if _, err := agreeWithCurrent(t, ctx, e, "agent-1", sess.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("at the timeout: %v", err)
	}
	if got, err := readStillCurrent(ctx, t, e, "agent-1", sess.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("at the timeout: StillCurrent = %+v, %v", got, err)
	}
	// CurrentID reads only the pointer, which the timeout leaves in place.
	if id, err := readCurrentID(ctx, t, e, "agent-1"); err != nil || id != sess.ID {
		t.Fatalf("at the timeout: CurrentID = %q, %v; want the pointer %q", id, err, sess.ID)
	}

	// A tool call before the timeout keeps it live past StopAfter from its start.
	next, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(currentPolicy.StopAfter - time.Second)
	if err := e.st.RecordTool(ctx, next.ID, session.Activity{At: e.clk.Now(), Tool: "browser_open", OK: true}); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", next.ID); err != nil || cur.ID != next.ID {
		t.Fatalf("after a tool call: %+v %v", cur, err)
	}
}

func TestStillCurrentRecordGone(t *testing.T) {
	e := newCurrentEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	sess, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	// The pointer names a session whose record is gone: no live session.
	if err := e.rdb.Del(ctx, keyspace.For(e.dep).Session(sess.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := agreeWithCurrent(t, ctx, e, "agent-1", sess.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("record gone: %v", err)
	}
}

func TestRedisErrorsAreNotNoSession(t *testing.T) {
	t.Run("cancelled context", func(t *testing.T) {
		e := newCurrentEnv(t)
		ctx := testenv.Context(t, 30*time.Second)
		sess, _, err := e.st.Start(ctx, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := e.st.Current(cancelled, "agent-1"); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Current = %v; want a Redis error", err)
		}
		if _, err := e.st.Live(cancelled, sess.ID); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Live = %v; want a Redis error", err)
		}
	})

	t.Run("server stopped", func(t *testing.T) {
		e := newCurrentEnv(t)
		ctx := testenv.Context(t, 30*time.Second)
		sess, _, err := e.st.Start(ctx, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		e.srv.Stop()

		if _, err := e.st.Current(ctx, "agent-1"); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Current = %v; want a Redis error", err)
		}
		if got, err := e.st.Live(ctx, sess.ID); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Live = %+v, %v; want a Redis error", got, err)
		}
	})
}
