package broker

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// Handler returns the broker's HTTP API:
//
//	POST /tools/browser_open  {"url"}             → {"result":{"tabId","url","title"}}
//	POST /tools/browser_play  {"tabId","steps"}   → {"result":{"tabId","url","title"}}
//	POST /tools/browser_tabs  {}                  → {"result":{"tabs":[{"tabId","url","title"}]}}
//	POST /tools/browser_close {"tabId"}           → {"result":{"closed":true}}
//	POST /observe             {"requestId"}       → {"envelope":{"publicKey","iv","tag","ciphertext"}}
//	GET  /healthz                                 → {"ok":true}
//
// Errors answer {"error":{"code","message"}} with the status errorTable
// gives. Bodies are limited to MaxBodyBytes and must be one JSON object
// without unknown members, none twice, each named in its exact case.
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	routes := []struct {
		method, path string
		handle       http.HandlerFunc
		// traced says the route gets a span (telemetry.Handler), named by its pattern:
		// the capture, a hop of a view; the tools and the health check are not traced.
		traced bool
	}{
		{http.MethodPost, wire.ToolPathPrefix + wire.ToolOpen, b.handleOpen, false},
		{http.MethodPost, wire.ToolPathPrefix + wire.ToolPlay, b.handlePlay, false},
		{http.MethodPost, wire.ToolPathPrefix + wire.ToolTabs, b.handleTabs, false},
		{http.MethodPost, wire.ToolPathPrefix + wire.ToolClose, b.handleClose, false},
		{http.MethodPost, wire.CapturePath, b.handleCapture, true},
		{http.MethodGet, "/healthz", b.handleHealth, false},
	}
	for _, r := range routes {
		h := b.logged(r.path, r.handle)
		if r.traced {
			h = telemetry.Handler(b.cfg.Tracer, h)
		}
		mux.Handle(r.method+" "+r.path, h)
		mux.Handle(r.path, b.logged(r.path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", r.method)
			writeError(w, errMethod)
		}))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, errNoRoute)
	})
	return mux
}

// handleOpen serves POST /tools/browser_open.
func (b *Broker) handleOpen(w http.ResponseWriter, r *http.Request) {
	var req struct {
		URL string `json:"url"`
	}
	if !b.decode(w, r, &req) {
		return
	}
	tab, err := b.OpenTab(r.Context(), req.URL)
	b.reply(w, r, result{tab}, err)
}

// handlePlay serves POST /tools/browser_play.
func (b *Broker) handlePlay(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TabID string `json:"tabId"`
		Steps []Step `json:"steps"`
	}
	if !b.decode(w, r, &req) {
		return
	}
	tab, err := b.Play(r.Context(), req.TabID, req.Steps)
	b.reply(w, r, result{tab}, err)
}

// handleTabs serves POST /tools/browser_tabs.
func (b *Broker) handleTabs(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !b.decode(w, r, &req) {
		return
	}
	tabs, err := b.Tabs(r.Context())
	b.reply(w, r, result{struct {
		Tabs []Tab `json:"tabs"`
	}{tabs}}, err)
}

// handleClose serves POST /tools/browser_close.
func (b *Broker) handleClose(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TabID string `json:"tabId"`
	}
	if !b.decode(w, r, &req) {
		return
	}
	err := b.CloseTab(r.Context(), req.TabID)
	b.reply(w, r, result{struct {
		Closed bool `json:"closed"`
	}{true}}, err)
}

// handleCapture serves POST /observe. The envelope passes through as the
// bytes Capture made, without another round of JSON.
func (b *Broker) handleCapture(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RequestID string `json:"requestId"`
	}
	if !b.decode(w, r, &req) {
		return
	}
	body, err := b.Capture(r.Context(), req.RequestID)
	span := trace.SpanFromContext(r.Context())
	if err != nil {
		telemetry.Mark(span, telemetry.OutcomeUnavailable, statusOf(err).code)
		b.reply(w, r, nil, err)
		return
	}
	telemetry.Mark(span, telemetry.OutcomeOK, "")
	writeBody(w, http.StatusOK, body)
}

// handleHealth serves GET /healthz.
func (b *Broker) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
}

// result wraps a tool's answer as {"result":…}.
type result struct {
	Result any `json:"result"`
}

// decode reads the body into v: at most MaxBodyBytes, then wire.DecodeStrict
// (one JSON value, no unknown member, none twice, names in their exact case,
// valid UTF-8). It answers the error itself and reports whether to go on.
func (b *Broker) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := wire.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err == nil && wire.DecodeStrict(data, v) != nil {
		err = ErrBadBody
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			err = ErrBodyTooLarge
		} else {
			err = ErrBadBody
		}
		b.reply(w, r, nil, err)
		return false
	}
	return true
}

// reply writes v with 200, or err as the client may see it.
func (b *Broker) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, v)
		return
	}
	e := statusOf(err)
	logger := zerolog.Ctx(r.Context())
	switch e.status {
	case http.StatusInternalServerError:
		// Internal errors are logged, never shown. They carry CDP method
		// names and codes, never page content.
		logger.Error().Err(err).Msg("request failed")
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		// Capture failures: consumption and CDP capture errors, which
		// hold neither the pass, nor a URL, nor page content.
		logger.Warn().Err(err).Str("code", e.code).Msg("request failed")
	default:
		// Tool failures may quote the agent's selectors or the page's own
		// script errors: only the status reaches the log.
	}
	writeError(w, e)
}

// writeError writes {"error":{"code","message"}}.
func writeError(w http.ResponseWriter, e apiError) {
	writeJSON(w, e.status, wire.ErrorBody{Error: wire.ErrorDetail{Code: e.code, Message: e.message}})
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = internalError.status, []byte(`{"error":{"code":"`+internalError.code+`","message":"`+internalError.message+`"}}`)
	}
	writeBody(w, status, data)
}

// writeBody writes a JSON body as it is, with a final newline.
func writeBody(w http.ResponseWriter, status int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// statusWriter remembers the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// logged logs each request to route: its route, status and duration, never
// its body. The request's logger is also reachable through zerolog.Ctx.
func (b *Broker) logged(route string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// A traced request's lines carry its trace id: the same on every process of a view.
		logger := telemetry.WithTraceID(r.Context(), b.logger.With().Str("route", route).Logger())
		r = r.WithContext(logger.WithContext(r.Context()))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h(sw, r)
		level := zerolog.InfoLevel
		if route == "/healthz" {
			level = zerolog.DebugLevel // probes would drown the rest
		}
		if sw.status >= http.StatusInternalServerError {
			level = zerolog.WarnLevel
		}
		logger.WithLevel(level).Int("status", sw.status).Dur("duration", time.Since(start)).Msg("request")
	})
}
