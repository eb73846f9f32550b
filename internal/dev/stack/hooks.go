package stack

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
)

// Hooks let a test watch and steer one running replica. They live here, not in the
// production packages: when the stack starts a replica it wraps the collaborators that
// the view service and the worker hub take (view.ServiceConfig, channel.Config), and the
// wrappers call the hooks set at the time. Each may be nil.
type Hooks struct {
	// OnReply may replace the sealed reply to this replica's view request before the
	// view service opens it (tampering, or acting "while the capture runs"). It wraps
	// the service's view.Requester.
	OnReply func([]byte) []byte
	// OnKey sees the private key of each of this replica's view requests, made for it
	// just then, to prove that no key material reaches Redis or NATS. It wraps the
	// service's key generator (view.ServiceConfig.NewKey).
	OnKey func(privateKey []byte)
	// OnGate sees each of the gate's decisions for this replica, with the time just
	// before the gate was asked. It wraps the service's view.Decider.
	OnGate func(agentID string, allowed bool, asked time.Time)
	// OnEnvelope may replace each answer with data that this replica's hub sends as the
	// owner of a session (a worker's sealed envelope on its way to the requester), before
	// NATS gets it; the ping's empty answer and error answers are left alone. A tool's
	// sealed result is an answer with data too: a test that tampers makes no tool call
	// meanwhile. It wraps the hub's channel.Bus.
	OnEnvelope func([]byte) []byte
	// OnRelay runs once this replica's hub found a view request vouched for by a
	// replica, before it relays the request to the worker, with the Redis key of its
	// grant (a test rewrites the grant there, as a Redis writer racing the broker
	// would). It wraps the hub's channel.Grants.
	OnRelay func(requestID, grantKey string)
}

// SetHooks installs h on the replica; nil removes every hook.
func (r *Replica) SetHooks(h *Hooks) { r.hooks.Store(h) }

// hooked wraps the collaborators of the view service and the worker hub of a replica
// that is about to start, so that they call the replica's Hooks, and puts the hub's
// relay pace on the stack's relay clock (see OpenGate).
func (s *Stack) hooked(hooks *atomic.Pointer[Hooks]) (func(*view.ServiceConfig), func(*channel.Config)) {
	views := func(cfg *view.ServiceConfig) {
		cfg.Gate = hookedGate{cfg.Gate, hooks}
		cfg.Requester = hookedRequester{cfg.Requester, hooks}
		newKey := cfg.NewKey
		if newKey == nil { // the service's own default
			newKey = func() (*ecdh.PrivateKey, error) { return envelope.GenerateKey(rand.Reader) }
		}
		cfg.NewKey = func() (*ecdh.PrivateKey, error) {
			k, err := newKey()
			if h := hooks.Load(); err == nil && h != nil && h.OnKey != nil {
				h.OnKey(k.Bytes())
			}
			return k, err
		}
	}
	hub := func(cfg *channel.Config) {
		cfg.NATS = hookedBus{cfg.NATS, hooks}
		cfg.Grants = hookedGrants{cfg.Grants, hooks, cfg.Sessions, cfg.Namespace.Keys()}
		cfg.RelayClock = s.relayClock
	}
	return views, hub
}

// hookedGate is a view service's gate that shows its decisions to Hooks.OnGate.
type hookedGate struct {
	view.Decider
	hooks *atomic.Pointer[Hooks]
}

func (g hookedGate) Decide(ctx context.Context, agentID, caller string, grants ...view.Grant) (view.Decision, error) {
	asked := time.Now()
	d, err := g.Decider.Decide(ctx, agentID, caller, grants...)
	if h := g.hooks.Load(); err == nil && h != nil && h.OnGate != nil {
		h.OnGate(agentID, d.Allowed, asked)
	}
	return d, err
}

// hookedRequester is a view service's NATS client whose replies pass Hooks.OnReply.
type hookedRequester struct {
	view.Requester
	hooks *atomic.Pointer[Hooks]
}

func (r hookedRequester) RequestMsg(ctx context.Context, msg *nats.Msg) ([]byte, error) {
	reply, err := r.Requester.RequestMsg(ctx, msg)
	if h := r.hooks.Load(); err == nil && h != nil && h.OnReply != nil {
		reply = h.OnReply(reply)
	}
	return reply, err
}

// hookedBus is a hub's NATS connection whose answers with data pass Hooks.OnEnvelope.
type hookedBus struct {
	channel.Bus
	hooks *atomic.Pointer[Hooks]
}

func (b hookedBus) PublishMsg(m *nats.Msg) error {
	if h := b.hooks.Load(); h != nil && h.OnEnvelope != nil && len(m.Data) > 0 && m.Header.Get(bus.HeaderErrorCode) == "" {
		m.Data = h.OnEnvelope(m.Data)
	}
	return b.Bus.PublishMsg(m)
}

// hookedGrants is a hub's grant check that calls Hooks.OnRelay for each view
// request it lets through.
type hookedGrants struct {
	channel.Grants
	hooks    *atomic.Pointer[Hooks]
	sessions *session.Store
	keys     keyspace.Keys
}

func (g hookedGrants) Vouched(requestID, sessionID, proof string, now time.Time) bool {
	ok := g.Grants.Vouched(requestID, sessionID, proof, now)
	if h := g.hooks.Load(); ok && h != nil && h.OnRelay != nil {
		// The grant is in its session's broker pass's slot (keyspace.Keys.Grant).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		sess, err := g.sessions.Get(ctx, sessionID)
		cancel()
		if err == nil {
			h.OnRelay(requestID, g.keys.Grant(sess.BrokerPassID, requestID))
		}
	}
	return ok
}
