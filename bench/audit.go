package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/replica"
)

// auditCostGoal is issue 50's bar for the durable audit trail: waiting for the audit
// stream's acknowledgement of a frame's event before serving the frame may add at most
// 1 ms to a view at p50, against a replica that publishes the event best effort.
const auditCostGoal = time.Millisecond

// auditResult is section 1's overhead of the acknowledged publish: views answered by a
// durable replica (the frame served once the stream acknowledged its event) against
// views answered by a best-effort one (the event queued for core NATS), alternated in
// one run on one stack.
type auditResult struct {
	Pairs int `json:"pairs"`
	// BestEffortReplica is the best-effort replica's id.
	BestEffortReplica string `json:"bestEffortReplica"`
	// Durable and BestEffort are everything but the capture (each view − the broker's
	// capture inside it) at the durable and at the best-effort replica; DurableView and
	// BestEffortView the whole views.
	Durable        dist `json:"durable"`
	BestEffort     dist `json:"bestEffort"`
	DurableView    dist `json:"durableView"`
	BestEffortView dist `json:"bestEffortView"`
	// Ratios of Durable to BestEffort at p50, p95 and p99.
	RatioP50 float64 `json:"ratioP50"`
	RatioP95 float64 `json:"ratioP95"`
	RatioP99 float64 `json:"ratioP99"`
	// Acked is how many events the durable replica's publisher had acknowledged by the
	// stream during the suite, Sent how many the best-effort one sent unacknowledged;
	// each view is one event. The Dropped are their drops meanwhile.
	Acked             uint64 `json:"acked"`
	Sent              uint64 `json:"sent"`
	DurableDropped    uint64 `json:"durableDropped"`
	BestEffortDropped uint64 `json:"bestEffortDropped"`
}

// auditSide is one replica of the comparison and what its views measured.
type auditSide struct {
	rep              *stack.Replica
	views, overheads []time.Duration
}

// benchAudit measures what the durable audit trail adds to section 1's views. Beside
// replica A of the main stack, which serves a frame only once the audit stream
// acknowledged its event, it starts one more replica on the same stack with
// AGENTFY_AUDIT=best-effort (replica.Options.AuditBestEffort), and alternates views of
// the same tab at the two (the worker stays on replica B), the order flipping every
// pair, each after a random idle gap. Every view counts what it spent beside the
// broker's capture, as the tracing comparison does. The best-effort replica stays up
// until the stack closes, answering its share of the broker's consume calls through
// the balancer as the others do: stopped, it would stay in the balancer's round robin
// as a refused connection for the suites after this one.
func benchAudit(ctx context.Context, o benchOptions, st *stack.Stack, bs *benchSession, v *viewer) (auditResult, error) {
	durable := st.Replicas[0]
	if durable.Audit.BestEffort() {
		return auditResult{}, errors.New("replica-a publishes best effort: nothing to compare")
	}
	best, err := st.StartReplicaWith(ctx, len(st.Replicas), st.NATS.ClientURL(), func(ro *replica.Options) { ro.AuditBestEffort = true })
	if err != nil {
		return auditResult{}, fmt.Errorf("best-effort replica: %w", err)
	}
	if err := waitReady(ctx, best.URL); err != nil {
		return auditResult{}, err
	}
	sides := [2]*auditSide{{rep: durable}, {rep: best}}
	acked, sent := durable.Audit.Published(), best.Audit.Published()
	dropped, bestDropped := durable.Audit.Dropped(), best.Audit.Dropped()
	var views uint64 // at each replica
	for i := range o.auditWarm + o.auditPairs {
		count := i >= o.auditWarm
		first, second := sides[0], sides[1]
		if i%2 == 1 {
			first, second = second, first
		}
		for _, s := range []*auditSide{first, second} {
			if err := s.view(ctx, bs, v, count); err != nil {
				return auditResult{}, fmt.Errorf("%s: %w", s.rep.ID, err)
			}
		}
		views++
	}
	// The best-effort drain sends beside the views: let it take the last one's event.
	for deadline := time.Now().Add(audit.FlushTimeout); best.Audit.Published()-sent < views && time.Now().Before(deadline); {
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return auditResult{}, err
		}
	}
	d, b := sides[0], sides[1]
	r := auditResult{
		Pairs: o.auditPairs, BestEffortReplica: best.ID,
		Durable: summarize(d.overheads), BestEffort: summarize(b.overheads),
		DurableView: summarize(d.views), BestEffortView: summarize(b.views),
		Acked: durable.Audit.Published() - acked, Sent: best.Audit.Published() - sent,
		DurableDropped: durable.Audit.Dropped() - dropped, BestEffortDropped: best.Audit.Dropped() - bestDropped,
	}
	r.RatioP50, r.RatioP95, r.RatioP99 = ratio(r.Durable.P50, r.BestEffort.P50), ratio(r.Durable.P95, r.BestEffort.P95), ratio(r.Durable.P99, r.BestEffort.P99)
	return r, nil
}

// view asks for one view at the side's replica after a random idle gap and, when
// count, records the whole view and what it spent beside the broker's capture.
func (s *auditSide) view(ctx context.Context, bs *benchSession, v *viewer, count bool) error {
	if err := v.openGate(ctx, benchAgent); err != nil {
		return err
	}
	bs.takeHop()
	if err := idleGap(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	_, err := v.view(ctx, s.rep.URL, benchAgent)
	total := time.Since(t0)
	if err != nil {
		return err
	}
	h := bs.takeHop()
	if h.capture <= 0 {
		return errors.New("a view without the broker's capture")
	}
	if count {
		s.views, s.overheads = append(s.views, total), append(s.overheads, total-h.capture)
	}
	return nil
}
