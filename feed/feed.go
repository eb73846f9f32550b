// Package feed carries session status events between replicas over NATS and fans them
// out to this replica's status-feed listeners, so a viewer connected to any replica
// learns when a session starts, goes idle or stops. An event is a hint, never the truth:
// before it is relayed, the session store must agree with it.
package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// Limits of one replica's feed.
const (
	// MaxListeners bounds the status-feed streams one replica serves.
	MaxListeners = 4096
	// MaxListenersPerCaller bounds the streams one caller (one user) holds on a replica,
	// so that nobody can take the others' share: a web app needs one per open tab.
	MaxListenersPerCaller = 8
	// ListenerQueue bounds the events queued for one listener; when full the oldest is
	// dropped (only the latest status matters).
	ListenerQueue = 16
	// MaxEventBytes bounds one event read from NATS.
	MaxEventBytes = 4 << 10 // 4 KiB
	// CheckTimeout bounds the session-store lookup that confirms one event.
	CheckTimeout = 2 * time.Second
	// subscribeTimeout bounds the wait for the server to register the subscription.
	subscribeTimeout = 5 * time.Second
)

// Sessions is what the feed needs of the session store to confirm an event.
type Sessions interface {
	Get(ctx context.Context, id string) (session.Session, error)
	Status(sess session.Session) session.Status
}

// ErrTooManyListeners is returned by Listen when MaxListeners are connected.
var ErrTooManyListeners = errors.New("feed: too many listeners")

// ErrTooManyForCaller is returned by Listen when the caller already holds
// MaxListenersPerCaller streams.
var ErrTooManyForCaller = errors.New("feed: too many listeners for this caller")

// Feed publishes and receives status events.
type Feed struct {
	nc       *nats.Conn
	ns       bus.Namespace
	sessions Sessions
	log      zerolog.Logger
	sub      *nats.Subscription

	mu        sync.Mutex
	listeners map[string]map[*Listener]struct{} // by agent id; guarded by mu
	count     int                               // guarded by mu
	byCaller  map[string]int                    // streams per caller; guarded by mu

	// Dropped counts events dropped for slow listeners.
	Dropped atomic.Int64
	// Refused counts events the session store contradicted (or could not confirm).
	Refused atomic.Int64
}

// New subscribes to every status event of the namespace; sessions confirms each event
// before it reaches a listener. It returns once the server has the subscription, so an
// event published after New returns is not missed.
func New(nc *nats.Conn, ns bus.Namespace, sessions Sessions, log zerolog.Logger) (*Feed, error) {
	f := &Feed{nc: nc, ns: ns, sessions: sessions, log: log, listeners: map[string]map[*Listener]struct{}{}, byCaller: map[string]int{}}
	sub, err := bus.Subscribe(nc, ns.AllOf(bus.VerbStatus), f.onEvent)
	if err != nil {
		return nil, err
	}
	if err := nc.FlushTimeout(subscribeTimeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("feed: subscribe: %w", err)
	}
	f.sub = sub
	return f, nil
}

// Close unsubscribes.
func (f *Feed) Close() { _ = f.sub.Unsubscribe() }

// Publish sends an event to every replica (best effort: a lost event is corrected by the
// next one, and listeners read the current status when they connect).
func (f *Feed) Publish(_ context.Context, ev session.Event) {
	subject, err := f.ns.Subject(bus.VerbStatus, ev.SessionID)
	if err != nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	if err := f.nc.Publish(subject, b); err != nil {
		f.log.Warn().Err(err).Msg("publish status event")
	}
}

// onEvent relays an event to the agent's listeners once the session store confirms it.
// Anything that can publish on the bus could claim that a live session stopped (and
// the web window would say «Браузер закрыт» for a working agent), or that a stopped one
// runs: so "stopped" passes only for a session the store has stopped, "running" and
// "idle" only for one it has not, and always for the agent the store names. It runs on
// the subscription's goroutine, whose pending limits bound a flood; events for agents
// nobody here listens to cost no lookup. The event is read with wire.DecodeStrict: one
// with a member twice, in another case or unknown is dropped, never taken for the field.
func (f *Feed) onEvent(msg *nats.Msg) {
	if len(msg.Data) > MaxEventBytes {
		return
	}
	var ev session.Event
	if err := wire.DecodeStrict(msg.Data, &ev); err != nil || ev.AgentID == "" {
		return
	}
	if want, err := f.ns.Subject(bus.VerbStatus, ev.SessionID); err != nil || want != msg.Subject {
		f.Refused.Add(1)
		return
	}
	if !f.listening(ev.AgentID) {
		return
	}
	if !f.confirm(ev) {
		f.Refused.Add(1)
		f.log.Warn().Str("session", ev.SessionID).Str("claimed", string(ev.Status)).Msg("status event contradicts the session store; not relayed")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.listeners[ev.AgentID] {
		l.deliver(ev, &f.Dropped)
	}
}

func (f *Feed) listening(agentID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.listeners[agentID]) > 0
}

// confirm reports whether the session store agrees with ev; when it cannot tell, the
// event is not relayed (a listener reads the current status when it connects).
func (f *Feed) confirm(ev session.Event) bool {
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	sess, err := f.sessions.Get(ctx, ev.SessionID)
	if err != nil || sess.AgentID != ev.AgentID {
		return false
	}
	stopped := f.sessions.Status(sess) == session.Stopped
	switch ev.Status {
	case session.Stopped:
		return stopped
	case session.Running, session.Idle:
		return !stopped
	}
	return false
}

// Listener receives one agent's events.
type Listener struct {
	f      *Feed
	agent  string
	caller string
	C      chan session.Event
}

// Listen registers a listener of caller (who opened the stream: a user id) for
// agentID; call Close when done. It returns ErrTooManyForCaller or ErrTooManyListeners
// when a bound is reached.
func (f *Feed) Listen(agentID, caller string) (*Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCaller[caller] >= MaxListenersPerCaller {
		return nil, ErrTooManyForCaller
	}
	if f.count >= MaxListeners {
		return nil, ErrTooManyListeners
	}
	f.byCaller[caller]++
	l := &Listener{f: f, agent: agentID, caller: caller, C: make(chan session.Event, ListenerQueue)}
	if f.listeners[agentID] == nil {
		f.listeners[agentID] = map[*Listener]struct{}{}
	}
	f.listeners[agentID][l] = struct{}{}
	f.count++
	return l, nil
}

// deliver queues ev, dropping the oldest queued event when full. Called with f.mu held.
func (l *Listener) deliver(ev session.Event, dropped *atomic.Int64) {
	for {
		select {
		case l.C <- ev:
			return
		default:
		}
		select {
		case <-l.C:
			dropped.Add(1)
		default:
		}
	}
}

// Close unregisters the listener.
func (l *Listener) Close() {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	if set := l.f.listeners[l.agent]; set != nil {
		if _, ok := set[l]; ok {
			delete(set, l)
			l.f.count--
			if l.f.byCaller[l.caller]--; l.f.byCaller[l.caller] <= 0 {
				delete(l.f.byCaller, l.caller)
			}
		}
		if len(set) == 0 {
			delete(l.f.listeners, l.agent)
		}
	}
}

// Listeners is the number of listeners now.
func (f *Feed) Listeners() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}
