package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/session"
)

// statusEvent is one server-sent event of the status feed.
type statusEvent struct {
	AgentID   string         `json:"agentId"`
	SessionID string         `json:"sessionId,omitempty"`
	Status    session.Status `json:"status"`
	Live      bool           `json:"live"`
}

// status serves GET /v1/agents/:id/worker/status: server-sent events telling a member of
// the agent's team when a session starts, goes idle or stops. The token travels in the
// Authorization header (the web app reads the stream with fetch), never in the URL.
func (s *Server) status(c *gin.Context) {
	ctx := c.Request.Context()
	user, err := s.cfg.JWT.Verify(c.Request.Context(), auth.BearerToken(c.GetHeader("Authorization")))
	if err != nil {
		s.abort(c, err)
		return
	}
	agentID := c.Param("id")
	if err := s.access.IsMember(ctx, user, agentID); err != nil {
		s.abort(c, err)
		return
	}
	// Listen before reading the current state, so no change falls between the two. A
	// change that did fall before the read arrives after it too: each event that repeats
	// the last one sent is left out (the stream tells changes; a second "running" after
	// the first is none, and a client would take it for one).
	l, err := s.cfg.Feed.Listen(agentID, user)
	if err != nil {
		s.abort(c, err)
		return
	}
	defer l.Close()
	cur := statusEvent{AgentID: agentID, Status: session.Stopped}
	sess, err := s.cfg.Sessions.Current(ctx, agentID)
	switch {
	case err == nil:
		cur = statusEvent{AgentID: agentID, SessionID: sess.ID, Status: s.cfg.Sessions.Status(sess), Live: true}
	case !errors.Is(err, session.ErrNoSession):
		s.abort(c, err)
		return
	}

	w := c.Writer
	// The stream is long-lived by design: lift the server's read deadline (which bounds
	// unauthenticated slow requests) now that the caller is known.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !writeEvent(w, cur) {
		return
	}
	heartbeat := time.NewTicker(StatusHeartbeat)
	defer heartbeat.Stop()
	end := time.NewTimer(StatusMaxStream)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-s.done:
			return
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.Flush()
		case ev := <-l.C:
			// Access may have been revoked since the stream opened.
			if err := s.access.IsMember(ctx, user, agentID); err != nil {
				return
			}
			next := statusEvent{AgentID: ev.AgentID, SessionID: ev.SessionID, Status: ev.Status, Live: ev.Status != session.Stopped}
			if next == cur {
				continue
			}
			if !writeEvent(w, next) {
				return
			}
			cur = next
		}
	}
}

func writeEvent(w gin.ResponseWriter, ev statusEvent) bool {
	b, err := json.Marshal(ev)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(w, "event: status\ndata: %s\n\n", b); err != nil {
		return false
	}
	w.Flush()
	return true
}
