package stacktest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics scrapes replica number replica's /metrics (its metrics listener) and returns
// the families by name.
func (c *Client) Metrics(tb testing.TB, replica int) map[string]*dto.MetricFamily {
	tb.Helper()
	req, err := http.NewRequestWithContext(c.Context(tb), http.MethodGet, c.St.Replicas[replica].MetricsURL+"/metrics", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("metrics: %v", err)
	}
	return families
}

// UnavailableByReason is replica A's agentfy_view_unavailable_total by reason: how many
// views it answered 503, for each reason.
func (c *Client) UnavailableByReason(tb testing.TB) map[string]float64 {
	tb.Helper()
	counts := map[string]float64{}
	if f := c.Metrics(tb, 0)["agentfy_view_unavailable_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					counts[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return counts
}
