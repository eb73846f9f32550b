package channel

import (
	"context"
	"slices"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// StatusSessionEnded is the WebSocket close code telling a worker that its session is
// over: it must not reconnect (wire.CloseSessionEnded).
const StatusSessionEnded websocket.StatusCode = wire.CloseSessionEnded

// Run checks the sessions this replica holds every Tick until ctx ends: it publishes
// running → idle changes and stops a session past the idle timeout, or stopped by the
// operator (`agentfy session stop`, in the store), closing its socket for good. Views
// never move the clock, so polling cannot keep a session alive. It also pings the
// workers (pinger.go).
func (h *Hub) Run(ctx context.Context) {
	pinging := make(chan struct{})
	go func() { defer close(pinging); h.pingLoop(ctx) }()
	defer func() { <-pinging }()
	t := time.NewTicker(h.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.check(ctx)
		}
	}
}

func (h *Hub) check(ctx context.Context) {
	h.mu.Lock()
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	// A pipelined read per batch: a replica holding thousands of sessions checks them
	// all in a few round trips, not one each; and the batches are spread over the tick,
	// so that the checks of ten thousand sessions are many short steps rather than one
	// long burst that every view arriving meanwhile waits behind (BENCHMARKS.md §7).
	batches := slices.Collect(slices.Chunk(conns, checkBatch))
	start := time.Now()
	var failed error
	for i, batch := range batches {
		if i > 0 && !sleepUntil(ctx, start.Add(h.cfg.Tick*time.Duration(i)/time.Duration(len(batches)))) {
			return
		}
		ids := make([]string, len(batch))
		for i, c := range batch {
			ids[i] = c.session.ID
		}
		cctx, cancel := context.WithTimeout(ctx, storeTimeout)
		live, err := h.cfg.Sessions.Liveness(cctx, ids)
		cancel()
		if err != nil {
			// Redis unreachable (decide next tick), or a read the replica's Redis user may
			// not make — which would stop no session ever: say so, once a tick.
			failed = err
			continue
		}
		for _, c := range batch {
			sess, ok := live[c.session.ID]
			if !ok {
				continue // gone from the store: decide next tick
			}
			st := h.cfg.Sessions.Status(sess)
			if st == session.Stopped {
				h.stop(ctx, c, sess, "idle timeout")
				continue
			}
			c.publish(ctx, st)
		}
	}
	if failed != nil {
		h.cfg.Log.Warn().Err(failed).Msg("session check failed")
	}
}

// checkBatch is how many held sessions one pipelined read of the session checks covers.
const checkBatch = 128

// sleepUntil waits until t, or until ctx ends (false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// stop records the stop (if not yet recorded), tells every replica and ends the socket.
func (h *Hub) stop(ctx context.Context, c *Conn, sess session.Session, reason string) {
	if !sess.Stopped {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		_, err := h.cfg.Sessions.Stop(sctx, sess.ID, reason)
		cancel()
		if err != nil {
			c.log.Warn().Err(err).Msg("stop session")
			return
		}
		c.log.Info().Str("reason", reason).Msg("session stopped")
	}
	c.publish(ctx, session.Stopped)
	// The close handshake may wait on a dead worker (bounded by the WebSocket library):
	// not on the session checks' time.
	go c.close(StatusSessionEnded, "session stopped")
}

// Close ends every worker socket with "going away", so that workers reconnect to another
// replica, and waits (until ctx ends) for their handlers to finish. Pending views
// on those sockets fail as "no channel".
func (h *Hub) Close(ctx context.Context) {
	h.mu.Lock()
	h.closed = true
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		// At once for all: each close handshake may wait on its peer.
		go c.close(websocket.StatusGoingAway, "replica shutting down")
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	h.closeOnce.Do(func() { close(h.done) })
	h.dispatchWG.Wait()
}
