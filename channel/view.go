package channel

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// Hooks are the hub's one testing seam: the reliability suite and the package's tests
// set them (SetHooks); production never does. Each may be nil.
type Hooks struct {
	// OnEnvelope may replace a worker's sealed answer before it is relayed (the
	// reliability suite tampers with envelopes through it).
	OnEnvelope func([]byte) []byte
	// OnRelay runs once a view request's capability checked out, before the request is
	// relayed to the worker (the reliability suite rewrites the capability in Redis
	// there, as a Redis writer racing the broker would).
	OnRelay func(requestID string)
	// OnHello runs before a hello is answered.
	OnHello func(*Conn)
}

// SetHooks installs the testing seam's hooks; nil removes them.
func (h *Hub) SetHooks(k *Hooks) { h.hooks.Store(k) }

// RefillPace fills the relay pace of every connection, as if each had been quiet for a
// while: part of the testing seam, for the harness's OpenGate (which stands in for the
// 5 s between two polls by clearing the gate) and the package's tests; production never
// calls it.
func (h *Hub) RefillPace() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.relays.Store(rate.NewLimiter(ObservationRate, ObservationBurst))
	}
}

// onView handles a view request from NATS. It runs on the subscription's goroutine, so
// it decides at once (image, capability in Redis, pace, waiter slot) and hands the wait
// to a goroutine that the waiter bound limits. Nothing on the bus is believed on its
// word: a request whose capability no replica stored — a random id, or one already
// redeemed — is refused without touching the worker, and whatever passes is paced.
func (c *Conn) onView(msg *nats.Msg) {
	if len(msg.Data) == 0 {
		// A ping: an empty request is answered empty by the owner, so that a harness
		// or an operator can tell that a session's subject is served (nats req
		// agentfy.<deployment>.db<N>.view.<sessionId> ''), without touching the worker.
		_ = bus.Respond(msg, nil)
		return
	}
	requestID := string(msg.Data)
	if !envelope.ValidRequestID(requestID) {
		_ = bus.RespondError(msg, wire.ReasonBadRequest, "bad request id")
		return
	}
	if !c.session.HasCapability(wire.CapabilityBrowserView) {
		_ = bus.RespondError(msg, wire.ReasonUnsupported, "worker image cannot relay views")
		return
	}
	// One deadline from the request's arrival: the check and the relay together fit
	// the owner's hop of the budget.
	ctx, cancel := context.WithTimeout(c.ctx, ObservationTimeout)
	cctx, ccancel := context.WithTimeout(ctx, GrantCheckTimeout)
	ok, err := c.hub.cfg.Grants.Pending(cctx, requestID, c.session.ID)
	ccancel()
	switch {
	case err != nil:
		cancel()
		_ = bus.RespondError(msg, wire.ReasonFailed, "cannot check the capability")
		return
	case !ok:
		cancel()
		c.hub.ViewsRefused.Add(1)
		_ = bus.RespondError(msg, wire.ReasonRefused, "no such capability")
		return
	}
	if k := c.hub.hooks.Load(); k != nil && k.OnRelay != nil {
		k.OnRelay(requestID)
	}
	if c.observing.Add(1) > MaxObservationWaiters {
		cancel()
		c.observing.Add(-1)
		_ = bus.RespondError(msg, wire.ReasonBusy, "too many observations on this connection")
		return
	}
	if !c.relays.Load().Allow() {
		cancel()
		c.observing.Add(-1)
		c.hub.ViewsPaced.Add(1)
		_ = bus.RespondError(msg, wire.ReasonBusy, "too many observations for this session")
		return
	}
	c.hub.ViewsRelayed.Add(1)
	go func() {
		defer cancel()
		res, err := c.call(ctx, jsonrpc.MethodBrowserView, jsonrpc.BrowserViewParams{RequestID: requestID})
		// The worker answered (or will not): the waiter's place is free before the
		// requester hears of it, so a requester that has its reply never finds the place
		// still taken (a view right after it counted as two).
		c.observing.Add(-1)
		if err != nil {
			code := viewReason(err)
			c.log.Debug().Str("reason", code).Msg("view relay failed")
			_ = bus.RespondError(msg, code, "view unavailable")
			return
		}
		// The envelope passes through as raw bytes: this replica cannot read it anyway.
		if k := c.hub.hooks.Load(); k != nil && k.OnEnvelope != nil {
			res = k.OnEnvelope(res)
		}
		if err := bus.Respond(msg, res); err != nil {
			// Too large for NATS, or the connection is down: say so at once rather than
			// let the requester wait out its deadline.
			c.log.Warn().Err(err).Int("bytes", len(res)).Msg("view reply not sent")
			_ = bus.RespondError(msg, wire.ReasonFailed, "reply not sent")
		}
	}()
}

// viewReason is the wire reason of a failed relay: the worker's (which carries the
// broker's) as it came, or what this replica saw of the channel.
func viewReason(err error) string {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		return jsonrpc.ReasonOf(rpcErr)
	case errors.Is(err, context.DeadlineExceeded):
		return wire.ReasonTimeout
	case errors.Is(err, errConnClosed):
		return wire.ReasonNoChannel
	}
	return wire.ReasonFailed
}
