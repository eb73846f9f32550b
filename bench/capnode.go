package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/openapi"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/worker"
)

// The capacity bench runs the replicas and the workers in processes of their own, so
// that /proc tells each one's CPU and memory apart: this binary started again as a
// node (`agentfy-bench node replica|farm|nats`, the first line of its stdin the node's
// spec as JSON). A node then answers control lines on stdin, one JSON line on stdout
// each, and stops when stdin ends.
const (
	nodeReplica = "replica" // one API replica (replica.New, as agentfy-api runs it)
	nodeFarm    = "farm"    // workers, each with a stand-in broker
	nodeNATS    = "nats"    // the NATS server (nats-server's own code), as a platform runs it
)

// natsSpec is what the NATS node needs: the deployment's configuration (accounts, users,
// permissions: deploy.NATSConfig).
type natsSpec struct {
	Config string `json:"config"`
}

// replicaSpec is what a replica node needs: the stack's servers and secrets.
type replicaSpec struct {
	ID            string     `json:"id"`
	Deployment    string     `json:"deployment"`
	RedisAddrs    []string   `json:"redisAddrs"`
	RedisUser     string     `json:"redisUser"`
	RedisPassword string     `json:"redisPassword"`
	RedisDB       int        `json:"redisDB"`
	NATS          bus.Config `json:"nats"`
	JWTSecret     []byte     `json:"jwtSecret"`
	GrantKey      []byte     `json:"grantKey"`
}

// farmSpec is what a farm node needs: its workers, and the replicas its stand-in
// brokers redeem at.
type farmSpec struct {
	Dir         string       `json:"dir"`
	ConsumeURLs []string     `json:"consumeURLs"`
	Workers     []farmWorker `json:"workers"`
}

// farmWorker is one session's worker: it attaches to API and only there.
type farmWorker struct {
	Agent      string `json:"agent"`
	API        string `json:"api"`
	WorkerPass string `json:"workerPass"`
	BrokerPass string `json:"brokerPass"`
}

// farmAttachRate is how many workers a farm starts per second: ten thousand hellos at
// once would time out on two replicas sharing two cores with everything else (four
// farms of 2,500 attach 10,000 workers at 2,000 a second).
const farmAttachRate = 500

// nodeAttachTimeout bounds the wait for a farm's workers to attach.
const nodeAttachTimeout = 3 * time.Minute

// RunNode runs this process as a node of the capacity bench: role is nodeReplica or
// nodeFarm, in carries the spec and then control lines, out the answers.
func RunNode(ctx context.Context, role string, in io.Reader, out io.Writer) error {
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 1<<20), 64<<20)
	if !lines.Scan() {
		return errors.New("bench node: no spec on stdin")
	}
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Str("node", role).Timestamp().Logger()
	enc := json.NewEncoder(out)
	switch role {
	case nodeReplica:
		var spec replicaSpec
		if err := json.Unmarshal(lines.Bytes(), &spec); err != nil {
			return fmt.Errorf("bench node: spec: %w", err)
		}
		return runReplicaNode(ctx, spec, lines, enc, log)
	case nodeFarm:
		var spec farmSpec
		if err := json.Unmarshal(lines.Bytes(), &spec); err != nil {
			return fmt.Errorf("bench node: spec: %w", err)
		}
		return runFarmNode(ctx, spec, lines, enc, log)
	case nodeNATS:
		var spec natsSpec
		if err := json.Unmarshal(lines.Bytes(), &spec); err != nil {
			return fmt.Errorf("bench node: spec: %w", err)
		}
		return runNATSNode(spec, lines, enc)
	default:
		return fmt.Errorf("bench node: unknown role %q", role)
	}
}

// runNATSNode serves NATS until stdin ends. It prints {"url":…} when it listens;
// control lines: "varz" ({"outMsgs","outBytes"}: what the server delivered), "sched",
// "profile FILE", "stop-profile".
func runNATSNode(spec natsSpec, lines *bufio.Scanner, enc *json.Encoder) error {
	srv, err := natsserver.Run(natsserver.Options{Name: "agentfy-capacity", Port: -1, Config: spec.Config})
	if err != nil {
		return err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if err := enc.Encode(map[string]string{"url": srv.ClientURL()}); err != nil {
		return err
	}
	var prof profiler
	for lines.Scan() {
		cmd, arg, _ := strings.Cut(lines.Text(), " ")
		var answer any = struct{}{}
		switch cmd {
		case "varz":
			v, err := srv.Varz(nil)
			if err != nil {
				return err
			}
			answer = natsCounters{OutMsgs: v.OutMsgs, OutBytes: v.OutBytes}
		case "sched":
			answer = readSched()
		default:
			if err := prof.control(cmd, arg); err != nil {
				return err
			}
		}
		if err := enc.Encode(answer); err != nil {
			return err
		}
	}
	return nil
}

// natsCounters are the NATS server's delivery counters.
type natsCounters struct {
	OutMsgs  int64 `json:"outMsgs"`
	OutBytes int64 `json:"outBytes"`
}

// schedHist is a node's Go scheduler figures since it started (runtime/metrics): how
// long goroutines waited runnable before they ran, and the collector's stop-the-world
// pauses, as cumulative histograms; a window is the difference of two.
type schedHist struct {
	Latencies hist `json:"latencies"`
	GCPauses  hist `json:"gcPauses"`
	// The collector's CPU (/cpu/classes/gc/total:cpu-seconds: its workers, its
	// pauses and the assists), the part of it that goroutines did instead of their
	// own work when they allocated during a cycle (/cpu/classes/gc/mark/assist), and
	// the cycles finished.
	GCCPU    float64 `json:"gcCPU"`
	GCAssist float64 `json:"gcAssist"`
	GCCycles uint64  `json:"gcCycles"`
	// What the last cycle scanned: goroutine stacks and heap, bytes.
	ScanStack uint64 `json:"scanStack"`
	ScanHeap  uint64 `json:"scanHeap"`
	// Started is when the process started (nodeStarted), Unix ns: its collector
	// trace dates cycles from it.
	Started int64 `json:"started"`
}

// hist is a runtime/metrics Float64Histogram: Counts[i] in [Buckets[i], Buckets[i+1]).
type hist struct {
	Counts  []uint64  `json:"counts"`
	Buckets []float64 `json:"buckets"`
}

// readSched reads this process's scheduler figures.
func readSched() schedHist {
	samples := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/pauses/total/gc:seconds"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/heap:bytes"}}
	metrics.Read(samples)
	out := schedHist{Started: nodeStarted.UnixNano()}
	for _, m := range samples[5:] {
		if m.Value.Kind() != metrics.KindUint64 {
			continue
		}
		switch m.Name {
		case "/gc/scan/stack:bytes":
			out.ScanStack = m.Value.Uint64()
		case "/gc/scan/heap:bytes":
			out.ScanHeap = m.Value.Uint64()
		}
	}
	if samples[2].Value.Kind() == metrics.KindFloat64 {
		out.GCCPU = samples[2].Value.Float64()
	}
	if samples[3].Value.Kind() == metrics.KindFloat64 {
		out.GCAssist = samples[3].Value.Float64()
	}
	if samples[4].Value.Kind() == metrics.KindUint64 {
		out.GCCycles = samples[4].Value.Uint64()
	}
	for i, h := range []*hist{&out.Latencies, &out.GCPauses} { // the first two
		if samples[i].Value.Kind() != metrics.KindFloat64Histogram {
			continue
		}
		fh := samples[i].Value.Float64Histogram()
		h.Counts, h.Buckets = slices.Clone(fh.Counts), slices.Clone(fh.Buckets)
		for j, b := range h.Buckets { // JSON has no infinities
			h.Buckets[j] = max(min(b, math.MaxFloat64), -math.MaxFloat64)
		}
	}
	return out
}

// runReplicaNode serves one replica until stdin ends. It prints {"url":…,"metricsURL":…}
// (its public listener and its metrics listener) when it listens; control lines: "gc"
// (collect and return memory to the OS, then {}), "profile FILE" (start a CPU
// profile), "stop-profile".
func runReplicaNode(ctx context.Context, spec replicaSpec, lines *bufio.Scanner, enc *json.Encoder, log zerolog.Logger) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r, err := replica.New(ctx, replica.Options{
		ReplicaID: spec.ID, Deployment: spec.Deployment,
		Redis: &redis.UniversalOptions{
			Addrs: spec.RedisAddrs, Username: spec.RedisUser, Password: spec.RedisPassword, DB: spec.RedisDB,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			MaxRetries: 1, PoolSize: 64, DisableIdentity: true, ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10,
		},
		NATS: spec.NATS,
		JWT:  []auth.JWTConfig{{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: spec.JWTSecret, Leeway: 30 * time.Second}},
		// Sessions stay running for the whole run: ten thousand started together would
		// turn idle together two minutes later, in the middle of a window, and that burst
		// of status events is not what a view costs.
		Policy:  session.Policy{IdleAfter: time.Hour, StopAfter: 2 * time.Hour},
		OpenAPI: openapi.Document,
		// The capacity nodes' NATS server runs no JetStream: the trail best effort.
		AuditBestEffort: true,
		GrantKeys:       view.GrantKeys{spec.GrantKey},
		Log:             log, DrainTimeout: 10 * time.Second,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	metricsLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		_ = ln.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.ServeAll(sctx, replica.Listeners{Public: ln, Metrics: metricsLn}) }()
	if err := enc.Encode(map[string]string{"url": "http://" + ln.Addr().String(), "metricsURL": "http://" + metricsLn.Addr().String()}); err != nil {
		stop()
		return err
	}
	var prof profiler
	for lines.Scan() {
		cmd, arg, _ := strings.Cut(lines.Text(), " ")
		var answer any = struct{}{}
		if cmd == "gc" {
			runtime.GC()
			debug.FreeOSMemory()
			answer = map[string]int{"goroutines": runtime.NumGoroutine(), "channel": goroutinesIn("github.com/agentfy/agentfy/channel.")}
		} else if cmd == "sched" {
			answer = readSched()
		} else if err = prof.control(cmd, arg); err != nil {
			break
		}
		if err = enc.Encode(answer); err != nil {
			break
		}
	}
	stop()
	if serr := <-done; err == nil {
		err = serr
	}
	return err
}

// runFarmNode runs a worker and a stand-in broker per session until stdin ends. It
// prints {"attached":n} once every worker's channel is open; control lines: "stats"
// ({"work":[…]}: the stand-ins' sealing times since the last stats, in µs).
func runFarmNode(ctx context.Context, spec farmSpec, lines *bufio.Scanner, enc *json.Encoder, log zerolog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One client for every stand-in's redemptions, as one broker process would have.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}
	var mu sync.Mutex
	var work []int64 // µs, guarded by mu
	onWork := func(d time.Duration) {
		mu.Lock()
		work = append(work, d.Microseconds())
		mu.Unlock()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	health := make([]string, len(spec.Workers))
	tick := time.NewTicker(time.Second / farmAttachRate)
	defer tick.Stop()
	for i, fw := range spec.Workers {
		dir := filepath.Join(spec.Dir, strconv.Itoa(i))
		stop, err := startStandIn(ctx, dir, fw.Agent, fw.BrokerPass, spec.ConsumeURLs, client, onWork)
		if err != nil {
			return fmt.Errorf("stand-in %d: %w", i, err)
		}
		defer stop()
		health[i] = filepath.Join(dir, "up")
		w, err := worker.New(worker.Config{APIURLs: []string{fw.API}, Pass: fw.WorkerPass, IPCDir: dir, ImageTag: "capacity", HealthFile: health[i], Log: log})
		if err != nil {
			return err
		}
		wg.Go(func() { _ = w.Run(ctx) })
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := waitAttached(ctx, health); err != nil {
		return err
	}
	if err := enc.Encode(map[string]int{"attached": len(health)}); err != nil {
		return err
	}
	var prof profiler
	for lines.Scan() {
		if lines.Text() == "sched" {
			if err := enc.Encode(readSched()); err != nil {
				return err
			}
			continue
		}
		if cmd, arg, _ := strings.Cut(lines.Text(), " "); cmd != "stats" {
			if err := prof.control(cmd, arg); err != nil {
				return err
			}
			if err := enc.Encode(struct{}{}); err != nil {
				return err
			}
			continue
		}
		mu.Lock()
		w := slices.Clone(work)
		work = work[:0]
		mu.Unlock()
		if err := enc.Encode(map[string][]int64{"work": w}); err != nil {
			return err
		}
	}
	return nil
}

// waitAttached waits until every health file exists: every worker's channel is open.
func waitAttached(ctx context.Context, health []string) error {
	ctx, cancel := context.WithTimeout(ctx, nodeAttachTimeout)
	defer cancel()
	next := 0
	for {
		for next < len(health) {
			if _, err := os.Stat(health[next]); err != nil {
				break
			}
			next++
		}
		if next == len(health) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d workers attached: %w", next, len(health), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// profiler is a node's CPU profile, driven by control lines: "profile FILE" starts
// one, "stop-profile" writes it; "heap FILE" writes a heap profile.
type profiler struct{ stop func() error }

func (p *profiler) control(cmd, arg string) error {
	switch cmd {
	case "heap":
		f, err := os.Create(arg) //nolint:gosec // the bench's own profile path
		if err != nil {
			return err
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	case "profile":
		stop, err := startCPUProfile(arg)
		if err != nil {
			return err
		}
		p.stop = stop
	case "stop-profile":
		if p.stop != nil {
			err := p.stop()
			p.stop = nil
			return err
		}
	}
	return nil
}

// goroutinesIn counts the goroutines with a frame of a function whose name starts with
// prefix: the worker connections' own (their socket's, and a ping waiting for its pong), told apart
// from the HTTP connections of viewers that happen to be open.
func goroutinesIn(prefix string) int {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return -1
	}
	n := 0
	for block := range strings.SplitSeq(b.String(), "\n\n") {
		count, _, ok := strings.Cut(block, " @ ")
		if !ok || !strings.Contains(block, prefix) {
			continue
		}
		k, _ := strconv.Atoi(strings.TrimSpace(count[strings.LastIndexByte(count, '\n')+1:]))
		n += k
	}
	return n
}
