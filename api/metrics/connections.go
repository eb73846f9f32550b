package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RedisProbeTimeout bounds the PING behind agentfy_redis_up: a scrape waits no longer
// for a Redis that does not answer.
const RedisProbeTimeout = time.Second

// Connections are a replica's links to NATS and Redis as its metrics read them, at
// scrape time. Each field is required.
type Connections struct {
	// NATSConnected reports whether the NATS connection is up now (not closed, not
	// reconnecting).
	NATSConnected func() bool
	// NATSReconnects counts the NATS connection's reconnects since the replica started.
	NATSReconnects func() uint64
	// RedisUp asks Redis whether it answers now (a PING under a short deadline).
	RedisUp func() bool
	// RedisDials counts the connections the Redis client opened, and those it failed
	// to open, since the replica started.
	RedisDials func() (ok, failed uint64)
	// RedisRoundTrips counts the Redis client's round trips (a command alone or a
	// pipeline) since the replica started.
	RedisRoundTrips func() uint64
}

var (
	natsConnectedDesc = prometheus.NewDesc("agentfy_nats_connected",
		"1 while the replica's NATS connection is up, 0 while it is down or reconnecting: views across replicas and status events need it.", nil, nil)
	natsReconnectsDesc = prometheus.NewDesc("agentfy_nats_reconnects_total",
		"Times the replica's NATS connection was lost and made again.", nil, nil)
	redisUpDesc = prometheus.NewDesc("agentfy_redis_up",
		"1 when Redis answered a PING at this scrape within "+RedisProbeTimeout.String()+", else 0: sessions, grants and the gate live there.", nil, nil)
	redisDialsDesc = prometheus.NewDesc("agentfy_redis_dials_total",
		"Connections the replica's Redis client opened (result ok) and failed to open (result failed): new ones follow every lost connection.", []string{"result"}, nil)
	redisTripsDesc = prometheus.NewDesc("agentfy_redis_round_trips_total",
		"Round trips of the replica's Redis client: a command sent alone or a pipeline (per node of a Cluster). A view that is served costs five across the replicas (BENCHMARKS.md §7).", nil, nil)
)

// WatchConnections exports the replica's NATS and Redis connections: whether each is up
// now, and how often they were made again.
func (m *Registry) WatchConnections(c Connections) {
	m.reg.MustRegister(&connCollector{c})
}

type connCollector struct{ c Connections }

func (cc *connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- natsConnectedDesc
	ch <- natsReconnectsDesc
	ch <- redisUpDesc
	ch <- redisDialsDesc
	ch <- redisTripsDesc
}

func (cc *connCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(natsConnectedDesc, prometheus.GaugeValue, one(cc.c.NATSConnected()))
	ch <- prometheus.MustNewConstMetric(natsReconnectsDesc, prometheus.CounterValue, float64(cc.c.NATSReconnects()))
	ch <- prometheus.MustNewConstMetric(redisUpDesc, prometheus.GaugeValue, one(cc.c.RedisUp()))
	ok, failed := cc.c.RedisDials()
	ch <- prometheus.MustNewConstMetric(redisDialsDesc, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(redisDialsDesc, prometheus.CounterValue, float64(failed), "failed")
	ch <- prometheus.MustNewConstMetric(redisTripsDesc, prometheus.CounterValue, float64(cc.c.RedisRoundTrips()))
}

// one is 1 for true and 0 for false.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
