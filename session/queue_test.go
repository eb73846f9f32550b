package session_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
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

var queuePolicy = session.Policy{IdleAfter: time.Minute, StopAfter: 5 * time.Minute}

// queueEnv is a session store with the client and server under it, for tests that build
// their own pipelines and touch keys directly.
type queueEnv struct {
	st  *session.Store
	rdb redis.UniversalClient
	srv *redisserver.Server
	clk *testenv.Clock
	dep string
}

func newQueueEnv(t *testing.T) queueEnv {
	t.Helper()
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	dep := testenv.Deployment(t)
	clk := testenv.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	creds := auth.NewStore(rdb, dep, clk.Now)
	return queueEnv{st: session.NewStore(rdb, creds, dep, queuePolicy, clk.Now), rdb: rdb, srv: srv, clk: clk, dep: dep}
}

// queuedCurrentID runs QueueCurrentID through a pipeline of its own.
func queuedCurrentID(ctx context.Context, e queueEnv, agentID string) (string, error) {
	p := e.rdb.Pipeline()
	f := e.st.QueueCurrentID(ctx, p, agentID)
	_, _ = p.Exec(ctx)
	return f()
}

// queuedStillCurrent runs QueueStillCurrent through a pipeline of its own.
func queuedStillCurrent(ctx context.Context, e queueEnv, agentID, id string) (session.Session, error) {
	p := e.rdb.Pipeline()
	f := e.st.QueueStillCurrent(ctx, p, agentID, id)
	_, _ = p.Exec(ctx)
	return f()
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

// agreeWithCurrent checks, in the present state, that QueueStillCurrent for id and Live
// for id answer what Current answers for agentID when id is what the agent's pointer
// names, and that QueueCurrentID gives that pointer. It returns Current's answer.
func agreeWithCurrent(t *testing.T, ctx context.Context, e queueEnv, agentID, id string) (session.Session, error) {
	t.Helper()
	cur, curErr := e.st.Current(ctx, agentID)
	if curErr != nil && !errors.Is(curErr, session.ErrNoSession) {
		t.Fatalf("Current: %v", curErr)
	}
	still, stillErr := queuedStillCurrent(ctx, e, agentID, id)
	sameAnswer(t, "QueueStillCurrent", still, stillErr, cur, curErr)
	live, liveErr := e.st.Live(ctx, id)
	sameAnswer(t, "Live", live, liveErr, cur, curErr)
	if curErr == nil {
		gotID, err := queuedCurrentID(ctx, e, agentID)
		if err != nil || gotID != cur.ID {
			t.Fatalf("QueueCurrentID = %q, %v; Current names %q", gotID, err, cur.ID)
		}
	}
	return cur, curErr
}

func TestQueueCurrentIDFollowsThePointer(t *testing.T) {
	e := newQueueEnv(t)
	ctx := testenv.Context(t, 30*time.Second)

	if id, err := queuedCurrentID(ctx, e, "agent-1"); !errors.Is(err, session.ErrNoSession) || id != "" {
		t.Fatalf("no session: QueueCurrentID = %q, %v; want ErrNoSession", id, err)
	}
	if _, err := e.st.Current(ctx, "agent-1"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("no session: Current = %v", err)
	}

	first, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := queuedCurrentID(ctx, e, "agent-1"); err != nil || id != first.ID {
		t.Fatalf("started: QueueCurrentID = %q, %v; want %q", id, err, first.ID)
	}
	// Another agent's pointer is its own.
	if id, err := queuedCurrentID(ctx, e, "agent-2"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("other agent: QueueCurrentID = %q, %v", id, err)
	}

	second, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID {
		t.Fatal("Start reused a session id")
	}
	if id, err := queuedCurrentID(ctx, e, "agent-1"); err != nil || id != second.ID {
		t.Fatalf("replaced: QueueCurrentID = %q, %v; want %q", id, err, second.ID)
	}

	if _, err := e.st.Stop(ctx, second.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	if id, err := queuedCurrentID(ctx, e, "agent-1"); !errors.Is(err, session.ErrNoSession) || id != "" {
		t.Fatalf("stopped: QueueCurrentID = %q, %v; want ErrNoSession", id, err)
	}
}

func TestQueueCurrentIDReadsAtExec(t *testing.T) {
	e := newQueueEnv(t)
	ctx := testenv.Context(t, 30*time.Second)

	// Queued while the agent has no session, run after one started: the answer is the
	// state at Exec, not at queueing.
	p := e.rdb.Pipeline()
	f := e.st.QueueCurrentID(ctx, p, "agent-1")
	sess, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if id, err := f(); err != nil || id != sess.ID {
		t.Fatalf("QueueCurrentID = %q, %v; want %q", id, err, sess.ID)
	}

	// And QueueStillCurrent, queued while the session was current, run after it stopped.
	p = e.rdb.Pipeline()
	g := e.st.QueueStillCurrent(ctx, p, "agent-1", sess.ID)
	if _, err := e.st.Stop(ctx, sess.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	_, _ = p.Exec(ctx)
	if got, err := g(); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("QueueStillCurrent after a stop between queue and Exec = %+v, %v", got, err)
	}
}

func TestQueueStillCurrentMatchesCurrent(t *testing.T) {
	e := newQueueEnv(t)
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
		t.Fatalf("running: QueueStillCurrent = %+v", cur)
	}

	// Idle is still live.
	e.clk.Advance(queuePolicy.IdleAfter)
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", first.ID); err != nil || cur.ID != first.ID || e.st.Status(cur) != session.Idle {
		t.Fatalf("idle: %+v %v", cur, err)
	}

	// A known id the agent's pointer does not name: ErrNoSession, although that other
	// session is live (it is another agent's).
	other, _, err := e.st.Start(ctx, "agent-2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := queuedStillCurrent(ctx, e, "agent-1", other.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("another agent's session: QueueStillCurrent = %+v, %v", got, err)
	}
	if got, err := queuedStillCurrent(ctx, e, "agent-2", other.ID); err != nil || got.ID != other.ID || got.AgentID != "agent-2" {
		t.Fatalf("agent-2's own session: QueueStillCurrent = %+v, %v", got, err)
	}
	// An id that names no record.
	if got, err := queuedStillCurrent(ctx, e, "agent-1", "nope"); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("unknown id: QueueStillCurrent = %+v, %v", got, err)
	}

	// Replaced: the old id is no longer current, the new one is.
	second, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := queuedStillCurrent(ctx, e, "agent-1", first.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("replaced session: QueueStillCurrent = %+v, %v", got, err)
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

func TestQueueStillCurrentIdleTimeout(t *testing.T) {
	e := newQueueEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	sess, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}

	// One millisecond before the timeout: still live (idle).
	e.clk.Advance(queuePolicy.StopAfter - time.Millisecond)
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", sess.ID); err != nil || cur.ID != sess.ID {
		t.Fatalf("just before the timeout: %+v %v", cur, err)
	}
	// At the timeout: stopped, though nothing recorded it and the pointer still names
	// the session.
	e.clk.Advance(time.Millisecond)
	if _, err := agreeWithCurrent(t, ctx, e, "agent-1", sess.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("at the timeout: %v", err)
	}
	if got, err := queuedStillCurrent(ctx, e, "agent-1", sess.ID); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("at the timeout: QueueStillCurrent = %+v, %v", got, err)
	}
	// QueueCurrentID reads only the pointer, which the timeout leaves in place.
	if id, err := queuedCurrentID(ctx, e, "agent-1"); err != nil || id != sess.ID {
		t.Fatalf("at the timeout: QueueCurrentID = %q, %v; want the pointer %q", id, err, sess.ID)
	}

	// A tool call before the timeout keeps it live past StopAfter from its start.
	next, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(queuePolicy.StopAfter - time.Second)
	if err := e.st.RecordTool(ctx, next.ID, session.Activity{At: e.clk.Now(), Tool: "browser_open", OK: true}); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	if cur, err := agreeWithCurrent(t, ctx, e, "agent-1", next.ID); err != nil || cur.ID != next.ID {
		t.Fatalf("after a tool call: %+v %v", cur, err)
	}
}

func TestQueueStillCurrentRecordGone(t *testing.T) {
	e := newQueueEnv(t)
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

// countingHook counts what a client sends about one deployment's keys: single commands
// and pipelines. Connection set-up (HELLO, CLIENT SETINFO), which names no key, is not
// counted.
type countingHook struct {
	dep               string
	single, pipelines atomic.Int64
}

func (h *countingHook) touches(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.Contains(s, h.dep) {
			return true
		}
	}
	return false
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.touches(cmd) {
			h.single.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, h.touches) {
			h.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestQueuedReadsShareOneRoundTrip(t *testing.T) {
	e := newQueueEnv(t)
	ctx := testenv.Context(t, 30*time.Second)
	a, _, err := e.st.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := e.st.Start(ctx, "agent-2")
	if err != nil {
		t.Fatal(err)
	}
	hook := &countingHook{dep: e.dep}
	e.rdb.AddHook(hook)

	p := e.rdb.Pipeline()
	id := e.st.QueueCurrentID(ctx, p, "agent-1")
	still := e.st.QueueStillCurrent(ctx, p, "agent-2", b.ID)
	none := e.st.QueueCurrentID(ctx, p, "agent-3")
	if hook.single.Load() != 0 || hook.pipelines.Load() != 0 {
		t.Fatalf("queueing sent %d commands and %d pipelines", hook.single.Load(), hook.pipelines.Load())
	}
	if _, err := p.Exec(ctx); !errors.Is(err, redis.Nil) {
		// agent-3 has no pointer: the pipeline's first error is that GET's redis.Nil.
		t.Fatalf("Exec: %v", err)
	}
	if got, err := id(); err != nil || got != a.ID {
		t.Fatalf("QueueCurrentID = %q, %v; want %q", got, err, a.ID)
	}
	if got, err := still(); err != nil || got.ID != b.ID || got.AgentID != "agent-2" {
		t.Fatalf("QueueStillCurrent = %+v, %v", got, err)
	}
	if got, err := none(); !errors.Is(err, session.ErrNoSession) {
		t.Fatalf("QueueCurrentID for an agent without a session = %q, %v", got, err)
	}
	if s, n := hook.single.Load(), hook.pipelines.Load(); s != 0 || n != 1 {
		t.Fatalf("the queued reads took %d single commands and %d pipelines; want 0 and 1", s, n)
	}
}

func TestQueueRedisErrorsAreNotNoSession(t *testing.T) {
	t.Run("cancelled context", func(t *testing.T) {
		e := newQueueEnv(t)
		ctx := testenv.Context(t, 30*time.Second)
		sess, _, err := e.st.Start(ctx, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()

		p := e.rdb.Pipeline()
		id := e.st.QueueCurrentID(ctx, p, "agent-1")
		still := e.st.QueueStillCurrent(ctx, p, "agent-1", sess.ID)
		noID := e.st.QueueCurrentID(ctx, p, "agent-without-session")
		if _, err := p.Exec(cancelled); err == nil {
			t.Fatal("Exec with a cancelled context succeeded")
		}
		if got, err := id(); err == nil || errors.Is(err, session.ErrNoSession) || !errors.Is(err, context.Canceled) {
			t.Fatalf("QueueCurrentID = %q, %v; want a wrapped context.Canceled", got, err)
		}
		if got, err := still(); err == nil || errors.Is(err, session.ErrNoSession) || !errors.Is(err, context.Canceled) {
			t.Fatalf("QueueStillCurrent = %+v, %v; want a wrapped context.Canceled", got, err)
		}
		// Even for an agent that has no session the answer is "could not tell".
		if got, err := noID(); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("QueueCurrentID (no session) = %q, %v; want a Redis error", got, err)
		}
		if _, err := e.st.Live(cancelled, sess.ID); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Live = %v; want a Redis error", err)
		}
	})

	t.Run("server stopped", func(t *testing.T) {
		e := newQueueEnv(t)
		ctx := testenv.Context(t, 30*time.Second)
		sess, _, err := e.st.Start(ctx, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		e.srv.Stop()

		if _, err := e.st.Current(ctx, "agent-1"); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Current = %v; want a Redis error", err)
		}
		if got, err := queuedCurrentID(ctx, e, "agent-1"); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("QueueCurrentID = %q, %v; want a Redis error", got, err)
		}
		if got, err := queuedStillCurrent(ctx, e, "agent-1", sess.ID); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("QueueStillCurrent = %+v, %v; want a Redis error", got, err)
		}
		if got, err := e.st.Live(ctx, sess.ID); err == nil || errors.Is(err, session.ErrNoSession) {
			t.Fatalf("Live = %+v, %v; want a Redis error", got, err)
		}
	})
}
