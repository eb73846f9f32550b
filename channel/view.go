package channel

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// onView handles a view request from NATS. It runs on the subscription's goroutine, so
// it decides at once (image, grant in Redis, pace, waiter slot) and hands the wait
// to a goroutine that the waiter bound limits. Nothing on the bus is believed on its
// word: a request whose grant no replica stored — a random id, or one already
// redeemed — is refused without touching the worker, and whatever passes is paced.
func (c *Conn) onView(msg *nats.Msg) {
	if len(msg.Data) == 0 {
		// A ping: an empty request is answered empty by the owner, so that a harness
		// or an operator can tell that a session's subject is served (nats req
		// agentfy.<deployment>.db<N>.view.<sessionId> ''), without touching the worker.
		_ = bus.Respond(c.hub.cfg.NATS, msg, nil)
		return
	}
	// The relay's span continues the requester's trace, whose context the request's
	// headers carry; the worker gets it in the call's _meta.
	ctx, span := c.hub.tracer.Start(bus.TraceContext(c.ctx, msg), telemetry.SpanViewRelay,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"), semconv.MessagingOperationName("process"),
			telemetry.AttrSessionID.String(c.session.ID), telemetry.AttrAgentID.String(c.session.AgentID),
		))
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
	// One deadline from the request's arrival: the check and the relay together fit
	// the owner's hop of the budget.
	ctx, cancel := context.WithTimeout(ctx, wire.RelayTimeout)
	cctx, ccancel := context.WithTimeout(ctx, wire.OwnerCheckTimeout)
	ok, err := c.hub.cfg.Grants.Redeemable(cctx, requestID, c.session.ID)
	ccancel()
	switch {
	case err != nil:
		cancel()
		refuse(wire.ReasonFailed, "cannot check the capability")
		return
	case !ok:
		cancel()
		c.hub.ViewsRefused.Add(1)
		refuse(wire.ReasonRefused, "no such capability")
		return
	}
	if c.relaying.Add(1) > MaxRelayWaiters {
		cancel()
		c.relaying.Add(-1)
		refuse(wire.ReasonBusy, "too many observations on this connection")
		return
	}
	if !c.relays.AllowN(c.hub.cfg.RelayClock(), 1) {
		cancel()
		c.relaying.Add(-1)
		c.hub.ViewsPaced.Add(1)
		refuse(wire.ReasonBusy, "too many observations for this session")
		return
	}
	c.hub.ViewsRelayed.Add(1)
	go func() {
		defer cancel()
		res, err := c.call(ctx, jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: requestID, Meta: jsonrpc.TraceMeta(ctx)})
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
