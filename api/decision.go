package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// A view's outcomes, one name each for the metric's outcome label, the audit event's
// outcome and the span's agentfy.outcome. The refusals' names are their answers' codes
// (package answer); a failure's is "unavailable" (or "identity_unavailable") with a reason
// from wire's table.
const (
	outcomeFrame   = audit.OutcomeFrame // 200 with a page
	outcomeNoTab   = "no_tab"           // 200 {"live":true,"page":null}
	outcomeNotLive = "not_live"         // 200 {"live":false}
	// outcomeCancelled: the viewer went away before the answer (nginx's 499): no
	// answer, no failure of the view's.
	outcomeCancelled = "cancelled"
	// outcomeOther: the handler gave no answer of its own (a panic, answered 500).
	outcomeOther = "other"
)

// statusCancelled is the status recorded for outcomeCancelled (nginx's 499, "client
// closed request"); nothing is written.
const statusCancelled = 499

// viewOutcomes is the table of a view route's outcomes and their statuses: the answers
// of a 200, the refusals, each failure's status from the failure table (wire.Failure),
// the viewer gone and the handler's panic. Every series of agentfy_view_requests_total is one of
// them; the alert on failing views divides by those that could have produced a frame
// (couldFrame).
func viewOutcomes() []metrics.ViewAnswer {
	answers := []metrics.ViewAnswer{{Status: http.StatusOK, Outcome: outcomeFrame}, {Status: http.StatusOK, Outcome: outcomeNoTab}, {Status: http.StatusOK, Outcome: outcomeNotLive}}
	for _, e := range []answer.Error{answer.Unauthenticated, answer.Forbidden, answer.AgentNotFound, answer.RateLimited, answer.IdentityUnavailable} {
		answers = append(answers, metrics.ViewAnswer{Status: e.Status, Outcome: e.Code})
	}
	for _, reason := range wire.Labels() {
		e := answer.Unavailable(reason)
		if a := (metrics.ViewAnswer{Status: e.Status, Outcome: e.Code}); reason != wire.ReasonIdentityUnavailable && !slices.Contains(answers, a) {
			answers = append(answers, a)
		}
	}
	return append(answers, metrics.ViewAnswer{Status: statusCancelled, Outcome: outcomeCancelled}, metrics.ViewAnswer{Status: answer.Panic.Status, Outcome: outcomeOther})
}

// NewMetrics is a replica's metrics (metrics.New) with the series of its view routes
// made up front: every answer they give (viewOutcomes) and every reason of a 503.
// pending, waiters, workers and listeners are read at scrape time (metrics.Config).
func NewMetrics(pending, waiters, workers, listeners func() int) *metrics.Registry {
	return metrics.New(metrics.Config{
		ViewRoutes: []string{AgentViewRoute, PartnerViewRoute}, ViewAnswers: viewOutcomes(),
		Pending: pending, Waiters: waiters, Workers: workers, Listeners: listeners,
	})
}

// decision is the one record of a view request: the handler fills it once — who asked,
// about which agent, what the view learnt, the outcome and why — and record turns it,
// at the request's end (a panic's too), into the log line, the metrics, the span's
// attributes and the audit event, so that the four never disagree.
type decision struct {
	start time.Time
	// event is the audit event's content: the viewer, the agent and what the view
	// learnt of it, the outcome and the reason.
	event audit.View
	// err is the error behind a refusal or a failure, for the log line alone.
	err error
	// audited: the handler published the event itself (a frame's, acknowledged before
	// the frame was written).
	audited bool
}

// ctxDecision is a view request's *decision.
const ctxDecision = "agentfy.decision"

// decisionOf is the request's decision (a throwaway one outside a view route).
func decisionOf(c *gin.Context) *decision {
	if d, ok := c.Get(ctxDecision); ok {
		return d.(*decision)
	}
	return &decision{}
}

// decide gives a view request its decision record and records it when the request
// ends, however it ends.
func (s *Server) decide(c *gin.Context) {
	d := &decision{start: time.Now()}
	c.Set(ctxDecision, d)
	defer func() {
		if p := recover(); p != nil {
			d.event.Outcome, d.event.Reason = outcomeOther, ""
			s.record(c, d, answer.Panic.Status)
			panic(p) // gin's recovery answers it
		}
		s.record(c, d, c.Writer.Status())
	}()
	c.Next()
}

// answer sets the decision's outcome: a 200's, or a refusal's or failure's (abort).
func (d *decision) answer(outcome, reason string, err error) {
	d.event.Outcome, d.event.Reason, d.err = outcome, reason, err
}

// viewerGone reports whether err ended a view because its viewer went away: its
// request's context was cancelled, which no deadline of the view's does.
func viewerGone(c *gin.Context, err error) bool {
	return errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil
}

// record writes the decision out: one log line, the route's metrics, the span's
// attributes and, unless the handler did, the audit event.
func (s *Server) record(c *gin.Context, d *decision, status int) {
	ev := &d.event
	ev.Agent = c.Param("id")
	if ev.Outcome == "" {
		ev.Outcome = outcomeOther
		if c.Request.Context().Err() != nil {
			ev.Outcome = outcomeCancelled
		}
	}
	if ev.Outcome == outcomeCancelled {
		status = statusCancelled
	}
	route := c.FullPath()
	took := time.Since(d.start)

	level := zerolog.DebugLevel
	switch {
	case ev.Outcome == outcomeCancelled:
		level = zerolog.InfoLevel
	case status >= http.StatusInternalServerError:
		level = zerolog.WarnLevel
	}
	line := s.log(c).WithLevel(level).Str("route", route).Int("status", status).Str("outcome", ev.Outcome).
		Str("viewerKind", ev.ViewerKind).Str("agent", ev.Agent).Dur("took", took)
	if ev.Reason != "" {
		line = line.Str("reason", ev.Reason)
	}
	if d.err != nil && level >= zerolog.InfoLevel {
		line = line.Err(d.err)
	}
	line.Msg("view")

	if m := s.cfg.Metrics; m != nil {
		m.CountView(metrics.View{
			Route: route, Status: status, Outcome: ev.Outcome, Reason: ev.Reason,
			Gated: ev.Outcome == answer.RateLimited.Code, Took: took,
		})
	}

	if span := trace.SpanFromContext(c.Request.Context()); span.IsRecording() {
		span.SetAttributes(telemetry.AttrOutcome.String(ev.Outcome))
		if ev.Reason != "" {
			span.SetAttributes(telemetry.AttrReason.String(ev.Reason))
		}
	}

	if !d.audited && s.cfg.Audit != nil {
		s.cfg.Audit.View(c.Request.Context(), *ev)
	}
}
