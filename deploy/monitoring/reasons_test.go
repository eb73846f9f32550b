package monitoring

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/agentfy/agentfy/wire"
)

// reasonSeries is the series whose reason label is a view's failure reason (wire.Labels).
const reasonSeries = "agentfy_view_unavailable_total"

// ownAlerts are the reasons with an alert of their own that does not select them by
// reason, and that alert.
var ownAlerts = map[string]string{
	// Its views are counted under their own outcome and agentfy_identity_unavailable_total;
	// the alert is on its cause, the JWK set no key of which verifies.
	wire.ReasonIdentityUnavailable: "AgentfyJWKSStale",
}

// reasonMatch is one matcher of the reason label of reasonSeries in a query.
type reasonMatch struct {
	where   string
	matcher *labels.Matcher
}

// reasonMatchers are the matchers of reasonSeries' reason label in q.
func reasonMatchers(t *testing.T, q query) []reasonMatch {
	t.Helper()
	e, err := promParser.ParseExpr(q.expr)
	if err != nil {
		t.Fatalf("%s: %v", q.where, err)
	}
	var out []reasonMatch
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name == reasonSeries {
			for _, m := range vs.LabelMatchers {
				if m.Name == "reason" {
					out = append(out, reasonMatch{q.where, m})
				}
			}
		}
		return nil
	})
	return out
}

// alternation is what a regular matcher's value may be here: reasons joined by |.
var alternation = regexp.MustCompile(`^[a-z_]+(\|[a-z_]+)*$`)

// matchedReasons are the reasons m names: its value, or each of a regular matcher's
// alternatives.
func matchedReasons(t *testing.T, m reasonMatch) []string {
	t.Helper()
	switch m.matcher.Type {
	case labels.MatchEqual, labels.MatchNotEqual:
		return []string{m.matcher.Value}
	}
	if !alternation.MatchString(m.matcher.Value) {
		t.Errorf("%s: reason matcher %s is not a list of reasons", m.where, m.matcher)
		return nil
	}
	return strings.Split(m.matcher.Value, "|")
}

// TestReasonMatchersAreTheFailureTables: every reason the alert rules and the dashboard
// match agentfy_view_unavailable_total's reason label with is one of the failure
// table's (wire.Labels): a reason renamed or dropped there fails here, not as an alert
// that silently never fires. And every reason is watched: AgentfyViewsFailing counts
// every reason but those it leaves out, and each of those has an alert of its own.
func TestReasonMatchersAreTheFailureTables(t *testing.T) {
	labelsOf := wire.Labels()
	var excluded []string
	own := map[string]string{}
	alerts := loadAlerts(t)
	for _, q := range allQueries(t) {
		for _, m := range reasonMatchers(t, q) {
			for _, r := range matchedReasons(t, m) {
				if !slices.Contains(labelsOf, r) {
					t.Errorf("%s: matches reason %q, which the failure table does not have (wire.Labels: %q)", m.where, r, labelsOf)
				}
			}
		}
	}
	for _, a := range alerts {
		for _, m := range reasonMatchers(t, query{where: "alert " + a.name, expr: a.expr}) {
			switch {
			case a.name == "AgentfyViewsFailing" && m.matcher.Type == labels.MatchNotRegexp:
				excluded = append(excluded, matchedReasons(t, m)...)
			case m.matcher.Type == labels.MatchEqual:
				own[m.matcher.Value] = a.name
			default:
				t.Errorf("alert %s: reason matcher %s: only AgentfyViewsFailing leaves reasons out", a.name, m.matcher)
			}
		}
	}
	if len(excluded) == 0 {
		t.Fatal("AgentfyViewsFailing leaves no reason out: the test reads it wrongly")
	}
	for r, name := range ownAlerts {
		if !slices.ContainsFunc(alerts, func(a alert) bool { return a.name == name }) {
			t.Errorf("%s: its own alert %s is not in %s", r, name, rulesFile)
		}
		own[r] = name
	}
	for _, r := range excluded {
		if own[r] == "" {
			t.Errorf("AgentfyViewsFailing leaves %s out, and no alert of its own watches it", r)
		}
	}
	for r, name := range own {
		if !slices.Contains(excluded, r) {
			t.Errorf("%s has an alert of its own (%s), and AgentfyViewsFailing pages on it too", r, name)
		}
	}
}
