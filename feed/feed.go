// Package feed carries session status events between replicas over NATS and fans them
// out to this replica's status-feed listeners, so a viewer connected to any replica
// learns when a session starts, goes idle or stops.
package feed

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/session"
)

// Limits of one replica's feed.
const (
	// MaxListeners bounds the status-feed streams one replica serves.
	MaxListeners = 4096
	// ListenerQueue bounds the events queued for one listener; when full the oldest is
	// dropped (only the latest status matters).
	ListenerQueue = 16
	// MaxEventBytes bounds one event read from NATS.
	MaxEventBytes = 4 << 10 // 4 KiB
)

// ErrTooManyListeners is returned by Listen when MaxListeners are connected.
var ErrTooManyListeners = errors.New("feed: too many listeners")

// Feed publishes and receives status events.
type Feed struct {
	nc  *nats.Conn
	ns  bus.Namespace
	log zerolog.Logger
	sub *nats.Subscription

	mu        sync.Mutex
	listeners map[string]map[*Listener]struct{} // by agent id; guarded by mu
	count     int                               // guarded by mu

	// Dropped counts events dropped for slow listeners.
	Dropped atomic.Int64
}

// New subscribes to every status event of the namespace.
func New(nc *nats.Conn, ns bus.Namespace, log zerolog.Logger) (*Feed, error) {
	f := &Feed{nc: nc, ns: ns, log: log, listeners: map[string]map[*Listener]struct{}{}}
	sub, err := bus.Subscribe(nc, ns.AllOf(bus.VerbStatus), f.onEvent)
	if err != nil {
		return nil, err
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

func (f *Feed) onEvent(msg *nats.Msg) {
	if len(msg.Data) > MaxEventBytes {
		return
	}
	var ev session.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil || ev.AgentID == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.listeners[ev.AgentID] {
		l.deliver(ev, &f.Dropped)
	}
}

// Listener receives one agent's events.
type Listener struct {
	f     *Feed
	agent string
	C     chan session.Event
}

// Listen registers a listener for agentID; call Close when done.
func (f *Feed) Listen(agentID string) (*Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count >= MaxListeners {
		return nil, ErrTooManyListeners
	}
	l := &Listener{f: f, agent: agentID, C: make(chan session.Event, ListenerQueue)}
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
