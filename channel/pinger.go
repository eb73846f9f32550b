package channel

import (
	"context"
	"math"
	"time"

	"github.com/coder/websocket"
)

// The hub pings its workers from one loop rather than a goroutine and a ticker per
// connection: a replica holding 10,000 idle workers keeps one goroutine for each, its
// socket's reader, and a ping lives only while it waits for its pong (the capacity
// bench, BENCHMARKS.md §7).

// pingLook is how often the ping loop looks for pings due. Often, so that the pings of
// a second leave in many small groups rather than one burst: with 5,000 connections
// pinged every 15 s, about 17 every 50 ms instead of 333 at once each second, a burst
// of writes that kept runnable goroutines — views among them — waiting up to 15 ms
// (BENCHMARKS.md §7). A look is a scan of the connections' due times, microseconds.
const pingLook = 50 * time.Millisecond

// pingLoop pings every connection whose ping is due, each PingInterval after its last
// (the first one PingInterval after its hello), until ctx ends.
func (h *Hub) pingLoop(ctx context.Context) {
	t := time.NewTicker(min(pingLook, h.cfg.PingInterval/4))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, c := range h.duePings(now) {
				go c.ping() //nolint:contextcheck // a ping lives with its connection (c.ctx), not with the loop
			}
		}
	}
}

// pingNever is a connection's pingAt while its ping waits for the pong, and after one
// went unanswered.
const pingNever = math.MaxInt64

// duePings are the connections whose ping is due at now; none of them is due again
// until its ping is answered.
func (h *Hub) duePings(now time.Time) []*Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	var due []*Conn
	for _, c := range h.conns {
		if at := c.pingAt.Load(); at != 0 && at <= now.UnixNano() {
			c.pingAt.Store(pingNever)
			due = append(due, c)
		}
	}
	return due
}

// ping sends one ping and schedules the next PingInterval after the pong; a worker that
// does not answer within PingTimeout is dropped.
func (c *Conn) ping() {
	ctx, cancel := context.WithTimeout(c.ctx, c.hub.cfg.PingTimeout)
	defer cancel()
	err := c.ws.Ping(ctx)
	switch {
	case err == nil:
		c.pingAt.Store(time.Now().Add(c.hub.cfg.PingInterval).UnixNano())
	case c.ctx.Err() == nil:
		c.log.Info().Msg("worker did not answer a ping")
		c.close(websocket.StatusGoingAway, "ping timeout")
	}
}
