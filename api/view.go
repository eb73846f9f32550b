package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/view"
)

// agentView serves GET /v1/agents/:id/worker/view for a member of the agent's team.
func (s *Server) agentView(c *gin.Context) {
	user, err := s.cfg.JWT.Verify(c.Request.Context(), auth.BearerToken(c.GetHeader("Authorization")))
	if err != nil {
		s.abort(c, err)
		return
	}
	agentID := c.Param("id")
	s.renderView(c, agentID, UserCaller(user), s.memberAccess(user, agentID))
}

// partnerView serves GET /v1/orgs/:orgId/agents/:id/worker/view for an organisation key
// with worker:logs:read of the agent's organisation and environment.
func (s *Server) partnerView(c *gin.Context) {
	token := auth.BearerToken(c.GetHeader("Authorization"))
	key, err := s.cfg.Creds.VerifyOrgKey(c.Request.Context(), token)
	if err != nil {
		s.abort(c, err)
		return
	}
	agentID := c.Param("id")
	s.renderView(c, agentID, KeyCaller(key.ID), s.partnerAccess(token, key, c.Param("orgId"), agentID, auth.ScopeWorkerLogsRead))
}

// UserCaller and KeyCaller name who asks for a view, for the per-caller pace: a member
// of the agent's team, or an organisation key.
func UserCaller(userID string) string { return "user:" + userID }

// KeyCaller: see UserCaller.
func KeyCaller(keyID string) string { return "key:" + keyID }

// renderView answers a view of agentID for caller (who asks, for the per-caller pace).
func (s *Server) renderView(c *gin.Context, agentID, caller string, authorize view.Authorize) {
	res, err := s.cfg.Views.View(c.Request.Context(), agentID, caller, authorize)
	if err != nil {
		s.abort(c, err)
		return
	}
	if !res.Live {
		c.Set(ctxOutcome, "not_live")
	} else if res.Page == nil {
		c.Set(ctxOutcome, "no_tab")
	} else {
		c.Set(ctxOutcome, "frame")
	}
	// The body is written as Result made it: re-encoding would scan the frame again.
	b, err := res.MarshalJSON()
	if err != nil {
		s.abort(c, err)
		return
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", append(b, '\n'))
}

// memberAccess: the agent exists and the user is a member of its team. Unknown agent and
// foreign team are the same ErrNotFound. A first check after a refusal reads only the
// directory's generation while it is the one the refusal was based on (refusals.go).
// Every other check reads the truth, the agent's record and its team's member set, in
// one round trip when the team is known beforehand: the team the last check saw, or the
// directory's hint of the agent's record, names the set to read beside the record; if
// the record says another team, that team's set is read after it. A hint never decides
// an answer.
func (s *Server) memberAccess(userID, agentID string) view.Authorize {
	var team string // the agent's team as the last check saw it
	key := refusal{agentID, userID}
	return func(p redis.Pipeliner, recheck bool) func(context.Context) error {
		if !recheck {
			if r, ok := s.refused.get(key, time.Now()); ok {
				return s.rememberedRefusal(p, key, r)
			}
		}
		agent := s.cfg.Dir.QueueAgent(p, agentID)
		guess := team
		if guess == "" {
			if a, ok := s.cfg.Dir.AgentHint(agentID); ok {
				guess = a.TeamID
			}
		}
		var member func() (bool, error)
		if guess != "" {
			member = s.cfg.Dir.QueueIsMember(p, guess, userID)
		}
		return func(ctx context.Context) error {
			a, err := agent()
			if errors.Is(err, directory.ErrNotFound) {
				s.refused.add(key, refused{}, time.Now())
				return auth.ErrNotFound
			}
			if err != nil {
				return err
			}
			team = a.TeamID
			var ok bool
			if member != nil && a.TeamID == guess {
				ok, err = member()
			} else {
				ok, err = s.cfg.Dir.IsMember(ctx, a.TeamID, userID)
			}
			if err != nil {
				return err
			}
			if !ok {
				s.refused.add(key, refused{}, time.Now())
				return auth.ErrNotFound
			}
			return nil
		}
	}
}

// rememberedRefusal checks a remembered refusal against the directory's generation: the
// same generation refuses again; another (or one not known yet) reads the truth after
// the generation, and a refusal then is remembered with that generation.
func (s *Server) rememberedRefusal(p redis.Pipeliner, key refusal, r refused) func(context.Context) error {
	generation := s.cfg.Dir.QueueGeneration(p)
	return func(ctx context.Context) error {
		g, err := generation()
		if err != nil {
			return err
		}
		if r.known && r.generation == g {
			return auth.ErrNotFound
		}
		err = s.isMember(ctx, key.user, key.agent)
		if errors.Is(err, auth.ErrNotFound) {
			s.refused.add(key, refused{generation: g, known: true}, time.Now())
		} else if err == nil {
			s.refused.Delete(key)
		}
		return err
	}
}

// isMember is memberAccess's truth, read at once: the agent's record, then the member
// set of its team.
func (s *Server) isMember(ctx context.Context, userID, agentID string) error {
	agent, err := s.cfg.Dir.Agent(ctx, agentID)
	if errors.Is(err, directory.ErrNotFound) {
		return auth.ErrNotFound
	}
	if err != nil {
		return err
	}
	ok, err := s.cfg.Dir.IsMember(ctx, agent.TeamID, userID)
	if err != nil {
		return err
	}
	if !ok {
		return auth.ErrNotFound
	}
	return nil
}

// partnerAccess applies the check every partner route that reads a worker shares. The
// first check trusts the key the route has just verified and reads the agent; the
// re-check verifies the key again (it may have been revoked meanwhile) beside the
// agent's record, in one round trip.
func (s *Server) partnerAccess(token string, key auth.OrgKey, orgID, agentID, scope string) view.Authorize {
	return func(p redis.Pipeliner, recheck bool) func(context.Context) error {
		verified := func() (auth.OrgKey, error) { return key, nil }
		if recheck {
			verified = s.cfg.Creds.QueueVerifyOrgKey(p, token)
		}
		agent := s.cfg.Dir.QueueAgent(p, agentID)
		return func(context.Context) error {
			k, err := verified()
			if err != nil {
				return err
			}
			a, err := agent()
			if errors.Is(err, directory.ErrNotFound) {
				return auth.ErrNotFound
			}
			if err != nil {
				return err
			}
			return auth.AuthorizeOrgAgent(k, orgID, a.OrgID, a.Environment, scope)
		}
	}
}

// consume serves POST /v1/internal/worker-observations/consume: a broker redeems a view
// capability with its broker pass and receives the destination public key.
func (s *Server) consume(c *gin.Context) {
	ctx := c.Request.Context()
	token := auth.BearerToken(c.GetHeader("Authorization"))
	if token == "" {
		s.abort(c, auth.ErrUnauthenticated)
		return
	}
	pass, err := s.cfg.Creds.VerifyPass(ctx, token, auth.RoleBroker)
	if errors.Is(err, auth.ErrUnauthenticated) && s.isOtherCredential(ctx, token) {
		err = auth.ErrForbidden // a real credential, just not a broker pass
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	var req struct {
		RequestID string `json:"requestId"`
	}
	if !decodeStrict(c, MaxConsumeBody, &req) {
		return
	}
	pk, err := s.cfg.Caps.Consume(ctx, req.RequestID, pass.SessionID)
	if errors.Is(err, view.ErrCapabilityForged) {
		// Someone who is not a replica wrote it to Redis: the broker hears the one
		// answer of a capability it cannot have, the operator the reason.
		s.log(c).Warn().Str("reason", "forged_capability").Msg("capability refused: its MAC is no replica's")
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.forged.Inc()
		}
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"publicKey": pk})
}

// isOtherCredential reports whether token is a valid credential of another kind (a
// human JWT or an organisation key), which the consume route refuses with 403.
func (s *Server) isOtherCredential(ctx context.Context, token string) bool {
	if _, err := s.cfg.JWT.Verify(ctx, token); err == nil {
		return true
	}
	_, err := s.cfg.Creds.VerifyOrgKey(ctx, token)
	return err == nil
}
