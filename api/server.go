// Package api is the HTTP edge of an API replica (Gin): it parses requests, calls the
// services, and renders their results. Every error's answer is a row of the failure
// table (wire.Failure), looked up in one place (package answer: the public API's errors
// and the admin API's, and a view's failure by its reason). Routes:
//
//	GET  /v1/agents                                     human JWT           the member's agents
//	GET  /v1/agents/:id/worker/view                     human JWT           view.Result
//	GET  /v1/orgs/:orgId/agents/:id/worker/view         org key             view.Result
//	GET  /v1/agents/:id/worker/status                   human JWT           server-sent events
//	POST /v1/internal/worker-observations/consume       broker pass         {"publicKey"}
//	GET  /v1/worker/channel                             worker pass         WebSocket, JSON-RPC 2.0
//	GET  /healthz, /readyz, /openapi.yaml, and the web app at /
//
// The replica's metrics are not among them: /metrics here is an unknown path like any
// other. They are served on a listener of their own (metrics.Registry.ListenerHandler),
// the admin API on another (package admin).
package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// Config wires a Server. Every field but WebApp, Metrics, Audit and Ready is required.
type Config struct {
	Log      zerolog.Logger
	JWT      *auth.Verifier
	Creds    *auth.Store
	Dir      *directory.Store
	Sessions *session.Store
	Views    *view.Service
	Grants   *view.Grants
	Hub      *channel.Hub
	Feed     *feed.Feed
	// Metrics counts the view routes' answers (NewMetrics); nil counts none. The routes
	// here never serve it (metrics.Registry.ListenerHandler does, on a listener of its
	// own).
	Metrics *metrics.Registry
	// Audit publishes a view decision's event; nil publishes none.
	Audit *audit.Publisher
	// OpenAPI is the document served at /openapi.yaml.
	OpenAPI []byte
	// WebApp holds the static web app served at /; nil serves none.
	WebApp fs.FS
	// Ready reports whether Redis and NATS answer (for /readyz).
	Ready func(ctx context.Context) error
	// Tracer, when set, traces the view routes and the consume route (a server span
	// each: the root of a new trace, unless continuesTrace continues the caller's);
	// nil means tracing off.
	Tracer trace.TracerProvider
	// TrustedTraceSources are the addresses of a front end whose trace context the
	// traced routes continue (telemetry.TrustedSources); empty means none: every
	// request from outside starts a trace of the deployment's own.
	TrustedTraceSources telemetry.TrustedSources
}

// Server is one replica's HTTP edge.
type Server struct {
	cfg  Config
	eng  *gin.Engine
	done chan struct{} // closed when the replica shuts down: ends status streams
	once sync.Once

	access *access.Rules // who may see an agent
}

// Shutdown ends the long-lived status streams, so a graceful shutdown need not wait an
// hour for them. Clients reconnect to another replica.
func (s *Server) Shutdown() { s.once.Do(func() { close(s.done) }) }

// The view routes, as they are registered and as the metrics' route label names them.
const (
	AgentViewRoute   = "/v1/agents/:id/worker/view"
	PartnerViewRoute = "/v1/orgs/:orgId/agents/:id/worker/view"
)

// Limits of the edge.
const (
	// MaxConsumeBody bounds the consume request body.
	MaxConsumeBody = 1 << 10 // 1 KiB
	// StatusHeartbeat is how often the status feed sends a comment to keep proxies open.
	StatusHeartbeat = 15 * time.Second
	// StatusMaxStream ends a status stream after this long; the client reconnects.
	StatusMaxStream = time.Hour
)

const (
	ctxLogger = "agentfy.log"
	// ctxOutcome and ctxReason are a consume request's outcome (its error's code) and,
	// for a 503, why (answer.Reason), for its span; a view's are its decision's.
	ctxOutcome = "agentfy.outcome"
	ctxReason  = "agentfy.reason"
)

// New builds the routes.
func New(cfg Config) *Server {
	gin.SetMode(gin.ReleaseMode)
	eng := gin.New()
	eng.HandleMethodNotAllowed = true
	eng.ContextWithFallback = true
	// No redirects: a trailing slash or a wrong case is a 404 with a JSON body and
	// no-store like every /v1 answer, never a cacheable 301.
	eng.RedirectTrailingSlash = false
	eng.RedirectFixedPath = false
	s := &Server{cfg: cfg, eng: eng, done: make(chan struct{}), access: access.New(cfg.Dir)}
	if cfg.Tracer != nil {
		// First, so that the request's log lines carry its span's trace id.
		eng.Use(traceRoute(telemetry.EdgeHandler(cfg.Tracer, http.HandlerFunc(runTraced), s.continuesTrace)))
	}
	eng.Use(s.requestLog, answer.Recovery(), answer.RefuseAmbiguous)

	v1 := eng.Group("/v1", answer.NoStore)
	views := eng.Group("", answer.NoStore, s.decide, s.traceView)
	views.GET(AgentViewRoute, s.agentView)
	views.GET(PartnerViewRoute, s.partnerView)
	v1.GET("/agents", s.agents)
	v1.GET("/agents/:id/worker/status", s.status)
	// The two routes of the other processes, as the wire contract names them.
	eng.POST(wire.ConsumePath, answer.NoStore, s.traceConsume, s.consume)
	eng.GET(wire.ChannelPath, answer.NoStore, gin.WrapH(cfg.Hub))

	eng.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"ok": true}) })
	eng.GET("/readyz", s.ready)
	eng.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", cfg.OpenAPI) })
	var static http.Handler
	csp := "default-src 'self'; img-src 'self' blob: data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
	if cfg.WebApp != nil {
		static = http.FileServer(http.FS(cfg.WebApp))
		if hashes := inlineScriptHashes(cfg.WebApp); hashes != "" {
			csp += "; script-src 'self' " + hashes
		}
	}
	// Every /v1 answer is no-store, errors included (answer.NoStore on the routes): so
	// are the answers outside the routes, an unknown /v1 path and a method a route does
	// not take.
	eng.NoMethod(func(c *gin.Context) {
		if isV1(c.Request.URL.Path) {
			answer.SetNoStore(c)
		}
		answer.CloseIfBody(c)
		c.AbortWithStatusJSON(answer.MethodNotAllowed.Status, answer.MethodNotAllowed.Body())
	})
	eng.NoRoute(func(c *gin.Context) {
		answer.CloseIfBody(c)
		if isV1(c.Request.URL.Path) {
			answer.SetNoStore(c)
			c.AbortWithStatusJSON(answer.NoRoute.Status, answer.NoRoute.Body())
			return
		}
		if static == nil || (c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead) {
			c.AbortWithStatusJSON(answer.NoRoute.Status, answer.NoRoute.Body())
			return
		}
		h := c.Writer.Header()
		h.Set("Cache-Control", "no-cache")
		// The app's only inline script is its import map, allowed by its hash; no inline
		// style; frames are blob: images.
		h.Set("Content-Security-Policy", csp)
		h.Set("Referrer-Policy", "no-referrer")
		static.ServeHTTP(c.Writer, c.Request)
	})
	return s
}

// inlineScript matches the inline scripts of the app's index.html (its import map).
var inlineScript = regexp.MustCompile(`(?s)<script type="importmap">(.*?)</script>`)

// inlineScriptHashes returns the CSP sources ('sha256-…') of the inline scripts of
// index.html, so that exactly those run; "" when there are none.
func inlineScriptHashes(app fs.FS) string {
	index, err := fs.ReadFile(app, "index.html")
	if err != nil {
		return ""
	}
	var out []string
	for _, m := range inlineScript.FindAllSubmatch(index, -1) {
		sum := sha256.Sum256(m[1])
		out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return strings.Join(out, " ")
}

// Handler is the replica's http.Handler.
func (s *Server) Handler() http.Handler { return s.eng }

// isV1 reports whether path is /v1 or under it, in any case (a client that got the
// case wrong still gets a /v1 answer).
func isV1(path string) bool {
	return strings.EqualFold(path, "/v1") || (len(path) >= 4 && strings.EqualFold(path[:4], "/v1/"))
}

// requestIDRe is what a client's X-Request-Id must look like to be used (and logged)
// as it is: a short token of safe characters. Anything else is replaced.
var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// requestLog gives each request an id and logs its route template, status and
// duration: never its token, query or body.
func (s *Server) requestLog(c *gin.Context) {
	start := time.Now()
	id := c.GetHeader("X-Request-Id")
	if !requestIDRe.MatchString(id) {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	c.Header("X-Request-Id", id)
	// A traced request's lines carry its trace id: the same on every process of a view.
	l := telemetry.WithTraceID(c.Request.Context(), s.cfg.Log.With().Str("request", id).Logger())
	c.Set(ctxLogger, &l)
	c.Next()
	if _, view := c.Get(ctxDecision); view {
		return // the view's decision wrote its line (record)
	}
	route := c.FullPath()
	if route == "" {
		route = "static"
	}
	level := zerolog.DebugLevel
	if c.Writer.Status() >= http.StatusInternalServerError {
		level = zerolog.InfoLevel
	}
	l.WithLevel(level).Str("route", route).Str("method", c.Request.Method).Int("status", c.Writer.Status()).
		Dur("took", time.Since(start)).Msg("request")
}

func (s *Server) log(c *gin.Context) *zerolog.Logger {
	if l, ok := c.Get(ctxLogger); ok {
		return l.(*zerolog.Logger)
	}
	return &s.cfg.Log
}

func (s *Server) ready(c *gin.Context) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(c.Request.Context()); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"ok": false})
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"ok": true})
}
