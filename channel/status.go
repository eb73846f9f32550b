package channel

import (
	"context"

	"github.com/agentfy/agentfy/session"
)

// current is the connection's session as the store has it now, or as the connection
// last saw it when the store cannot be read within storeTimeout.
func (c *Conn) current(ctx context.Context) session.Session {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	s, err := c.hub.cfg.Sessions.Get(ctx, c.session.ID)
	if err != nil {
		return c.session
	}
	return s
}

// publish sends a status event when the status changed since the last one.
func (c *Conn) publish(ctx context.Context, st session.Status) {
	c.mu.Lock()
	changed := c.status != st
	c.status = st
	c.mu.Unlock()
	if changed && c.hub.cfg.Events != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		defer cancel()
		c.hub.cfg.Events.Publish(ctx, session.Event{AgentID: c.session.AgentID, SessionID: c.session.ID, Status: st, At: c.hub.cfg.Now()})
	}
}
