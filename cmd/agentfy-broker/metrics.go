package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/wire"
)

// envMetricsAddr, when set, serves Prometheus metrics on that TCP address (for example
// 127.0.0.1:9464 inside the browser worker container). Off by default: the broker's
// only interface is its socket.
const envMetricsAddr = "AGENTFY_METRICS_ADDR"

// captureMetrics are the broker's series: no URL, title or session labels.
type captureMetrics struct {
	reg      *prometheus.Registry
	duration prometheus.Histogram
	bytes    prometheus.Histogram
	total    *prometheus.CounterVec
	masked   prometheus.Counter
	whole    *prometheus.CounterVec
}

// newCaptureMetrics makes the broker's series; sandboxed is whether its Chromium runs
// in its sandbox (agentfy_broker_chromium_sandboxed).
func newCaptureMetrics(sandboxed bool) *captureMetrics {
	m := &captureMetrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentfy_broker_capture_duration_seconds",
			Help:    "Duration of the CDP capture sequence (getTargetInfo, getLayoutMetrics, captureScreenshot; with masks, the DOM snapshots and the painting too).",
			Buckets: []float64{.01, .025, .04, .05, .06, .075, .1, .15, .25, .5, 1, 2.5, 5},
		}),
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentfy_broker_frame_bytes",
			Help:    "Size of captured JPEG frames.",
			Buckets: prometheus.ExponentialBuckets(16<<10, 2, 8),
		}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfy_broker_captures_total",
			Help: "Capture attempts by result (ok, failed).",
		}, []string{"result"}),
		masked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentfy_broker_masked_frames_total",
			Help: "Frames sent with at least one secret region masked.",
		}),
		whole: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfy_broker_masked_whole_frames_total",
			Help: "Frames sent masked whole, by why (motion, changed, view_transition, ink): the masks could not be placed where the frame painted the secrets.",
		}, []string{"reason"}),
	}
	// 1 when Chromium runs in its sandbox, 0 when an operator turned it off: an alert
	// (AgentfyBrokerUnsandboxed) fires on 0.
	sandbox := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentfy_broker_chromium_sandboxed",
		Help: "1 when the broker's Chromium runs in its sandbox (seccomp-bpf and namespaces for every renderer), 0 when AGENTFY_CHROMIUM_SANDBOX=off.",
	})
	if sandboxed {
		sandbox.Set(1)
	}
	m.reg.MustRegister(sandbox)
	// Both results exist from the start, at 0, so that a rate sees the first failure.
	m.total.WithLabelValues("ok")
	m.total.WithLabelValues("failed")
	// Every reason exists from the start, at 0.
	for _, why := range wire.HiddenReasons {
		m.whole.WithLabelValues(why)
	}
	m.reg.MustRegister(m.duration, m.bytes, m.total, m.masked, m.whole, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// capture is the broker's OnCapture hook.
func (m *captureMetrics) record(s broker.CaptureStats) {
	if s.Failed {
		m.total.WithLabelValues("failed").Inc()
		return
	}
	m.total.WithLabelValues("ok").Inc()
	m.duration.Observe(s.Duration.Seconds())
	m.bytes.Observe(float64(s.Bytes))
	if s.Masked > 0 {
		m.masked.Inc()
	}
	if s.Hidden != "" {
		m.whole.WithLabelValues(s.Hidden).Inc()
	}
}

// handler serves GET /metrics and answers anything else from the failure table, like
// the broker's socket: a method /metrics does not take is 405, any other path 404, in
// the JSON error body.
func (m *captureMetrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			w.Header().Set("Allow", "GET, HEAD")
			wire.WriteFailure(w, wire.FailBrokerMethodNotAllowed)
			return
		}
		wire.WriteFailure(w, wire.FailBrokerNoRoute)
	})
	return mux
}

// serve exposes /metrics on addr until ctx ends.
func (m *captureMetrics) serve(ctx context.Context, addr string, logger zerolog.Logger) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: readTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn().Err(err).Msg("metrics server")
		}
	}()
	logger.Info().Str("addr", ln.Addr().String()).Msg("metrics")
	return nil
}
