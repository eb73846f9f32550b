package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// The routes a replica traces, as their spans are named: the two view routes and the
// consume route, the hops of a view. Nothing else is traced (health checks, metrics,
// the hour-long status streams, the worker's socket).
const (
	spanAgentView   = "GET " + AgentViewRoute
	spanPartnerView = "GET " + PartnerViewRoute
	spanConsume     = "POST " + wire.ConsumePath
)

// tracedRoute names the span of a request to a traced route, before the router runs
// (telemetry.Handler wraps the whole engine); "" for any other request.
func tracedRoute(r *http.Request) string {
	path := r.URL.Path
	switch r.Method {
	case http.MethodPost:
		if path == wire.ConsumePath {
			return spanConsume
		}
	case http.MethodGet:
		seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
		for _, s := range seg {
			if s == "" {
				return ""
			}
		}
		switch {
		case len(seg) == 5 && seg[0] == "v1" && seg[1] == "agents" && seg[3] == "worker" && seg[4] == "view":
			return spanAgentView
		case len(seg) == 7 && seg[0] == "v1" && seg[1] == "orgs" && seg[2] != "" && seg[3] == "agents" && seg[5] == "worker" && seg[6] == "view":
			return spanPartnerView
		}
	}
	return ""
}

// traceView gives a view's answer its traceresponse header (W3C Trace Context Level
// 2) when the request is sampled, so that a support engineer finds the trace from the
// browser's network tab, and gives the view's span its outcome and reason once the
// handler decided them.
func (s *Server) traceView(c *gin.Context) {
	ctx := c.Request.Context()
	if v := telemetry.TraceResponse(ctx); v != "" {
		c.Header(telemetry.HeaderTraceResponse, v)
	}
	c.Next()
	s.traceOutcome(c)
}

// traceConsume gives the consume route's span its outcome.
func (s *Server) traceConsume(c *gin.Context) {
	c.Next()
	s.traceOutcome(c)
}

// traceOutcome sets the outcome (ok for a consume redeemed) and reason of the request's
// span, if it records.
func (s *Server) traceOutcome(c *gin.Context) {
	span := trace.SpanFromContext(c.Request.Context())
	if !span.IsRecording() {
		return
	}
	outcome := c.GetString(ctxOutcome)
	if outcome == "" {
		outcome = telemetry.OutcomeOK
	}
	span.SetAttributes(semconv.HTTPRoute(c.FullPath()), telemetry.AttrOutcome.String(outcome))
	if reason := c.GetString(ctxReason); reason != "" {
		span.SetAttributes(telemetry.AttrReason.String(reason))
	}
}

// traceViewer names the agent and the viewer on the view's span: a member by user id,
// a partner by its organisation key's id, never a token.
func traceViewer(c *gin.Context, agentID, kind, viewerID string) {
	span := trace.SpanFromContext(c.Request.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.AttrAgentID.String(agentID))
	if viewerID != "" {
		span.SetAttributes(telemetry.AttrViewerKind.String(kind), telemetry.AttrViewerID.String(viewerID))
	}
}
