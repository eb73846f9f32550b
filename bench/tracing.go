package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentfy/agentfy/internal/dev/servers"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// tracingCostGoal is issue 37's bar for tracing: with every view sampled and its spans
// exported to a real receiver, everything but the capture may grow by at most 0.3 ms at
// p50.
const tracingCostGoal = 300 * time.Microsecond

// spansPerView is how many spans one sampled view of a live tab leaves in the backend:
// the view route and the NATS request at replica A, the relay at replica B, the
// worker's call and its POST /observe, the broker's POST /observe and its consume call,
// and the consume route at a replica.
const spansPerView = 8

// Bounds of the tracing suite's own waits.
const (
	jaegerReadyTimeout = time.Minute      // Jaeger's start (servers.JaegerStartTimeout)
	traceExportTimeout = 30 * time.Second // every counted view's trace whole in Jaeger
	tracePollInterval  = 100 * time.Millisecond
)

// tracingResult is section 1's overhead with tracing on against off: the same views on
// two stacks alike but for their traces, alternated in one run.
type tracingResult struct {
	Pairs int `json:"pairs"`
	// Untraced and Traced are everything but the capture (each view − the broker's
	// capture inside it) with tracing off and on; UntracedView and TracedView the
	// whole views.
	Untraced     dist `json:"untraced"`
	Traced       dist `json:"traced"`
	UntracedView dist `json:"untracedView"`
	TracedView   dist `json:"tracedView"`
	// Ratios of Traced to Untraced at p50, p95 and p99.
	RatioP50 float64 `json:"ratioP50"`
	RatioP95 float64 `json:"ratioP95"`
	RatioP99 float64 `json:"ratioP99"`
	// Sampled counts the counted traced views whose answer carried a traceresponse
	// header, UntracedSampled the untraced ones that did (none may).
	Sampled         int `json:"sampled"`
	UntracedSampled int `json:"untracedSampled"`
	// Exported counts the counted traced views whose trace Jaeger held whole
	// (SpansPerView spans, all of that trace) after the run.
	Exported     int `json:"exported"`
	SpansPerView int `json:"spansPerView"`
}

// tracingSide is one stack of the comparison and what its views measured.
type tracingSide struct {
	st     *stack.Stack
	bs     *benchSession
	v      *viewer
	traced bool

	views, overheads []time.Duration
	sampled          int
	traceIDs         []string // of the counted views, when traced
}

// benchTracing measures what tracing adds to section 1's views. Beside the main stack
// (untraced) it starts Jaeger from bin and a second stack exported to it (every view
// sampled: the default parent-based sampler samples every view that arrives without a
// trace context), laid out alike (two replicas, the worker on replica B, the same
// logger, its own broker with Chromium built by the bench as the main one is, a tab of
// the same page), and alternates views at replica A of each, the order flipping every
// pair, each after a random idle gap. Every view counts what it spent beside the
// broker's capture, which takes tens of milliseconds and whose noise would hide a cost
// of a fraction of one. After the run it checks that every counted traced view's trace
// reached Jaeger whole.
func benchTracing(ctx context.Context, o benchOptions, main *stack.Stack, mainSession *benchSession, mainViewer *viewer) (tracingResult, error) {
	dir, err := os.MkdirTemp("", "agentfy-bench-jaeger-")
	if err != nil {
		return tracingResult{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	jctx, cancel := context.WithTimeout(ctx, jaegerReadyTimeout)
	jaeger, err := servers.RunJaeger(jctx, o.jaegerBin, dir)
	cancel()
	if err != nil {
		return tracingResult{}, fmt.Errorf("jaeger: %w", err)
	}
	defer jaeger.Stop()

	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.OTLPHTTP}
	st, err := stack.Start(ctx, stack.Options{
		Replicas: 2, Deployment: benchDeployment, Chromium: o.chromium, Log: o.log,
		Traces: func(name string) string { return env[name] },
	})
	if err != nil {
		return tracingResult{}, fmt.Errorf("traced stack: %w", err)
	}
	defer st.Close()
	bs, err := startBenchSession(ctx, st, benchAgent, 1, o.chromium, benchPage, o.log)
	if err != nil {
		return tracingResult{}, fmt.Errorf("traced stack: %w", err)
	}
	defer bs.Close(ctx)
	token, err := st.Token(benchUser, time.Hour)
	if err != nil {
		return tracingResult{}, err
	}
	sides := [2]*tracingSide{
		{st: main, bs: mainSession, v: mainViewer},
		{st: st, bs: bs, v: newViewer(benchUser, token, st), traced: true},
	}
	for i := range o.tracingWarm + o.tracingPairs {
		count := i >= o.tracingWarm
		first, second := sides[0], sides[1]
		if i%2 == 1 {
			first, second = second, first
		}
		for _, s := range []*tracingSide{first, second} {
			if err := s.view(ctx, count); err != nil {
				return tracingResult{}, err
			}
		}
	}

	untraced, traced := sides[0], sides[1]
	r := tracingResult{
		Pairs:    o.tracingPairs,
		Untraced: summarize(untraced.overheads), Traced: summarize(traced.overheads),
		UntracedView: summarize(untraced.views), TracedView: summarize(traced.views),
		Sampled: traced.sampled, UntracedSampled: untraced.sampled, SpansPerView: spansPerView,
	}
	r.RatioP50, r.RatioP95, r.RatioP99 = ratio(r.Traced.P50, r.Untraced.P50), ratio(r.Traced.P95, r.Untraced.P95), ratio(r.Traced.P99, r.Untraced.P99)
	if r.Exported, err = exportedTraces(ctx, st, jaeger, traced.traceIDs); err != nil {
		return tracingResult{}, err
	}
	return r, nil
}

// view asks for one view at replica A of the side's stack after a random idle gap and,
// when count, records it: the whole view, what it spent beside the broker's capture,
// and whether it was sampled.
func (s *tracingSide) view(ctx context.Context, count bool) error {
	if err := s.v.openGate(ctx, benchAgent); err != nil {
		return err
	}
	s.bs.takeHop()
	if err := idleGap(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	f, err := s.v.view(ctx, s.st.Replicas[0].URL, benchAgent)
	total := time.Since(t0)
	if err != nil {
		return err
	}
	h := s.bs.takeHop()
	if h.capture <= 0 {
		return errors.New("a view without the broker's capture")
	}
	if !count {
		return nil
	}
	s.views, s.overheads = append(s.views, total), append(s.overheads, total-h.capture)
	if f.traceResponse != "" {
		s.sampled++
		if s.traced {
			s.traceIDs = append(s.traceIDs, traceIDOf(f.traceResponse))
		}
	}
	return nil
}

// traceIDOf is the trace id of a traceresponse header (00-<trace id>-<span id>-<flags>),
// "" when it has no such shape.
func traceIDOf(header string) string {
	parts := strings.Split(header, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// exportedTraces flushes every part of st and counts the traces of ids that Jaeger holds
// whole (spansPerView spans, every one of that trace), waiting up to traceExportTimeout
// for the receiver to store what it was sent.
func exportedTraces(ctx context.Context, st *stack.Stack, jaeger *servers.Jaeger, ids []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, traceExportTimeout)
	defer cancel()
	if err := st.FlushTraces(ctx); err != nil {
		return 0, fmt.Errorf("flush traces: %w", err)
	}
	whole := 0
	t := time.NewTicker(tracePollInterval)
	defer t.Stop()
	for _, id := range ids {
		for {
			ok, err := traceWhole(ctx, jaeger, id)
			if err != nil && ctx.Err() != nil {
				return whole, nil
			}
			if err != nil {
				return 0, err
			}
			if ok {
				whole++
				break
			}
			select {
			case <-ctx.Done():
				return whole, nil // the rest did not arrive in time: the count says so
			case <-t.C:
			}
		}
	}
	return whole, nil
}

// traceWhole reports whether Jaeger holds spansPerView spans of trace id and no other.
func traceWhole(ctx context.Context, jaeger *servers.Jaeger, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	tr, err := jaeger.Trace(ctx, id)
	switch {
	case errors.Is(err, servers.ErrTraceNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("jaeger: %w", err)
	}
	for _, s := range tr.Spans {
		if s.TraceID != id {
			return false, fmt.Errorf("jaeger: span %s of trace %s in the answer for %s", s.OperationName, s.TraceID, id)
		}
	}
	return len(tr.Spans) == spansPerView, nil
}
