package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestMetricsConnections: the NATS and Redis series say what the replica's connections
// say at scrape time, and change with them.
func TestMetricsConnections(t *testing.T) {
	tests := []struct {
		name      string
		connected bool
		up        bool
		want      map[string]float64
	}{
		{name: "both up", connected: true, up: true, want: map[string]float64{
			"agentfy_nats_connected": 1, "agentfy_nats_reconnects_total": 3, "agentfy_redis_up": 1,
			`agentfy_redis_dials_total{result="ok"}`: 5, `agentfy_redis_dials_total{result="failed"}`: 2, "agentfy_redis_round_trips_total": 42,
		}},
		{name: "both down", want: map[string]float64{
			"agentfy_nats_connected": 0, "agentfy_nats_reconnects_total": 3, "agentfy_redis_up": 0,
			`agentfy_redis_dials_total{result="ok"}`: 5, `agentfy_redis_dials_total{result="failed"}`: 2, "agentfy_redis_round_trips_total": 42,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			zero := func() int { return 0 }
			m := New(Config{Pending: zero, Waiters: zero, Workers: zero, Listeners: zero})
			m.WatchConnections(Connections{
				NATSConnected:   func() bool { return tc.connected },
				NATSReconnects:  func() uint64 { return 3 },
				RedisUp:         func() bool { return tc.up },
				RedisDials:      func() (uint64, uint64) { return 5, 2 },
				RedisRoundTrips: func() uint64 { return 42 },
			})
			got := testenv.Scrape(t, m.Handler())
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (exported %t), want %v", k, g, ok, v)
				}
			}
		})
	}
}

// notFoundBody is the public API's 404 of an unknown path (answer.NoRoute), as sent.
const notFoundBody = `{"error":{"code":"not_found","message":"no such route"}}`

// TestMetricsListenerServesOnlyMetrics: a metrics listener's handler serves the series
// at /metrics to a request without a credential, and answers every other path with the
// API's 404 and another method with its 405: nothing of the public or admin API, no
// health, no web app.
func TestMetricsListenerServesOnlyMetrics(t *testing.T) {
	zero := func() int { return 0 }
	h := New(Config{Pending: zero, Waiters: zero, Workers: zero, Listeners: zero}).ListenerHandler()
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantBody   string // "" for the series
	}{
		{name: "the series", method: http.MethodGet, path: Path, wantStatus: http.StatusOK},
		{name: "the root", method: http.MethodGet, path: "/", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "health", method: http.MethodGet, path: "/healthz", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "readiness", method: http.MethodGet, path: "/readyz", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "the OpenAPI document", method: http.MethodGet, path: "/openapi.yaml", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "a view route", method: http.MethodGet, path: "/v1/agents/a/worker/view", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "an admin route", method: http.MethodGet, path: "/v1/admin/orgs/o/keys", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "a trailing slash", method: http.MethodGet, path: Path + "/", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "another case", method: http.MethodGet, path: "/METRICS", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "below it", method: http.MethodGet, path: Path + "/x", wantStatus: http.StatusNotFound, wantBody: notFoundBody},
		{name: "another method", method: http.MethodPost, path: Path, wantStatus: http.StatusMethodNotAllowed,
			wantBody: `{"error":{"code":"method_not_allowed","message":"this route does not take that method"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
			if w.Code != tt.wantStatus {
				t.Fatalf("%s %s: status %d, want %d", tt.method, tt.path, w.Code, tt.wantStatus)
			}
			body := w.Body.String()
			if tt.wantBody == "" {
				if !strings.Contains(body, "agentfy_view_pending 0\n") || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
					t.Fatalf("%s %s: not the series (%s): %.200s", tt.method, tt.path, w.Header().Get("Content-Type"), body)
				}
				return
			}
			if body != tt.wantBody {
				t.Fatalf("%s %s: body %s, want %s", tt.method, tt.path, body, tt.wantBody)
			}
		})
	}
}
