package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// The view routes, as they are registered and as the metrics' route label names them.
const (
	AgentViewRoute   = "/v1/agents/:id/worker/view"
	PartnerViewRoute = "/v1/orgs/:orgId/agents/:id/worker/view"
)

// Metrics are one replica's Prometheus series. Labels carry routes, statuses and
// reasons only: never a user, agent, session or URL.
type Metrics struct {
	reg      *prometheus.Registry
	outcomes *prometheus.CounterVec
	reasons  *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	gate     prometheus.Counter
	forged   prometheus.Counter
	identity *prometheus.CounterVec
}

// NewMetrics registers the series. pending, waiters and workers are read at scrape time.
func NewMetrics(pending, waiters, workers, listeners func() int) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg: reg,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfy_view_requests_total",
			Help: "View requests by route, HTTP status and outcome (frame, no_tab, not_live, rate_limited, not_found, unavailable, …).",
		}, []string{"route", "status", "outcome"}),
		reasons: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfy_view_unavailable_total",
			Help: reasonsHelp(),
		}, []string{"route", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentfy_view_duration_seconds",
			Help:    "View request latency by route and HTTP status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, wire.ViewTimeout.Seconds()},
		}, []string{"route", "status"}),
	}
	// Every reason of every view route exists from the start, at 0: a rate over a series
	// that appears with its first failure would miss that failure, and an alert on the
	// first broker_down of a deployment would not fire.
	// So does every answer a view route gives (its status and outcome): the first 404 or
	// 429 of a replica shows on the dashboard's rates too.
	for _, route := range []string{AgentViewRoute, PartnerViewRoute} {
		for _, reason := range wire.Labels() {
			m.reasons.WithLabelValues(route, reason)
		}
		for _, a := range viewOutcomes() {
			m.outcomes.WithLabelValues(route, strconv.Itoa(a.status), a.outcome)
		}
	}
	m.gate = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentfy_gate_refusals_total",
		Help: "View requests refused by the per-agent gate of " + view.GateWindow.String() + " (429).",
	})
	m.forged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentfy_capability_forged_total",
		Help: "Grants the consume route refused because no replica's key made their MAC: written to Redis by someone else.",
	})
	m.identity = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentfy_identity_unavailable_total",
		Help: "Requests with a human token answered 503 identity_unavailable, by route: the token's keys could not be confirmed because the identity provider does not answer (its JWK set older than AGENTFY_JWT_JWKS_MAX_STALE, never fetched, or without the token's kid while refreshes fail).",
	}, []string{"route"})
	gauge := func(name, help string, f func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	reg.MustRegister(m.outcomes, m.reasons, m.latency, m.gate, m.forged, m.identity,
		gauge("agentfy_view_pending", "View requests this replica waits for (bound "+strconv.Itoa(view.MaxInFlight)+").", pending),
		gauge("agentfy_observation_waiters", "View requests relayed to workers held by this replica (bound "+strconv.Itoa(channel.MaxRelayWaiters)+" per connection).", waiters),
		gauge("agentfy_worker_connections", "Worker sockets held by this replica.", workers),
		gauge("agentfy_status_listeners", "Open status-feed streams.", listeners),
	)
	return m
}

// WatchAudit registers the audit trail's series, read at scrape time from p:
// agentfy_audit_dropped_total{reason} (audit.DropReasons), agentfy_audit_published_total
// and agentfy_audit_best_effort.
func (m *Metrics) WatchAudit(p *audit.Publisher) {
	m.reg.MustRegister(auditCollector{p}, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "agentfy_audit_published_total",
		Help: "Audit events this replica published that the audit stream acknowledged (with AGENTFY_AUDIT=best-effort: that were sent, unacknowledged).",
	}, func() float64 { return float64(p.Published()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentfy_audit_best_effort",
		Help: "1 when this replica publishes its audit trail unacknowledged (AGENTFY_AUDIT=best-effort): frames are served whether or not the trail keeps their events, and the trail cannot show it is complete. 0 when durable.",
	}, func() float64 {
		if p.BestEffort() {
			return 1
		}
		return 0
	}))
}

// WatchPeers registers agentfy_worker_invalid_messages_total, read at scrape time from
// invalid (channel.Hub.InvalidMessages): bad input from workers, whose log lines are
// bounded.
func (m *Metrics) WatchPeers(invalid func() uint64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "agentfy_worker_invalid_messages_total",
		Help: "Messages from workers on their sockets that were no JSON-RPC message, each ignored; the log says the first few a minute.",
	}, func() float64 { return float64(invalid()) }))
}

// auditDropped describes agentfy_audit_dropped_total.
var auditDropped = prometheus.NewDesc("agentfy_audit_dropped_total",
	"Audit events (view decisions, admin changes) this replica could not record, by cause: full (its buffer of "+strconv.Itoa(audit.Buffer)+" events), invalid (too large or an unknown action), closed (left at shutdown), unacknowledged (the audit stream did not acknowledge it within "+audit.RetryFor.String()+"), refused (the server refused a best-effort publish), publish (the connection failed a best-effort publish). Each leaves a gap `agentfy audit verify` shows.",
	[]string{"reason"}, nil)

// auditCollector reads the publisher's drops by cause at scrape time.
type auditCollector struct{ p *audit.Publisher }

func (c auditCollector) Describe(ch chan<- *prometheus.Desc) { ch <- auditDropped }

func (c auditCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range audit.DropReasons {
		ch <- prometheus.MustNewConstMetric(auditDropped, prometheus.CounterValue, float64(c.p.Drops(r)), r)
	}
}

// MetricsPath is the one route of a replica's metrics listener.
const MetricsPath = "/metrics"

// Handler serves m's series in Prometheus's text format, whatever the request's path
// (ListenerHandler routes to it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ListenerHandler is the whole of a replica's metrics listener (AGENTFY_METRICS_LISTEN),
// which serves
//
//	GET  /metrics                                       none                m's series
//
// and nothing else: every other path is the public API's 404 (not_found, "no such
// route"), another method on /metrics its 405. The series say how much traffic a
// replica serves and how its parts fare, so they are served only here, on a listener a
// deployment keeps off the public network, never on the public listener nor the admin
// API's.
func (m *Metrics) ListenerHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	eng := gin.New()
	eng.HandleMethodNotAllowed = true
	eng.RedirectTrailingSlash = false
	eng.RedirectFixedPath = false
	eng.Use(answer.Recovery())
	eng.GET(MetricsPath, gin.WrapH(m.Handler()))
	answer.Unrouted(eng, answer.NoRoute)
	return eng
}

// viewAnswer is one answer of a view route, as agentfy_view_requests_total labels it.
type viewAnswer struct {
	status  int
	outcome string
}

// reasonsHelp is agentfy_view_unavailable_total's help: every value of its reason label
// (wire.Labels), those that cross processes first.
func reasonsHelp() string {
	own := slices.DeleteFunc(wire.Labels(), wire.IsReason)
	return "View requests answered 503, by route and reason: the wire reasons (" + strings.Join(wire.Reasons(), ", ") + "), " +
		strings.Join(own[:len(own)-1], ", ") + " or " + own[len(own)-1] + "."
}
