package channel

import (
	"container/heap"
	"context"
	"math"
	"time"
)

// The hub pings its workers from one loop rather than a goroutine and a ticker per
// connection: a replica holding 10,000 idle workers keeps one goroutine for each, its
// socket's reader, and a ping lives only while it waits for its pong (the capacity
// bench, BENCHMARKS.md §7).

// pingLook is how often the ping loop looks for pings due. Often, so that the pings of
// a second leave in many small groups rather than one burst: with 5,000 connections
// pinged every 15 s, about 17 every 50 ms instead of 333 at once each second, a burst
// of writes that kept runnable goroutines — views among them — waiting up to 15 ms
// (BENCHMARKS.md §7). A look pops the pings due from a queue ordered by due time
// (pingQueue), so it costs what is due rather than a scan of every connection, which
// with 5,000 took 0.6 ms twenty times a second.
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

// schedulePing sets c's next ping at at (UnixNano).
func (h *Hub) schedulePing(c *Conn, at int64) {
	c.pingAt.Store(at)
	h.pingMu.Lock()
	heap.Push(&h.pings, pingEntry{at: at, c: c})
	h.pingMu.Unlock()
}

// duePings are the connections whose ping is due at now; none of them is due again
// until its ping is answered. An entry whose connection ended, or whose time is no
// longer the connection's, is dropped.
func (h *Hub) duePings(now time.Time) []*Conn {
	h.pingMu.Lock()
	defer h.pingMu.Unlock()
	var due []*Conn
	for len(h.pings) > 0 && h.pings[0].at <= now.UnixNano() {
		e := heap.Pop(&h.pings).(pingEntry)
		if e.c.ctx.Err() != nil || !e.c.pingAt.CompareAndSwap(e.at, pingNever) {
			continue
		}
		due = append(due, e.c)
	}
	return due
}

// pingEntry is one connection's next ping.
type pingEntry struct {
	at int64 // UnixNano
	c  *Conn
}

// pingQueue orders the pings by due time (container/heap): the earliest first. It
// holds one entry per connection whose ping is scheduled, and those of connections that
// ended until their time comes.
type pingQueue []pingEntry

func (q pingQueue) Len() int           { return len(q) }
func (q pingQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q pingQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *pingQueue) Push(x any)        { *q = append(*q, x.(pingEntry)) }
func (q *pingQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = pingEntry{} // the connection is not held by the spare slot
	*q = old[:len(old)-1]
	return e
}

// ping sends one ping and schedules the next PingInterval after the pong; a worker that
// does not answer within PingTimeout is dropped at once: without the close handshake,
// which would wait 5 s more for a close frame from a peer that reads nothing, and the
// socket's reader (it holds the read lock a handshake needs) for as long.
func (c *Conn) ping() {
	ctx, cancel := context.WithTimeout(c.ctx, c.hub.cfg.PingTimeout)
	defer cancel()
	err := c.ws.Ping(ctx)
	switch {
	case err == nil:
		c.hub.schedulePing(c, time.Now().Add(c.hub.cfg.PingInterval).UnixNano())
	case c.ctx.Err() == nil:
		c.log.Info().Msg("worker did not answer a ping")
		c.drop()
	}
}
