package reliability

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/view"
)

// Load shape (issue 7): 1,000 concurrent pollers over 200 agents, a few of them live
// with a broker, for 20 s, spread over both replicas.
const (
	loadPollers  = 1000
	loadAgents   = 200
	loadLive     = 3
	loadDuration = 20 * time.Second
)

type gateWin struct{ asked, answered time.Time }

type sample struct {
	agent      string
	status     int
	retryAfter string
}

func TestBoundsUnderLoad(t *testing.T) {
	c := client.Context(t)
	seed := directory.Seed{}
	for i := range loadAgents {
		seed.Agents = append(seed.Agents, directory.Agent{ID: fmt.Sprintf("agent-load-%03d", i), TeamID: "team-atlas", OrgID: "org-acme", Environment: "production"})
	}
	if err := st.Dir.Load(c, seed); err != nil {
		t.Fatal(err)
	}

	// Every agent has a running session, so that every poll is a capture request the gate
	// decides (a request that finds no session takes no window): the first loadLive
	// with a worker and a broker, the others without a worker (503 no_channel once their
	// window is won).
	for i := loadLive; i < loadAgents; i++ {
		if _, _, err := st.Sess.Start(c, seed.Agents[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	// Captures are counted at each live agent's broker.
	var mu sync.Mutex
	captures := map[string][]time.Time{}
	wins := map[string][]gateWin{}
	for i := range loadLive {
		agent := seed.Agents[i].ID
		cfg := broker.DefaultConfig()
		cfg.OnCapture = func(cs broker.CaptureStats) {
			started := time.Now().Add(-cs.Duration) // the broker spaces capture starts
			mu.Lock()
			captures[agent] = append(captures[agent], started)
			mu.Unlock()
		}
		stacktest.LiveSession(c, t, st, agent, stack.SessionOptions{Replica: i % 2, Broker: &cfg}, "/catalog.html")
	}
	for _, r := range st.Replicas {
		r.SetHooks(&stack.Hooks{OnGate: func(agent string, allowed bool, asked time.Time) {
			if allowed {
				answered := time.Now()
				mu.Lock()
				wins[agent] = append(wins[agent], gateWin{asked, answered})
				mu.Unlock()
			}
		}})
		t.Cleanup(func() { r.SetHooks(nil) })
	}

	tr := &http.Transport{MaxIdleConnsPerHost: loadPollers, IdleConnTimeout: 30 * time.Second}
	pollClient := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	member := client.Token(t, "u-alice")
	poll := func(d time.Duration) chan []sample {
		results := make(chan []sample, loadPollers)
		lctx, cancel := context.WithTimeout(c, d)
		defer cancel()
		var wg sync.WaitGroup
		for p := range loadPollers {
			wg.Go(func() {
				agent := seed.Agents[p%loadAgents].ID
				url := client.ViewURL(p%2, agent)
				var out []sample
				for lctx.Err() == nil {
					req, _ := http.NewRequestWithContext(context.WithoutCancel(lctx), http.MethodGet, url, nil)
					req.Header.Set("Authorization", "Bearer "+member)
					resp, err := pollClient.Do(req)
					if err != nil {
						out = append(out, sample{agent: agent, status: -1})
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					out = append(out, sample{agent, resp.StatusCode, resp.Header.Get("Retry-After")})
					// Pollers pace themselves (50–250 ms) so the two cores serve rather than queue.
					select {
					case <-lctx.Done():
					case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
					}
				}
				results <- out
			})
		}
		wg.Wait()
		close(results)
		return results
	}

	// A short warm-up first: connection pools fill and each replica makes its lazy NATS
	// reply subscription. Growth is measured from the level after it.
	for range poll(3 * time.Second) {
	}
	mu.Lock()
	clear(wins)
	clear(captures)
	mu.Unlock()
	tr.CloseIdleConnections()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()
	logsBefore := logs.Cap()
	var stacksBefore bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&stacksBefore, 1)

	results := poll(loadDuration)

	var total, refused, others, wrongStatus int
	statuses := map[int]int{}
	perAgent := map[string]int{}
	badRetry := 0
	live := map[string]bool{}
	for i := range loadLive {
		live[seed.Agents[i].ID] = true
	}
	for out := range results {
		for _, s := range out {
			total++
			statuses[s.status]++
			if s.status == http.StatusTooManyRequests {
				refused++
				// The window's 2 s, or what is left of the caller's 3-s pace, rounded up.
				if s.retryAfter != "1" && s.retryAfter != "2" && s.retryAfter != "3" {
					badRetry++
				}
				continue
			}
			if (live[s.agent] && s.status != http.StatusOK) || (!live[s.agent] && s.status != http.StatusServiceUnavailable) {
				wrongStatus++
			}
			others++
			perAgent[s.agent]++
		}
	}

	t.Run("one_answer_per_agent_per_2_s", func(t *testing.T) {
		observed := ""
		record(t, "Bounds under load (1,000 pollers, 200 agents, 20 s, both replicas)", "per agent at most one non-429 answer in any 2 s window; every other answer 429 with a Retry-After of 1–3 s", &observed)
		mu.Lock()
		defer mu.Unlock()
		// Each win's SET happened in Redis between asked and answered; two wins' SETs are
		// at least 2 s apart, so the later answer is at least 2 s after the earlier ask.
		minGap := time.Hour
		for agent, ws := range wins {
			sort.Slice(ws, func(i, j int) bool { return ws[i].asked.Before(ws[j].asked) })
			for i := 1; i < len(ws); i++ {
				if gap := ws[i].answered.Sub(ws[i-1].asked); gap < minGap {
					minGap = gap
				}
			}
			if len(ws) != perAgent[agent] {
				t.Errorf("%s: %d gate wins but %d non-429 answers", agent, len(ws), perAgent[agent])
			}
		}
		observed = fmt.Sprintf("%d answers (%.0f/s): %d non-429, %d 429 (%d without a Retry-After of 1–3 s); statuses %v; two wins of one agent never closer than %v",
			total, float64(total)/loadDuration.Seconds(), others, refused, badRetry, statuses, minGap.Round(time.Millisecond))
		if minGap < view.GateWindow {
			t.Errorf("two answers of one agent %v apart", minGap)
		}
		if badRetry > 0 || statuses[-1] > 0 {
			t.Errorf("%d 429s without a Retry-After of 1–3 s, %d transport errors", badRetry, statuses[-1])
		}
		if wrongStatus > 0 {
			t.Errorf("%d answers other than 200 (an agent with a worker) or 503 (one without); statuses %v", wrongStatus, statuses)
		}
		if len(wins) != loadAgents || others < loadAgents*int(loadDuration/view.GateWindow)/2 {
			t.Errorf("only %d agents won and %d answers passed: the load did not reach the gate", len(wins), others)
		}
	})

	t.Run("one_capture_per_live_agent_per_2_s", func(t *testing.T) {
		observed := ""
		record(t, "Bounds under load (1,000 pollers, 200 agents, 20 s, both replicas)", "at most one capture per live agent per 2 s, counted at its broker", &observed)
		mu.Lock()
		defer mu.Unlock()
		minGap, n := time.Hour, 0
		for agent, cs := range captures {
			n += len(cs)
			for i := 1; i < len(cs); i++ {
				if gap := cs[i].Sub(cs[i-1]); gap < minGap {
					minGap = gap
				}
			}
			if len(cs) > int(loadDuration/view.GateWindow)+2 {
				t.Errorf("%s: %d captures in %v", agent, len(cs), loadDuration)
			}
		}
		observed = fmt.Sprintf("%d captures over %d live agents; closest two of one agent %v apart", n, len(captures), minGap.Round(time.Millisecond))
		if minGap < view.GateWindow-20*time.Millisecond || len(captures) != loadLive {
			t.Errorf("got %s", observed)
		}
	})

	t.Run("no_growth_after_the_load", func(t *testing.T) {
		observed := ""
		record(t, "Bounds under load (1,000 pollers, 200 agents, 20 s, both replicas)", "goroutines and heap back to their level before the load", &observed)
		tr.CloseIdleConnections()
		var after runtime.MemStats
		deadline := time.Now().Add(20 * time.Second)
		for {
			runtime.GC()
			runtime.ReadMemStats(&after)
			g := runtime.NumGoroutine()
			// The suite keeps every log line in memory to search it; that is not the
			// system's growth.
			logGrowth := int64(logs.Cap() - logsBefore)
			grew := int64(after.HeapAlloc) - int64(before.HeapAlloc) - logGrowth
			observed = fmt.Sprintf("goroutines %d → %d; heap %.1f → %.1f MiB (less %.1f MiB of captured log lines)", goroutinesBefore, g,
				float64(before.HeapAlloc)/(1<<20), float64(after.HeapAlloc)/(1<<20), float64(logGrowth)/(1<<20))
			if g <= goroutinesBefore+5 && grew < 16<<20 {
				return
			}
			if time.Now().After(deadline) {
				var stacks bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
				t.Errorf("no return to the level before the load: %s\nbefore:\n%s\nafter:\n%s", observed, stacksBefore.String(), stacks.String())
				return
			}
			time.Sleep(100 * time.Millisecond) // waiting for closed connections' goroutines to end
		}
	})
}
