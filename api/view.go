package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/view"
)

// agentView serves GET /v1/agents/:id/worker/view for a member of the agent's team.
func (s *Server) agentView(c *gin.Context) {
	ev := &decisionOf(c).event
	ev.ViewerKind = audit.ViewerMember
	agentID := c.Param("id")
	user, err := s.cfg.JWT.Verify(c.Request.Context(), auth.BearerToken(c.GetHeader("Authorization")))
	traceViewer(c, agentID, audit.ViewerMember, user)
	if err != nil {
		s.abort(c, err)
		return
	}
	ev.ViewerID = user
	s.renderView(c, agentID, UserCaller(user), s.access.Member(user, agentID))
}

// partnerView serves GET /v1/orgs/:orgId/agents/:id/worker/view for an organisation key
// with worker:logs:read of the agent's organisation and environment.
func (s *Server) partnerView(c *gin.Context) {
	ev := &decisionOf(c).event
	ev.ViewerKind = audit.ViewerPartner
	token := auth.BearerToken(c.GetHeader("Authorization"))
	key, err := s.cfg.Creds.VerifyOrgKey(c.Request.Context(), token)
	agentID := c.Param("id")
	if err != nil {
		traceViewer(c, agentID, audit.ViewerPartner, "")
		s.abort(c, err)
		return
	}
	ev.ViewerID = key.ID
	traceViewer(c, agentID, audit.ViewerPartner, key.ID)
	s.renderView(c, agentID, KeyCaller(key.ID), access.Partner(token, key, c.Param("orgId"), agentID, auth.ScopeWorkerLogsRead))
}

// UserCaller and KeyCaller name who asks for a view, for the per-caller pace: a member
// of the agent's team, or an organisation key.
func UserCaller(userID string) string { return "user:" + userID }

// KeyCaller: see UserCaller.
func KeyCaller(keyID string) string { return "key:" + keyID }

// renderView answers a view of agentID for caller (who asks, for the per-caller pace).
func (s *Server) renderView(c *gin.Context, agentID, caller string, check access.Check) {
	res, err := s.cfg.Views.View(c.Request.Context(), agentID, caller, check)
	d := decisionOf(c)
	ev := &d.event
	ev.Team, ev.Organisation, ev.Session = res.Seen.Team, res.Seen.Organisation, res.Seen.Session
	if err != nil {
		s.abort(c, err)
		return
	}
	if !res.Live {
		d.answer(outcomeNotLive, "", nil)
	} else if res.Page == nil {
		d.answer(outcomeNoTab, "", nil)
	} else {
		// No frame leaves unrecorded: it is served only once the audit stream has its
		// event, and discarded (503 audit_unavailable) when the stream does not say so
		// in time. Either way the publisher recorded the decision itself.
		ev.Agent = agentID
		d.audited = true
		if err := s.cfg.Audit.Frame(c.Request.Context(), *ev); err != nil {
			s.abort(c, err)
			return
		}
		d.answer(outcomeFrame, "", nil)
	}
	// The body is written as Result encodes it, in one write from encoding/json's pooled
	// buffer (its Page cannot fail to encode: strings and an int).
	c.Header("Content-Type", "application/json; charset=utf-8")
	c.Status(http.StatusOK)
	_ = res.WriteJSON(c.Writer) // a viewer gone is not an error of the view
}

// consume serves POST /v1/internal/worker-observations/consume: a broker redeems a view
// grant with its broker pass and receives the destination public key.
func (s *Server) consume(c *gin.Context) {
	ctx := c.Request.Context()
	token := auth.BearerToken(c.GetHeader("Authorization"))
	if token == "" {
		s.abort(c, auth.ErrUnauthenticated)
		return
	}
	pass, ok := auth.ClaimPass(token)
	if !ok {
		err := auth.ErrUnauthenticated
		if s.isOtherCredential(ctx, token) {
			err = auth.ErrForbidden // a real credential, just not a broker pass
		}
		s.abort(c, err)
		return
	}
	var req struct {
		RequestID string `json:"requestId"`
	}
	if !s.decodeConsume(c, token, &req) {
		return
	}
	// One script checks the pass and redeems the grant (Grants.Consume).
	pk, sessionID, err := s.cfg.Grants.Consume(ctx, pass, req.RequestID)
	if sessionID != "" {
		trace.SpanFromContext(ctx).SetAttributes(telemetry.AttrSessionID.String(sessionID))
	}
	if errors.Is(err, view.ErrGrantForged) {
		// Someone who is not a replica wrote it to Redis: the broker hears the one
		// answer of a grant it cannot have, the operator the reason.
		s.log(c).Warn().Str("reason", "forged_capability").Msg("grant refused: its MAC is no replica's")
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.CountForgedGrant()
		}
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"publicKey": pk})
}

// consumeRefusalTimeout bounds the pass check behind a refused consume body.
const consumeRefusalTimeout = 2 * time.Second

// decodeConsume reads the consume route's body. A body it refuses is answered 400 (or
// 415) only to a current broker pass: any other caller hears what its credential earns
// (401 or 403), as when the pass was checked before the body was read.
func (s *Server) decodeConsume(c *gin.Context, token string, v any) bool {
	refusal := readStrict(c, MaxConsumeBody, v)
	if refusal == nil {
		return true
	}
	// A refused body ends the connection's reads (answer.CloseIfBody), and with them, soon, the
	// request's context: the pass is checked under a deadline of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), consumeRefusalTimeout)
	defer cancel()
	if _, err := s.cfg.Creds.VerifyPass(ctx, token, auth.RoleBroker); err != nil {
		s.abort(c, err)
		return false
	}
	c.AbortWithStatusJSON(refusal.Status, refusal.Body())
	return false
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
