// Package bench measures the system on real servers (redis-server, NATS, replicas and
// a broker with Chromium, all on this machine) and renders what it measured as the
// Markdown of BENCHMARKS.md: a view end to end against the bare capture of the same
// tab, with tracing on against off and at a durable replica against a best-effort one,
// the cost of the privacy masks, routing against the broadcast design, the fast
// paths, the footprint and the Go benchmarks. `agentfy-bench` runs it and writes the files.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/dev/servers"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/view"
)

// Who and what the bench views: the demo agent of testdata/directory.json, a member of
// its team, and the demo site's home page.
const (
	benchDeployment = "bench"
	benchAgent      = "agent-scout"
	benchUser       = "u-alice"
	benchPage       = "/"
)

// Bounds of a whole run, compile time not included (the issue allows five minutes from
// a fresh clone, compile included; a full run takes about three). A quick run takes
// about 35 s alone, but the test command runs it under the race detector beside the
// e2e suite's stacks, where CI saw it pass 90 s: its bound is the full run's.
const (
	benchFullTimeout  = 25 * time.Minute // the capacity suite takes about half
	benchQuickTimeout = 5 * time.Minute
)

// benchOptions size the suites.
type benchOptions struct {
	quick      bool
	chromium   string
	log        zerolog.Logger
	cpuProfile string // where to write a CPU profile of the end-to-end suite

	e2eWarm, e2ePairs int

	tracingWarm, tracingPairs int
	jaegerBin                 string // servers.BuildJaeger's

	auditWarm, auditPairs int

	masksWarm, masksPairs             int // per page: `/` and the checkout
	masksMovingWarm, masksMovingPairs int // per moving page

	routingViews, routingSims int

	fastConcurrency int
	fastPhase       time.Duration
	fastRounds      int
	liveFalsePool   int // agents for live:false per round

	cpuCaptures int
	goBenchTime string
}

func fullOptions() benchOptions {
	return benchOptions{
		e2eWarm: 10, e2ePairs: 200,
		tracingWarm: 10, tracingPairs: 400,
		auditWarm: 10, auditPairs: 400,
		masksWarm: 3, masksPairs: 40, masksMovingWarm: 3, masksMovingPairs: 20,
		routingViews: 40, routingSims: 400,
		fastConcurrency: 16, fastPhase: 1500 * time.Millisecond, fastRounds: 3, liveFalsePool: 12000,
		cpuCaptures: 60, goBenchTime: "300ms",
	}
}

func quickOptions() benchOptions {
	return benchOptions{
		quick:   true,
		e2eWarm: 3, e2ePairs: 20,
		tracingWarm: 3, tracingPairs: 16,
		auditWarm: 3, auditPairs: 16,
		masksWarm: 2, masksPairs: 10, masksMovingWarm: 1, masksMovingPairs: 4,
		routingViews: 6, routingSims: 40,
		fastConcurrency: 16, fastPhase: 300 * time.Millisecond, fastRounds: 1, liveFalsePool: 3000,
		cpuCaptures: 8, goBenchTime: "200x",
	}
}

// Results is everything one run measured; `agentfy-bench -json` writes it as is.
type Results struct {
	Machine    machine         `json:"machine"`
	Command    string          `json:"command"`
	Quick      bool            `json:"quick"`
	Started    time.Time       `json:"started"`
	Elapsed    time.Duration   `json:"elapsed"`
	E2E        e2eResult       `json:"e2e"`
	Tracing    tracingResult   `json:"tracing"`
	Audit      auditResult     `json:"audit"`
	Masks      masksResult     `json:"masks"`
	Routing    []routingResult `json:"routing"`
	ReplyBytes int             `json:"replyBytes"` // a sealed reply on NATS
	FastPaths  fastPathResult  `json:"fastPaths"`
	Footprint  footprintResult `json:"footprint"`
	GoBench    []goBench       `json:"goBench"`
	Capacity   *capacityResult `json:"capacity,omitempty"`
}

// machine describes where the run happened.
type machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	Memory   int64  `json:"memory"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Chromium string `json:"chromium"`
	Commit   string `json:"commit"`
}

// Options configure a run; `agentfy-bench` fills them from its flags.
type Options struct {
	// Root is the repository root (required): go test -bench runs there and git
	// describes its commit.
	Root string
	// Quick takes small samples: a smoke run of every suite in well under a minute.
	Quick bool
	// Chromium is the Chromium binary; empty means broker.DefaultChromium.
	Chromium string
	// CPUProfile, when not empty, is where a CPU profile of the end-to-end suite goes
	// (go tool pprof); section 1's tracing comparison's to CPUProfile + ".tracing", the
	// fast paths' to CPUProfile + ".fastpaths" and section 5's CPU windows' to
	// CPUProfile + ".footprint".
	CPUProfile string
	// Command is the command line that reproduces the run; the report quotes it.
	Command string
	// Log receives the stacks' logs.
	Log zerolog.Logger
	// Progress, when not nil, receives one line per step.
	Progress func(format string, a ...any)
	// Self is the command line that starts this program as a bench node (RunNode),
	// the node's role appended: the capacity suite runs its replicas and workers in
	// processes of their own. Empty leaves the capacity suite out.
	Self []string
	// CapacityOnly runs the capacity suite alone.
	CapacityOnly bool
	// CapacityLevels, when set, are the live sessions of the capacity suite's levels
	// in place of the full run's, and the ceiling is not searched: a diagnostic run.
	CapacityLevels []int
}

// Run starts the stacks, runs every suite in turn (none beside another) and returns
// what they measured. A run is bounded (benchFullTimeout, benchQuickTimeout); the
// build of Jaeger, section 1's trace receiver, comes before and is bounded by
// servers.JaegerBuildTimeout (a cached binary takes no time). The error is the first
// suite's failure, or the context's.
func Run(ctx context.Context, opts Options) (*Results, error) {
	if opts.Root == "" {
		return nil, errors.New("no repository root")
	}
	o := fullOptions()
	timeout := benchFullTimeout
	if opts.Quick {
		o, timeout = quickOptions(), benchQuickTimeout
	}
	o.chromium, o.cpuProfile, o.log = opts.Chromium, opts.CPUProfile, opts.Log
	progress := opts.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if !opts.CapacityOnly {
		// Jaeger, section 1's trace receiver, is built once per machine and cached; a
		// cold build is compile time, outside the run's bound.
		var err error
		if o.jaegerBin, err = servers.BuildJaeger(ctx, progress); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	res := &Results{Quick: o.quick, Started: time.Now().UTC(), Command: opts.Command}
	res.Machine = describeMachine(ctx, opts.Root)
	if !opts.CapacityOnly {
		if err := runBench(ctx, opts.Root, o, res, progress); err != nil {
			return nil, err
		}
	}
	if len(opts.Self) > 0 {
		co := fullCapacity()
		if opts.Quick {
			co = quickCapacity()
		}
		if len(opts.CapacityLevels) > 0 {
			co.agents, co.ceiling = opts.CapacityLevels, nil
		}
		c, err := benchCapacity(ctx, co, opts.Self, profileOf(opts.CPUProfile, "capacity"), opts.Log, progress)
		if err != nil {
			return nil, fmt.Errorf("capacity: %w", err)
		}
		res.Capacity = &c
	} else if opts.CapacityOnly {
		return nil, errors.New("capacity: no command to start bench nodes with (Options.Self)")
	}
	res.Elapsed = time.Since(res.Started)
	return res, nil
}

// runBench runs every suite in turn; none runs beside another.
func runBench(ctx context.Context, root string, o benchOptions, res *Results, progress func(string, ...any)) error {
	var err error
	progress("routing: a stack of one replica growing to eight, one broker with Chromium")
	if res.Routing, res.ReplyBytes, err = benchRouting(ctx, o, progress); err != nil {
		return err
	}
	if err := benchMainStack(ctx, o, res, progress); err != nil {
		return err
	}
	progress("go test %s (benchtime %s)", goBenchCommands(), o.goBenchTime)
	if res.GoBench, err = runGoBenchmarks(ctx, root, o.goBenchTime); err != nil {
		return err
	}
	return nil
}

// benchMainStack runs the suites that share one stack of two replicas with the worker
// on the second: end to end (with the audit comparison's third replica, best effort,
// from then on), privacy masks, fast paths and footprint.
func benchMainStack(ctx context.Context, o benchOptions, res *Results, progress func(string, ...any)) error {
	progress("starting the stack: redis-server, NATS, two replicas, a broker with Chromium and a worker on replica-b")
	st, err := stack.Start(ctx, stack.Options{Replicas: 2, Deployment: benchDeployment, Chromium: o.chromium, Log: o.log})
	if err != nil {
		return err
	}
	defer st.Close()
	bs, err := startBenchSession(ctx, st, benchAgent, 1, o.chromium, benchPage, o.log)
	if err != nil {
		return err
	}
	defer bs.Close(ctx)
	res.Machine.Chromium = bs.chromiumVersion(ctx)
	token, err := st.Token(benchUser, time.Hour)
	if err != nil {
		return err
	}
	v := newViewer(benchUser, token, st)

	progress("end to end: %d views at replica-a against %d bare captures, interleaved", o.e2ePairs, o.e2ePairs)
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	res.E2E, err = benchE2E(ctx, st, bs, v, st.Replicas[0], benchAgent, o.e2eWarm, o.e2ePairs)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("end to end: %w", err)
	}
	progress("tracing: %d views on a stack traced to Jaeger against %d on this one, interleaved", o.tracingPairs, o.tracingPairs)
	if stopProfile, err = startCPUProfile(profileOf(o.cpuProfile, "tracing")); err != nil {
		return err
	}
	res.Tracing, err = benchTracing(ctx, o, st, bs, v)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	progress("audit: %d views at replica-a (durable) against %d at one more replica, best effort, alternated", o.auditPairs, o.auditPairs)
	if res.Audit, err = benchAudit(ctx, o, st, bs, v); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	progress("privacy masks: %d views against %d bare captures on %s and on %s each, %d on each of %d moving pages, interleaved",
		o.masksPairs, o.masksPairs, benchPage, maskedPage, o.masksMovingPairs, movingPages())
	if res.Masks, err = benchMasks(ctx, st, bs, v, st.Replicas[0], benchAgent, o.masksWarm, o.masksPairs, o.masksMovingWarm, o.masksMovingPairs); err != nil {
		return fmt.Errorf("privacy masks: %w", err)
	}
	progress("fast paths: %d round(s) of %s per answer at concurrency %d", o.fastRounds, o.fastPhase, o.fastConcurrency)
	if stopProfile, err = startCPUProfile(profileOf(o.cpuProfile, "fastpaths")); err != nil {
		return err
	}
	res.FastPaths, err = benchFastPaths(ctx, st, st.Replicas[0], token, o)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("fast paths: %w", err)
	}
	progress("footprint: CPU over %d captures; memory of a third replica idle and with %d pending views", o.cpuCaptures, view.MaxInFlight)
	stopProfile, err = startCPUProfile(profileOf(o.cpuProfile, "footprint"))
	if err != nil {
		return err
	}
	err = benchCPU(ctx, bs, v, st.Replicas[0].URL, benchAgent, o.cpuCaptures, &res.Footprint)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("footprint: %w", err)
	}
	if err := benchMemory(ctx, st, token, &res.Footprint); err != nil {
		return fmt.Errorf("footprint: %w", err)
	}
	return nil
}

// profileOf names the profile of one suite beside the end-to-end one: FILE.suite, or
// nothing when no profile was asked for.
func profileOf(path, suite string) string {
	if path == "" {
		return ""
	}
	return path + "." + suite
}

// startCPUProfile starts profiling this process into path (nothing when path is empty)
// and returns the function that stops it.
func startCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path) //nolint:gosec // the operator's own -cpuprofile path
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// describeMachine reads the CPU model, memory and kernel from /proc and the commit
// from git; what it cannot read it leaves empty.
func describeMachine(ctx context.Context, root string) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
					m.Memory = kb << 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty", "--exclude", "*")
	cmd.Dir = root
	if b, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
	}
	return m
}
