package channel

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// ServeHTTP serves GET /v1/worker/channel: a WebSocket for one worker, authenticated by
// its worker pass (Authorization: Bearer). Two Authorization headers (400: which one is
// checked would depend on the reader; the API's listener refuses them before the hub
// too), a broker pass, an unknown pass or a stopped session's pass are refused before
// the upgrade, each with its row of the failure table (wire.FailChannel…) in the JSON
// error body of every /v1 answer. A 401 tells the worker its session ended; a 503, that
// the store could not say, and to retry.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Authorization")) > 1 {
		wire.WriteFailure(w, wire.FailTwoCredentials)
		return
	}
	token := auth.BearerToken(r.Header.Get("Authorization"))
	pass, err := h.cfg.Creds.VerifyPass(r.Context(), token, auth.RoleWorker)
	switch {
	case errors.Is(err, auth.ErrForbidden):
		wire.WriteFailure(w, wire.FailChannelForbidden)
		return
	case errors.Is(err, auth.ErrUnauthenticated):
		wire.WriteFailure(w, wire.FailChannelUnauthenticated)
		return
	case err != nil:
		h.cfg.Log.Error().Err(err).Str("reason", wire.FailChannelUnavailable.Row().Reason).Msg("verify worker pass")
		wire.WriteFailure(w, wire.FailChannelUnavailable)
		return
	}
	sess, err := h.cfg.Sessions.Get(r.Context(), pass.SessionID)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		// The store cannot be read (Redis down): the session may well be live, and a
		// 401 would send its worker home for good. The worker retries a 503.
		h.cfg.Log.Error().Err(err).Str("reason", wire.FailChannelUnavailable.Row().Reason).Msg("read session")
		wire.WriteFailure(w, wire.FailChannelUnavailable)
		return
	}
	if err != nil || h.cfg.Sessions.Status(sess) == session.Stopped {
		// A worker that was away past the idle timeout comes back to a stopped session:
		// record the stop (and revoke its passes) if nobody has yet, and send it home.
		if err == nil && !sess.Stopped {
			if _, serr := h.cfg.Sessions.Stop(r.Context(), sess.ID, "idle timeout"); serr == nil && h.cfg.Events != nil {
				h.cfg.Events.Publish(r.Context(), session.Event{AgentID: sess.AgentID, SessionID: sess.ID, Status: session.Stopped, At: h.cfg.Now()})
			}
		}
		wire.WriteFailure(w, wire.FailChannelSessionEnded)
		return
	}
	// The socket lives as long as the session: lift the server's read deadline now that
	// the worker is authenticated (the ping loop and read limits bound it from here).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ws, err := websocket.Accept(&handshakeRefusals{ResponseWriter: w}, r, &websocket.AcceptOptions{})
	if err != nil {
		return // Accept has answered, in the JSON error body (handshakeRefusals)
	}
	// The hello is small: a larger first message ends the socket before it is read
	// whole (the limit is raised once the hello passed).
	ws.SetReadLimit(jsonrpc.MaxHelloBytes)
	// The socket is served on a goroutine of its own and the handler returns: the
	// HTTP server's goroutine ends at the upgrade, and with it its deep stack (the
	// router's and the middlewares' frames) and the request's records. What a replica
	// keeps per worker is the socket's goroutine alone, whose stack the collector scans
	// every cycle: a third of its scan work with 5,000 workers (BENCHMARKS.md §7). The
	// route's request log line is written at the upgrade.
	go h.serve(context.WithoutCancel(r.Context()), ws, sess)
}

// handshakeFailures are the channel's rows for the statuses websocket.Accept refuses a
// handshake with: not a WebSocket's (426), malformed (400), from another origin (403),
// a method but GET (405, which the router answers first), a connection that cannot be
// hijacked (501) or failed to be (500).
var handshakeFailures = []wire.Failure{
	wire.FailChannelUpgradeRequired, wire.FailChannelBadHandshake, wire.FailChannelCrossOrigin,
	wire.FailMethodNotAllowed, wire.FailChannelNotUpgradable, wire.FailPanic,
}

// handshakeRefusals is the http.ResponseWriter websocket.Accept answers on: a refusal it
// writes (http.Error's plain text) goes out as the channel's row of the failure table
// for its status, in the JSON error body of every /v1 answer, its status unchanged.
// Anything else — the 101 (WriteHeaderNow) and the hijack (Unwrap) — passes through.
type handshakeRefusals struct {
	http.ResponseWriter
	refused bool // the refusal's body is written: Accept's own is dropped
}

// WriteHeader writes status, as the row of the failure table for it when it refuses.
func (w *handshakeRefusals) WriteHeader(status int) {
	if status < http.StatusBadRequest || w.refused {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	for _, f := range handshakeFailures {
		if f.Row().Status == status {
			w.refused = true
			wire.WriteFailure(w.ResponseWriter, f)
			return
		}
	}
	w.ResponseWriter.WriteHeader(status) // none of Accept's: passed through as it is
}

// Write drops the body of a refusal (written by WriteHeader).
func (w *handshakeRefusals) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// WriteHeaderNow writes the header of a writer that defers it until the body (gin's,
// the router's), which websocket.Accept asks for before it hijacks the connection:
// without it the 101 would never be sent.
func (w *handshakeRefusals) WriteHeaderNow() {
	if d, ok := w.ResponseWriter.(interface{ WriteHeaderNow() }); ok {
		d.WriteHeaderNow()
	}
}

// Unwrap is the server's own writer, which websocket.Accept hijacks.
func (w *handshakeRefusals) Unwrap() http.ResponseWriter { return w.ResponseWriter }
