package channel

import (
	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
)

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
	vs, err := bus.Subscribe(c.hub.cfg.NATS, viewSubj, c.onView)
	if err != nil {
		return err
	}
	ts, err := bus.Subscribe(c.hub.cfg.NATS, toolSubj, c.onTool)
	if err != nil {
		_ = vs.Unsubscribe()
		return err
	}
	c.mu.Lock()
	c.subs = []*nats.Subscription{vs, ts}
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
		_ = s.Unsubscribe()
	}
}
