package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
)

// store is the session store as the feed sees it: sessions by id.
type store map[string]session.Session

func (s store) Get(_ context.Context, id string) (session.Session, error) {
	sess, ok := s[id]
	if !ok {
		return session.Session{}, session.ErrNotFound
	}
	return sess, nil
}

func (s store) Status(sess session.Session) session.Status {
	if sess.Stopped {
		return session.Stopped
	}
	return session.Running
}

func newFeed(t *testing.T, sessions store) (*feed.Feed, bus.Namespace, *nats.Conn) {
	t.Helper()
	srv := testenv.NATS(t)
	ns, err := bus.NewNamespace(testenv.Deployment(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := feed.New(testenv.NATSConn(t, srv), ns, sessions, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, ns, testenv.NATSConn(t, srv)
}

func TestListenBounds(t *testing.T) {
	f, _, _ := newFeed(t, store{})
	var mine []*feed.Listener
	for i := range feed.MaxListenersPerCaller {
		l, err := f.Listen("agent-1", "u-alice")
		if err != nil {
			t.Fatalf("listener %d: %v", i, err)
		}
		mine = append(mine, l)
	}
	if _, err := f.Listen("agent-2", "u-alice"); !errors.Is(err, feed.ErrTooManyForCaller) {
		t.Fatalf("one listener too many for a caller: %v", err)
	}
	mine[0].Close()
	mine[0].Close() // twice is harmless
	if _, err := f.Listen("agent-2", "u-alice"); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	for i := f.Listeners(); i < feed.MaxListeners; i++ {
		if _, err := f.Listen("agent-1", fmt.Sprintf("u-%d", i)); err != nil {
			t.Fatalf("listener %d of %d: %v", i, feed.MaxListeners, err)
		}
	}
	if _, err := f.Listen("agent-1", "u-new"); !errors.Is(err, feed.ErrTooManyListeners) {
		t.Fatalf("listener past the global bound: %v", err)
	}
}

// TestEventsAreConfirmed: an event reaches a listener only when the session store
// agrees with it, whatever the message on the bus claims.
func TestEventsAreConfirmed(t *testing.T) {
	sessions := store{
		"live":    {ID: "live", AgentID: "agent-1"},
		"stopped": {ID: "stopped", AgentID: "agent-1", Stopped: true},
		"other":   {ID: "other", AgentID: "agent-2"},
	}
	f, ns, pub := newFeed(t, sessions)
	l, err := f.Listen("agent-1", "u-alice")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		subjectID string // the session id in the subject
		ev        session.Event
		want      bool
	}{
		{"running for a live session", "live", session.Event{AgentID: "agent-1", SessionID: "live", Status: session.Running}, true},
		{"idle for a live session", "live", session.Event{AgentID: "agent-1", SessionID: "live", Status: session.Idle}, true},
		{"stopped for a stopped session", "stopped", session.Event{AgentID: "agent-1", SessionID: "stopped", Status: session.Stopped}, true},
		{"stopped for a live session", "live", session.Event{AgentID: "agent-1", SessionID: "live", Status: session.Stopped}, false},
		{"running for a stopped session", "stopped", session.Event{AgentID: "agent-1", SessionID: "stopped", Status: session.Running}, false},
		{"another agent's session", "other", session.Event{AgentID: "agent-1", SessionID: "other", Status: session.Running}, false},
		{"an unknown session", "ghost", session.Event{AgentID: "agent-1", SessionID: "ghost", Status: session.Stopped}, false},
		{"subject and body disagree", "stopped", session.Event{AgentID: "agent-1", SessionID: "live", Status: session.Running}, false},
		{"an unknown status", "live", session.Event{AgentID: "agent-1", SessionID: "live", Status: "paused"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused := f.Refused.Load()
			subject, err := ns.Subject(bus.VerbStatus, tt.subjectID)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(tt.ev)
			if err := pub.Publish(subject, b); err != nil {
				t.Fatal(err)
			}
			if !tt.want {
				// The refusal is counted before anything could be delivered.
				testenv.WaitFor(t, 5*time.Second, "the refusal", func() bool { return f.Refused.Load() > refused })
				select {
				case ev := <-l.C:
					t.Fatalf("relayed %+v", ev)
				default:
				}
				return
			}
			select {
			case ev := <-l.C:
				if ev.SessionID != tt.ev.SessionID || ev.Status != tt.ev.Status {
					t.Fatalf("relayed %+v, want %+v", ev, tt.ev)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("not relayed")
			}
		})
	}
}

// TestFreshFeedMissesNothing: an event published, from another connection, the moment
// feed.New returns reaches the listener — New returns only once the server holds the
// subscription (CI once lost such an event). Many fresh feeds, one event each.
func TestFreshFeedMissesNothing(t *testing.T) {
	srv := testenv.NATS(t)
	ns, err := bus.NewNamespace(testenv.Deployment(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	sessions := store{"live": {ID: "live", AgentID: "agent-1"}}
	pub := testenv.NATSConn(t, srv)
	subject, err := ns.Subject(bus.VerbStatus, "live")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(session.Event{AgentID: "agent-1", SessionID: "live", Status: session.Running})
	const feeds = 100
	missed := 0
	for range feeds {
		f, err := feed.New(testenv.NATSConn(t, srv), ns, sessions, testenv.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		l, err := f.Listen("agent-1", "u-alice")
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.C:
		case <-time.After(2 * time.Second):
			missed++
		}
		l.Close()
		f.Close()
	}
	if missed > 0 {
		t.Fatalf("%d of %d fresh feeds missed the event published as New returned", missed, feeds)
	}
}

// TestFeedRefusesAmbiguousMembers: an event on the bus is read with wire.DecodeStrict —
// one whose status (or any member) is given twice or in another case is dropped, where
// encoding/json took the last of two, or "Status" for "status", and relayed it. Each is
// followed by a good event on the same subject from the same connection, which NATS
// delivers after it: the listener must see the good one first.
func TestFeedRefusesAmbiguousMembers(t *testing.T) {
	sessions := store{"live": {ID: "live", AgentID: "agent-1"}}
	f, ns, pub := newFeed(t, sessions)
	l, err := f.Listen("agent-1", "u-alice")
	if err != nil {
		t.Fatal(err)
	}
	subject, err := ns.Subject(bus.VerbStatus, "live")
	if err != nil {
		t.Fatal(err)
	}
	const at = `"at":"2026-12-01T10:00:00Z"`
	tests := []struct {
		name, body string
	}{
		{"status twice", `{"agentId":"agent-1","sessionId":"live","status":"stopped","status":"idle",` + at + `}`},
		{"Status", `{"agentId":"agent-1","sessionId":"live","Status":"idle",` + at + `}`},
		{"AgentId beside agentId", `{"agentId":"agent-1","AgentId":"agent-2","sessionId":"live","status":"idle",` + at + `}`},
		{"agentId twice", `{"agentId":"agent-2","agentId":"agent-1","sessionId":"live","status":"idle",` + at + `}`},
		{"unknown member", `{"agentId":"agent-1","sessionId":"live","status":"idle","stoppedBy":"u-mallory",` + at + `}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := session.Event{AgentID: "agent-1", SessionID: "live", Status: session.Running, At: time.Unix(int64(i), 0).UTC()}
			b, _ := json.Marshal(good)
			for _, m := range [][]byte{[]byte(tt.body), b} {
				if err := pub.Publish(subject, m); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case ev := <-l.C:
				if ev != good {
					t.Fatalf("relayed %+v from %s, want it dropped", ev, tt.body)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the good event was not relayed")
			}
		})
	}
}
