package bench

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentfy/agentfy/wire"
)

// overheadTarget is the headline's bar: a view's p50 at most 5 ms above the bare
// capture's p50 measured beside it. The ratio of the two is shown beside the overhead,
// not judged: it depends on how fast Chromium captures on the machine (1.09× where a
// capture took 87 ms, 1.19× where it took 51 ms, for about the same overhead).
const overheadTarget = 5 * time.Millisecond

// Section headings; the smoke test checks that each is in the report.
var benchSections = []string{
	"## 1. End to end vs the physical limit",
	"## 2. Privacy masks",
	"## 3. Routing cost vs the broadcast design",
	"## 4. Fast paths",
	"## 5. Footprint",
	"## 6. Go benchmarks",
	"## 7. Capacity",
}

// mdTable renders a Markdown table.
func mdTable(b *strings.Builder, header []string, rows [][]string) {
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	b.WriteString("\n")
}

func fx(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) + "×" }
func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
func f0(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }

// Markdown renders the results as Markdown: the machine, then one section per suite.
// full adds the method notes (BENCHMARKS.md has them; the terminal does not).
func (r *Results) Markdown(full bool) string {
	var b strings.Builder
	renderMachine(&b, r, full)
	// 1. End to end.
	renderE2E(&b, r, full)
	// 2. Privacy masks.
	renderMasks(&b, r, full)
	// 3. Routing.
	renderRouting(&b, r, full)
	// 4. Fast paths.
	renderFastPaths(&b, r, full)
	// 5. Footprint.
	renderFootprint(&b, r, full)
	// 6. Go benchmarks.
	renderGoBench(&b, r, full)
	// 7. Capacity.
	renderCapacity(&b, r, full)
	return b.String()
}

// renderMachine renders the report's title, what run it was (with the method in
// general when full) and the table of the machine it ran on.
func renderMachine(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	mode := "full run"
	if r.Quick {
		mode = "quick run (-quick: small samples, a smoke test; read the full run's numbers instead)"
	}
	p("# Benchmarks\n\n")
	if full {
		p("Written by `%s` (%s) on %s UTC; the run took %.0f s. ", r.Command, mode, r.Started.Format("2006-01-02 15:04"), r.Elapsed.Seconds())
		p("Every comparison below is measured in the same run, interleaved or alternated with its baseline, ")
		p("because this machine is shared and noisy: read the ratios first, the absolute numbers second. ")
		p("Quantiles are nearest-rank; n is beside each.\n\n")
	} else {
		p("%s, %.0f s\n\n", mode, r.Elapsed.Seconds())
	}
	m := r.Machine
	mdTable(b, []string{"machine", ""}, [][]string{
		{"CPU", fmt.Sprintf("%s, %d cores", m.CPU, m.Cores)},
		{"memory", mib(float64(m.Memory))},
		{"kernel", m.Kernel},
		{"Go", m.Go},
		{"Chromium", m.Chromium},
		{"commit", m.Commit},
		{"command", "`" + r.Command + "`"},
	})
}

// renderE2E renders section 1: the views against the bare capture measured beside
// them and the verdict against overheadTarget, then the time of a view per hop (and, when
// full, where the time goes).
func renderE2E(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	e := r.E2E
	p("%s\n\n", benchSections[0])
	if full {
		p("A view of `%s` asked at replica-a (`GET /v1/agents/:id/worker/view`, a member's JWT) while the worker is attached to replica-b, ", benchAgent)
		p("timed from the request to the decoded frame (JSON parsed, base64 decoded, JPEG header read), against the bare CDP capture sequence ")
		p("(`Target.getTargetInfo`, `Page.getLayoutMetrics`, `Page.captureScreenshot` JPEG q60, clip scaled to ≤ 1280 px) on the same tab through a CDP session of the bench's own. ")
		p("The two alternate (%d pairs, the order flipping every pair), each after a random idle gap below 50 ms so that both start at a random phase of Chromium's 16.7 ms frame cadence. ", e.Pairs)
		p("The broker runs as deployed, with its privacy masks on (`broker.DefaultConfig()`), so its capture reads the page's layout and a DOM snapshot before and after the screenshot; this page has nothing to mask (section 2). ")
		p("The broker's capture spacing is off for the benchmark broker (`MinCaptureInterval: 0`); the per-agent gate is opened between views by deleting its key (`agentfy:bench:gate:{a:%s}`) outside the timed part. ", benchAgent)
		p("Every other two pairs the view is also timed per hop (below); those views are reported on their own row and left out of the headline, since the hop timing adds a NATS subscriber.\n\n")
	}
	mdTable(b, []string{"", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms"}, [][]string{
		{"**view**: request at A → decoded frame (worker on B)", strconv.Itoa(e.View.N), ms(e.View.P50), ms(e.View.P95), ms(e.View.P99), ms(e.View.Mean)},
		{"bare CDP capture, same tab (the physical limit)", strconv.Itoa(e.Bare.N), ms(e.Bare.P50), ms(e.Bare.P95), ms(e.Bare.P99), ms(e.Bare.Mean)},
		{"**overhead: view − bare**", "", "**" + ms(e.View.P50-e.Bare.P50) + "**", ms(e.View.P95 - e.Bare.P95), "**" + ms(e.View.P99-e.Bare.P99) + "**", ms(e.View.Mean - e.Bare.Mean)},
		{"view / bare", "", fx(e.RatioP50), fx(e.RatioP95), fx(e.RatioP99), fx(ratio(e.View.Mean, e.Bare.Mean))},
		{"the broker's own capture inside each view", strconv.Itoa(e.InCap.N), ms(e.InCap.P50), ms(e.InCap.P95), ms(e.InCap.P99), ms(e.InCap.Mean)},
		{"everything but the capture (each view − its capture)", strconv.Itoa(e.Overhead.N), ms(e.Overhead.P50), ms(e.Overhead.P95), ms(e.Overhead.P99), ms(e.Overhead.Mean)},
		{"view timed per hop (with the NATS spies)", strconv.Itoa(e.Spied.N), ms(e.Spied.P50), ms(e.Spied.P95), ms(e.Spied.P99), ms(e.Spied.Mean)},
	})
	verdict := "**within**"
	if e.View.P50-e.Bare.P50 > overheadTarget {
		verdict = "**not within**"
	}
	p("**A view costs %s ms above the bare capture at p50 and %s ms at p99** (%s ms against %s ms at p50, %s): %s the %s ms target. ",
		ms(e.View.P50-e.Bare.P50), ms(e.View.P99-e.Bare.P99), ms(e.View.P50), ms(e.Bare.P50), fx(e.RatioP50), verdict, ms(overheadTarget))
	p("Everything but the capture costs %s ms at p50 (%.1f %% of the bare capture).\n\n", ms(e.Overhead.P50), 100*ratio(e.Overhead.P50, e.Bare.P50))
	if full {
		p("Where the time of a view goes, per hop, timed from outside the code it measures (all in one process, one monotonic clock): ")
		p("a silent second NATS subscriber on the session's view subject (when the request was delivered) and one on the replicas' inboxes `agentfy.bench.db0._INBOX.replica.>` (when the sealed reply was), ")
		p("the broker's `/observe` handler wrapped on its socket, a timing transport under the broker's consume client, the broker's `OnCapture` hook, ")
		p("and the viewer's response headers. Shares are of the p50 of these views; the p50s of the hops need not add up to the p50 of the whole.\n\n")
	}
	var rows [][]string
	for _, h := range e.Hops {
		rows = append(rows, []string{h.Name, strconv.Itoa(h.Dist.N), ms(h.Dist.P50), ms(h.Dist.P95), f1(100*h.Share) + " %", h.What})
	}
	mdTable(b, []string{"hop", "n", "p50 ms", "p95 ms", "share of view p50", "what it covers"}, rows)
	if full {
		renderWhereTimeGoes(b, r)
	}
	renderTracing(b, r, full)
	renderAudit(b, r, full)
}

// renderAudit renders section 1's overhead of the acknowledged publish: views at a
// durable replica against views at a best-effort one, and the verdict against
// auditCostGoal.
func renderAudit(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	a := r.Audit
	if a.Pairs == 0 {
		return
	}
	p("### The audit trail: acknowledged against best effort\n\n")
	if full {
		p("The views above again, on this stack, at two replicas that differ only in their audit trail: replica-a, durable (the default), which serves a frame only once the JetStream stream `AGENTFY_AUDIT` of the stack's embedded NATS server (a file store) acknowledged the frame's event, ")
		p("and %s, started for this comparison with `AGENTFY_AUDIT=best-effort`, which queues the event for a core NATS publish and serves the frame without waiting; the worker stays on replica-b. ", a.BestEffortReplica)
		p("Views at the two alternate (%d pairs, the order flipping every pair, after warm-up pairs), each after a random idle gap below 50 ms. ", a.Pairs)
		p("Each view counts what it spends beside the broker's capture inside it (as the row *everything but the capture* above), and the acknowledged publish's cost is the difference of the two sides' quantiles. ")
		p("`BenchmarkFrame` (section 6) prices the publisher's `Frame` alone, on the same kind of server without the rest of a view. ")
		p("The per-hop table above has no row of its own for the wait, which lies within *A: reply → response*: NATS spies stamp the event and its acknowledgement on a goroutine of theirs, tens to hundreds of microseconds late on this machine, which is the size of the wait itself (the server even sends the two in one write to a spy that reads both).\n\n")
	}
	row := func(name string, d dist) []string {
		return []string{name, strconv.Itoa(d.N), ms(d.P50), ms(d.P95), ms(d.P99), ms(d.Mean)}
	}
	cost := func(q func(dist) time.Duration) time.Duration { return q(a.Durable) - q(a.BestEffort) }
	p50, p95, p99 := cost(func(d dist) time.Duration { return d.P50 }), cost(func(d dist) time.Duration { return d.P95 }), cost(func(d dist) time.Duration { return d.P99 })
	mdTable(b, []string{"", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms"}, [][]string{
		row("everything but the capture, view at a durable replica (frame's event acknowledged)", a.Durable),
		row("everything but the capture, view at a best-effort replica", a.BestEffort),
		{"**the acknowledged publish's cost: durable − best effort**", "", "**" + ms(p50) + "**", "**" + ms(p95) + "**", "**" + ms(p99) + "**", ms(a.Durable.Mean - a.BestEffort.Mean)},
		{"durable / best effort", "", fx(a.RatioP50), fx(a.RatioP95), fx(a.RatioP99), fx(ratio(a.Durable.Mean, a.BestEffort.Mean))},
		row("whole view at a durable replica (frame's event acknowledged)", a.DurableView),
		row("whole view at a best-effort replica", a.BestEffortView),
	})
	verdict := "**within**"
	if p50 > auditCostGoal {
		verdict = "**not within**"
	}
	if p50 > 0 {
		p("**Waiting for the stream's acknowledgement costs %s ms per view at p50** (%s ms at p95, %s ms at p99; %s ms against %s ms beside the capture, %s): %s the %s ms goal. ",
			ms(p50), ms(p95), ms(p99), ms(a.Durable.P50), ms(a.BestEffort.P50), fx(a.RatioP50), verdict, ms(auditCostGoal))
	} else {
		// The wait cannot make a view faster: a difference below zero is the run's noise.
		p("**Waiting for the stream's acknowledgement costs nothing this run can tell from its noise at p50**: durable − best effort is %s ms (%s ms at p95, %s ms at p99; %s ms against %s ms beside the capture, %s), %s the %s ms goal. ",
			ms(p50), ms(p95), ms(p99), ms(a.Durable.P50), ms(a.BestEffort.P50), fx(a.RatioP50), verdict, ms(auditCostGoal))
	}
	p("Meanwhile the stream acknowledged %d events of replica-a's, and %s sent %d unacknowledged; %d and %d were dropped.", a.Acked, a.BestEffortReplica, a.Sent, a.DurableDropped, a.BestEffortDropped)
	frame := map[string]float64{}
	for _, g := range r.GoBench {
		if g.Package == "audit" {
			frame[g.Name] = g.NsPerOp
		}
	}
	if d, be := frame["BenchmarkFrame/durable"], frame["BenchmarkFrame/best_effort"]; d > 0 && be > 0 {
		p(" `Frame` alone (section 6): %s µs acknowledged, %s µs queued best effort.", f1(d/1000), f1(be/1000))
	}
	p("\n\n")
}

// renderTracing renders section 1's overhead with tracing on against off, the verdict
// against tracingCostGoal, and what the run checked of the traces.
func renderTracing(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	t := r.Tracing
	if t.Pairs == 0 {
		return
	}
	p("### Tracing on against off\n\n")
	if full {
		p("The views above again, on two stacks that differ only in their traces: this one, untraced, and a second one laid out alike (two replicas, the worker on replica-b, the same logger, a broker with Chromium of the bench's own on a tab of the same page) ")
		p("whose replicas, worker and broker export their spans over OTLP/HTTP to a real Jaeger v2 started by the bench (the default batch span processor and parent-based sampler, so every view, which arrives without a trace context, is sampled: %d spans each). ", t.SpansPerView)
		p("Views at replica-a of each alternate (%d pairs, the order flipping every pair, after warm-up pairs), each after a random idle gap below 50 ms, so that the machine's noise, Jaeger's own work and the exports of the traced views hit both sides alike. ", t.Pairs)
		p("Each view counts what it spends beside the broker's capture inside it (as the row *everything but the capture* above): the capture's tens of milliseconds of noise would hide a cost of a fraction of one.\n\n")
	}
	row := func(name string, d dist) []string {
		return []string{name, strconv.Itoa(d.N), ms(d.P50), ms(d.P95), ms(d.P99), ms(d.Mean)}
	}
	mdTable(b, []string{"", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms"}, [][]string{
		row("everything but the capture, tracing off", t.Untraced),
		row("everything but the capture, **tracing on** (every view sampled, exported to Jaeger)", t.Traced),
		{"**tracing cost: on − off**", "", "**" + ms(t.Traced.P50-t.Untraced.P50) + "**", ms(t.Traced.P95 - t.Untraced.P95), ms(t.Traced.P99 - t.Untraced.P99), ms(t.Traced.Mean - t.Untraced.Mean)},
		{"on / off", "", fx(t.RatioP50), fx(t.RatioP95), fx(t.RatioP99), fx(ratio(t.Traced.Mean, t.Untraced.Mean))},
		row("whole view, tracing off", t.UntracedView),
		row("whole view, tracing on", t.TracedView),
	})
	verdict := "**within**"
	if t.Traced.P50-t.Untraced.P50 > tracingCostGoal {
		verdict = "**not within**"
	}
	p("**Tracing costs %s ms per view at p50** (%s ms against %s ms beside the capture, %s): %s the %s ms goal. ",
		ms(t.Traced.P50-t.Untraced.P50), ms(t.Traced.P50), ms(t.Untraced.P50), fx(t.RatioP50), verdict, ms(tracingCostGoal))
	p("%d of the %d traced views were sampled (their answer carried `traceresponse`) and Jaeger held all %d spans of %d of them after the run; %d of the %d untraced views were sampled.\n\n",
		t.Sampled, t.TracedView.N, t.SpansPerView, t.Exported, t.UntracedSampled, t.UntracedView.N)
}

// renderRouting renders section 3: real views and the routed and broadcast designs at
// each replica count, and whether the messages or the latency of a view grow with the
// replicas.
func renderRouting(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s\n\n", benchSections[2])
	if full {
		p("One stack grows from 1 to 2, 4 and 8 replicas; the worker stays on the first. ")
		p("*Real views*: views through HTTP, asked round robin at every replica (as a balancer spreads them), one at a time, each followed by a bare capture of the same tab (view / bare is the view's latency net of the machine's mood at the time); ")
		p("messages are the NATS server's own counters (`Varz` `InMsgs`/`OutMsgs`/`OutBytes`), the delta around each view (its request, its reply and its audit event, delivered to one subscriber that stands in for the platform's stream), averaged. ")
		p("*Routed* and *broadcast* run at the NATS layer alone, alternating in blocks of 20 on the same connections: the request is a 64-hex request id asked from the replicas round robin, ")
		p("the reply %s of random bytes (the size of a real sealed frame). Routed: only the owner's connection subscribes, to a subject of the session (what the replicas do). ", kib(float64(r.ReplyBytes)))
		p("Broadcast: every replica's own connection subscribes to one subject and drops requests for sessions it does not hold; the owner answers — ")
		p("what the original Redis pub/sub design does, where every replica receives every request. Deliveries are again the server's `OutMsgs` delta.\n\n")
	}
	var rows [][]string
	for _, x := range r.Routing {
		rows = append(rows, []string{
			strconv.Itoa(x.Replicas),
			ms(x.ViewLatency.P50), ms(x.ViewLatency.P99), fx(x.ViewRatio), f1(x.ViewPublished), "**" + f1(x.ViewDeliveries) + "**", kib(x.ViewOutBytes),
			f1(x.RoutedDeliveries), ms(x.RoutedLatency.P50), ms(x.RoutedLatency.P99),
			f1(x.BroadcastDelivered), ms(x.BroadcastLatency.P50), ms(x.BroadcastLatency.P99),
		})
	}
	mdTable(b, []string{
		"replicas", "real view p50 ms", "p99 ms", "view / bare p50", "msgs published / view", "**msgs delivered / view**", "bytes delivered / view",
		"routed: delivered / req", "p50 ms", "p99 ms", "broadcast: delivered / req", "p50 ms", "p99 ms",
	}, rows)
	if len(r.Routing) > 0 {
		first, last := r.Routing[0], r.Routing[len(r.Routing)-1]
		p("Real views: %s NATS deliveries per view with %d replica(s), %s with %d; the broadcast design delivers %s with %d replicas. ",
			f1(first.ViewDeliveries), first.Replicas, f1(last.ViewDeliveries), last.Replicas, f1(last.BroadcastDelivered), last.Replicas)
		p("View / bare p50 is %s with %d replica(s) and %s with %d. ", fx(first.ViewRatio), first.Replicas, fx(last.ViewRatio), last.Replicas)
		msgs, latency := "does not grow", "nor does its latency beyond this run's noise (±15 %)"
		if last.ViewDeliveries > first.ViewDeliveries+0.1 {
			msgs = "**grows**"
		}
		if last.ViewRatio > first.ViewRatio*1.15 {
			latency = "and its latency **grows**"
		}
		p("With more replicas the number of messages per view %s, %s.\n\n", msgs, latency)
	}
}

// renderFastPaths renders section 4: each kind of answer under load against the no-op
// route measured in the same rounds (and, when full, their price in machine time).
func renderFastPaths(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	fp := r.FastPaths
	p("%s\n\n", benchSections[3])
	if full {
		p("Replica-a under a Go load generator in this process (keep-alive, %d concurrent requests), one kind of request at a time for %s, in %d round(s) whose order rotates, ", fp.Concurrency, fp.Phase, fp.Rounds)
		p("against the replica's no-op route `/healthz` in the same rounds. 404: a member asks for an agent of another team. ")
		p("429: the agent's gate key is held by the bench for the whole run. live:false: agents without a session, each asked once in the whole run, so that every request wins its gate. ")
		p("Every answer is checked (status, and body or headers); an unexpected one counts as an error.\n\n")
	}
	var rows [][]string
	for _, x := range fp.Paths {
		rows = append(rows, []string{x.Name, strconv.Itoa(x.Requests), strconv.Itoa(x.Errors), f0(x.RPS), ms(x.Latency.P50), ms(x.Latency.P99), fx(x.RPSRatio), fx(x.P99Ratio), x.What})
	}
	mdTable(b, []string{"answer", "requests", "errors", "req/s", "p50 ms", "p99 ms", "req/s vs no-op", "p99 vs no-op", "work per request"}, rows)
	if full {
		renderFastPathFloor(b, r)
	}
}

// renderFootprint renders section 5: the memory of a replica idle and with its views
// pending, the CPU per capture, and the bytes of a frame on each leg.
func renderFootprint(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	e, f := r.E2E, r.Footprint
	p("%s\n\n", benchSections[4])
	if full {
		p("The replicas run inside the bench's process (internal/dev/stack), so a replica's memory is the delta of this process around starting one more replica ")
		p("and around filling it with %d pending views, each after two garbage collections and `debug.FreeOSMemory`: VmRSS from /proc/self/status and the live heap from runtime/metrics. ", f.PendingViews)
		p("The pending views are for %d agents with sessions but no worker; a silent NATS subscriber on every view subject holds the requests; ", f.PendingViews)
		p("the viewers are raw TCP connections with a request written and nothing read, so the client side adds no goroutine. ")
		p("After the measurement the holder answers them all (%d of %d got their 503), and the process is measured once more.\n\n", f.PendingAnswered503, f.PendingViews)
	}
	mrow := func(name string, m, base memory, note string) []string {
		d := func(a, b int64) string {
			if name == "before the replica" {
				return ""
			}
			return mib(float64(a - b))
		}
		return []string{name, mib(float64(m.RSS)), d(m.RSS, base.RSS), mib(float64(m.Heap)), d(m.Heap, base.Heap), mib(float64(m.Stacks)), d(m.Stacks, base.Stacks), strconv.Itoa(m.Goroutines), note}
	}
	mdTable(b, []string{"process", "RSS", "Δ RSS", "live heap", "Δ heap", "stacks", "Δ stacks", "goroutines", ""}, [][]string{
		mrow("before the replica", f.Before, f.Before, ""),
		mrow("+ one idle replica", f.Idle, f.Before, "Δ: the idle replica"),
		mrow(fmt.Sprintf("+ %d pending views in it", f.PendingViews), f.Pending, f.Idle, "Δ: the views and what the burst grew"),
		mrow("after they were answered", f.After, f.Idle, "Δ: what the burst left behind"),
	})
	n := float64(max(f.PendingViews, 1))
	p("While it waits, a pending view holds %s of live heap, %s of goroutine stacks and %s goroutines (pending − after). ",
		kib(float64(f.Pending.Heap-f.After.Heap)/n), kib(float64(f.Pending.Stacks-f.After.Stacks)/n), f1(float64(f.Pending.Goroutines-f.After.Goroutines)/n))
	p("The burst of %d concurrent views leaves %s of heap in the replica (after − idle): the Redis connection pool grew towards its 64 connections, each with go-redis's default 32 KiB read and 32 KiB write buffers; RSS grows less because those buffers are mostly never written.\n\n",
		f.PendingViews, mib(float64(f.After.Heap-f.Idle.Heap)))
	if full {
		p("CPU per capture: %d views back to back and %d bare captures, in alternating windows of %d, each pair followed by an idle window as long; CPU time from /proc/<pid>/stat (utime + stime, 10 ms ticks) ", f.Captures, f.Captures, cpuBlock)
		p("of the %d Chromium processes of the broker and of the bench's own Go process (which holds the replicas, the worker, the broker's Go side and the viewer), net of the idle rate. ", f.ChromiumProcesses)
		p("Idle: Chromium %s ms/s, Go process %s ms/s.\n\n", ms(f.ChromiumIdle), ms(f.GoIdle))
	}
	mdTable(b, []string{"CPU per capture", "Chromium ms", "Go process ms"}, [][]string{
		{"a view (whole path: replicas, worker, broker, viewer)", ms(f.ChromiumPerView), ms(f.GoPerView)},
		{"a bare capture", ms(f.ChromiumPerBare), ms(f.GoPerBare)},
	})
	natsPerView := 0.0
	if len(r.Routing) > 0 {
		natsPerView = r.Routing[0].ViewOutBytes
	}
	if full {
		p("Bytes: medians of the end-to-end views (the demo site's home page, %d px wide); a viewer polls every 5 s, so a viewer-minute is 12 frames.\n\n", e.Width)
	}
	mdTable(b, []string{"bytes", "per frame", "per viewer-minute"}, [][]string{
		{"JPEG", kib(float64(e.JPEGBytes)), kib(12 * float64(e.JPEGBytes))},
		{"sealed envelope (broker → worker → NATS)", kib(float64(e.SealedBytes)), kib(12 * float64(e.SealedBytes))},
		{"NATS bytes delivered per view (request + reply, server OutBytes)", kib(natsPerView), kib(12 * natsPerView)},
		{"HTTP body to the viewer (JSON, base64)", kib(float64(e.BodyBytes)), kib(12 * float64(e.BodyBytes))},
	})
}

// renderGoBench renders section 6: the Go benchmarks, those of the view package
// against the Redis PING run in the same command.
func renderGoBench(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s\n\n", benchSections[5])
	if full {
		p("`go test -run '^$' -benchmem` with %s (real redis-server from internal/test/testenv). ", goBenchCommands())
		p("The grant and the gate are Redis round trips, so their floor is `BenchmarkRedisPing` on the same server, run in the same command.\n\n")
	}
	var ping float64
	for _, g := range r.GoBench {
		if g.Name == "BenchmarkRedisPing" {
			ping = g.NsPerOp
		}
	}
	var rows [][]string
	for _, g := range r.GoBench {
		vsPing, mbs := "", ""
		if ping > 0 && g.Package == "view" && !strings.HasPrefix(g.Name, "BenchmarkOpenReply") {
			vsPing = fx(g.NsPerOp / ping)
		}
		if g.MBPerSec > 0 {
			mbs = f0(g.MBPerSec)
		}
		rows = append(rows, []string{g.Package, g.Name, strconv.Itoa(g.Iterations), f1(g.NsPerOp / 1000), mbs, strconv.Itoa(g.BytesPerOp), strconv.Itoa(g.AllocsPerOp), vsPing})
	}
	mdTable(b, []string{"package", "benchmark", "iterations", "µs/op", "MB/s", "B/op", "allocs/op", "vs Redis PING"}, rows)
	if full {
		renderJSONDecoders(b, r)
	}
}

// jsonDecoders are the benchmark pairs that price the wire bodies' decoder
// (wire.DecodeStrict, encoding/json/v2's) against encoding/json with the same
// strictness, each run once per view.
var jsonDecoders = []struct{ what, pkg, v2, v1 string }{
	{"the sealed reply (48 KB)", "view", "BenchmarkOpenReply/envelope-json", "BenchmarkOpenReply/envelope-json-v1"},
	{"the page (36 KB)", "wire", "BenchmarkDecodePage/decodePage", "BenchmarkDecodePage/encoding-json"},
}

// renderJSONDecoders says what the decoder saves per view against encoding/json, as a
// share of a view's Go CPU (section 5): the figure behind having no hand-written
// scanner, which would have to save 5 % of it over this decoder to be kept.
func renderJSONDecoders(b *strings.Builder, r *Results) {
	ns := map[string]float64{}
	for _, g := range r.GoBench {
		ns[g.Package+" "+g.Name] = g.NsPerOp
	}
	goView := float64(r.Footprint.GoPerView)
	var parts []string
	for _, d := range jsonDecoders {
		v2, v1 := ns[d.pkg+" "+d.v2], ns[d.pkg+" "+d.v1]
		if v2 <= 0 || v1 <= 0 {
			continue
		}
		part := fmt.Sprintf("%s in %s µs against encoding/json's %s µs (%s)", d.what, f1(v2/1000), f1(v1/1000), fx(v1/v2))
		if goView > 0 {
			part += fmt.Sprintf(", %s µs or %s %% of a view's %s ms of Go CPU saved", f0((v1-v2)/1000), f1(100*(v1-v2)/goView), ms(r.Footprint.GoPerView))
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return
	}
	fmt.Fprintf(b, "\nEvery body that crosses from another process (a JSON-RPC message, the sealed reply, the page) is read by one strict decoder, `wire.DecodeStrict`: encoding/json/v2's, from github.com/go-json-experiment/json. It reads %s. It is as fast as the hand-written one-pass scanners it replaced, so none is left: one would have to save 5 %% of a view's Go CPU over this decoder to be kept.\n", strings.Join(parts, "; "))
}

// renderMasks renders section 2: the views of a page with nothing to mask, of a page
// with masked fields and of each moving page, each against the bare capture measured
// beside it, with the share of the views masked whole, the verdict against masksTarget
// and the moving pages' figures (renderMovingMasks).
func renderMasks(b *strings.Builder, r *Results, full bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s\n\n", benchSections[1])
	var none, masked, moving *maskPageResult
	for i, pg := range r.Masks.Pages {
		switch {
		case pg.Path == benchPage:
			none = &r.Masks.Pages[i]
		case pg.Path == maskedPage:
			masked = &r.Masks.Pages[i]
		case pg.Moving && moving == nil:
			moving = &r.Masks.Pages[i]
		}
	}
	if full {
		warm, pairs := 0, 0
		if none != nil {
			warm, pairs = none.Warm, none.Pairs
		}
		p("The broker paints privacy masks over the secret regions of a frame before sealing it (on by default, `broker.DefaultConfig()`; `Config.NoMask` turns them off). ")
		p("Its capture then reads `Page.getLayoutMetrics` and `DOMSnapshot.captureSnapshot` (with the computed styles that paint ink outside a box) together before `Page.captureScreenshot` and again after it, and what moves on the page (one function called in an isolated world of the broker's); with a secret on the page, also Chromium's work counters around the screenshot. ")
		p("When neither snapshot holds a secret the screenshot is sent as Chromium made it; otherwise the masks are painted in the JPEG's DCT domain — each 8×8 block under a mask re-coded flat, every other block copied as Chromium coded it, no decode or encode of pixels — and the page says how many regions it shows masked (`masked`). ")
		p("While the screenshot is taken, DevTools' overlay paints an opaque grey box on each secret's element in the very frame Chromium captures (a pin); on a page that moves, where the reads cannot tell where the frame painted a secret, the pins are the masks, and a frame the broker cannot mask either way is masked whole, the page saying why (`hidden`: %s). ", strings.Join(wire.HiddenReasons, ", "))
		p("On the session of section 1, the tab the broker views is navigated with a `browser_play` navigate step to the demo site's home page `%s` (nothing to mask), then to `%s` (13 secrets, 11 of them in the first 1280×800 viewport, each beside a control that looks alike), ", benchPage, maskedPage)
		p("then to each of its moving pages (`testdata/site/moving/`, all but agent-types, whose fields are empty): a filled sign-in and payment form with three secrets (password, card number, one-time code) beside one kind of motion, or moving itself; then back. ")
		p("On `%s` and `%s`, %d pairs of one view and one bare capture of that tab alternate as in section 1 (idle gaps, the gate opened outside the timed part, the first %d pairs after the navigation not counted). ", benchPage, maskedPage, pairs, warm)
		if moving != nil {
			p("On each moving page, %d pairs alternate the same way, the first %d not counted, once the page holds its form (the bench asks through its own CDP session, outside the timed part: secret-appears inserts the form 700 ms after its load). ", moving.Pairs, moving.Warm)
		}
		p("**The cost of masking** is the broker's own capture inside each view (its `OnCapture` hook: the whole masked sequence) against the bare three-call sequence; the issue's bar is %.2f× on the page with nothing to mask. ", masksTarget)
		p("**Masked whole** is the share of a page's counted views whose frame the broker masked whole, with the views counted by the reason the page gave. ")
		p("The suite fails, and prints no table, unless every view is of the page it was meant to be, says `masked` ≥ 1 on `%s` and on every moving page (a frame masked whole says it too) and nothing on `%s`, and says what the broker counted and why it masked a frame whole; ", maskedPage, benchPage)
		p("on the dialog page, whose form rests outside the viewport between its slides, a view may say `masked` 0, but then its frame, decoded after the timing, must show no pixel of the secrets' green (the moving pages draw the secrets, and a control that is never masked, in that green alone).\n\n")
	}
	var rows [][]string
	for _, pg := range r.Masks.Pages {
		name := pg.Name
		if pg.Moving {
			name = "moving: " + name
		}
		rows = append(rows, []string{
			name + " (`" + pg.Path + "`)", strconv.Itoa(pg.View.N), ms(pg.View.P50), ms(pg.View.P95), ms(pg.InCap.P50), ms(pg.Bare.P50),
			fx(pg.ViewRatio), "**" + fx(pg.CaptureRatio) + "**", kib(float64(pg.JPEGBytes)), maskedCount(&pg), maskedWhole(&pg),
		})
	}
	mdTable(b, []string{"", "n", "view p50 ms", "view p95 ms", "broker capture p50 ms", "bare p50 ms", "view / bare p50", "**broker capture / bare p50**", "JPEG (median)", "masked", "masked whole"}, rows)
	if none == nil || masked == nil {
		return
	}
	verdict := "**within**"
	if none.CaptureRatio > masksTarget {
		verdict = "**not within**"
	}
	p("With nothing to mask, the broker's capture p50 %s ms is %s the bare capture p50 %s ms measured beside it: %s the %.2f× target; the masks' reads add %s ms to the p50 (%s %% of the bare capture). ",
		ms(none.InCap.P50), fx(none.CaptureRatio), ms(none.Bare.P50), verdict, masksTarget, ms(none.InCap.P50-none.Bare.P50), signedPercent(none.CaptureRatio))
	if e := r.E2E; e.InCap.N > 0 && e.Bare.P50 > 0 {
		p("Section 1's views of the same page, masks on too, put it at %s over %d pairs. ", fx(ratio(e.InCap.P50, e.Bare.P50)), e.Pairs)
	}
	p("With %s regions masked, it is %s (%s ms against %s ms): the reads, and the re-coding of the frame's blocks (`BenchmarkPaintMasks` in section 6 has it against a decode, paint and encode). ",
		maskedCount(masked), fx(masked.CaptureRatio), ms(masked.InCap.P50), ms(masked.Bare.P50))
	p("A whole view is %s the bare capture with nothing to mask and %s with masked fields.\n\n", fx(none.ViewRatio), fx(masked.ViewRatio))
	renderMovingMasks(b, r)
}

// renderMovingMasks states the moving pages' figures: the span of the broker's capture
// against the bare one, the share of the views masked whole on each page and why, and
// the views that said masked 0 with the form out of the frame. Nothing without a
// moving page.
func renderMovingMasks(b *strings.Builder, r *Results) {
	var pages []*maskPageResult
	for i := range r.Masks.Pages {
		if r.Masks.Pages[i].Moving && r.Masks.Pages[i].View.N > 0 {
			pages = append(pages, &r.Masks.Pages[i])
		}
	}
	if len(pages) == 0 {
		return
	}
	lo := slices.MinFunc(pages, func(x, y *maskPageResult) int { return cmp.Compare(x.CaptureRatio, y.CaptureRatio) })
	hi := slices.MaxFunc(pages, func(x, y *maskPageResult) int { return cmp.Compare(x.CaptureRatio, y.CaptureRatio) })
	ratios := make([]float64, len(pages))
	views, whole := 0, 0
	var wholePages []string
	for i, pg := range pages {
		ratios[i] = pg.CaptureRatio
		views, whole = views+pg.View.N, whole+pg.wholeViews()
		if pg.wholeViews() > 0 {
			wholePages = append(wholePages, maskedWhole(pg)+" on "+movingName(pg))
		}
	}
	slices.Sort(ratios)
	sentences := []string{fmt.Sprintf("On the %d moving pages (%d pairs each), the broker's capture p50 is %s to %s the bare capture p50 measured beside it (median %s): %s on %s, %s on %s.",
		len(pages), pages[0].Pairs, fx(lo.CaptureRatio), fx(hi.CaptureRatio), fx(ratios[len(ratios)/2]), fx(lo.CaptureRatio), movingName(lo), fx(hi.CaptureRatio), movingName(hi))}
	switch clean := len(pages) - len(wholePages); {
	case whole == 0:
		sentences = append(sentences, "No view of theirs was masked whole.")
	case clean == 0:
		sentences = append(sentences, fmt.Sprintf("Of their %d views, %d were masked whole (%s): %s.", views, whole, percent(whole, views), strings.Join(wholePages, "; ")))
	default:
		sentences = append(sentences, fmt.Sprintf("Of their %d views, %d were masked whole (%s): none on %d of the %d pages; %s.", views, whole, percent(whole, views), clean, len(pages), strings.Join(wholePages, "; ")))
	}
	for _, pg := range pages {
		if pg.Outside > 0 {
			sentences = append(sentences, fmt.Sprintf("On %s, %d of the %d views said `masked` 0: the form was out of the frame, which showed none of the secrets' green.", movingName(pg), pg.Outside, pg.View.N))
		}
	}
	b.WriteString(strings.Join(sentences, " ") + "\n\n")
}

// movingName names a moving page in prose by its file: `dialog` for
// /moving/dialog.html.
func movingName(pg *maskPageResult) string {
	return "`" + strings.TrimSuffix(path.Base(pg.Path), ".html") + "`"
}

// percent is n of total in per cent, no decimals: "15 %".
func percent(n, total int) string {
	if total == 0 {
		return "0 %"
	}
	return f0(100*float64(n)/float64(total)) + " %"
}

// maskedWhole is the share of a page's views masked whole with the views by reason,
// "15 % (motion 2, changed 1)", "0 %" when none was, and "—" on a page with nothing
// to mask.
func maskedWhole(pg *maskPageResult) string {
	if pg.MaskedMax == 0 && len(pg.Whole) == 0 {
		return "—"
	}
	n := pg.wholeViews()
	if n == 0 {
		return "0 %"
	}
	var why []string
	for _, reason := range wire.HiddenReasons {
		if c := pg.Whole[reason]; c > 0 {
			why = append(why, reason+" "+strconv.Itoa(c))
		}
	}
	return percent(n, pg.View.N) + " (" + strings.Join(why, ", ") + ")"
}

// maskedCount is a page's masked count, or its range when the views disagreed.
func maskedCount(pg *maskPageResult) string {
	if pg.MaskedMin == pg.MaskedMax {
		return strconv.Itoa(pg.MaskedMin)
	}
	return strconv.Itoa(pg.MaskedMin) + "–" + strconv.Itoa(pg.MaskedMax)
}

// signedPercent is how far a ratio is from 1, in per cent with a sign: +4.2 for 1.042.
func signedPercent(r float64) string { return fmt.Sprintf("%+.1f", 100*(r-1)) }

// renderWhereTimeGoes explains the gap between a view and the bare capture with this
// run's numbers: which hops, how much CPU, and what the hops have in common.
func renderWhereTimeGoes(b *strings.Builder, r *Results) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	e, f := r.E2E, r.Footprint
	p("### Where the time goes\n\n")
	near := func(a, b time.Duration) bool { r := ratio(a, b); return r > 0.85 && r < 1.15 }
	if near(e.InCap.P50, e.Bare.P50) {
		p("**Not in Chromium.** The broker's own capture inside a view takes about what the bare capture takes (p50 %s ms against %s ms), ", ms(e.InCap.P50), ms(e.Bare.P50))
	} else {
		p("**Partly in the capture.** The broker's own capture inside a view takes %s the bare capture (p50 %s ms against %s ms), ", fx(ratio(e.InCap.P50, e.Bare.P50)), ms(e.InCap.P50), ms(e.Bare.P50))
	}
	if near(f.ChromiumPerView, f.ChromiumPerBare) {
		p("and Chromium burns about the same CPU for a view as for a bare capture (%s ms against %s ms, section 5).\n\n", ms(f.ChromiumPerView), ms(f.ChromiumPerBare))
	} else {
		p("and Chromium burns %s ms of CPU for a view against %s ms for a bare capture (section 5).\n\n", ms(f.ChromiumPerView), ms(f.ChromiumPerBare))
	}
	p("**In the Go code around it, as CPU.** Everything but the capture costs %s ms at p50. ", ms(e.Overhead.P50))
	p("The bench's Go process, which runs every Go part of the path (both replicas, the worker, the broker's Go side, the viewer), spends %s ms of CPU per view against %s ms per bare capture (section 5): ", ms(f.GoPerView), ms(f.GoPerBare))
	p("about %s ms of CPU per view that the bare capture does not spend, on a machine with two cores that Chromium shares. ", ms(f.GoPerView-f.GoPerBare))
	p("Of the hops above, the three largest after the capture are ")
	hops := slices.Clone(e.Hops)
	hops = slices.DeleteFunc(hops, func(h hop) bool { return h.Name == "broker: capture" })
	slices.SortFunc(hops, func(a, b hop) int { return int(b.Dist.P50 - a.Dist.P50) })
	for i, h := range hops[:min(3, len(hops))] {
		sep := ", "
		if i == 0 {
			sep = ""
		}
		p("%s%s (%s ms)", sep, h.Name, ms(h.Dist.P50))
	}
	p(".\n\n")
	if whole, parts := openReplyBench(r.GoBench); whole > 0 {
		p("**The requester's share, priced alone** on one core (section 6): handling a sealed reply (`openReply`) costs %s µs, of which the decode of the envelope %s µs (`wire.DecodeStrict`, encoding/json/v2's decoder; encoding/json's takes %s µs on the same reply), ", f0(whole), f0(parts["envelope-json"]), f0(parts["envelope-json-v1"]))
		p("opening it (ECDH, HKDF, AES-GCM) %s µs and the decode and validation of the page %s µs; rendering the result adds %s µs.\n\n", f0(parts["open"]), f0(parts["page"]), f0(parts["render"]))
	}
	p("**What the hops have in common** is the frame's bytes: 27 KB of JPEG travel as 36 KB of base64 inside the page JSON, and as 48 KB of base64 of the encrypted page in the envelope (both layers are fixed by the specification). ")
	p("A view now scans them about eight times, each in one pass: the broker reads the screenshot's base64 from CDP's JSON and copies it into the page (no decode and encode again), base64-decodes it once to check the JPEG, and writes the envelope in one buffer (`envelope.SealJSON`); ")
	p("the worker reads each WebSocket message into a pooled buffer (`wire.ReadAll`) and wraps the broker's answer as it is, and replica B parses the worker's message in the lent buffer it read it into (`wire.ReadScratch`), copies `result` out in one pass and forwards its bytes; ")
	p("replica A reads the envelope and the page in one pass each, opens the ciphertext and base64-decodes the frame once to check it, both in lent buffers zeroed when given back (`wire.Scratch`), and writes the body in one pass from encoding/json's pooled encoder; the viewer decodes it.\n\n")
	p("**Redis**: a view costs replica A four round trips (a pipeline for the access check and the current session id, the session record, the gate script and the grant in one pipeline, and a pipeline for the whole re-check before the frame leaves) where it cost ten, replica B none (it checks the request's proof in memory), and the broker's consume one (one script over its pass and the grant).\n\n")
	p("**What is left is the hops themselves.** ")
	p("Of the %s ms of Go CPU a view costs, %s ms is what the bare capture costs too (CDP over a WebSocket, rod's decoding of the screenshot message); ", ms(f.GoPerView), ms(f.GoPerBare))
	p("the rest is spread over an HTTP request, two unix-socket HTTP legs (worker → broker, and the broker's consume through the balancer), two WebSocket legs, two NATS legs through the embedded server (in this process too), the frame's audit event published to its JetStream stream and acknowledged, five Redis round trips and the goroutine wake-ups between them, each a few tens of microseconds of system calls on this virtual machine, and the garbage collector's share of what every Go part allocates for a view (about 1.1 MB, most of it copies of the frame's bytes that change shape at each hop). ")
	p("None of these hops can go without changing the architecture of SPEC.md (NATS between replicas, the worker's WebSocket, the broker's unix socket, Redis-held grants). ")
	at := func(capture time.Duration) string { return fx(1 + ratio(e.Overhead.P50, capture)) }
	p("With everything but the capture at %s ms, a view is %s the bare capture of this page (%s ms), and would be %s on a page whose capture takes the 52 ms of NOTES.md.\n\n", ms(e.Overhead.P50), at(e.Bare.P50), ms(e.Bare.P50), at(52*time.Millisecond))
}

// renderFastPathFloor prices the fast paths in machine time per request (cores ÷ req/s:
// the load generator, the replica and redis-server share the cores) and says what a
// Redis round trip costs beside the no-op.
func renderFastPathFloor(b *strings.Builder, r *Results) {
	cores := r.Machine.Cores
	if cores < 1 || len(r.FastPaths.Paths) < 4 {
		return
	}
	per := map[string]float64{}
	for _, x := range r.FastPaths.Paths {
		if x.RPS > 0 {
			per[x.Name] = float64(cores) * 1e6 / x.RPS
		}
	}
	noop, nf, lost, won := per["no-op /healthz"], per["404"], per["429"], per["live:false"]
	if noop == 0 || nf == 0 || lost == 0 || won == 0 {
		return
	}
	rt := (won - nf) / 2
	own := nf - noop
	fmt.Fprintf(b, "In machine time (%d cores ÷ req/s: the load generator, the replica and redis-server share them), a request costs %s µs on the no-op route, %s µs for a 404, %s µs for a 429 and %s µs for live:false. ", cores, f0(noop), f0(nf), f0(lost), f0(won))
	fmt.Fprintf(b, "The 404 makes one Redis round trip (a remembered refusal reads only the directory's generation), live:false three and the 429 four (the gate's, with the view's grant written beside it and deleted after it, and a key pair made for the grant), and otherwise they do about the same work (JWT, the view route, an error or a small body), so the 404 prices that work (%s µs beside the no-op) and a round trip costs about %s µs of machine time here ((live:false − 404) ÷ 2: the client's write and read, redis-server's, and the wake-ups between them). ", f0(own), f0(rt))
	ceiling := func(n float64) string { return fx(noop / (nf + n*rt)) }
	fmt.Fprintf(b, "So an answer that needs n round trips more than the 404 reaches about %s ÷ (%s + n × %s) of the no-op's rate: %s for one, %s for two, %s for three. ", f0(noop), f0(nf), f0(rt), ceiling(1), ceiling(2), ceiling(3))
	b.WriteString("The gate is a Redis script by design (one window per agent across every replica) and must follow the access check (a stranger may not take a team's window), so while the access check reads Redis a 429 needs three round trips before the gate answers (and a fourth to delete the grant written beside it) and live:false at least two: their ratios are this design's floor on this machine. ")
	b.WriteString("Remembering grants as well as refusals would save the first round trip of both (the re-check before a frame leaves would still read the truth), at the price of letting a member revoked in the last seconds take the team's window; the replica does not.\n\n")
}

// openReplyBench returns BenchmarkOpenReply/whole and its parts, in µs per operation.
func openReplyBench(gb []goBench) (float64, map[string]float64) {
	parts := map[string]float64{}
	for _, g := range gb {
		if name, ok := strings.CutPrefix(g.Name, "BenchmarkOpenReply/"); ok {
			parts[name] = g.NsPerOp / 1000
		}
	}
	return parts["whole"], parts
}

// Capacity goals (issues 28 and 38).
const (
	growthLimit       = 1.2                     // per-view CPU and p99 at the largest level against the smallest
	rssPerConnLimit   = 64 << 10                // a replica's RSS per idle worker connection
	goroutinesPerConn = 2                       // a replica's goroutines per idle worker connection
	cpuPerViewLimit   = 1500 * time.Microsecond // the replicas' own CPU per frame at the ceiling (issue 38; issue 28 asked 1 ms)
	tripsPerViewLimit = 5                       // Redis round trips per frame served
	cmdsPerViewLimit  = 12                      // Redis commands per frame served
	ceilingGoal       = 160                     // frames/s under ceilingP99 at the largest level
)

// renderCapacity renders section 7: the levels, the growth, the ceiling, the goals and
// the planning figures per 1,000 watched agents.
func renderCapacity(b *strings.Builder, r *Results, full bool) {
	c := r.Capacity
	if c == nil || len(c.Levels) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s\n\n", benchSections[6])
	if full {
		p("N agents with live sessions, each with a real worker (the `worker` package over a real WebSocket, hello and all) attached round robin to two replicas, ")
		p("and behind each worker a stand-in broker that does what the real one does but Chromium: it redeems the grant through the consume route with the session's broker pass (`broker.ConsumeClient`) and seals a fixed %s JPEG page naming its agent to the requester's key (`envelope.SealJSON`: ECDH, HKDF, AES-GCM), answering through the broker's socket (`TestStandInSealsAsTheBroker` checks that the requester opens it with the code that opens real frames). ", kib(float64(c.FrameBytes)))
		p("The replicas (`replica.New`, as `agentfy-api` runs it) and the workers run in processes of their own (the workers in farms of up to %d), so that /proc tells their CPU and memory apart; the farms that the window at hand does not watch stand for workers on machines of their own and run under Linux's %s policy, which gives a core to any other thread that wakes up on it (those that no step watches from their start, the others for every window that watches none of their agents), so that their idle work does not take the replicas' cores at random; redis-server is real, and so is NATS: the server's own code (`nats-server/v2`, as the stack embeds it) in a process of its own, configured as a deployment's (`deploy.NATSConfig`), as a platform runs it; the viewers are the bench's own process. ", fullCapacity().farmSize, backgroundPolicy)
		p("Viewers poll as the SDK does (every 5 s ± 0.5 s, a 429's Retry-After added), open loop: each request leaves at its time whether or not the last was answered. ")
		p("At every level the same %d agents are watched, by one viewer each (a member, through the members' route) and then by three (the member and two partners, each with an organisation key of its own), so that the levels compare the cost of a view as the idle sessions grow; the others are live and idle. ", fullCapacity().watched)
		p("Each window runs %s after %s of warm-up (%s at each step of the ceiling search); CPU is utime + stime from /proc of each process, the replicas' net of their idle rate, measured over %s right before each window (after a settle as long as the warm-up, and %s after a level's workers attached) with every worker attached; Redis commands (`INFO commandstats`, a script's own commands included), the replicas' Redis round trips (`agentfy_redis_round_trips_total`: a command alone or a pipeline) and NATS deliveries (the server's `OutMsgs`, `OutBytes`) are per frame served, net of their idle rates (a counter's rate between its readings over the rate of the frames fired in the window); each Go process's scheduling latency (`runtime/metrics` `/sched/latencies:seconds`: how long runnable goroutines waited to run) and GC pauses are read over each window, and each process is CPU-profiled in the one-viewer window of every level and at every step of the ceiling; latency is from the request to the decoded body, net of the stand-ins' sealing at the same quantile. ", fullCapacity().window, fullCapacity().warm, fullCapacity().step, fullCapacity().idle, fullCapacity().settle)
		p("Errors are answers other than a frame and 429, by status and, for 503, by the replicas' own reason (`agentfy_view_unavailable_total`).\n\n")
	}
	var rows [][]string
	for _, l := range c.Levels {
		for _, ph := range l.Phases {
			rows = append(rows, []string{
				strconv.Itoa(l.Agents), strconv.Itoa(ph.Watched), strconv.Itoa(ph.ViewersPerAgent), strconv.Itoa(ph.Polls),
				f1(ph.perSecond()), strconv.Itoa(ph.Limited), errorsText(ph), strconv.Itoa(ph.Wrong),
				ms(ph.cpuPerFrame()), ms(ph.Latency.P50), ms(ph.Latency.P99),
				ms(max(ph.Latency.P50-ph.Work.P50, 0)), ms(max(ph.Latency.P99-ph.Work.P99, 0)),
				f1(ph.RedisCommands), f1(ph.RedisTrips), f1(ph.NATSMsgs), kib(ph.NATSBytes),
			})
		}
	}
	mdTable(b, []string{"agents", "watched", "viewers each", "polls", "frames/s", "429", "errors", "wrong agent", "replica CPU ms/frame", "p50 ms", "p99 ms", "p50 net", "p99 net", "Redis cmds/frame", "Redis round trips/frame", "NATS msgs/frame", "NATS bytes/frame"}, rows)

	rows = rows[:0]
	for _, l := range c.Levels {
		rows = append(rows, []string{
			strconv.Itoa(l.Agents), strconv.FormatFloat(l.RedisPerAgent, 'f', 0, 64) + " B", strconv.FormatFloat(l.RedisPerSession, 'f', 0, 64) + " B",
			kib(l.RSSPerConn), strconv.FormatFloat(l.GoroutinesPerConn, 'f', 2, 64), strconv.Itoa(l.ReplicaFDs), strconv.FormatFloat(l.Attach.Seconds(), 'f', 1, 64) + " s",
			ms(l.IdleReplicaCPU),
		})
	}
	mdTable(b, []string{"agents", "Redis per agent", "Redis per session (worker attached)", "replica RSS per worker connection", "replica goroutines per connection", "replicas' open files", "attach (the new workers)", "replicas idle, CPU ms per s"}, rows)

	first, last := c.Levels[0], c.Levels[len(c.Levels)-1]
	if len(c.Heap) > 0 {
		p("Where a replica's memory goes with %d sessions (replica-a's heap in use, after a collection):\n\n```\n%s\n```\n\n", last.Agents, strings.Join(c.Heap, "\n"))
	}
	cpuGrowth := ratio(last.Phases[0].cpuPerFrame(), first.Phases[0].cpuPerFrame())
	p99Growth := ratio(last.Phases[0].Latency.P99, first.Phases[0].Latency.P99)
	p("**Growth** from %d to %d live sessions, one viewer per watched agent: the replicas' CPU per frame is %s (%s ms against %s ms) and the p99 %s (%s ms against %s ms).",
		first.Agents, last.Agents, fx(cpuGrowth), ms(last.Phases[0].cpuPerFrame()), ms(first.Phases[0].cpuPerFrame()), fx(p99Growth), ms(last.Phases[0].Latency.P99), ms(first.Phases[0].Latency.P99))
	if a, z := first.Phases[0], last.Phases[0]; a.P99Low > 0 && z.P99Low > 0 {
		p(" A window's frames are a sample: with %d and %d of them, the p99 lies between %s and %s ms and between %s and %s ms with 95 %% confidence (their order statistics), so the growth lies between %s and %s.",
			a.Latency.N, z.Latency.N, ms(a.P99Low), ms(a.P99High), ms(z.P99Low), ms(z.P99High), fx(ratio(z.P99Low, a.P99High)), fx(ratio(z.P99High, a.P99Low)))
	}
	p("\n\n")

	renderProcesses(b, first, last)

	p("**The ceiling**, at %d live sessions, one viewer per watched agent, the watched agents raised until the p99 passes %s ms or a poll fails:\n\n", last.Agents, ms(ceilingP99))
	rows = rows[:0]
	procs := []string{"replica-a", "replica-b", farmsProcess, natsProcess, redisProcess, benchProcess}
	for _, ph := range c.Ceiling {
		row := []string{strconv.Itoa(ph.Watched), f1(float64(ph.Watched) / pollInterval.Seconds()), f1(ph.perSecond()), ms(ph.Latency.P50), ms(ph.Latency.P99), errorsText(ph), ms(ph.cpuPerFrame())}
		for _, name := range procs {
			row = append(row, strconv.FormatFloat(ph.Cores[name], 'f', 2, 64))
		}
		rows = append(rows, row)
	}
	mdTable(b, append([]string{"watched", "polls/s offered", "frames/s", "p50 ms", "p99 ms", "errors", "replica CPU ms/frame"}, procs...), rows)
	var at capacityPhase
	if c.Crossed >= 0 {
		at = c.Ceiling[c.Crossed]
		p("The step of %d watched agents crossed (p99 %s ms, %d errors). ", at.Watched, ms(at.Latency.P99), at.errorCount())
	} else if len(c.Ceiling) > 0 {
		at = c.Ceiling[len(c.Ceiling)-1]
		p("No step crossed: the ceiling is above %s frames/s. ", f1(at.perSecond()))
	}
	total := 0.0
	for _, v := range at.Cores {
		total += v
	}
	p("The processes used %.2f of the machine's %d cores there; the busiest was %s (%.2f cores).", total, r.Machine.Cores, c.ProfileOf, at.Cores[c.ProfileOf])
	if len(c.Profile) > 0 {
		p(" The top of its CPU profile (of the first farm, for the farms):\n\n```\n%s\n```\n\n", strings.Join(c.Profile, "\n"))
	} else {
		p("\n\n")
	}

	renderParts(b, first, last, at)

	// The most frames/s of a step under the p99 limit without an error: the step's
	// offered rate when every poll fired in its window was answered with a frame (the
	// frames counted in a 15-s window move by about 2 % with the polls' jitter), what
	// was counted otherwise.
	held, heldText := 0.0, ""
	for i, ph := range c.Ceiling {
		if i == c.Crossed || ph.errorCount() > 0 {
			continue
		}
		rate, text := ph.perSecond(), " frames/s"
		if ph.Frames == ph.Polls && ph.Polls > 0 {
			rate = float64(ph.Watched) / pollInterval.Seconds()
			text = fmt.Sprintf(" frames/s offered, every poll served (%s counted in the window)", f1(ph.perSecond()))
		}
		if rate > held {
			held, heldText = rate, text
		}
	}
	// The p99's growth is judged by the bounds of each p99 (quantileInterval): met when
	// even the largest growth they allow is within the limit, not met when even the
	// smallest is not, undecided between.
	a0, z0 := first.Phases[0], last.Phases[0]
	growthLow, growthHigh := ratio(z0.P99Low, a0.P99High), ratio(z0.P99High, a0.P99Low)
	growthText, growthStatus := fx(p99Growth), met(p99Growth <= growthLimit)
	if a0.P99Low > 0 && z0.P99Low > 0 {
		growthText = fmt.Sprintf("%s (95 %%: %s to %s)", fx(p99Growth), fx(growthLow), fx(growthHigh))
		switch {
		case growthHigh <= growthLimit:
			growthStatus = met(true)
		case growthLow > growthLimit:
			growthStatus = met(false)
		default:
			growthStatus = "**undecided** by this sample"
		}
	}
	one := last.Phases[0]
	maxCmds := 0.0
	for _, ph := range last.Phases {
		maxCmds = max(maxCmds, ph.RedisCommands)
	}
	goals := [][]string{
		{"p99 of a view at the largest level within " + fx(growthLimit) + " of the smallest, one viewer per watched agent", growthText, growthStatus},
		{"the replicas' CPU per frame at the largest level within " + fx(growthLimit) + " of the smallest", fx(cpuGrowth), met(cpuGrowth <= growthLimit)},
		{fmt.Sprintf("a replica holds %d idle worker connections in at most 64 KiB of RSS and %d goroutines each", last.Agents, goroutinesPerConn), kib(last.RSSPerConn) + ", " + strconv.FormatFloat(last.GoroutinesPerConn, 'f', 2, 64), met(last.RSSPerConn <= rssPerConnLimit && math.Round(100*last.GoroutinesPerConn) <= 100*goroutinesPerConn)},
		{"at the ceiling, the replicas' own CPU per frame at most " + ms(cpuPerViewLimit) + " ms", ms(at.cpuPerFrame()) + " ms", met(at.Frames > 0 && at.cpuPerFrame() <= cpuPerViewLimit)},
		{fmt.Sprintf("Redis round trips per frame at most %d (the largest level, one viewer each)", tripsPerViewLimit), f1(one.RedisTrips), met(one.Frames > 0 && math.Round(10*one.RedisTrips) <= 10*tripsPerViewLimit)},
		{fmt.Sprintf("Redis commands per frame at most %d (the largest level, one and three viewers each)", cmdsPerViewLimit), f1(one.RedisCommands) + " and " + f1(maxCmds), met(math.Round(10*maxCmds) <= 10*cmdsPerViewLimit)},
		{fmt.Sprintf("the ceiling under a %s ms p99 at the largest level at least %d frames/s", ms(ceilingP99), ceilingGoal), f1(held) + heldText, met(held >= ceilingGoal)},
		{"no error but 429 below the ceiling; no frame of another agent", belowText(c), met(belowClean(c))},
	}
	mdTable(b, []string{"goal", "measured", ""}, goals)
	renderPlanning(b, c)
}

// renderProcesses sets the first and the last level's one-viewer windows side by side,
// process by process: CPU, scheduling latency and GC pauses, then the top of
// replica-a's CPU profile at each.
func renderProcesses(b *strings.Builder, first, last capacityLevel) {
	a, z := first.Phases[0], last.Phases[0]
	if len(a.Sched) == 0 || len(z.Sched) == 0 {
		return
	}
	fmt.Fprintf(b, "**Process by process**, one viewer per watched agent, at %d and at %d live sessions: CPU (cores, gross), how long runnable goroutines waited to run (the scheduler's latency, p50 and p99 of every wait in the window, bucket upper bounds) the collector's stop-the-world pauses (count, p99, total) and its CPU (ms over the window, cycles, and the part of it done by goroutines that allocated during a cycle, its assists):\n\n", first.Agents, last.Agents)
	var rows [][]string
	for _, name := range []string{"replica-a", "replica-b", farmsProcess, natsProcess, redisProcess, benchProcess} {
		row := []string{name}
		for _, ph := range []capacityPhase{a, z} {
			row = append(row, strconv.FormatFloat(ph.Cores[name], 'f', 3, 64))
		}
		for _, ph := range []capacityPhase{a, z} {
			if w, ok := ph.Sched[name]; ok {
				row = append(row, us(w.LatencyP50)+" / "+us(w.LatencyP99))
			} else {
				row = append(row, "—")
			}
		}
		for _, ph := range []capacityPhase{a, z} {
			if w, ok := ph.Sched[name]; ok {
				row = append(row, fmt.Sprintf("%d, %s, %s", w.GCPauses, us(w.GCPauseP99), ms(w.GCPauseSum)+" ms"))
			} else {
				row = append(row, "—")
			}
		}
		for _, ph := range []capacityPhase{a, z} {
			if w, ok := ph.Sched[name]; ok {
				row = append(row, fmt.Sprintf("%.0f ms, %d cycles, assists %.0f ms; scanned %s of stacks, %s of heap", msf(w.GCCPU), w.GCCycles, msf(w.GCAssist), mib(float64(w.ScanStack)), mib(float64(w.ScanHeap))))
			} else {
				row = append(row, "—")
			}
		}
		rows = append(rows, row)
	}
	at := func(s string) []string {
		return []string{s + " at " + strconv.Itoa(first.Agents), s + " at " + strconv.Itoa(last.Agents)}
	}
	head := append(append(append(append([]string{"process"}, at("cores")...), at("sched µs p50 / p99")...), at("GC pauses")...), at("GC CPU")...)
	mdTable(b, head, rows)
	renderGCOverlap(b, first, last)
	if len(first.Profile) > 0 && len(last.Profile) > 0 {
		fmt.Fprintf(b, "replica-a's CPU profile in those windows, at %d live sessions:\n\n```\n%s\n```\n\nand at %d:\n\n```\n%s\n```\n\n",
			first.Agents, strings.Join(first.Profile, "\n"), last.Agents, strings.Join(last.Profile, "\n"))
	}
}

// renderParts splits the replicas' CPU per frame by part of their work, from their CPU
// profiles: the first and the last level's one-viewer windows and the ceiling's step.
func renderParts(b *strings.Builder, first, last capacityLevel, at capacityPhase) {
	windows := []struct {
		name string
		ph   capacityPhase
	}{
		{fmt.Sprintf("%d sessions", first.Agents), first.Phases[0]},
		{fmt.Sprintf("%d sessions", last.Agents), last.Phases[0]},
		{fmt.Sprintf("the ceiling's step (%d watched)", at.Watched), at},
	}
	for _, w := range windows {
		if len(w.ph.ReplicaParts) == 0 || w.ph.Frames == 0 {
			return
		}
	}
	b.WriteString("**Where the replicas' CPU per frame goes**, from their CPU profiles of the same windows (both replicas; each sample given to the first part one of its frames names, in this order; gross, the idle work included, which the figures above take out at its idle rate; in brackets the part of it in system calls), ms per frame served:\n\n")
	head := []string{"part"}
	for _, w := range windows {
		head = append(head, w.name)
	}
	names := make([]string, 0, len(replicaParts)+1)
	for _, part := range replicaParts {
		names = append(names, part.name)
	}
	names = append(names, otherPart)
	totals := make([]time.Duration, len(windows))
	var rows [][]string
	for _, name := range names {
		row := []string{name}
		for i, w := range windows {
			per := func(d time.Duration) time.Duration { return time.Duration(float64(d) / w.ph.framesInWall()) }
			row = append(row, fmt.Sprintf("%s (%s)", ms(per(w.ph.ReplicaParts[name])), ms(per(w.ph.ReplicaPartsSyscalls[name]))))
			totals[i] += per(w.ph.ReplicaParts[name])
		}
		rows = append(rows, row)
	}
	total := []string{"all"}
	for _, t := range totals {
		total = append(total, ms(t))
	}
	mdTable(b, head, append(rows, total))
}

// renderGCOverlap sets the frames of the first and the last level's one-viewer windows
// against the collections of the replicas and of the farms.
func renderGCOverlap(b *strings.Builder, first, last capacityLevel) {
	a, z := first.Phases[0], last.Phases[0]
	if len(a.GC) == 0 || len(z.GC) == 0 {
		return
	}
	b.WriteString("**The frames and the collections**, in the same windows: each process's collector trace (`GODEBUG=gctrace=1`) dates its cycles, from the start to the end of the mark termination; a frame met a collection when its request (from the poll to the decoded body) overlapped one. Busy is the share of the window during which at least one of the processes was collecting:\n\n")
	var rows [][]string
	for _, lv := range []capacityLevel{first, last} {
		for _, group := range []string{gcReplicas, farmsProcess} {
			o, ok := lv.Phases[0].GC[group]
			if !ok || o.Frames == 0 {
				continue
			}
			rows = append(rows, []string{strconv.Itoa(lv.Agents), group, strconv.Itoa(o.Cycles),
				fmt.Sprintf("%.1f %%", 100*o.Busy),
				fmt.Sprintf("%d of %d (%.1f %%)", o.Met, o.Frames, 100*float64(o.Met)/float64(o.Frames)),
				fmt.Sprintf("%d of %d", o.SlowestMet, o.Slowest),
				ms(o.P99Met), ms(o.P99Clear)})
		}
	}
	mdTable(b, []string{"agents", "processes", "cycles", "busy", "frames that met one", "of the slowest 1 %", "p99 ms of those", "p99 ms of the others"}, rows)
}

// msf is d in milliseconds.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// us is d in microseconds.
func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// errorsText lists a phase's errors by label, or 0.
func errorsText(ph capacityPhase) string {
	if len(ph.Errors) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ph.Errors)) {
		parts = append(parts, fmt.Sprintf("%d × %s", ph.Errors[k], k))
	}
	return strings.Join(parts, ", ")
}

// belowClean reports whether every window below the ceiling had no error and no frame
// of another agent.
func belowClean(c *capacityResult) bool {
	n, wrong := belowCounts(c)
	return n == 0 && wrong == 0
}

func belowText(c *capacityResult) string {
	n, wrong := belowCounts(c)
	return fmt.Sprintf("%d errors, %d frames of another agent", n, wrong)
}

// belowCounts sums the errors and wrong frames of every window below the ceiling; the
// wrong frames of the crossing step too (a wrong frame is never load).
func belowCounts(c *capacityResult) (errs, wrong int) {
	for _, l := range c.Levels {
		for _, ph := range l.Phases {
			errs += ph.errorCount() - ph.Wrong
			wrong += ph.Wrong
		}
	}
	for i, ph := range c.Ceiling {
		wrong += ph.Wrong
		if i != c.Crossed {
			errs += ph.errorCount() - ph.Wrong
		}
	}
	return errs, wrong
}

func met(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// renderPlanning renders the figures per 1,000 watched agents from the largest level:
// one viewer each, and three.
func renderPlanning(b *strings.Builder, c *capacityResult) {
	last := c.Levels[len(c.Levels)-1]
	fmt.Fprintf(b, "**Per 1,000 watched agents** (from the %d-session level; replica cores = the replicas' CPU per second of the window, net of idle, ÷ watched agents × 1,000; Redis memory = 1,000 × (per agent + per session); NATS = frames/s × per frame):\n\n", last.Agents)
	var rows [][]string
	for _, ph := range last.Phases {
		if ph.Watched == 0 || ph.Wall <= 0 {
			continue
		}
		scale := 1000 / float64(ph.Watched)
		frames := ph.perSecond() * scale
		cores := ph.ReplicaCPU.Seconds() / ph.Wall.Seconds() * scale
		rows = append(rows, []string{
			strconv.Itoa(ph.ViewersPerAgent), f0(frames), strconv.FormatFloat(cores, 'f', 2, 64),
			mib(1000 * (last.RedisPerAgent + last.RedisPerSession)), f0(frames * ph.NATSMsgs), mib(frames*ph.NATSBytes) + "/s",
		})
	}
	mdTable(b, []string{"viewers per agent", "frames/s", "replica cores", "Redis memory", "NATS msgs/s", "NATS bytes/s"}, rows)
}

// CapacityMarkdown renders section 7 alone, with its method notes: what
// `agentfy-bench -capacity` puts in place of the report's section 7.
func (r *Results) CapacityMarkdown() string {
	var b strings.Builder
	renderCapacity(&b, r, true)
	return b.String()
}

// SpliceCapacity returns report with its section 7 replaced by section (appended when
// it has none): the sections before it are kept as they were measured.
func SpliceCapacity(report, section string) string {
	section = strings.TrimRight(section, "\n") + "\n"
	head := benchSections[6]
	i := strings.Index(report, head)
	switch {
	case strings.TrimSpace(report) == "":
		return section
	case i < 0:
		return strings.TrimRight(report, "\n") + "\n\n" + section
	}
	rest := report[i+len(head):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		return report[:i] + section + "\n" + rest[j+1:]
	}
	return report[:i] + section
}
