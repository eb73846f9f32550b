// Package monitoring holds the tests of the Grafana dashboard (deploy/grafana) and the
// Prometheus alerting rules (deploy/prometheus): their queries parse, name only series a
// running stack exports, and the alerts fire on the faults they are for. It has no
// production code: nothing imports it.
package monitoring
