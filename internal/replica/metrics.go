package replica

import (
	"context"
	"net"

	"golang.org/x/net/netutil"
)

// MaxMetricsConnections bounds the metrics listener's connections: it serves the
// deployment's Prometheus, a few scrapers at most, not the public.
const MaxMetricsConnections = 16

// ServeMetrics serves the replica's Prometheus series at /metrics, and nothing else
// (metrics.Registry.ListenerHandler), on ln, a listener of its own, until ctx ends. Its
// requests and answers are bounded like the admin listener's.
func (r *Replica) ServeMetrics(ctx context.Context, ln net.Listener) error {
	return serveAside(ctx, netutil.LimitListener(ln, MaxMetricsConnections), r.Metrics.ListenerHandler())
}
