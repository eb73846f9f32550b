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
)

// ServeHTTP serves GET /v1/worker/channel: a WebSocket for one worker, authenticated by
// its worker pass (Authorization: Bearer). Two Authorization headers (400: which one is
// checked would depend on the reader; the API's listener refuses them before the hub
// too), a broker pass, an unknown pass or a stopped session's pass are refused before
// the upgrade.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Authorization")) > 1 {
		http.Error(w, "one Authorization header", http.StatusBadRequest)
		return
	}
	token := auth.BearerToken(r.Header.Get("Authorization"))
	pass, err := h.cfg.Creds.VerifyPass(r.Context(), token, auth.RoleWorker)
	switch {
	case errors.Is(err, auth.ErrForbidden):
		http.Error(w, "worker pass required", http.StatusForbidden)
		return
	case errors.Is(err, auth.ErrUnauthenticated):
		http.Error(w, "worker pass required", http.StatusUnauthorized)
		return
	case err != nil:
		h.cfg.Log.Error().Err(err).Msg("verify worker pass")
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	sess, err := h.cfg.Sessions.Get(r.Context(), pass.SessionID)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		// The store cannot be read (Redis down): the session may well be live, and a
		// 401 would send its worker home for good. The worker retries a 503.
		h.cfg.Log.Error().Err(err).Msg("read session")
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
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
		http.Error(w, "session is not live", http.StatusUnauthorized)
		return
	}
	// The socket lives as long as the session: lift the server's read deadline now that
	// the worker is authenticated (the ping loop and read limits bound it from here).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{})
	if err != nil {
		return // Accept has answered
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
