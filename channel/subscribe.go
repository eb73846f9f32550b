package channel

import (
	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
)

// The session subscriptions' handlers run on a hub's dispatchers, not on a goroutine of
// each subscription: every held session's view and tool subjects deliver into one
// bounded queue (nats.go's ChanSubscribe) that the dispatchers drain, so a worker
// connection costs the replica one goroutine (its socket's; the hub pings from one loop,
// pinger.go) rather than four, ten thousand connections thirty thousand fewer
// (BENCHMARKS.md §7). A handler
// decides at once and hands any wait to a goroutine of its own, as it did on a
// subscription's goroutine; the dispatchers bound how many decide at once.
const (
	// dispatchers is how many goroutines of a hub run the subscriptions' handlers.
	dispatchers = 16
	// dispatchQueue bounds the messages waiting for a dispatcher, across every session
	// the hub holds. A message that finds it full is dropped (nats.go counts a slow
	// consumer), and its requester's deadline answers for it.
	dispatchQueue = 1024
)

// startDispatchers starts the hub's dispatchers once; Close ends them.
func (h *Hub) startDispatchers() {
	h.dispatchOnce.Do(func() {
		for range dispatchers {
			h.dispatchWG.Go(func() {
				for {
					select {
					case <-h.done:
						return
					case m := <-h.msgs:
						if f, ok := h.handlers.Load(m.Sub); ok {
							f.(nats.MsgHandler)(m)
						}
					}
				}
			})
		}
	})
}

func (c *Conn) subscribe() error {
	ns := c.hub.cfg.Namespace
	viewSubj, err := ns.Subject(bus.VerbView, c.session.ID)
	if err != nil {
		return err
	}
	toolSubj, err := ns.Subject(bus.VerbTool, c.session.ID)
	if err != nil {
		return err
	}
	c.hub.startDispatchers()
	var subs []*nats.Subscription
	for _, s := range []struct {
		subject string
		handler nats.MsgHandler
	}{{viewSubj, c.onView}, {toolSubj, c.onTool}} {
		sub, err := c.hub.cfg.NATS.ChanSubscribe(s.subject, c.hub.msgs)
		if err != nil {
			for _, sub := range subs {
				c.hub.unsubscribe(sub)
			}
			return err
		}
		c.hub.handlers.Store(sub, s.handler)
		subs = append(subs, sub)
	}
	c.mu.Lock()
	c.subs = subs
	c.mu.Unlock()
	// Make sure the server has the interest before the worker is told it is attached.
	return c.hub.cfg.NATS.FlushTimeout(subscribeTimeout)
}

func (c *Conn) unsubscribe() {
	c.mu.Lock()
	subs := c.subs
	c.subs = nil
	c.mu.Unlock()
	for _, s := range subs {
		c.hub.unsubscribe(s)
	}
}

// unsubscribe ends sub and forgets its handler: a message of it still queued is dropped.
func (h *Hub) unsubscribe(sub *nats.Subscription) {
	_ = sub.Unsubscribe()
	h.handlers.Delete(sub)
}
