package monitoring

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
)

// ruleEvalInterval is how often the rules are evaluated over the series of
// TestAlertRules: Prometheus's default evaluation_interval (and promtool's).
const ruleEvalInterval = time.Minute

// ruleEngine evaluates the rules' expressions as the stack tests do (firing).
func ruleEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
}

// instantQuery is expr's value at ts over db.
func instantQuery(ctx context.Context, ng *promql.Engine, db storage.Queryable, expr string, ts time.Time) (promql.Vector, error) {
	q, err := ng.NewInstantQuery(ctx, db, nil, expr, ts)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
	}
	return nil, fmt.Errorf("%s: a %s, not a vector", expr, res.Value.Type())
}

// firingAlert is one alert that fires: its series' labels (the expression's, without
// the metric name) and its annotations, expanded.
type firingAlert struct {
	labels      string
	annotations map[string]string
}

// alertLabels are an alert's labels of the series l its expression returned: l without
// the metric name, as Prometheus's rule manager makes them (before it adds alertname
// and the rule's labels).
func alertLabels(l labels.Labels) labels.Labels {
	return labels.NewBuilder(l).Del(model.MetricNameLabel).Labels()
}

// evalAlert evaluates a's expression over db every ruleEvalInterval from the series'
// start (the Unix epoch, as promqltest loads them) to at, with the state machine of
// Prometheus's rules.AlertingRule: a series the expression returns is active from the
// first evaluation that returns it, fires once it has been active for the rule's
// `for`, and is forgotten at the first evaluation that does not return it. It returns
// the alerts that fire at the last evaluation, their annotations expanded as
// Prometheus expands them.
func evalAlert(t *testing.T, db storage.Queryable, a alert, at time.Duration) []firingAlert {
	t.Helper()
	ng := ruleEngine()
	epoch := time.Unix(0, 0).UTC()
	active := map[string]time.Time{} // a series' labels → when it became active
	var last promql.Vector
	var ts time.Time
	for d := time.Duration(0); d <= at; d += ruleEvalInterval {
		ts = epoch.Add(d)
		v, err := instantQuery(t.Context(), ng, db, a.expr, ts)
		if err != nil {
			t.Fatalf("%s at %s: %v", a.name, d, err)
		}
		seen := map[string]bool{}
		for _, s := range v {
			k := alertLabels(s.Metric).String()
			seen[k] = true
			if _, ok := active[k]; !ok {
				active[k] = ts
			}
		}
		for k := range active {
			if !seen[k] {
				delete(active, k)
			}
		}
		last = v
	}
	var out []firingAlert
	for _, s := range last {
		k := alertLabels(s.Metric).String()
		if ts.Sub(active[k]) < a.hold {
			continue // pending
		}
		out = append(out, firingAlert{labels: k, annotations: expandAnnotations(t, ng, db, a, s, ts)})
	}
	slices.SortFunc(out, func(x, y firingAlert) int { return strings.Compare(x.labels, y.labels) })
	return out
}

// expandAnnotations expands a's annotations for the sample s at ts as
// rules.AlertingRule does (its $labels, $value and query), failing the test on a
// template that does not expand.
func expandAnnotations(t *testing.T, ng *promql.Engine, db storage.Queryable, a alert, s promql.Sample, ts time.Time) map[string]string {
	t.Helper()
	data := template.AlertTemplateData(alertLabels(s.Metric).Map(), nil, "", s)
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	query := func(ctx context.Context, q string, at time.Time) (promql.Vector, error) {
		return instantQuery(ctx, ng, db, q, at)
	}
	out := map[string]string{}
	for name, text := range a.annotations {
		e := template.NewTemplateExpander(t.Context(), defs+text, "__alert_"+a.name, data, model.TimeFromUnixNano(ts.UnixNano()), query, nil, nil)
		v, err := e.Expand()
		if err != nil {
			t.Errorf("%s: annotation %s: %v", a.name, name, err)
		}
		out[name] = v
	}
	return out
}

// The view routes' label as the series below write it.
const agentRoute = `route="/v1/agents/:id/worker/view"`

// TestAlertRules evaluates alerts of deploy/prometheus/alerts.yml over series written
// for them in promtool's notation (load 15s: one sample every 15 s, 1500 a step is
// 100 a second), each as Prometheus's rule manager would (evalAlert), and checks which
// alerts fire at the end and what their summary says. Each alert here has a case where
// it fires and one where it must not, its `for` included, which the stack test
// (TestAlertsOnAStack, its faults caused for real) does not evaluate; for
// AgentfyAuditBestEffort these are its only fault.
func TestAlertRules(t *testing.T) {
	tests := []struct {
		name   string
		alert  string
		series string        // the body of a promqltest load command, one sample every 15 s
		at     time.Duration // when the alerts are read
		want   []string      // the firing alerts' series labels
		// summary, when set, is the first firing alert's summary.
		summary string
	}{
		{
			name:  "a flood of 401s beside 5 of 5 views failing",
			alert: "AgentfyViewsFailing",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="401",outcome="unauthenticated"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="unavailable"} 0+75x60
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="frame"} 0x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="no_channel"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="broker_down"} 0x60`,
			at:      10 * time.Minute,
			want:    []string{`{reason="no_channel"}`},
			summary: "no_channel: 100% of the views answer 503",
		},
		{
			name:  "refusals of every kind beside 5 of 10 views failing",
			alert: "AgentfyViewsFailing",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="401",outcome="unauthenticated"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="403",outcome="forbidden"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="404",outcome="not_found"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="429",outcome="rate_limited"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="identity_unavailable"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="unavailable"} 0+75x60
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="frame"} 0+45x60
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="no_tab"} 0+15x60
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="not_live"} 0+15x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="identity_unavailable"} 0+1500x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="capture"} 0+75x60`,
			at:      10 * time.Minute,
			want:    []string{`{reason="capture"}`},
			summary: "capture: 50% of the views answer 503",
		},
		{
			name:  "a flood of 401s, every view a frame",
			alert: "AgentfyViewsFailing",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="401",outcome="unauthenticated"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="frame"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="no_channel"} 0x60`,
			at: 10 * time.Minute,
		},
		{
			name:  "5 views failing a second among 100 frames",
			alert: "AgentfyViewsFailing",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="frame"} 0+1500x60
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="unavailable"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="timeout"} 0+75x60`,
			at: 10 * time.Minute,
		},
		{
			name:  "one view failing, alone",
			alert: "AgentfyViewsFailing",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="unavailable"} 0x20 1x40
agentfy_view_unavailable_total{` + agentRoute + `,reason="no_channel"} 0x20 1x40`,
			at: 8 * time.Minute, // its rate above 0, for 3 minutes
		},
		{
			name:  "every view failing for reasons with alerts of their own",
			alert: "AgentfyViewsFailing",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="unavailable"} 0+150x60
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="identity_unavailable"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="broker_down"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="audit_unavailable"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="identity_unavailable"} 0+75x60`,
			at: 10 * time.Minute,
		},

		{
			name:  "every frame refused audit_unavailable for 10 minutes",
			alert: "AgentfyAuditUnavailable",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="503",outcome="unavailable"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="audit_unavailable"} 0+75x60`,
			at:      10 * time.Minute,
			want:    []string{`{}`},
			summary: `views answer 503 audit_unavailable: the audit stream does not acknowledge, viewers see "temporarily unavailable"`,
		},
		{
			name:  "one frame refused audit_unavailable (a stream leader's election)",
			alert: "AgentfyAuditUnavailable",
			series: `
agentfy_view_requests_total{` + agentRoute + `,status="200",outcome="frame"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="audit_unavailable"} 0x20 1x40`,
			at: 9 * time.Minute, // its rate above 0, for 4 minutes
		},
		{
			name:  "frames refused audit_unavailable until 6 minutes ago",
			alert: "AgentfyAuditUnavailable",
			series: `
agentfy_view_unavailable_total{` + agentRoute + `,reason="audit_unavailable"} 0+75x36 2700x24`,
			at: 15 * time.Minute,
		},
		{
			name:  "views failing for other reasons",
			alert: "AgentfyAuditUnavailable",
			series: `
agentfy_view_unavailable_total{` + agentRoute + `,reason="no_channel"} 0+75x60
agentfy_view_unavailable_total{` + agentRoute + `,reason="audit_unavailable"} 0x60`,
			at: 10 * time.Minute,
		},

		{
			name:  "one view's event not acknowledged",
			alert: "AgentfyAuditDropped",
			series: `
agentfy_audit_dropped_total{instance="api-1",reason="unacknowledged"} 0x20 1x40
agentfy_audit_dropped_total{instance="api-1",reason="full"} 0x60
agentfy_audit_dropped_total{instance="api-2",reason="unacknowledged"} 0x60`,
			at:      10 * time.Minute,
			want:    []string{`{instance="api-1", reason="unacknowledged"}`},
			summary: "replica api-1: 1 audit events dropped (unacknowledged) in 10 minutes: the audit trail has a gap",
		},
		{
			name:  "best-effort publishes failing on one replica, refused on another",
			alert: "AgentfyAuditDropped",
			series: `
agentfy_audit_dropped_total{instance="api-1",reason="publish"} 0+3x60
agentfy_audit_dropped_total{instance="api-2",reason="refused"} 0x30 2x30
agentfy_audit_dropped_total{instance="api-2",reason="closed"} 0x60`,
			at:   10 * time.Minute,
			want: []string{`{instance="api-1", reason="publish"}`, `{instance="api-2", reason="refused"}`},
		},
		{
			name:  "nothing dropped",
			alert: "AgentfyAuditDropped",
			series: `
agentfy_audit_dropped_total{instance="api-1",reason="full"} 0x60
agentfy_audit_dropped_total{instance="api-1",reason="invalid"} 0x60`,
			at: 10 * time.Minute,
		},
		{
			name:  "a replica restarted, its counters back to 0",
			alert: "AgentfyAuditDropped",
			series: `
agentfy_audit_dropped_total{instance="api-1",reason="unacknowledged"} 7x20 0x40`,
			at: 10 * time.Minute,
		},
		{
			name:  "an event dropped more than 10 minutes ago",
			alert: "AgentfyAuditDropped",
			series: `
agentfy_audit_dropped_total{instance="api-1",reason="full"} 0x4 1x56`,
			at: 15 * time.Minute,
		},

		{
			name:  "one replica best-effort for 15 minutes",
			alert: "AgentfyAuditBestEffort",
			series: `
agentfy_audit_best_effort{instance="api-1"} 0x60
agentfy_audit_best_effort{instance="api-2"} 1x60`,
			at:      15 * time.Minute,
			want:    []string{`{instance="api-2"}`},
			summary: "replica api-2 runs with AGENTFY_AUDIT=best-effort: the audit trail cannot show it is complete",
		},
		{
			name:  "every replica durable",
			alert: "AgentfyAuditBestEffort",
			series: `
agentfy_audit_best_effort{instance="api-1"} 0x60
agentfy_audit_best_effort{instance="api-2"} 0x60`,
			at: 15 * time.Minute,
		},
		{
			name:  "a replica best-effort for 5 minutes so far",
			alert: "AgentfyAuditBestEffort",
			series: `
agentfy_audit_best_effort{instance="api-1"} 1x20`,
			at: 5 * time.Minute,
		},
		{
			name:  "best-effort for 5 minutes, then restarted durable",
			alert: "AgentfyAuditBestEffort",
			series: `
agentfy_audit_best_effort{instance="api-1"} 1x20 0x40`,
			at: 15 * time.Minute,
		},
	}
	alerts := map[string]alert{}
	for _, a := range loadAlerts(t) {
		alerts[a.name] = a
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.alert+"/"+tt.name, func(t *testing.T) {
			a, ok := alerts[tt.alert]
			if !ok {
				t.Fatalf("no alert %s in %s", tt.alert, rulesFile)
			}
			db := promqltest.LoadedStorage(t, "load 15s"+tt.series)
			got := evalAlert(t, db, a, tt.at)
			var firing []string
			for _, f := range got {
				firing = append(firing, f.labels)
			}
			if !slices.Equal(firing, tt.want) {
				t.Fatalf("at %s firing %q, want %q", tt.at, firing, tt.want)
			}
			if tt.summary != "" && got[0].annotations["summary"] != tt.summary {
				t.Errorf("summary %q, want %q", got[0].annotations["summary"], tt.summary)
			}
		})
		fires[tt.alert] = fires[tt.alert] || len(tt.want) > 0
		quiet[tt.alert] = quiet[tt.alert] || len(tt.want) == 0
	}
	for _, name := range []string{"AgentfyViewsFailing", "AgentfyAuditUnavailable", "AgentfyAuditDropped", "AgentfyAuditBestEffort"} {
		if !fires[name] || !quiet[name] {
			t.Errorf("%s: a case where it fires %t, one where it does not %t; want both", name, fires[name], quiet[name])
		}
	}
}

// TestViewsFailingShareOfViews: the share AgentfyViewsFailing pages on is of the views
// that could have produced a frame. Over 100 401s a second beside 5 views a second,
// all failing, the share of every answer the rule used to take (5 of 105) is under its
// 10 %, and the rule fires.
func TestViewsFailingShareOfViews(t *testing.T) {
	db := promqltest.LoadedStorage(t, `load 15s
agentfy_view_requests_total{`+agentRoute+`,status="401",outcome="unauthenticated"} 0+1500x60
agentfy_view_requests_total{`+agentRoute+`,status="503",outcome="unavailable"} 0+75x60
agentfy_view_unavailable_total{`+agentRoute+`,reason="no_channel"} 0+75x60`)
	const everyAnswer = `sum by (reason) (rate(agentfy_view_unavailable_total{reason!~"broker_down|identity_unavailable"}[5m]))
  / scalar(sum(rate(agentfy_view_requests_total[5m])))`
	at := time.Unix(0, 0).UTC().Add(10 * time.Minute)
	v, err := instantQuery(t.Context(), ruleEngine(), db, everyAnswer, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].F > 0.1 {
		t.Fatalf("the share of every answer: %v, want one series under 0.1", v)
	}
	var a alert
	for _, x := range loadAlerts(t) {
		if x.name == "AgentfyViewsFailing" {
			a = x
		}
	}
	if got := evalAlert(t, db, a, 10*time.Minute); len(got) != 1 {
		t.Errorf("AgentfyViewsFailing: %d alerts fire, want 1 (%g of every answer failing)", len(got), v[0].F)
	}
}
