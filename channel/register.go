package channel

import (
	"context"

	"github.com/coder/websocket"
)

// register makes c the session's connection on this replica, closing an older one (a
// worker that reconnected before its old socket timed out).
func (h *Hub) register(c *Conn) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	old := h.conns[c.session.ID]
	h.conns[c.session.ID] = c
	h.wg.Add(1)
	h.mu.Unlock()
	if old != nil {
		// Its close handshake may wait on a dead peer: not on this connection's time.
		go old.close(websocket.StatusPolicyViolation, "replaced by a newer connection")
	}
	return true
}

func (h *Hub) unregister(ctx context.Context, c *Conn) {
	h.mu.Lock()
	current := h.conns[c.session.ID] == c
	if current {
		delete(h.conns, c.session.ID)
	}
	h.mu.Unlock()
	c.unsubscribe()
	// A connection replaced by a newer one of the same session on this replica leaves
	// the owner alone: it names this replica, and the newer connection holds it now.
	if current {
		// The connection's context is over by now; the detach gets a short one of its own.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachTimeout)
		defer cancel()
		if err := h.cfg.Sessions.Detach(dctx, c.session.ID, h.cfg.ReplicaID); err != nil {
			c.log.Warn().Err(err).Msg("detach session")
		}
	}
	// A lost socket never stops the session (the seed: socket loss is unavailable, not
	// stopped): views answer 503 until the worker reconnects to any replica, and only the
	// stop command, the idle timeout or the worker's own end-of-session close stop it.
	h.wg.Done()
}
