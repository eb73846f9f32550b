package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/session"
)

// agentSummary is one agent of GET /v1/agents: who it is and how its session is now.
type agentSummary struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Status session.Status `json:"status"`
	Live   bool           `json:"live"`
}

// agentList is the body of GET /v1/agents.
type agentList struct {
	Agents []agentSummary `json:"agents"`
}

// agents serves GET /v1/agents: the agents of every team the signed-in member belongs to
// (a human JWT only; an organisation key is not a member of anything), each with its
// session's status as the status feed would report it now. Sorted by id.
func (s *Server) agents(c *gin.Context) {
	ctx := c.Request.Context()
	user, err := s.cfg.JWT.Verify(c.Request.Context(), auth.BearerToken(c.GetHeader("Authorization")))
	if err != nil {
		s.abort(c, err)
		return
	}
	visible, err := s.cfg.Dir.VisibleAgents(ctx, user)
	if err != nil {
		s.abort(c, err)
		return
	}
	out := agentList{Agents: make([]agentSummary, 0, len(visible))}
	for _, a := range visible {
		sum := agentSummary{ID: a.ID, Name: a.Name, Status: session.Stopped}
		sess, err := s.cfg.Sessions.Current(ctx, a.ID)
		switch {
		case err == nil:
			sum.Status, sum.Live = s.cfg.Sessions.Status(sess), true
		case !errors.Is(err, session.ErrNoSession):
			s.abort(c, err)
			return
		}
		out.Agents = append(out.Agents, sum)
	}
	c.JSON(http.StatusOK, out)
}
