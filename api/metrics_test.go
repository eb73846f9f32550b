package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gin-gonic/gin"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// sum adds the samples of one metric.
func sum(samples map[string]float64, name string) float64 {
	var n float64
	for k, v := range samples {
		if strings.HasPrefix(k, name+"{") || k == name {
			n += v
		}
	}
	return n
}

// A view's decision counts every answer by route, status and outcome, and a 503 once
// more by its reason: agentfy_view_unavailable_total{route,reason}; a viewer gone is
// its own outcome (499), not a failure; a panic is counted (500 other).
func TestMetricViewCountsReasons(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	zero := func() int { return 0 }
	m := NewMetrics(zero, zero, zero, zero)
	s := &Server{cfg: Config{Log: testenv.Logger(t), Metrics: m}}
	const route = "/v1/agents/:id/worker/view"
	errs := map[string]error{
		"pending":   view.ErrBusy,
		"durable":   fmt.Errorf("%w: 0 of 1 replicas", view.ErrNotDurable),
		"redis":     errors.New("redis: connection refused"),
		"limited":   view.ErrRateLimited,
		"stranger":  auth.ErrNotFound,
		"anonymous": auth.ErrUnauthenticated,
	}
	for _, r := range wire.Reasons() {
		errs["reason-"+r] = &view.UnavailableError{Reason: r}
	}
	eng := gin.New()
	eng.Use(gin.CustomRecovery(func(c *gin.Context, _ any) { c.AbortWithStatusJSON(answer.Panic.Status, answer.Panic.Body()) }))
	eng.GET(route, s.decide, func(c *gin.Context) {
		id := c.Param("id")
		switch id {
		case "frame":
			decisionOf(c).answer(outcomeFrame, "", nil)
			c.Data(http.StatusOK, "application/json", []byte(`{"live":true,"page":null}`))
			return
		case "panic":
			panic("a handler's bug")
		case "gone":
			ctx, cancel := context.WithCancel(c.Request.Context())
			cancel() // the viewer went away
			c.Request = c.Request.WithContext(ctx)
			s.abort(c, fmt.Errorf("view: %w", ctx.Err()))
			return
		}
		s.abort(c, errs[id])
	})

	tests := []struct {
		name       string
		id         string
		wantStatus int
		wantOut    string
		wantReason string // "" when agentfy_view_unavailable_total must not move
	}{
		{"frame", "frame", 200, "frame", ""},
		{"rate limited", "limited", 429, "rate_limited", ""},
		{"not found", "stranger", 404, "not_found", ""},
		{"unauthenticated", "anonymous", 401, "unauthenticated", ""},
		{"pending limit", "pending", 503, "unavailable", "pending_limit"},
		{"not durable", "durable", 503, "unavailable", "not_durable"},
		{"internal", "redis", 503, "unavailable", "internal"},
		{"panic", "panic", 500, "other", ""},
	}
	for _, r := range wire.Reasons() {
		tests = append(tests, struct {
			name       string
			id         string
			wantStatus int
			wantOut    string
			wantReason string
		}{"view " + r, "reason-" + r, 503, "unavailable", r})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testenv.Scrape(t, m.Handler())
			w := httptest.NewRecorder()
			eng.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/agents/"+tt.id+"/worker/view", nil))
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", w.Code, tt.wantStatus)
			}
			after := testenv.Scrape(t, m.Handler())

			outcome := fmt.Sprintf(`agentfy_view_requests_total{outcome=%q,route=%q,status="%d"}`, tt.wantOut, route, tt.wantStatus)
			if _, ok := before[outcome]; !ok {
				t.Errorf("%s did not exist before its first answer", outcome)
			}
			if d := after[outcome] - before[outcome]; d != 1 {
				t.Errorf("%s moved by %v, want 1", outcome, d)
			}
			reasons := sum(after, "agentfy_view_unavailable_total") - sum(before, "agentfy_view_unavailable_total")
			if tt.wantReason == "" {
				if reasons != 0 {
					t.Errorf("agentfy_view_unavailable_total moved by %v for a %d", reasons, tt.wantStatus)
				}
			} else {
				series := fmt.Sprintf(`agentfy_view_unavailable_total{reason=%q,route=%q}`, tt.wantReason, route)
				if d := after[series] - before[series]; d != 1 || reasons != 1 {
					t.Errorf("%s moved by %v (all reasons by %v), want 1", series, d, reasons)
				}
			}
			gate := sum(after, "agentfy_gate_refusals_total") - sum(before, "agentfy_gate_refusals_total")
			if want := map[bool]float64{true: 1, false: 0}[tt.wantStatus == http.StatusTooManyRequests]; gate != want {
				t.Errorf("agentfy_gate_refusals_total moved by %v, want %v", gate, want)
			}
			latency := fmt.Sprintf(`agentfy_view_duration_seconds_count{route=%q,status="%d"}`, route, tt.wantStatus)
			if d := after[latency] - before[latency]; d != 1 {
				t.Errorf("%s moved by %v, want 1", latency, d)
			}
		})
	}
}

// A viewer who went away before the answer is counted as cancelled, status 499, and
// logged at info without a reason: no failure of the view's.
func TestViewerGoneIsNoFailure(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	zero := func() int { return 0 }
	m := NewMetrics(zero, zero, zero, zero)
	logs := &testenv.Buffer{}
	s := &Server{cfg: Config{Log: zerolog.New(logs), Metrics: m}}
	const route = "/v1/agents/:id/worker/view"
	eng := gin.New()
	eng.GET(route, s.decide, func(c *gin.Context) {
		ctx, cancel := context.WithCancel(c.Request.Context())
		cancel()
		c.Request = c.Request.WithContext(ctx)
		s.abort(c, fmt.Errorf("view: %w", ctx.Err()))
	})
	before := testenv.Scrape(t, m.Handler())
	eng.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/agents/a1/worker/view", nil))
	after := testenv.Scrape(t, m.Handler())
	series := fmt.Sprintf(`agentfy_view_requests_total{outcome="cancelled",route=%q,status="499"}`, route)
	if d := after[series] - before[series]; d != 1 {
		t.Fatalf("%s moved by %v, want 1", series, d)
	}
	if d := sum(after, "agentfy_view_unavailable_total") - sum(before, "agentfy_view_unavailable_total"); d != 0 {
		t.Fatalf("agentfy_view_unavailable_total moved by %v for a viewer gone", d)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level":"info"`) || !strings.Contains(lines[0], `"outcome":"cancelled"`) || strings.Contains(lines[0], `"reason"`) {
		t.Fatalf("log %q, want one info line of the cancelled view", lines)
	}
}

// Without Metrics the decision only passes the request on.
func TestMetricViewWithoutMetrics(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: Config{Log: testenv.Logger(t)}}
	eng := gin.New()
	eng.GET("/v1/agents/:id/worker/view", s.decide, func(c *gin.Context) { s.abort(c, view.ErrBusy) })
	w := httptest.NewRecorder()
	eng.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/agents/a/worker/view", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
}

// TestMetricsReasonsStartAtZero: every reason of both view routes, and every answer
// (status and outcome) they give, is exported at 0 before any view, so that a rate over
// it sees the first failure.
func TestMetricsReasonsStartAtZero(t *testing.T) {
	zero := func() int { return 0 }
	got := testenv.Scrape(t, NewMetrics(zero, zero, zero, zero).Handler())
	for _, route := range []string{AgentViewRoute, PartnerViewRoute} {
		for _, reason := range wire.Labels() {
			series := fmt.Sprintf(`agentfy_view_unavailable_total{reason=%q,route=%q}`, reason, route)
			if v, ok := got[series]; !ok || v != 0 {
				t.Errorf("%s = %v (exported %t), want 0", series, v, ok)
			}
		}
		for _, a := range []struct{ status, outcome string }{
			{"200", "frame"}, {"200", "no_tab"}, {"200", "not_live"}, {"401", "unauthenticated"}, {"403", "forbidden"},
			{"404", "not_found"}, {"429", "rate_limited"}, {"503", "identity_unavailable"}, {"503", "unavailable"},
		} {
			series := fmt.Sprintf(`agentfy_view_requests_total{outcome=%q,route=%q,status=%q}`, a.outcome, route, a.status)
			if v, ok := got[series]; !ok || v != 0 {
				t.Errorf("%s = %v (exported %t), want 0", series, v, ok)
			}
		}
	}
}

// notFoundBody is the public API's 404 of an unknown path (answer.NoRoute), as sent.
const notFoundBody = `{"error":{"code":"not_found","message":"no such route"}}`

// TestPublicListenerServesNoMetrics: the public listener, the one viewers reach, answers
// /metrics as the unknown path it is there — the API's JSON 404 without the web app,
// and with it whatever any other unknown path gets — and never with a series.
func TestPublicListenerServesNoMetrics(t *testing.T) {
	zero := func() int { return 0 }
	app := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>app</title>")}}
	tests := []struct {
		name     string
		webApp   fs.FS
		wantBody string // "" for the answer of another unknown path
	}{
		{name: "without the web app", wantBody: notFoundBody},
		{name: "with the web app", webApp: app},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Config{Log: testenv.Logger(t), Metrics: NewMetrics(zero, zero, zero, zero), WebApp: tt.webApp})
			get := func(path string) *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				return w
			}
			unknown := get("/no-such-path")
			for _, path := range []string{metrics.Path, metrics.Path + "/", "/METRICS"} {
				w := get(path)
				want := cmp.Or(tt.wantBody, unknown.Body.String())
				if w.Code != http.StatusNotFound || w.Body.String() != want || w.Header().Get("Content-Type") != unknown.Header().Get("Content-Type") {
					t.Errorf("GET %s: %d %s %s, want 404 %s %s", path, w.Code, w.Header().Get("Content-Type"), w.Body, unknown.Header().Get("Content-Type"), want)
				}
				if strings.Contains(w.Body.String(), "agentfy_") || strings.Contains(w.Body.String(), "go_info") {
					t.Errorf("GET %s: the public listener serves series", path)
				}
			}
			if tt.webApp != nil && get("/").Code != http.StatusOK {
				t.Error("the web app is not served at /: the case tests nothing")
			}
		})
	}
}
