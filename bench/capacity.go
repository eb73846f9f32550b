package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/servers"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// capacityOptions size the capacity suite.
type capacityOptions struct {
	agents   []int         // live sessions at each level, growing
	watched  int           // agents polled at every level, so that levels compare per view
	settle   time.Duration // after a level's workers attached, before its first window
	idle     time.Duration // the idle window that prices what the replicas do unwatched
	warm     time.Duration // viewers run before a window counts
	window   time.Duration // a measured window of a level
	ceiling  []int         // watched agents at each step of the ceiling search (largest level)
	step     time.Duration // a measured window of the ceiling search
	farmSize int           // workers per farm process
}

func fullCapacity() capacityOptions {
	return capacityOptions{
		agents: []int{100, 1000, 10000}, watched: 100,
		settle: 20 * time.Second, idle: 15 * time.Second, warm: 5 * time.Second, window: 60 * time.Second,
		ceiling: []int{200, 400, 800, 1000, 1200, 1600, 3200}, step: 15 * time.Second, farmSize: 2500,
	}
}

func quickCapacity() capacityOptions {
	return capacityOptions{
		agents: []int{20, 60}, watched: 20,
		settle: time.Second, idle: time.Second, warm: 2 * time.Second, window: 4 * time.Second,
		ceiling: []int{40}, step: 4 * time.Second, farmSize: 40,
	}
}

// Capacity limits of a healthy step: past either, the ceiling is found.
const (
	ceilingP99       = 100 * time.Millisecond
	pollInterval     = 5 * time.Second // the SDK's (sdk/src/poll.ts)
	pollJitter       = 500 * time.Millisecond
	capacityDeploy   = "capacity"
	capacityUser     = "u-alice" // a member of team-atlas, the agents' team
	capacityOrg      = "org-acme"
	capacityEnv      = "production"
	capacityTeam     = "team-atlas"
	capacityFrameURL = "https://capacity.invalid/"
)

// The processes of the CPU and scheduling figures besides the replicas: the farm
// processes together, the NATS server, redis-server and the bench (its viewers).
const (
	farmsProcess = "workers and stand-ins"
	natsProcess  = "nats-server"
	redisProcess = "redis-server"
	benchProcess = "bench: viewers"
)

// capacityResult is the capacity suite's measurements.
type capacityResult struct {
	FrameBytes int             `json:"frameBytes"`
	Levels     []capacityLevel `json:"levels"`
	Ceiling    []capacityPhase `json:"ceiling"`
	// Crossed is the index in Ceiling of the first step past ceilingP99 or with an
	// error; -1 when every step held.
	Crossed int `json:"crossed"`
	// Profile is the top of the CPU profile of the busiest process at the last step
	// measured (the crossing one when there is one), from go tool pprof -top.
	ProfileOf string   `json:"profileOf"`
	Profile   []string `json:"profile"`
	// Heap is the top of replica-a's heap in use at the largest level (go tool pprof
	// -top -sample_index=inuse_space): where its memory per connection goes.
	Heap []string `json:"heap"`
}

// capacityLevel is one number of live sessions, each with a worker attached.
type capacityLevel struct {
	Agents int `json:"agents"`
	// Redis memory (INFO memory used_memory) per agent added to the directory, and per
	// session started and its worker attached.
	RedisPerAgent   float64 `json:"redisPerAgent"`
	RedisPerSession float64 `json:"redisPerSession"`
	// RSSPerConn and GoroutinesPerConn are the replicas' growth per worker connection
	// added at this level (from the level before, or from before the first worker),
	// each measured after a GC and FreeOSMemory: what one more connection costs,
	// without the fixed cost of a replica spread over them.
	RSSPerConn        float64 `json:"rssPerConn"`
	GoroutinesPerConn float64 `json:"goroutinesPerConn"`
	// ReplicaFDs is the replicas' open file descriptors, summed (their limit is
	// RLIMIT_NOFILE each).
	ReplicaFDs int `json:"replicaFDs"`
	// Attach is how long the workers added at this level took to attach.
	Attach time.Duration `json:"attach"`
	// IdleReplicaCPU is the replicas' CPU per second with every worker attached and no
	// viewer (session checks, pings, NATS and Redis keepalives).
	IdleReplicaCPU time.Duration   `json:"idleReplicaCPU"`
	Phases         []capacityPhase `json:"phases"`
	// Profile is the top of replica-a's CPU profile in the one-viewer window.
	Profile []string `json:"profile"`
}

// capacityPhase is one measured window of viewers.
type capacityPhase struct {
	Watched         int            `json:"watched"`
	ViewersPerAgent int            `json:"viewersPerAgent"`
	Polls           int            `json:"polls"`
	Frames          int            `json:"frames"`
	Limited         int            `json:"limited"` // 429
	Errors          map[string]int `json:"errors"`  // anything else, by status and reason
	Wrong           int            `json:"wrong"`   // frames of another agent
	Wall            time.Duration  `json:"wall"`    // from the first counters' reading to the last
	Window          time.Duration  `json:"window"`  // when the frames counted were fired
	Latency         dist           `json:"latency"` // of the frames, request to decoded body
	// P99Low and P99High bound the p99 of the frames' latency with 95 % confidence
	// (quantileInterval): a window's frames are a sample.
	P99Low  time.Duration `json:"p99Low"`
	P99High time.Duration `json:"p99High"`
	Work    dist          `json:"work"` // the stand-ins' sealing
	// ReplicaCPU is both replicas' CPU over the window net of their idle rate.
	ReplicaCPU time.Duration `json:"replicaCPU"`
	// Cores is each process's CPU over the window per second of it, gross.
	Cores map[string]float64 `json:"cores"`
	// Sched is each Go process's scheduling over the window (runtime/metrics): how long
	// goroutines waited runnable, and the collector's pauses.
	Sched map[string]schedWindow `json:"sched"`
	// ReplicaParts is the replicas' CPU in the window by part of their work
	// (replicaParts), from their CPU profiles, when profiled; ReplicaPartsSyscalls is
	// the part of each spent in system calls.
	ReplicaParts         map[string]time.Duration `json:"replicaParts,omitempty"`
	ReplicaPartsSyscalls map[string]time.Duration `json:"replicaPartsSyscalls,omitempty"`
	// GC is how the window's frames met the collections of the replicas and of the
	// farms (gcReplicas, farmsProcess), from their collector traces.
	GC map[string]gcOverlap `json:"gc"`
	// Per frame, net of the idle rate: Redis commands (INFO commandstats), the
	// replicas' Redis round trips (agentfy_redis_round_trips_total) and NATS messages
	// and bytes delivered (the server's OutMsgs, OutBytes).
	RedisCommands float64 `json:"redisCommands"`
	RedisTrips    float64 `json:"redisTrips"`
	NATSMsgs      float64 `json:"natsMsgs"`
	NATSBytes     float64 `json:"natsBytes"`
}

// perSecond is the frames served per second of the window.
// The frames counted are those fired in the window (Window); the counters are read
// over Wall, from the first reading to the last, which starts a little after the
// window and ends a little after it: a figure per frame divides a counter's rate by the
// frames' rate.
func (p capacityPhase) perSecond() float64 {
	if p.Window <= 0 {
		return 0
	}
	return float64(p.Frames) / p.Window.Seconds()
}

// framesInWall is the frames served at the window's rate over Wall, the divisor of the
// counters read over Wall.
func (p capacityPhase) framesInWall() float64 { return p.perSecond() * p.Wall.Seconds() }

// cpuPerFrame is the replicas' CPU per frame served, net of idle.
func (p capacityPhase) cpuPerFrame() time.Duration {
	f := p.framesInWall()
	if f <= 0 {
		return 0
	}
	return time.Duration(float64(p.ReplicaCPU) / f)
}

// errorCount is how many polls failed for another reason than the gate.
func (p capacityPhase) errorCount() int {
	n := p.Wrong
	for _, c := range p.Errors {
		n += c
	}
	return n
}

// capacity is one run of the suite: a stack without replicas of its own, two replica
// processes, and farm processes of workers and stand-in brokers.
type capacity struct {
	o        capacityOptions
	st       *stack.Stack
	self     []string
	dir      string
	profiles string // the prefix of the ceiling steps' CPU profiles
	log      zerolog.Logger
	progress func(string, ...any)

	replicas []*capNode
	farms    []*capNode
	nats     *capNode
	agents   []string // every agent with a live session, in order
	member   string   // the member's token
	keys     [2]string
	client   *http.Client

	baseRSS, baseGoroutines float64 // the replicas' at the last level, or before the first worker
}

// benchCapacity runs the capacity suite. self starts this program as a bench node
// (RunNode's role is appended).
//
// profiles, when not empty, is where the ceiling steps' CPU profiles are kept
// (profiles-N.replica-a, …); they go with the run's temporary directory otherwise.
func benchCapacity(ctx context.Context, o capacityOptions, self []string, profiles string, log zerolog.Logger, progress func(string, ...any)) (res capacityResult, err error) {
	if len(self) == 0 {
		return res, errors.New("capacity: no command to start bench nodes with")
	}
	frame, err := standInFrame()
	if err != nil {
		return res, err
	}
	res.FrameBytes, res.Crossed = len(frame), -1
	dir, err := os.MkdirTemp("", "agentfy-capacity-")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// NATS in a process of its own, as a platform runs it, so that its CPU and its
	// scheduling are its own and not the viewers'.
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		return res, err
	}
	ns, err := bus.NewNamespace(capacityDeploy, 0)
	if err != nil {
		return res, err
	}
	natsConfig, err := deploy.NATSConfig(ns, secrets)
	if err != nil {
		return res, err
	}
	c := &capacity{o: o, self: self, dir: dir, log: log, progress: progress,
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}}}
	if c.nats, err = c.startNode(ctx, natsProcess, nodeNATS, false, natsSpec{Config: natsConfig}); err != nil {
		return res, err
	}
	defer c.nats.stop()
	var up struct{ URL string }
	if err := c.nats.read(&up); err != nil {
		return res, err
	}
	st, err := stack.Start(ctx, stack.Options{Replicas: -1, Deployment: capacityDeploy, Log: log, NATSServers: []string{up.URL}, Secrets: &secrets, AuditBestEffort: true})
	if err != nil {
		return res, err
	}
	defer st.Close()
	if profiles == "" {
		profiles = filepath.Join(dir, "ceiling")
	}
	c.st, c.profiles = st, profiles
	defer c.stopNodes()
	if err := c.start(ctx); err != nil {
		return res, err
	}
	for _, n := range o.agents {
		level, err := c.level(ctx, n)
		if err != nil {
			return res, fmt.Errorf("%d agents: %w", n, err)
		}
		res.Levels = append(res.Levels, level)
	}
	heap := filepath.Join(dir, "heap.replica-a")
	if err := c.replicas[0].call("heap "+heap, nil); err != nil {
		return res, err
	}
	res.Heap = pprofTop(ctx, heap, "-sample_index=inuse_space")
	if err := c.findCeiling(ctx, &res); err != nil {
		return res, fmt.Errorf("ceiling: %w", err)
	}
	return res, nil
}

// start starts the two replica processes and makes the viewers' credentials.
func (c *capacity) start(ctx context.Context) error {
	redisOpts := c.st.RedisOptions(deploy.RedisReplica)
	for _, id := range []string{"replica-a", "replica-b"} {
		spec := replicaSpec{
			ID: id, Deployment: capacityDeploy, RedisAddrs: redisOpts.Addrs, RedisUser: redisOpts.Username,
			RedisPassword: redisOpts.Password, RedisDB: redisOpts.DB,
			NATS: c.st.NATSConfig(bus.RoleReplica, "agentfy-api "+id), JWTSecret: c.st.Secret, GrantKey: c.st.GrantKeys[0],
		}
		n, err := c.startNode(ctx, id, nodeReplica, false, spec)
		if err != nil {
			return err
		}
		var up struct{ URL, MetricsURL string }
		if err := n.read(&up); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		n.url, n.metricsURL = up.URL, up.MetricsURL
		if err := waitReady(ctx, n.url); err != nil {
			return err
		}
		c.replicas = append(c.replicas, n)
	}
	var err error
	if c.member, err = c.st.Token(capacityUser, 2*time.Hour); err != nil {
		return err
	}
	for i := range c.keys {
		if c.keys[i], _, err = c.st.Creds.CreateOrgKey(ctx, capacityOrg, capacityEnv, []string{auth.ScopeWorkerLogsRead}); err != nil {
			return err
		}
	}
	rss, gr, err := c.replicaMemory(ctx)
	c.baseRSS, c.baseGoroutines = rss, gr
	return err
}

// level grows the live sessions to n and measures them idle, then watched by one
// viewer per watched agent, then by three.
func (c *capacity) level(ctx context.Context, n int) (capacityLevel, error) {
	l := capacityLevel{Agents: n}
	added := n - len(c.agents)
	c.progress("capacity: %d agents (+%d): directory, sessions, workers", n, added)
	ids := make([]string, 0, added)
	for i := len(c.agents); i < n; i++ {
		ids = append(ids, fmt.Sprintf("cap-%05d", i))
	}
	m0, err := c.redisMemory(ctx)
	if err != nil {
		return l, err
	}
	if err := c.addAgents(ctx, ids); err != nil {
		return l, err
	}
	m1, err := c.redisMemory(ctx)
	if err != nil {
		return l, err
	}
	start := time.Now()
	if err := c.addSessions(ctx, ids); err != nil {
		return l, err
	}
	l.Attach = time.Since(start)
	m2, err := c.redisMemory(ctx)
	if err != nil {
		return l, err
	}
	l.RedisPerAgent, l.RedisPerSession = float64(m1-m0)/float64(added), float64(m2-m1)/float64(added)
	c.agents = append(c.agents, ids...)
	// Thousands of attaches leave work behind for a while (their garbage, the heap
	// grown): measured idle at 10,000 sessions, the replicas spent 161 ms/s in the
	// first 10 s after a 5 s settle and 64–110 ms/s in the five windows after it.
	if err := sleepCtx(ctx, c.o.settle); err != nil {
		return l, err
	}
	watched := min(c.o.watched, n)
	for _, per := range []int{1, 3} {
		idle, err := c.idleRates(ctx)
		if err != nil {
			return l, err
		}
		if per == 1 {
			l.IdleReplicaCPU = idle.replicaCPU()
		}
		c.progress("capacity: %d agents, %d watched by %d viewer(s) each", n, watched, per)
		profile := ""
		if per == 1 {
			// Each process's CPU profile of the one-viewer window, to set the levels'
			// side by side.
			profile = fmt.Sprintf("%s-level-%d", c.profiles, n)
		}
		p, err := c.phase(ctx, watched, per, c.o.window, idle, profile)
		if err != nil {
			return l, err
		}
		if profile != "" {
			l.Profile = pprofTop(ctx, profile+".replica-a")
		}
		l.Phases = append(l.Phases, p)
	}
	// Memory last: measuring it collects and gives memory back to the OS, and faulting
	// it in again would be counted as the idle cost of the window after.
	rss, gr, err := c.replicaMemory(ctx)
	if err != nil {
		return l, err
	}
	l.RSSPerConn, l.GoroutinesPerConn = (rss-c.baseRSS)/float64(added), (gr-c.baseGoroutines)/float64(added)
	c.baseRSS, c.baseGoroutines = rss, gr
	for _, r := range c.replicas {
		fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(r.cmd.Process.Pid), "fd"))
		if err != nil {
			return l, err
		}
		l.ReplicaFDs += len(fds)
	}
	return l, nil
}

// addAgents writes the agents to the directory, in team-atlas of org-acme's production.
func (c *capacity) addAgents(ctx context.Context, ids []string) error {
	for batch := range slices.Chunk(ids, 1000) {
		seed := directory.Seed{}
		for _, id := range batch {
			seed.Agents = append(seed.Agents, directory.Agent{ID: id, Name: id, TeamID: capacityTeam, OrgID: capacityOrg, Environment: capacityEnv})
		}
		if err := c.st.Dir.Load(ctx, seed); err != nil {
			return err
		}
	}
	return nil
}

// addSessions starts a session per agent and attaches its worker, round robin to the
// two replicas, from farm processes of at most farmSize workers.
func (c *capacity) addSessions(ctx context.Context, ids []string) error {
	workers := make([]farmWorker, len(ids))
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 32)
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, passes, err := c.st.Sess.Start(ctx, id)
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			k := len(c.agents) + i
			workers[i] = farmWorker{Agent: id, API: c.replicas[k%2].url, WorkerPass: passes.Worker, BrokerPass: passes.Broker}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("start sessions: %w", err)
	default:
	}
	urls := []string{c.replicas[0].url, c.replicas[1].url}
	var started []*capNode
	first := len(c.agents) // the index of the next farm's first agent
	for chunk := range slices.Chunk(workers, c.o.farmSize) {
		name := fmt.Sprintf("farm-%d", len(c.farms)+len(started)+1)
		// A farm of sessions that no step ever watches stands for workers on machines of
		// their own: it runs in the background (setBackground), so that its idle work
		// (the pings of thousands of sockets, its collections) does not take the
		// replicas' cores at random. The farms of watched agents, on the view path, do
		// not.
		background := first >= c.watchedAtMost()
		n, err := c.startNode(ctx, name, nodeFarm, background, farmSpec{Dir: filepath.Join(c.dir, name), ConsumeURLs: urls, Workers: chunk})
		if err != nil {
			return err
		}
		n.first, n.background = first, background
		started = append(started, n)
		first += len(chunk)
	}
	c.farms = append(c.farms, started...)
	for _, n := range started {
		var up struct{ Attached int }
		if err := n.read(&up); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

// rates is what the processes and servers did per second of an idle window.
type rates struct {
	cpu           map[string]float64 // CPU seconds per second, by process
	redisCommands float64
	redisTrips    float64
	natsMsgs      float64
	natsBytes     float64
}

// replicaCPU is the replicas' CPU per second.
func (r rates) replicaCPU() time.Duration {
	return time.Duration((r.cpu["replica-a"] + r.cpu["replica-b"]) * float64(time.Second))
}

// idleRates measures an idle window with every worker attached, right before the
// window it is subtracted from, after a settle of its own: whatever the last step left
// behind (answers in flight, a collection, memory given back to the OS and faulted in
// again) is not the idle cost, and at 10,000 sessions the idle rate is larger than what
// the views cost, so its noise is theirs.
func (c *capacity) idleRates(ctx context.Context) (rates, error) {
	if err := sleepCtx(ctx, c.o.warm); err != nil {
		return rates{}, err
	}
	s0, err := c.snapshot(ctx)
	if err != nil {
		return rates{}, err
	}
	if err := sleepCtx(ctx, c.o.idle); err != nil {
		return rates{}, err
	}
	s1, err := c.snapshot(ctx)
	if err != nil {
		return rates{}, err
	}
	wall := s1.at.Sub(s0.at).Seconds()
	r := rates{cpu: map[string]float64{}}
	for name, v := range s1.cpu {
		r.cpu[name] = (v - s0.cpu[name]).Seconds() / wall
	}
	r.redisCommands = float64(s1.redisCalls-s0.redisCalls) / wall
	r.redisTrips = float64(s1.redisTrips-s0.redisTrips) / wall
	r.natsMsgs = float64(s1.natsOut-s0.natsOut) / wall
	r.natsBytes = float64(s1.natsBytes-s0.natsBytes) / wall
	return r, nil
}

// snapshot is the counters a window is the difference of.
type snapshot struct {
	at         time.Time
	cpu        map[string]time.Duration // by process
	redisCalls int64
	redisTrips int64 // the replicas' agentfy_redis_round_trips_total
	natsOut    int64
	natsBytes  int64
	unavail    map[string]float64 // the replicas' agentfy_view_unavailable_total by reason
}

// snapshot reads every counter.
func (c *capacity) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), cpu: map[string]time.Duration{}, unavail: map[string]float64{}}
	add := func(name string, pid int) error {
		ps, err := readProcStat(pid)
		if err != nil {
			return err
		}
		s.cpu[name] += ps.CPU
		return nil
	}
	for _, n := range c.replicas {
		if err := add(n.name, n.cmd.Process.Pid); err != nil {
			return s, err
		}
	}
	for _, n := range c.farms {
		if err := add(farmsProcess, n.cmd.Process.Pid); err != nil {
			return s, err
		}
	}
	if err := add(natsProcess, c.nats.cmd.Process.Pid); err != nil {
		return s, err
	}
	if err := add(redisProcess, c.st.Redis.Pid()); err != nil {
		return s, err
	}
	if err := add(benchProcess, os.Getpid()); err != nil {
		return s, err
	}
	info, err := c.st.AdminClient().Info(ctx, "commandstats").Result()
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(info) {
		if _, rest, ok := strings.Cut(line, ":calls="); ok {
			calls, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			s.redisCalls += n
		}
	}
	var v natsCounters
	if err := c.nats.call("varz", &v); err != nil {
		return s, err
	}
	s.natsOut, s.natsBytes = v.OutMsgs, v.OutBytes
	for _, n := range c.replicas {
		body, err := c.get(ctx, n.metricsURL+metrics.Path)
		if err != nil {
			return s, err
		}
		for line := range strings.Lines(body) {
			if rest, ok := strings.CutPrefix(line, "agentfy_redis_round_trips_total "); ok {
				x, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				s.redisTrips += int64(x)
				continue
			}
			rest, ok := strings.CutPrefix(line, `agentfy_view_unavailable_total{reason="`)
			if !ok {
				continue
			}
			reason, rest, _ := strings.Cut(rest, `"`)
			f := strings.Fields(rest)
			if len(f) > 0 {
				x, _ := strconv.ParseFloat(f[len(f)-1], 64)
				s.unavail[reason] += x
			}
		}
	}
	return s, nil
}

// get fetches url's body.
func (c *capacity) get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return string(b), err
}

// redisMemory is Redis's used_memory.
func (c *capacity) redisMemory(ctx context.Context) (int64, error) {
	info, err := c.st.AdminClient().Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO memory")
}

// replicaMemory is the two replicas' VmRSS and their goroutines in the channel package
// (a worker connection's, and the hub's own), summed, each measured after a garbage
// collection that returns memory to the OS.
func (c *capacity) replicaMemory(ctx context.Context) (rss, goroutines float64, err error) {
	c.client.CloseIdleConnections() // the viewers' keep-alive connections are no worker's
	for _, n := range c.replicas {
		var g struct{ Channel int }
		if err := n.call("gc", &g); err != nil {
			return 0, 0, err
		}
		goroutines += float64(g.Channel)
		r, err := vmRSSOf(strconv.Itoa(n.cmd.Process.Pid))
		if err != nil {
			return 0, 0, err
		}
		rss += float64(r)
	}
	return rss, goroutines, nil
}

// viewerSpec is one viewer: the route it polls, with its credential, for agent.
type viewerSpec struct{ agent, url, bearer string }

// pollOutcome is one answer.
type pollOutcome struct {
	fired      time.Time
	latency    time.Duration
	status     int
	frame      bool
	wrong      bool
	retryAfter time.Duration
}

// phase runs the viewers of watched agents, per agent each, for warm + window and
// measures the window. profile, when not empty, is where the replicas' and this
// process's CPU profiles of the window go (profile.replica-a, … .bench).
func (c *capacity) phase(ctx context.Context, watched, per int, window time.Duration, idle rates, profile string) (capacityPhase, error) {
	p := capacityPhase{Watched: watched, ViewersPerAgent: per, Errors: map[string]int{}}
	if err := c.backgroundFarms(watched); err != nil {
		return p, err
	}
	var viewers []viewerSpec
	for i, agent := range c.agents[:watched] {
		base := c.replicas[i%2].url // a balancer spreads the viewers
		viewers = append(viewers, viewerSpec{agent, base + "/v1/agents/" + agent + "/worker/view", c.member})
		for k := range per - 1 {
			viewers = append(viewers, viewerSpec{agent, c.replicas[(i+k+1)%2].url + "/v1/orgs/" + capacityOrg + "/agents/" + agent + "/worker/view", c.keys[k%2]})
		}
	}
	warmEnd := time.Now().Add(c.o.warm)
	end := warmEnd.Add(window)
	out := make(chan pollOutcome, 1<<16)
	var wg sync.WaitGroup
	for _, v := range viewers {
		wg.Go(func() { c.runViewer(ctx, v, end, out, &wg) })
	}
	var outcomes []pollOutcome
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for o := range out {
			outcomes = append(outcomes, o)
		}
	}()
	if err := sleepCtx(ctx, time.Until(warmEnd)); err != nil {
		return p, err
	}
	if _, err := c.farmWork(); err != nil { // the stand-ins' work of the warm-up goes
		return p, err
	}
	stopProfiles, err := c.startProfiles(profile)
	if err != nil {
		return p, err
	}
	s0, err := c.snapshot(ctx)
	if err != nil {
		return p, err
	}
	h0, err := c.scheds()
	if err != nil {
		return p, err
	}
	if err := sleepCtx(ctx, time.Until(end)); err != nil {
		return p, err
	}
	s1, err := c.snapshot(ctx)
	if err != nil {
		return p, err
	}
	h1, err := c.scheds()
	if err != nil {
		return p, err
	}
	p.Sched = schedWindows(h0, h1)
	if err := stopProfiles(); err != nil {
		return p, err
	}
	if profile != "" {
		p.ReplicaParts, p.ReplicaPartsSyscalls = cpuParts(ctx, replicaParts, profile+".replica-a", profile+".replica-b")
	}
	wg.Wait() // the viewers, and every poll they fired
	close(out)
	<-collected
	work, err := c.farmWork()
	if err != nil {
		return p, err
	}
	p.Work = summarize(work)
	var lat []time.Duration
	var frames []frameSpan
	for _, o := range outcomes {
		if o.fired.Before(warmEnd) || !o.fired.Before(end) {
			continue
		}
		p.Polls++
		switch {
		case o.wrong:
			p.Wrong++
		case o.frame:
			p.Frames++
			lat = append(lat, o.latency)
			frames = append(frames, frameSpan{fired: o.fired, latency: o.latency})
		case o.status == http.StatusTooManyRequests:
			p.Limited++
		case o.status != http.StatusServiceUnavailable:
			p.Errors[statusLabel(o.status)]++
		}
	}
	for reason, n := range s1.unavail {
		if d := int(n - s0.unavail[reason]); d > 0 {
			p.Errors["503 "+reason] += d
		}
	}
	p.Latency = summarize(lat)
	p.P99Low, p.P99High = quantileInterval(lat, 0.99)
	p.GC = c.gcOverlaps(frames, warmEnd, end)
	p.Wall, p.Window = s1.at.Sub(s0.at), end.Sub(warmEnd)
	wall := p.Wall.Seconds()
	p.Cores = map[string]float64{}
	for name, v := range s1.cpu {
		p.Cores[name] = (v - s0.cpu[name]).Seconds() / wall
	}
	p.ReplicaCPU = time.Duration(((p.Cores["replica-a"]+p.Cores["replica-b"])*wall - idle.replicaCPU().Seconds()*wall) * float64(time.Second))
	if p.Frames > 0 {
		f := p.framesInWall()
		p.RedisCommands = (float64(s1.redisCalls-s0.redisCalls) - idle.redisCommands*wall) / f
		p.RedisTrips = (float64(s1.redisTrips-s0.redisTrips) - idle.redisTrips*wall) / f
		p.NATSMsgs = (float64(s1.natsOut-s0.natsOut) - idle.natsMsgs*wall) / f
		p.NATSBytes = (float64(s1.natsBytes-s0.natsBytes) - idle.natsBytes*wall) / f
	}
	return p, nil
}

// statusLabel names an answer that is neither a frame nor 429 nor 503.
func statusLabel(status int) string {
	if status == 0 {
		return "no answer"
	}
	return strconv.Itoa(status)
}

// runViewer polls as the SDK does, open loop: a request every 5 s ± 0.5 s from the
// last one sent, whether or not it was answered, a 429's Retry-After added to the
// wait; the first at a random point of the first interval. It stops sending at until.
func (c *capacity) runViewer(ctx context.Context, v viewerSpec, until time.Time, out chan<- pollOutcome, wg *sync.WaitGroup) {
	retry := make(chan time.Duration, 4)
	next := time.Now().Add(rand.N(pollInterval)) //nolint:gosec // a poll's jitter, no secret
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	stopAt := time.NewTimer(time.Until(until))
	defer stopAt.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stopAt.C:
			return
		case ra := <-retry:
			next = next.Add(ra)
			t.Reset(time.Until(next))
			continue
		case <-t.C:
		}
		fired := time.Now()
		if !fired.Before(until) {
			return
		}
		next = fired.Add(pollInterval - pollJitter + rand.N(2*pollJitter)) //nolint:gosec // a poll's jitter, no secret
		t.Reset(time.Until(next))
		wg.Go(func() {
			o := c.poll(ctx, v, fired)
			out <- o
			if o.status == http.StatusTooManyRequests {
				select {
				case retry <- o.retryAfter:
				default:
				}
			}
		})
	}
}

// poll sends one request and reads the answer as the SDK does; a frame must name the
// agent asked for.
func (c *capacity) poll(ctx context.Context, v viewerSpec, fired time.Time) pollOutcome {
	o := pollOutcome{fired: fired}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
	if err != nil {
		return o
	}
	req.Header.Set("Authorization", "Bearer "+v.bearer)
	resp, err := c.client.Do(req)
	if err != nil {
		return o
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return o
	}
	o.status = resp.StatusCode
	switch resp.StatusCode {
	case http.StatusOK:
		var r struct {
			Live bool `json:"live"`
			Page *struct {
				URL   string `json:"url"`
				Title string `json:"title"`
			} `json:"page"`
		}
		if jsonv2.Unmarshal(body, &r) != nil || !r.Live || r.Page == nil {
			o.status = -1 // not a frame: counted as an error
			return o
		}
		o.frame = true
		o.wrong = r.Page.Title != v.agent || r.Page.URL != capacityFrameURL+v.agent
	case http.StatusTooManyRequests:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		o.retryAfter = time.Duration(max(s, 1)) * time.Second
	}
	o.latency = time.Since(fired)
	return o
}

// farmWork collects the stand-ins' sealing times since the last call.
func (c *capacity) farmWork() ([]time.Duration, error) {
	var all []time.Duration
	for _, n := range c.farms {
		var w struct{ Work []int64 }
		if err := n.call("stats", &w); err != nil {
			return nil, err
		}
		for _, us := range w.Work {
			all = append(all, time.Duration(us)*time.Microsecond)
		}
	}
	return all, nil
}

// profiled are the nodes whose CPU is profiled in a ceiling step: both replicas and
// the first farm (the farms run the same code).
func (c *capacity) profiled() []*capNode {
	return append(append(slices.Clone(c.replicas), c.nats), c.farms[:min(1, len(c.farms))]...)
}

// startProfiles starts CPU profiles of both replicas, the NATS server, the first farm
// and this process into prefix.replica-a, prefix.replica-b, prefix.nats-server,
// prefix.farm-1 and prefix.bench; nothing when prefix is empty.
func (c *capacity) startProfiles(prefix string) (stop func() error, err error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	profiled := c.profiled()
	for _, n := range profiled {
		if err := n.call("profile "+prefix+"."+n.name, nil); err != nil {
			return nil, err
		}
	}
	stopSelf, err := startCPUProfile(prefix + ".bench")
	if err != nil {
		return nil, err
	}
	return func() error {
		err := stopSelf()
		for _, n := range profiled {
			if e := n.call("stop-profile", nil); err == nil {
				err = e
			}
		}
		return err
	}, nil
}

// findCeiling raises the watched agents at the largest level, one viewer each, until
// p99 passes ceilingP99 or a poll fails, and profiles the busiest process of the last
// step.
func (c *capacity) findCeiling(ctx context.Context, res *capacityResult) error {
	prefix := c.profiles
	for i, w := range c.o.ceiling {
		w = min(w, len(c.agents))
		idle, err := c.idleRates(ctx)
		if err != nil {
			return err
		}
		c.progress("capacity ceiling: %d agents watched (%.0f polls/s)", w, float64(w)/pollInterval.Seconds())
		step := fmt.Sprintf("%s-%d", prefix, i)
		p, err := c.phase(ctx, w, 1, c.o.step, idle, step)
		if err != nil {
			return err
		}
		res.Ceiling = append(res.Ceiling, p)
		res.ProfileOf, res.Profile = c.topOfProfile(ctx, p, step)
		if p.Latency.P99 > ceilingP99 || p.errorCount() > 0 {
			res.Crossed = i
			break
		}
	}
	return nil
}

// topOfProfile is the busiest process of p and, when it is profiled (a replica or this
// process), the top of its CPU profile.
func (c *capacity) topOfProfile(ctx context.Context, p capacityPhase, prefix string) (string, []string) {
	busiest := ""
	for name, cores := range p.Cores {
		if busiest == "" || cores > p.Cores[busiest] {
			busiest = name
		}
	}
	file := prefix + ".bench"
	switch {
	case strings.HasPrefix(busiest, "replica-"):
		file = prefix + "." + busiest
	case busiest == farmsProcess:
		file = prefix + ".farm-1"
	case busiest == natsProcess:
		file = prefix + "." + natsProcess
	case busiest == "redis-server":
		return busiest, nil // not a Go process
	}
	return busiest, pprofTop(ctx, file)
}

// pprofTop is the top of a profile as go tool pprof -top prints it, its header left out.
func pprofTop(ctx context.Context, file string, flags ...string) []string {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=12"}, flags...)
	out, err := exec.CommandContext(ctx, "go", append(args, file)...).Output() //nolint:gosec // go tool pprof on the bench's own profile
	if err != nil {
		return []string{"go tool pprof: " + err.Error()}
	}
	var lines []string
	header := true
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		if header {
			header = !strings.Contains(line, "flat%")
			if header {
				continue
			}
		}
		if strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// capNode is a bench node: a child process answering one JSON line per control line.
type capNode struct {
	name string
	url  string // a replica's public listener
	// metricsURL is a replica's metrics listener.
	metricsURL string
	cmd        *exec.Cmd
	in         io.WriteCloser
	out        *bufio.Scanner
	logs       *servers.Buffer // its standard error: its log and its collector's trace
	mu         sync.Mutex      // one call at a time
	// started is when the process started, as it said in its last scheduler reading.
	started time.Time
	// A farm's first agent (an index into capacity.agents), and whether it runs in the
	// background now (setBackground).
	first      int
	background bool
}

// watchedAtMost is how many agents, the first ones, any step watches.
func (c *capacity) watchedAtMost() int {
	return max(c.o.watched, slices.Max(append([]int{0}, c.o.ceiling...)))
}

// backgroundFarms runs each farm, for a window that watches the first watched agents,
// in the background or not: a farm that holds one of them runs as the replicas do, one
// that does not in the background (setBackground), as a farm that no step watches: its
// workers stand for workers on machines of their own, whose idle work does not take the
// replicas' cores.
func (c *capacity) backgroundFarms(watched int) error {
	for _, n := range c.farms {
		want := n.first >= watched
		if n.background == want {
			continue
		}
		if err := setBackground(n.cmd.Process.Pid, want); err != nil {
			return fmt.Errorf("%s: background %t: %w", n.name, want, err)
		}
		n.background = want
	}
	return nil
}

// startNode starts this program as a bench node of role and sends it spec; background
// starts it in the background (backgroundCommand).
func (c *capacity) startNode(ctx context.Context, name, role string, background bool, spec any) (*capNode, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	argv := append(slices.Clone(c.self), role)
	if background {
		argv = append(slices.Clone(backgroundCommand), argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // this program, as a bench node
	n := &capNode{name: name, cmd: cmd, logs: &servers.Buffer{}}
	cmd.Stderr = n.logs
	// The collector's trace dates each cycle, so that a window's frames can be set
	// against the collections that ran beside them (overlapGC).
	cmd.Env = withGCTrace(os.Environ())
	if n.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	n.out = bufio.NewScanner(stdout)
	n.out.Buffer(make([]byte, 1<<20), 64<<20)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if _, err := n.in.Write(append(b, '\n')); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// read reads the node's next answer into v (nil: any).
func (n *capNode) read(v any) error {
	if !n.out.Scan() {
		err := n.out.Err()
		if err == nil {
			err = io.EOF
		}
		return fmt.Errorf("%s ended (%w): %s", n.name, err, lastLines(withoutGCTrace(n.logs.String()), 5))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(n.out.Bytes(), v)
}

// call sends a control line and reads its answer.
func (n *capNode) call(line string, v any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := io.WriteString(n.in, line+"\n"); err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	return n.read(v)
}

// stop ends the node: stdin closed, then a kill if it has not ended within 15 s.
func (n *capNode) stop() {
	_ = n.in.Close()
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// stopNodes stops the farms, then the replicas.
func (c *capacity) stopNodes() {
	var wg sync.WaitGroup
	for _, n := range c.farms {
		wg.Go(n.stop)
	}
	wg.Wait()
	for _, n := range c.replicas {
		wg.Go(n.stop)
	}
	wg.Wait()
}

// schedWindow is a process's scheduling over a window: quantiles of the time its
// goroutines waited runnable before they ran, and of its collector's pauses, and their
// total.
type schedWindow struct {
	LatencyP50 time.Duration `json:"latencyP50"`
	LatencyP99 time.Duration `json:"latencyP99"`
	GCPauses   int           `json:"gcPauses"`
	GCPauseP99 time.Duration `json:"gcPauseP99"`
	GCPauseSum time.Duration `json:"gcPauseSum"`
	// The collector's CPU in the window, its assists' part, and its cycles.
	GCCPU    time.Duration `json:"gcCPU"`
	GCAssist time.Duration `json:"gcAssist"`
	GCCycles uint64        `json:"gcCycles"`
	// What the last cycle in the window scanned (the farms': summed), bytes.
	ScanStack uint64 `json:"scanStack"`
	ScanHeap  uint64 `json:"scanHeap"`
}

// gcReplicas names the replicas together in GC overlaps.
const gcReplicas = "replicas"

// gcOverlaps sets the frames of the window [from, to) against the collections of the
// replicas and of the farms.
func (c *capacity) gcOverlaps(frames []frameSpan, from, to time.Time) map[string]gcOverlap {
	spans := func(nodes []*capNode) []gcSpan {
		var out []gcSpan
		for _, n := range nodes {
			if !n.started.IsZero() {
				out = append(out, gcSpans(n.logs.String(), n.started)...)
			}
		}
		return out
	}
	return map[string]gcOverlap{
		gcReplicas:   overlapGC(frames, spans(c.replicas), from, to),
		farmsProcess: overlapGC(frames, spans(c.farms), from, to),
	}
}

// scheds reads the scheduling figures of every Go process of the run but the bench's
// (the farms' summed).
func (c *capacity) scheds() (map[string]schedHist, error) {
	out := map[string]schedHist{}
	read := func(name string, n *capNode) error {
		var h schedHist
		if err := n.call("sched", &h); err != nil {
			return err
		}
		n.started = time.Unix(0, h.Started)
		prev := out[name]
		out[name] = schedHist{Latencies: prev.Latencies.add(h.Latencies), GCPauses: prev.GCPauses.add(h.GCPauses),
			GCCPU: prev.GCCPU + h.GCCPU, GCAssist: prev.GCAssist + h.GCAssist, GCCycles: prev.GCCycles + h.GCCycles,
			ScanStack: prev.ScanStack + h.ScanStack, ScanHeap: prev.ScanHeap + h.ScanHeap}
		return nil
	}
	for _, n := range c.replicas {
		if err := read(n.name, n); err != nil {
			return nil, err
		}
	}
	for _, n := range c.farms {
		if err := read(farmsProcess, n); err != nil {
			return nil, err
		}
	}
	if err := read(natsProcess, c.nats); err != nil {
		return nil, err
	}
	out[benchProcess] = readSched()
	return out, nil
}

// add is h and o summed (same buckets: one Go version); an empty h is o.
func (h hist) add(o hist) hist {
	if len(h.Counts) == 0 {
		return hist{Counts: slices.Clone(o.Counts), Buckets: o.Buckets}
	}
	out := hist{Counts: slices.Clone(h.Counts), Buckets: h.Buckets}
	for i := range min(len(out.Counts), len(o.Counts)) {
		out.Counts[i] += o.Counts[i]
	}
	return out
}

// since is what h counted after before.
func (h hist) since(before hist) hist {
	out := hist{Counts: slices.Clone(h.Counts), Buckets: h.Buckets}
	for i := range min(len(out.Counts), len(before.Counts)) {
		out.Counts[i] -= before.Counts[i]
	}
	return out
}

// quantile is the upper bound of the bucket holding quantile q (nearest rank), and the
// number counted.
func (h hist) quantile(q float64) (time.Duration, int) {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	if n == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank && i+1 < len(h.Buckets) {
			return time.Duration(h.Buckets[i+1] * float64(time.Second)), int(n)
		}
	}
	return time.Duration(h.Buckets[len(h.Buckets)-1] * float64(time.Second)), int(n)
}

// sum is the histogram's total, each count at its bucket's middle.
func (h hist) sum() time.Duration {
	var s float64
	for i, c := range h.Counts {
		if i+1 < len(h.Buckets) && c > 0 {
			s += float64(c) * (h.Buckets[i] + min(h.Buckets[i+1], 2*h.Buckets[i]+1e-6)) / 2
		}
	}
	return time.Duration(s * float64(time.Second))
}

// schedWindows is each process's scheduling between two readings.
func schedWindows(before, after map[string]schedHist) map[string]schedWindow {
	out := map[string]schedWindow{}
	for name, a := range after {
		lat := a.Latencies.since(before[name].Latencies)
		gc := a.GCPauses.since(before[name].GCPauses)
		var w schedWindow
		w.LatencyP50, _ = lat.quantile(0.50)
		w.LatencyP99, _ = lat.quantile(0.99)
		w.GCPauseP99, w.GCPauses = gc.quantile(0.99)
		w.GCPauseSum = gc.sum()
		b := before[name]
		w.GCCPU = time.Duration((a.GCCPU - b.GCCPU) * float64(time.Second))
		w.GCAssist = time.Duration((a.GCAssist - b.GCAssist) * float64(time.Second))
		w.GCCycles = a.GCCycles - b.GCCycles
		w.ScanStack, w.ScanHeap = a.ScanStack, a.ScanHeap
		out[name] = w
	}
	return out
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
