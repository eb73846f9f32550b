// Package channel is the API replica's end of the worker tool channel: one WebSocket per
// worker session, authenticated with the worker pass, speaking JSON-RPC 2.0. While a
// socket lives, its replica subscribes to the session's view and tool subjects on NATS,
// so requests from any replica reach the one holding the socket and no other.
//
// Views and tools are kept apart: a view request takes a slot of its connection's
// view waiter map (MaxRelayWaiters, wire.RelayTimeout) and is relayed as
// agentfy/browserView; it never touches tool routing, the session clock or the activity
// log. Only tool calls do.
package channel

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/session"
)

// Limits of one worker connection.
const (
	// MaxRelayWaiters is how many view requests one connection relays at once; the
	// next is refused at once.
	MaxRelayWaiters = 8
	// MaxToolWaiters is how many tool calls one connection relays at once.
	MaxToolWaiters = 16
	// ToolTimeout bounds one tool call.
	ToolTimeout = 60 * time.Second
	// HelloTimeout bounds the wait for the worker's hello after the upgrade.
	HelloTimeout = 10 * time.Second
	// WriteTimeout bounds one WebSocket write.
	WriteTimeout = 10 * time.Second
	// PingInterval is how often the replica pings the worker; a worker that does not
	// answer within PingTimeout is dropped.
	PingInterval = 15 * time.Second
	PingTimeout  = 10 * time.Second
	// MaxToolRequest bounds a tool call arriving over NATS.
	MaxToolRequest = 1 << 20 // 1 MiB
	// RelayBurst and RelayRate pace the view requests relayed to one worker:
	// a few at once, then about one a second. The HTTP gate lets one view per agent
	// through every 2 s, so only requests that never passed it (a flood on the bus)
	// meet this bound; the excess is answered busy at once, without touching the
	// worker or the consume route.
	RelayBurst = 3
	RelayRate  = rate.Limit(1) // per second
	// relayMemory is how many of the request ids it relayed a connection remembers, to
	// refuse a request replayed on the bus while its proof is still fresh: what the pace
	// lets through over a proof's life, RelayBurst then RelayRate over view.GrantTTL
	// and view.ProofSkew (15), fits in it.
	relayMemory = 16
)

// Deadlines of the hub's own calls to the session store (Redis), the event publisher
// and NATS. A healthy server answers in milliseconds: these bound only how long an
// unreachable or stalled one can hold up the caller.
const (
	// storeTimeout bounds one session-store call the hub makes on its own time: reading
	// a held session (each session check, the status after the hello or at
	// the worker's end-of-session close) and recording its stop. 2 s is far beyond a
	// healthy round trip, and short enough that an unreachable Redis costs a session
	// check or a stop no more than a moment; a read that fails is retried next tick.
	storeTimeout = 2 * time.Second
	// detachTimeout bounds the detach after a connection ended. It runs on a context cut
	// loose from the ended connection, before the handler counts as done: it is how long
	// an unreachable Redis can delay the handler's end, and with it Close, which waits
	// for the handlers. 2 s: one script call; a detach that does not finish leaves the
	// owner naming this replica until the worker attaches again.
	detachTimeout = 2 * time.Second
	// recordTimeout bounds the activity record after a tool call (RecordTool). It runs
	// on a context cut loose from the call's, which may have spent all of ToolTimeout,
	// and before the result goes back: a slow Redis delays the requester by at most this
	// much. 2 s: one pipelined round trip.
	recordTimeout = 2 * time.Second
	// publishTimeout bounds the publication of one status event (EventPublisher). It runs
	// on a context cut loose from the caller's, which may be over (a tool call that timed
	// out, a connection that ended), so that the event still goes out. 2 s: the feed's
	// publish is a buffered NATS write; the bound keeps a publisher that does wait from
	// holding up the session checks or a tool result.
	publishTimeout = 2 * time.Second
	// subscribeTimeout bounds the flush that makes sure the NATS server has a session's
	// view and tool subscriptions before its worker is told it is attached. 5 s, as the
	// feed's: one round trip to the server, well inside the worker's 10 s for connecting
	// and the hello (worker.DialTimeout), which it spends waiting for that answer.
	subscribeTimeout = 5 * time.Second
)

// Grants is what the hub needs of the view grants (view.Grants).
type Grants interface {
	// Vouched reports whether proof (the request's HeaderProof) is a replica's proof
	// of requestID for sessionID, made recently enough at now. It reads nothing.
	Vouched(requestID, sessionID, proof string, now time.Time) bool
}

// Bus is the hub's side of NATS, a *nats.Conn: it subscribes to the view and tool
// subjects of the sessions it holds and answers their requests (bus.Respond). The
// development stack wraps it to alter the answers on their way out (internal/dev/stack).
type Bus interface {
	ChanSubscribe(subject string, ch chan *nats.Msg) (*nats.Subscription, error)
	FlushTimeout(timeout time.Duration) error
	bus.Publisher
}

// Status events are published by this package through an EventPublisher.
type EventPublisher interface {
	Publish(ctx context.Context, ev session.Event)
}

// Config wires a Hub.
type Config struct {
	ReplicaID string
	Creds     *auth.Store
	Sessions  *session.Store
	// Grants proves that a view request on the bus comes from a replica, which stored
	// its grant: any other request is refused before it reaches the worker.
	Grants    Grants
	NATS      Bus
	Namespace bus.Namespace
	Events    EventPublisher
	Log       zerolog.Logger
	// Tick is how often held sessions are checked for idle and stop; 0 means 1 s.
	Tick time.Duration
	// PingInterval and PingTimeout: how often the hub pings each worker, and how long
	// it waits for the pong before it drops the socket; 0 means the package's
	// PingInterval and PingTimeout.
	PingInterval, PingTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RelayClock is the clock of each connection's relay pace (RelayBurst,
	// RelayRate); nil means time.Now. It is apart from Now, which stamps events and
	// the session clock, so that the development stack can let pace time pass — standing
	// in for a client's wait between two polls — and move no session's clock.
	RelayClock func() time.Time
	// Tracer, when set, gets the span of each view this replica relays to a worker
	// (its parent the requester's, from the request's headers); nil means tracing off.
	Tracer trace.TracerProvider
}

// Hub holds this replica's worker connections.
type Hub struct {
	cfg    Config
	tracer trace.Tracer

	mu     sync.Mutex
	conns  map[string]*Conn // by session id; guarded by mu
	closed bool             // guarded by mu

	wg sync.WaitGroup

	// pings are the connections' next pings by due time (pinger.go).
	pingMu sync.Mutex
	pings  pingQueue // guarded by pingMu

	// serving counts the sockets served now, from the upgrade to the end of their
	// goroutine (Serving).
	serving atomic.Int64

	// Counts of the view requests that arrived on the bus: relayed to a worker, refused
	// because no replica stored their grant, or answered busy by the pace.
	ViewsRelayed, ViewsRefused, ViewsPaced atomic.Int64

	// invalid counts the messages from workers that were no JSON-RPC (InvalidMessages);
	// peerLog is the logger of such bad input, its lines at most PeerLogBurst a
	// PeerLogPeriod across every socket, so that a worker cannot flood the log.
	invalid atomic.Uint64
	peerLog zerolog.Logger

	// key opens tool calls sealed to this replica; its public half is published with
	// each session this replica holds. It lives only in this process's memory.
	key *ecdh.PrivateKey

	// The dispatchers of the session subscriptions (subscribe.go): msgs is their queue,
	// handlers each subscription's handler, done ends them (Close).
	msgs         chan *nats.Msg
	handlers     sync.Map // *nats.Subscription → nats.MsgHandler
	dispatchOnce sync.Once
	dispatchWG   sync.WaitGroup
	done         chan struct{}
	closeOnce    sync.Once
}

// NewHub returns a Hub; call Run to start its session checks and Close to end it.
func NewHub(cfg Config) *Hub {
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RelayClock == nil {
		cfg.RelayClock = time.Now
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = PingInterval
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = PingTimeout
	}
	key, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("channel: generate key: %v", err)) // crypto/rand does not fail
	}
	return &Hub{
		cfg: cfg, tracer: telemetry.Tracer(cfg.Tracer), conns: map[string]*Conn{}, key: key, msgs: make(chan *nats.Msg, dispatchQueue), done: make(chan struct{}),
		peerLog: cfg.Log.Sample(&zerolog.BurstSampler{Burst: PeerLogBurst, Period: PeerLogPeriod}),
	}
}

// The bound of the log lines about bad input from workers: the first PeerLogBurst of
// each PeerLogPeriod, across the replica's sockets; InvalidMessages counts them all.
const (
	PeerLogBurst  = 5
	PeerLogPeriod = time.Minute
)

// InvalidMessages is how many messages from workers were no JSON-RPC message.
func (h *Hub) InvalidMessages() uint64 { return h.invalid.Load() }

// Conns is the number of worker sockets this replica holds.
func (h *Hub) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Serving is the number of worker sockets this replica serves now, from the upgrade to
// the end of the socket's goroutine: Conns and the sockets not registered yet or
// closing.
func (h *Hub) Serving() int { return int(h.serving.Load()) }

// RelayWaiters is the number of view requests relayed now, over all connections.
func (h *Hub) RelayWaiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.conns {
		n += int(c.relaying.Load())
	}
	return n
}
