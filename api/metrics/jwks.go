package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentfy/agentfy/auth"
)

// WatchJWKS exports the identity provider's key sets as the verifier sees them, read at
// scrape time: how many keys verify, how old the last good set is (its staleness while
// the provider fails), and the refreshes that succeeded and failed. A source is named by
// its place in the configuration ("1", "2", …), never by its URL.
func (m *Registry) WatchJWKS(status func() []auth.JWKSStatus) {
	m.reg.MustRegister(&jwksCollector{status: status, now: time.Now})
}

var (
	jwksKeysDesc = prometheus.NewDesc("agentfy_jwks_keys",
		"Keys of the identity provider's JWK set that verify tokens now (0 before the first fetch, and once the last good set is older than its staleness bound).", []string{"source"}, nil)
	jwksAgeDesc = prometheus.NewDesc("agentfy_jwks_age_seconds",
		"Seconds since the JWK set was last fetched successfully (-1: never). It grows while the provider is down; the last good keys verify until AGENTFY_JWT_JWKS_MAX_STALE.", []string{"source"}, nil)
	jwksRefreshDesc = prometheus.NewDesc("agentfy_jwks_refreshes_total",
		"Fetches of the JWK set, by result (ok, failed).", []string{"source", "result"}, nil)
)

type jwksCollector struct {
	status func() []auth.JWKSStatus
	now    func() time.Time
}

func (c *jwksCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jwksKeysDesc
	ch <- jwksAgeDesc
	ch <- jwksRefreshDesc
}

func (c *jwksCollector) Collect(ch chan<- prometheus.Metric) {
	for i, s := range c.status() {
		src := strconv.Itoa(i + 1)
		age := -1.0
		if !s.LastSuccess.IsZero() {
			age = c.now().Sub(s.LastSuccess).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(jwksKeysDesc, prometheus.GaugeValue, float64(s.Keys), src)
		ch <- prometheus.MustNewConstMetric(jwksAgeDesc, prometheus.GaugeValue, age, src)
		ch <- prometheus.MustNewConstMetric(jwksRefreshDesc, prometheus.CounterValue, float64(s.Successes), src, "ok")
		ch <- prometheus.MustNewConstMetric(jwksRefreshDesc, prometheus.CounterValue, float64(s.Failures), src, "failed")
	}
}
