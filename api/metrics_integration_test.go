package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestMetricsOnlyOnTheMetricsListener: on a real replica, its series are served at
// /metrics of its metrics listener, without a credential, and nowhere else: the public
// listener, the one viewers reach, answers /metrics with the API's 404, the admin
// listener with the admin API's, and the metrics listener serves no other path.
func TestMetricsOnlyOnTheMetricsListener(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	c := stacktest.Start(t, stack.Options{Replicas: 1})
	r := c.St.Replicas[0]
	const (
		notFound      = `{"error":{"code":"not_found","message":"no such route"}}`
		adminNotFound = `{"error":{"code":"not_found","message":"no such admin route"}}`
	)
	tests := []struct {
		name       string
		url        string
		bearer     string
		wantStatus int
		wantBody   string // "" for the series
	}{
		{name: "the metrics listener", url: r.MetricsURL + metrics.Path, wantStatus: http.StatusOK},
		{name: "the public listener", url: r.URL + metrics.Path, wantStatus: http.StatusNotFound, wantBody: notFound},
		{name: "the public listener with a member's token", url: r.URL + metrics.Path, bearer: c.Token(t, "u-alice"), wantStatus: http.StatusNotFound, wantBody: notFound},
		{name: "the admin listener", url: r.AdminURL + metrics.Path, wantStatus: http.StatusNotFound, wantBody: adminNotFound},
		{name: "the admin listener with the admin key", url: r.AdminURL + metrics.Path, bearer: c.St.AdminKey, wantStatus: http.StatusNotFound, wantBody: adminNotFound},
		{name: "health on the metrics listener", url: r.MetricsURL + "/healthz", wantStatus: http.StatusNotFound, wantBody: notFound},
		{name: "a view route on the metrics listener", url: r.MetricsURL + "/v1/agents/agent-scout/worker/view", bearer: c.Token(t, "u-alice"), wantStatus: http.StatusNotFound, wantBody: notFound},
		{name: "an admin route on the metrics listener", url: r.MetricsURL + "/v1/admin/orgs/org-acme/keys", bearer: c.St.AdminKey, wantStatus: http.StatusNotFound, wantBody: notFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := fetch(t, ctx, tt.url, tt.bearer)
			if status != tt.wantStatus {
				t.Fatalf("GET %s: %d %.200s, want %d", tt.url, status, body, tt.wantStatus)
			}
			if tt.wantBody == "" {
				for _, want := range []string{"agentfy_view_pending ", "agentfy_worker_connections ", "agentfy_audit_dropped_total ", "go_info{"} {
					if !strings.Contains(body, want) {
						t.Errorf("GET %s lacks %s", tt.url, want)
					}
				}
				return
			}
			if strings.TrimSpace(body) != tt.wantBody {
				t.Errorf("GET %s: body %s, want %s", tt.url, body, tt.wantBody)
			}
			if strings.Contains(body, "agentfy_") || strings.Contains(body, "go_info") {
				t.Errorf("GET %s serves series", tt.url)
			}
			if !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
				t.Errorf("GET %s: Content-Type %q, want JSON", tt.url, h.Get("Content-Type"))
			}
		})
	}
}
