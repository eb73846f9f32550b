package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// memory is the process's memory at one moment, after a full collection.
type memory struct {
	RSS        int64 `json:"rss"`        // VmRSS
	Heap       int64 `json:"heap"`       // live heap objects
	Stacks     int64 `json:"stacks"`     // goroutine stacks
	Goroutines int   `json:"goroutines"` // runtime.NumGoroutine
}

// footprintResult is the footprint suite.
type footprintResult struct {
	Before, Idle, Pending, After memory
	PendingViews                 int `json:"pendingViews"`
	PendingAnswered503           int `json:"pendingAnswered503"`
	// CPU per capture, net of what the same processes burn idle over the same time.
	Captures        int           `json:"captures"`
	ChromiumPerView time.Duration `json:"chromiumPerView"`
	ChromiumPerBare time.Duration `json:"chromiumPerBare"`
	GoPerView       time.Duration `json:"goPerView"`
	GoPerBare       time.Duration `json:"goPerBare"`
	// CPU time per second of wall time when nothing happens.
	ChromiumIdle      time.Duration `json:"chromiumIdle"`
	GoIdle            time.Duration `json:"goIdle"`
	ChromiumProcesses int           `json:"chromiumProcesses"`
	CPUWindows        []cpuWindow   `json:"cpuWindows"` // the raw measurements
}

// cpuWindow is one CPU measurement window of benchCPU.
type cpuWindow struct {
	Name     string        `json:"name"`
	Chromium time.Duration `json:"chromium"`
	Go       time.Duration `json:"go"`
	Wall     time.Duration `json:"wall"`
}

// measureMemory collects twice, returns freed pages to the OS and reads RSS, the live
// heap and the goroutine count.
func measureMemory() (memory, error) {
	runtime.GC()
	debug.FreeOSMemory()
	rss, err := vmRSS()
	if err != nil {
		return memory{}, err
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return memory{RSS: rss, Heap: toInt64(s[0].Value.Uint64()), Stacks: toInt64(s[1].Value.Uint64()), Goroutines: runtime.NumGoroutine()}, nil
}

func toInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// benchMemory measures what one more replica costs idle, then with view.MaxInFlight
// views waiting in it. The replicas run inside this process (internal/dev/stack), so the
// figures are deltas of this process's RSS and heap around starting the replica and
// around filling it. The pending views are for agents with sessions but no worker; a
// silent NATS subscriber on every view subject holds the requests until released; the
// viewers are raw TCP connections with a request written and nothing read, so that the
// client side adds no goroutine and almost no memory to the delta.
func benchMemory(ctx context.Context, st *stack.Stack, token string, r *footprintResult) error {
	rep, err := startIdleReplica(ctx, st, r)
	if err != nil {
		return err
	}

	n := view.MaxInFlight
	if err := startPendingSessions(ctx, st, n); err != nil {
		return err
	}
	var mu sync.Mutex
	var held []*nats.Msg
	holder, err := st.Bus.Subscribe(st.NS.AllOf(bus.VerbView), func(m *nats.Msg) {
		mu.Lock()
		held = append(held, m)
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer func() { _ = holder.Unsubscribe() }()
	_ = holder.SetPendingLimits(-1, -1)
	if err := st.Bus.Flush(); err != nil {
		return err
	}
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range held {
			_ = bus.RespondError(st.Bus, m, wire.ReasonCapture, "released by the bench")
		}
		held = nil
	}
	defer release()

	host := strings.TrimPrefix(rep.URL, "http://")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if conns, err = dialPendingViews(ctx, host, token, n, conns); err != nil {
		return err
	}
	if err := waitPending(ctx, rep, n); err != nil {
		return err
	}
	r.PendingViews = rep.Views.InFlight()
	if r.Pending, err = measureMemory(); err != nil {
		return err
	}
	release()
	r.PendingAnswered503 += count503(conns)
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	// What stays after the burst: the pools it grew (Redis connections, buffers).
	if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
		return err
	}
	r.After, err = measureMemory()
	return err
}

// startIdleReplica measures the process before, starts one more replica, waits until
// it is ready and measures the process again with the replica idle.
func startIdleReplica(ctx context.Context, st *stack.Stack, r *footprintResult) (*stack.Replica, error) {
	var err error
	if r.Before, err = measureMemory(); err != nil {
		return nil, err
	}
	idx := len(st.Replicas)
	rep, err := st.StartReplica(ctx, idx, st.NATS.ClientURL())
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, rep.URL); err != nil {
		return nil, err
	}
	if r.Idle, err = measureMemory(); err != nil {
		return nil, err
	}
	return rep, nil
}

// startPendingSessions loads n agents and starts a session for each, with no worker:
// the agents of benchMemory's pending views.
func startPendingSessions(ctx context.Context, st *stack.Stack, n int) error {
	if err := loadAgents(ctx, st, "agent-pv", n); err != nil {
		return err
	}
	for i := range n {
		if _, _, err := st.Sess.Start(ctx, agentName("agent-pv", i)); err != nil {
			return err
		}
	}
	return nil
}

// dialPendingViews opens n raw TCP connections to host and writes a view request of
// one of the agents of startPendingSessions on each, reading nothing. It appends the
// connections to conns and returns them, those it opened before an error too, so that
// the caller closes them all.
func dialPendingViews(ctx context.Context, host, token string, n int, conns []net.Conn) ([]net.Conn, error) {
	var d net.Dialer
	for i := range n {
		c, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return conns, err
		}
		conns = append(conns, c)
		req := "GET /v1/agents/" + agentName("agent-pv", i) + "/worker/view HTTP/1.1\r\nHost: " + host +
			"\r\nAuthorization: Bearer " + token + "\r\nConnection: close\r\n\r\n"
		if _, err := c.Write([]byte(req)); err != nil {
			return conns, err
		}
	}
	return conns, nil
}

// waitPending polls the replica's own gauge until n views are pending in it, for at
// most 20 s.
func waitPending(ctx context.Context, rep *stack.Replica, n int) error {
	deadline := time.Now().Add(20 * time.Second)
	for rep.Views.InFlight() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("footprint: only %d of %d views pending", rep.Views.InFlight(), n)
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil { // polling the replica's own gauge
			return err
		}
	}
	return nil
}

// count503 reads the answer on each connection, waiting at most 10 s for each, and
// counts those that are 503 Service Unavailable.
func count503(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			n++
		}
	}
	return n
}

// cpuBlock is how many operations one CPU measurement window holds; the windows of the
// three kinds alternate, so that all see the same machine.
const cpuBlock = 10

// benchCPU measures the CPU time of the Chromium processes and of this process over
// captures views of agentID and as many bare captures, in alternating windows of
// cpuBlock operations, each net of idle windows (nothing happening) of the same length
// that alternate with them.
func benchCPU(ctx context.Context, bs *benchSession, v *viewer, base, agentID string, captures int, r *footprintResult) error {
	type sample struct {
		chromium, self time.Duration
		at             time.Time
	}
	read := func() (sample, error) {
		c, n, err := chromiumCPU()
		if err != nil {
			return sample{}, err
		}
		r.ChromiumProcesses = n
		s, err := selfCPU()
		return sample{chromium: c, self: s, at: time.Now()}, err
	}
	totals := map[string]*cpuWindow{}
	window := func(name string, n int, op func() error) error {
		a, err := read()
		if err != nil {
			return err
		}
		for range n {
			if err := op(); err != nil {
				return err
			}
		}
		b, err := read()
		if err != nil {
			return err
		}
		w := cpuWindow{Name: name, Chromium: b.chromium - a.chromium, Go: b.self - a.self, Wall: b.at.Sub(a.at)}
		r.CPUWindows = append(r.CPUWindows, w)
		t := totals[name]
		if t == nil {
			t = &cpuWindow{Name: name}
			totals[name] = t
		}
		t.Chromium, t.Go, t.Wall = t.Chromium+w.Chromium, t.Go+w.Go, t.Wall+w.Wall
		return nil
	}
	viewOnce := func() error {
		if err := v.openGate(ctx, agentID); err != nil {
			return err
		}
		_, err := v.view(ctx, base, agentID)
		return err
	}
	bareOnce := func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := bs.bare.Capture(cctx)
		return err
	}
	for done := 0; done < captures; done += cpuBlock {
		n := min(cpuBlock, captures-done)
		if err := window("views", n, viewOnce); err != nil {
			return err
		}
		if err := window("bare captures", n, bareOnce); err != nil {
			return err
		}
		// As long as the longer of the two windows just measured.
		last := r.CPUWindows[len(r.CPUWindows)-2:]
		idle := max(last[0].Wall, last[1].Wall)
		if err := window("idle", 1, func() error { return sleepCtx(ctx, idle) }); err != nil {
			return err
		}
	}
	idle, views, bares := totals["idle"], totals["views"], totals["bare captures"]
	perSec := func(d, wall time.Duration) time.Duration { return time.Duration(float64(d) / wall.Seconds()) }
	r.ChromiumIdle, r.GoIdle = perSec(idle.Chromium, idle.Wall), perSec(idle.Go, idle.Wall)
	netPer := func(d, wall time.Duration, idleRate time.Duration) time.Duration {
		return max(0, d-time.Duration(float64(idleRate)*wall.Seconds())) / time.Duration(captures)
	}
	r.Captures = captures
	r.ChromiumPerView, r.GoPerView = netPer(views.Chromium, views.Wall, r.ChromiumIdle), netPer(views.Go, views.Wall, r.GoIdle)
	r.ChromiumPerBare, r.GoPerBare = netPer(bares.Chromium, bares.Wall, r.ChromiumIdle), netPer(bares.Go, bares.Wall, r.GoIdle)
	return nil
}

// waitReady polls a replica's /readyz until it answers 200.
func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s not ready", base)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
