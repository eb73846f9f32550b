package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/wire"
)

// TestMaskedWholeByReason: a frame masked whole counts under its reason, every reason
// is there from the start at 0, and a frame masked in part counts as masked alone.
func TestMaskedWholeByReason(t *testing.T) {
	m := newCaptureMetrics(true)
	for _, why := range wire.HiddenReasons {
		if got := testutil.ToFloat64(m.whole.WithLabelValues(why)); got != 0 {
			t.Fatalf("%s starts at %v, want 0", why, got)
		}
	}
	m.record(broker.CaptureStats{Masked: 3})
	m.record(broker.CaptureStats{Masked: 3, Hidden: wire.HiddenMotion})
	m.record(broker.CaptureStats{Masked: 1, Hidden: wire.HiddenChanged})
	m.record(broker.CaptureStats{Masked: 1, Hidden: wire.HiddenChanged})
	want := map[string]float64{wire.HiddenMotion: 1, wire.HiddenChanged: 2, wire.HiddenViewTransition: 0, wire.HiddenInk: 0}
	for why, n := range want {
		if got := testutil.ToFloat64(m.whole.WithLabelValues(why)); got != n {
			t.Errorf("masked whole for %s: %v, want %v", why, got, n)
		}
	}
	if got := testutil.ToFloat64(m.masked); got != 4 {
		t.Errorf("masked frames: %v, want 4", got)
	}
}

// TestMetricsListenerAnswersFromTheFailureTable: the broker's metrics listener serves
// GET /metrics, and answers another method 405 and another path 404 with the failure
// table's rows, in the JSON error body.
func TestMetricsListenerAnswersFromTheFailureTable(t *testing.T) {
	h := newCaptureMetrics(true).handler()
	tests := []struct {
		name, method, path string
		want               wire.Failure // 0: the metrics
	}{
		{"metrics", http.MethodGet, "/metrics", 0},
		{"another method", http.MethodPost, "/metrics", wire.FailBrokerMethodNotAllowed},
		{"another path", http.MethodGet, "/debug/pprof/", wire.FailBrokerNoRoute},
		{"the root", http.MethodGet, "/", wire.FailBrokerNoRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
			if tt.want == 0 {
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "agentfy_broker_chromium_sandboxed 1") {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				return
			}
			r := tt.want.Row()
			if r.Listeners&wire.ListenerBrokerMetrics == 0 {
				t.Fatalf("%s is no row of the broker's metrics listener", tt.name)
			}
			if body := `{"error":{"code":"` + r.Code + `","message":"` + r.Message + `"}}`; w.Code != r.Status || w.Body.String() != body {
				t.Fatalf("%d %s, want %d %s", w.Code, w.Body, r.Status, body)
			}
		})
	}
}
