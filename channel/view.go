package channel

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// onView handles a view request from NATS. It runs on the subscription's goroutine, so
// it decides at once (image, the request's proof, pace, waiter slot) and hands the wait
// to a goroutine that the waiter bound limits. Nothing on the bus is believed on its
// word: a request no replica made for this session — a random id, another session's,
// one whose proof is stale, or one this connection relayed already — is refused
// without touching the worker, and whatever passes is paced.
func (c *Conn) onView(msg *nats.Msg) {
	if len(msg.Data) == 0 {
		// A ping: an empty request is answered empty by the owner, so that a harness
		// or an operator can tell that a session's subject is served, without touching
		// the worker. Only the replica's NATS role may publish to a view subject (the
		// operator's, debug and audit roles may not), and it may hear replies only
		// under its own inbox prefix; so an operator pings with the replica's
		// credential, user agentfy-replica and the password `agentfy secrets -out DIR`
		// wrote to DIR/replica/nats:
		//   nats --user agentfy-replica --password "$(cat DIR/replica/nats)" \
		//     --inbox-prefix agentfy.<deployment>.db<N>._INBOX.replica \
		//     req agentfy.<deployment>.db<N>.view.<sessionId> ''
		_ = bus.Respond(c.hub.cfg.NATS, msg, nil)
		return
	}
	// The relay's span continues the requester's trace, whose context the request's
	// headers carry; the worker gets it in the call's _meta.
	ctx, span := c.hub.tracer.Start(bus.TraceContext(c.ctx, msg), telemetry.SpanViewRelay,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(telemetry.MessagingProcess(c.hub.cfg.Namespace.SubjectTemplate(bus.VerbView))...),
		trace.WithAttributes(telemetry.AttrSessionID.String(c.session.ID), telemetry.AttrAgentID.String(c.session.AgentID)))
	refuse := func(reason, description string) {
		telemetry.End(span, telemetry.OutcomeUnavailable, reason)
		_ = bus.RespondError(c.hub.cfg.NATS, msg, reason, description)
	}
	requestID := string(msg.Data)
	if !envelope.ValidRequestID(requestID) {
		refuse(wire.ReasonBadRequest, "bad request id")
		return
	}
	if !c.session.HasFeature(wire.FeatureBrowserView) {
		refuse(wire.ReasonUnsupported, "worker image cannot relay views")
		return
	}
	if !c.hub.cfg.Grants.Vouched(requestID, c.session.ID, msg.Header.Get(bus.HeaderProof), time.Now()) ||
		c.relayed.holds(requestID) {
		c.hub.ViewsRefused.Add(1)
		refuse(wire.ReasonRefused, "no such grant")
		return
	}
	// One deadline from the request's arrival: the relay fits the owner's hop of the
	// budget.
	ctx, cancel := context.WithTimeout(ctx, wire.RelayTimeout)
	if c.relaying.Add(1) > MaxRelayWaiters {
		cancel()
		c.relaying.Add(-1)
		refuse(wire.ReasonBusy, "too many views waiting on this connection")
		return
	}
	if !c.relays.AllowN(c.hub.cfg.RelayClock(), 1) {
		cancel()
		c.relaying.Add(-1)
		c.hub.ViewsPaced.Add(1)
		refuse(wire.ReasonBusy, "too many views waiting for this session")
		return
	}
	if !c.relayed.first(requestID) {
		// Two copies of one request at once (a replay racing the original): one goes.
		cancel()
		c.relaying.Add(-1)
		c.hub.ViewsRefused.Add(1)
		refuse(wire.ReasonRefused, "no such grant")
		return
	}
	c.hub.ViewsRelayed.Add(1)
	go func() {
		defer cancel()
		res, err := c.call(ctx, jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: requestID, Meta: telemetry.RPCMeta(ctx)})
		// The worker answered (or will not): the waiter's place is free before the
		// requester hears of it, so a requester that has its reply never finds the place
		// still taken (a view right after it counted as two).
		c.relaying.Add(-1)
		if err != nil {
			code := viewReason(err)
			log := telemetry.WithTraceID(ctx, c.log)
			log.Debug().Str("reason", code).Msg("view relay failed")
			refuse(code, "view unavailable")
			return
		}
		// The envelope passes through as raw bytes: this replica cannot read it anyway.
		if err := bus.Respond(c.hub.cfg.NATS, msg, res); err != nil {
			// Too large for NATS, or the connection is down: say so at once rather than
			// let the requester wait out its deadline.
			log := telemetry.WithTraceID(ctx, c.log)
			log.Warn().Err(err).Int("bytes", len(res)).Msg("view reply not sent")
			refuse(wire.ReasonFailed, "reply not sent")
			return
		}
		telemetry.End(span, telemetry.OutcomeOK, "")
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

// relayRing remembers the last relayMemory request ids a connection relayed; the
// dispatchers (subscribe.go) may ask it at once.
type relayRing struct {
	mu   sync.Mutex
	ids  *[relayMemory][32]byte // made on the first relay; guarded by mu
	next int                    // guarded by mu
}

// holds reports whether id was relayed (a replay: refused before it takes any of the
// pace, so that replays cannot starve real views).
func (r *relayRing) holds(id string) bool {
	b, ok := requestBytes(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || r.ids == nil {
		return false
	}
	return slices.Contains(r.ids[:], b)
}

// first remembers id, in place of the oldest, unless it is there already; it reports
// whether it was new.
func (r *relayRing) first(id string) bool {
	b, ok := requestBytes(id)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = new([relayMemory][32]byte)
	}
	if slices.Contains(r.ids[:], b) {
		return false
	}
	r.ids[r.next] = b
	r.next = (r.next + 1) % relayMemory
	return true
}

// requestBytes is a request id's 32 bytes.
func requestBytes(id string) (b [32]byte, ok bool) {
	n, err := hex.Decode(b[:], []byte(id))
	return b, err == nil && n == len(b)
}
