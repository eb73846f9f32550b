package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/agentfy/agentfy/internal/test/testenv"
)

// The files under test, relative to this package.
const (
	dashboardFile = "../grafana/agentfy.json"
	rulesFile     = "../prometheus/alerts.yml"
	operatingFile = "../../docs/operating.md"
)

// promParser is Prometheus's own PromQL parser, with its default options.
var promParser = parser.NewParser(parser.Options{})

// dashboard is what the tests read of the Grafana dashboard.
type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource *datasource `json:"datasource"`
	GridPos    gridPos     `json:"gridPos"`
	// FieldConfig holds the unit the panel formats its values in.
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Datasource   *datasource `json:"datasource"`
		Expr         string      `json:"expr"`
		LegendFormat string      `json:"legendFormat"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// gridPos is a panel's place on Grafana's grid: 24 columns wide, in rows of a fixed
// height.
type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL expression of the dashboard or the rules, named for messages.
type query struct {
	where, expr string
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// grafanaVars are the dashboard's variables as Prometheus would see them once Grafana
// has put in their values.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")

// dashboardQueries are the expressions of every panel, rows' panels included, with
// Grafana's interval variables replaced.
func dashboardQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	var out []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				out = append(out, query{where: p.Title + " #" + string(rune('A'+i)), expr: grafanaVars.Replace(tg.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

// alert is one alerting rule.
type alert struct {
	name, expr, runbook string
	// hold is the rule's `for`: how long its expression returns a series before that
	// series' alert fires.
	hold time.Duration
	// annotations are the rule's, their templates unexpanded.
	annotations map[string]string
}

func loadAlerts(t *testing.T) []alert {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promParser, promslog.NewNopLogger())
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	var out []alert
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule %q: the file holds alerts only", g.Name, r.Record)
				continue
			}
			out = append(out, alert{name: r.Alert, expr: r.Expr, runbook: r.Annotations["runbook_url"], hold: time.Duration(r.For), annotations: r.Annotations})
		}
	}
	if len(out) == 0 {
		t.Fatal("no alerts")
	}
	return out
}

// metricNames are the series names expr selects.
func metricNames(t *testing.T, q query) []string {
	t.Helper()
	e, err := promParser.ParseExpr(q.expr)
	if err != nil {
		t.Fatalf("%s: %v", q.where, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%s: a selector without a metric name: %s", q.where, vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: selects no series", q.where)
	}
	return names
}

// allQueries are the dashboard's and the rules' expressions.
func allQueries(t *testing.T) []query {
	t.Helper()
	qs := dashboardQueries(t, loadDashboard(t))
	for _, a := range loadAlerts(t) {
		qs = append(qs, query{where: "alert " + a.name, expr: a.expr})
	}
	return qs
}

// TestQueriesParse: every dashboard query and every alert expression parses with
// Prometheus's parser, the rule file loads with rulefmt, each query names its series,
// and the dashboard asks for its Prometheus data source in a variable.
func TestQueriesParse(t *testing.T) {
	d := loadDashboard(t)
	for _, q := range allQueries(t) {
		if _, err := promParser.ParseExpr(q.expr); err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			continue
		}
		for _, n := range metricNames(t, q) {
			if !strings.HasPrefix(n, "agentfy_") {
				t.Errorf("%s: %s is not an agentfy series", q.where, n)
			}
		}
	}
	ok := slices.ContainsFunc(d.Templating.List, func(v struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Query string `json:"query"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	})
	if !ok {
		t.Error("the dashboard has no Prometheus data source variable named datasource")
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
				t.Errorf("panel %q does not use ${datasource}", p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("a query of panel %q does not use ${datasource}", p.Title)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}

// headingSlug is GitHub's anchor of a Markdown heading.
func headingSlug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = regexp.MustCompile(`[^\p{L}\p{N} _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// TestRunbooks: each alert's runbook_url is a heading of docs/operating.md, and its
// paragraph says the symptom, the likely causes, what to check and what to do.
func TestRunbooks(t *testing.T) {
	b, err := os.ReadFile(operatingFile)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{} // anchor → text up to the next heading
	var cur string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			cur = headingSlug(strings.TrimLeft(line, "#"))
			sections[cur] = ""
			continue
		}
		if cur != "" {
			sections[cur] += line + "\n"
		}
	}
	for _, a := range loadAlerts(t) {
		doc, anchor, found := strings.Cut(a.runbook, "#")
		if !found || filepath.Base(doc) != "operating.md" {
			t.Errorf("%s: runbook_url %q is not docs/operating.md#…", a.name, a.runbook)
			continue
		}
		text, ok := sections[anchor]
		if !ok {
			t.Errorf("%s: docs/operating.md has no heading #%s", a.name, anchor)
			continue
		}
		for _, part := range []string{"**Symptom.**", "**Likely causes.**", "**Check.**", "**Do.**"} {
			if !strings.Contains(text, part) {
				t.Errorf("%s: its runbook paragraph lacks %s", a.name, part)
			}
		}
	}
}

// TestNoBinaryLinksPrometheus: the Prometheus server module is for these tests only; no
// production binary links any of it.
func TestNoBinaryLinksPrometheus(t *testing.T) {
	out, err := exec.CommandContext(testenv.Context(t, time.Minute), "go", "list", "-deps", "../../cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(dep, "github.com/prometheus/prometheus/") {
			t.Errorf("a binary of cmd/ links %s", dep)
		}
	}
}
