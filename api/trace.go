package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// tracedRoutes are the routes a replica traces, by the method and the template of the
// route the router matched (gin's FullPath), never by a reading of the path: the two
// view routes and the consume route, the hops of a view. Nothing else is traced
// (health checks, metrics, the hour-long status streams, the worker's socket).
var tracedRoutes = map[tracedRoute]bool{
	{http.MethodGet, AgentViewRoute}:    true,
	{http.MethodGet, PartnerViewRoute}:  true,
	{http.MethodPost, wire.ConsumePath}: true,
}

// tracedRoute is a key of tracedRoutes: a method and a route's template.
type tracedRoute struct{ method, template string }

// traceRoute is the first handler of every route when tracing is on. A request to a
// traced route runs the rest of its handlers inside its server span (traced:
// telemetry.EdgeHandler over runTraced), named by its method and the route's template
// ("GET /v1/agents/:id/worker/view", the request's Pattern), so that its log lines
// carry the span's trace id from the first; any other request goes on untraced.
func traceRoute(traced http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !tracedRoutes[tracedRoute{c.Request.Method, c.FullPath()}] {
			c.Next()
			return
		}
		r := c.Request.WithContext(context.WithValue(c.Request.Context(), ginContextKey{}, c))
		r.Pattern = c.Request.Method + " " + c.FullPath()
		traced.ServeHTTP(c.Writer, r)
	}
}

// ginContextKey holds a traced request's gin.Context in the request's context, for
// runTraced.
type ginContextKey struct{}

// runTraced runs the rest of a traced request's handlers (traceRoute) with r, the
// request in its span's context.
func runTraced(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(ginContextKey{}).(*gin.Context)
	if !ok {
		return
	}
	c.Request = r
	c.Next()
	// The handlers wrote through gin's writer, which w wraps: w learns the status here
	// (gin's writer takes the same status again as a no-op).
	w.WriteHeader(c.Writer.Status())
}

// traceView gives a view's answer its traceresponse header (W3C Trace Context Level 2)
// when the request is sampled and the viewer was let in, so that a support engineer
// finds the trace from the browser's network tab (traceResponder says when). The span's
// outcome and reason are the decision's (record).
func (s *Server) traceView(c *gin.Context) {
	if v := telemetry.TraceResponse(c.Request.Context()); v != "" {
		w := &traceResponder{ResponseWriter: c.Writer, value: v}
		c.Writer = w
		defer func() { c.Writer = w.ResponseWriter }()
		c.Next()
		// A handler that wrote nothing still answers through the responder.
		w.WriteHeaderNow()
	} else {
		c.Next()
	}
}

// traceResponder is a sampled view's writer. It adds the traceresponse header just
// before the answer's header is written, once the status is known, and only when
// traceViewer found the viewer authenticated and the answer is not a refusal of access
// (401, 403, 404): the trace id is the deployment's own, a handle for its support, not
// something to hand whoever knocks. A refused viewer's trace is still found from the
// answer's X-Request-Id, in the log line that carries its trace_id.
type traceResponder struct {
	gin.ResponseWriter
	value    string // the header's value (telemetry.TraceResponse)
	viewer   bool   // the viewer is authenticated (traceViewer)
	answered bool   // the header was decided
}

// answer decides the header, once, before the answer's header is written.
func (w *traceResponder) answer() {
	if w.answered || w.Written() {
		return
	}
	w.answered = true
	switch w.Status() {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return
	}
	if w.viewer {
		w.Header().Set(telemetry.HeaderTraceResponse, w.value)
	}
}

// WriteHeaderNow writes the answer's header, the traceresponse decided first.
func (w *traceResponder) WriteHeaderNow() {
	w.answer()
	w.ResponseWriter.WriteHeaderNow()
}

// Write writes the answer's body, the traceresponse decided first.
func (w *traceResponder) Write(b []byte) (int, error) {
	w.answer()
	return w.ResponseWriter.Write(b)
}

// WriteString writes the answer's body, the traceresponse decided first.
func (w *traceResponder) WriteString(s string) (int, error) {
	w.answer()
	return w.ResponseWriter.WriteString(s)
}

// Flush writes what is buffered, the traceresponse decided first.
func (w *traceResponder) Flush() {
	w.answer()
	w.ResponseWriter.Flush()
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
	span.SetAttributes(telemetry.AttrOutcome.String(outcome))
	if reason := c.GetString(ctxReason); reason != "" {
		span.SetAttributes(telemetry.AttrReason.String(reason))
	}
}

// traceViewer names the agent and the viewer on the view's span: a member by user id,
// a partner by its organisation key's id, never a token. A viewer id is set only once
// the credential was verified: the view's answer may then carry traceresponse
// (traceResponder).
func traceViewer(c *gin.Context, agentID, kind, viewerID string) {
	if w, ok := c.Writer.(*traceResponder); ok {
		w.viewer = viewerID != ""
	}
	span := trace.SpanFromContext(c.Request.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.AttrAgentID.String(agentID))
	if viewerID != "" {
		span.SetAttributes(telemetry.AttrViewerKind.String(kind), telemetry.AttrViewerID.String(viewerID))
	}
}

// traceTrustTimeout bounds the broker pass check of continuesTrace: it only chooses a
// span's parent, and must not spend much of the broker's consume budget
// (wire.BrokerConsumeTimeout) on a slow Redis, where the redemption fails anyway.
const traceTrustTimeout = 500 * time.Millisecond

// continuesTrace reports whether a traced request continues its caller's trace context
// (telemetry.EdgeHandler, which asks only about a request that carries one) instead of
// starting a trace of this deployment's own:
//
//   - a request from the platform's trusted front end (Config.TrustedTraceSources);
//   - the consume route called with a current broker pass. A broker calls it inside a
//     view whose context came from the view's own span, through NATS, the worker's
//     _meta and the broker's socket, so the consume span belongs under the broker's
//     call. The pass is checked here because the parent is chosen before the span
//     starts; the route checks it again in the one script that redeems the grant.
//
// Anyone else is outside the deployment, and anything it sends as a trace context is
// dropped: an outsider who asks a view, or calls the consume route without a broker's
// pass, neither chooses the trace nor its sampling.
func (s *Server) continuesTrace(r *http.Request) bool {
	if s.cfg.TrustedTraceSources.Contains(r) {
		return true
	}
	if r.Pattern != http.MethodPost+" "+wire.ConsumePath { // the route traceRoute matched
		return false
	}
	token := auth.BearerToken(r.Header.Get("Authorization"))
	if _, ok := auth.ClaimPass(token); !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), traceTrustTimeout)
	defer cancel()
	_, err := s.cfg.Creds.VerifyPass(ctx, token, auth.RoleBroker)
	return err == nil
}
