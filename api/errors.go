package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/wire"
)

// abort renders err through the public API's table (answer.Public), logging what the
// client does not see of a 5xx with its reason (answer.Reason).
func (s *Server) abort(c *gin.Context, err error) {
	e := answer.Public(err)
	if d, ok := c.Get(ctxDecision); ok {
		// A view's refusal or failure: its decision says it, once (record).
		d := d.(*decision)
		switch {
		case viewerGone(c, err):
			d.answer(outcomeCancelled, "", err)
		case e.Status >= http.StatusInternalServerError:
			d.answer(e.Code, answer.Reason(err), err)
		default:
			d.answer(e.Code, "", err)
		}
	}
	s.answerError(c, e, err)
}

// answerError writes e as the answer to err: its Retry-After, the log line of a 5xx
// outside the view routes (a view's decision writes its own), and its body.
func (s *Server) answerError(c *gin.Context, e answer.Error, err error) {
	if wait := e.Row().RetryAfter; wait > 0 {
		c.Header("Retry-After", answer.RetryAfter(err, wait))
	}
	if e.Failure == wire.FailIdentityUnavailable && s.cfg.Metrics != nil {
		s.cfg.Metrics.CountIdentityUnavailable(c.FullPath())
	}
	if _, view := c.Get(ctxDecision); !view {
		if e.Status >= http.StatusInternalServerError {
			reason := answer.Reason(err)
			c.Set(ctxReason, reason)
			s.log(c).Warn().Err(err).Str("reason", reason).Msg("request failed")
		}
		c.Set(ctxOutcome, e.Code)
	}
	answer.CloseIfBody(c)
	c.AbortWithStatusJSON(e.Status, e.Body())
}
