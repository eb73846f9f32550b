// Package metrics is a replica's Prometheus series: the view routes' answers that the
// public API counts (CountView), the collectors read at scrape time (its bounds, its NATS
// and Redis connections, the identity provider's key sets, the audit trail), and the
// listener of their own that serves them (ListenerHandler), never the public one nor the
// admin API's.
package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

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

// Registry holds one replica's Prometheus series and serves them (ListenerHandler).
// Labels carry routes, statuses and reasons only: never a user, agent, session or URL.
type Registry struct {
	reg      *prometheus.Registry
	outcomes *prometheus.CounterVec
	reasons  *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	gate     prometheus.Counter
	forged   prometheus.Counter
	identity *prometheus.CounterVec
}

// ViewAnswer is one answer of a view route, as agentfy_view_requests_total labels it.
type ViewAnswer struct {
	Status  int
	Outcome string
}

// Config says what New registers. Every field is required.
type Config struct {
	// ViewRoutes are the view routes' templates, the values of the view series' route
	// label; ViewAnswers every answer they give. Each series of a route's answers and
	// of its reasons (wire.Labels) exists from the start, at 0.
	ViewRoutes  []string
	ViewAnswers []ViewAnswer
	// Pending, Waiters, Workers and Listeners are read at scrape time: the view
	// requests the replica waits for, the views relayed to workers it holds, the
	// worker sockets it holds and the open status-feed streams.
	Pending, Waiters, Workers, Listeners func() int
}

// New registers the series.
func New(cfg Config) *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Registry{
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
	for _, route := range cfg.ViewRoutes {
		for _, reason := range wire.Labels() {
			m.reasons.WithLabelValues(route, reason)
		}
		for _, a := range cfg.ViewAnswers {
			m.outcomes.WithLabelValues(route, strconv.Itoa(a.Status), a.Outcome)
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
		gauge("agentfy_view_pending", "View requests this replica waits for (bound "+strconv.Itoa(view.MaxInFlight)+").", cfg.Pending),
		gauge("agentfy_observation_waiters", "View requests relayed to workers held by this replica (bound "+strconv.Itoa(channel.MaxRelayWaiters)+" per connection).", cfg.Waiters),
		gauge("agentfy_worker_connections", "Worker sockets held by this replica.", cfg.Workers),
		gauge("agentfy_status_listeners", "Open status-feed streams.", cfg.Listeners),
	)
	return m
}

// View is one view request's answer as the view series count it.
type View struct {
	Route   string // the route's template
	Status  int
	Outcome string
	// Reason is why a 503 failed (one of wire.Labels); "" for any other answer.
	Reason string
	// Gated: the per-agent gate refused the view (429 rate_limited).
	Gated bool
	Took  time.Duration
}

// CountView counts v: agentfy_view_requests_total by its route, status and outcome,
// agentfy_gate_refusals_total when the gate refused it,
// agentfy_view_unavailable_total by its reason when it has one, and
// agentfy_view_duration_seconds by its route and status.
func (m *Registry) CountView(v View) {
	st := strconv.Itoa(v.Status)
	m.outcomes.WithLabelValues(v.Route, st, v.Outcome).Inc()
	if v.Gated {
		m.gate.Inc()
	}
	if v.Reason != "" {
		m.reasons.WithLabelValues(v.Route, v.Reason).Inc()
	}
	m.latency.WithLabelValues(v.Route, st).Observe(v.Took.Seconds())
}

// CountForgedGrant counts a grant the consume route refused because no replica's key
// made its MAC (agentfy_capability_forged_total).
func (m *Registry) CountForgedGrant() { m.forged.Inc() }

// CountIdentityUnavailable counts a request of route answered 503 identity_unavailable
// (agentfy_identity_unavailable_total).
func (m *Registry) CountIdentityUnavailable(route string) {
	m.identity.WithLabelValues(route).Inc()
}

// WatchAudit registers the audit trail's series, read at scrape time from p:
// agentfy_audit_dropped_total{reason} (audit.DropReasons), agentfy_audit_published_total
// and agentfy_audit_best_effort.
func (m *Registry) WatchAudit(p *audit.Publisher) {
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
func (m *Registry) WatchPeers(invalid func() uint64) {
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

// Path is the one route of a replica's metrics listener.
const Path = "/metrics"

// Handler serves m's series in Prometheus's text format, whatever the request's path
// (ListenerHandler routes to it).
func (m *Registry) Handler() http.Handler {
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
func (m *Registry) ListenerHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	eng := gin.New()
	eng.HandleMethodNotAllowed = true
	eng.RedirectTrailingSlash = false
	eng.RedirectFixedPath = false
	eng.Use(answer.Recovery())
	eng.GET(Path, gin.WrapH(m.Handler()))
	answer.Unrouted(eng, answer.NoRoute)
	return eng
}

// reasonsHelp is agentfy_view_unavailable_total's help: every value of its reason label
// (wire.Labels), those that cross processes first.
func reasonsHelp() string {
	own := slices.DeleteFunc(wire.Labels(), wire.IsReason)
	return "View requests answered 503, by route and reason: the wire reasons (" + strings.Join(wire.Reasons(), ", ") + "), " +
		strings.Join(own[:len(own)-1], ", ") + " or " + own[len(own)-1] + "."
}
