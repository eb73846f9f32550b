package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/keyspace"
)

// maxFastBody bounds a fast-path response the load generator reads.
const maxFastBody = 4 << 10 // 4 KiB

// maxSamplesPerPhase bounds the latencies one phase records (and so its requests).
const maxSamplesPerPhase = 1 << 20

// fastPath is one kind of request of the fast-path suite.
type fastPath struct {
	Name string `json:"name"`
	What string `json:"what"`
	// Requests and Errors over all rounds; an error is a transport failure or an
	// answer other than the expected one.
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	RPS      float64 `json:"rps"`
	Latency  dist    `json:"latency"`
	// Versus the no-op route measured in the same run.
	RPSRatio float64 `json:"rpsRatio"`
	P99Ratio float64 `json:"p99Ratio"`

	url     func(i int64) string // the URL of the i-th request of the phase
	auth    bool
	check   func(status int, h http.Header, body []byte) bool
	limit   func(round int) int64 // requests a phase may send; 0: only the time bounds it
	elapsed time.Duration
	lat     []time.Duration
}

// fastPathResult is the fast-path suite.
type fastPathResult struct {
	Concurrency int           `json:"concurrency"`
	Phase       time.Duration `json:"phase"`
	Rounds      int           `json:"rounds"`
	Paths       []*fastPath   `json:"paths"`
}

// benchFastPaths loads replica a with four kinds of requests in turn, at the same
// concurrency, for o.fastRounds rounds of o.fastPhase each (the order rotates every
// round): the no-op /healthz, a 404 (an agent of another team), a 429 (an agent whose
// gate is held) and {"live":false} (agents without a session, each requested once, so
// that every request wins its gate).
func benchFastPaths(ctx context.Context, st *stack.Stack, a *stack.Replica, token string, o benchOptions) (fastPathResult, error) {
	// Agents for live:false: each used once across the whole run.
	pool := o.liveFalsePool * o.fastRounds
	if err := loadAgents(ctx, st, "agent-lf", pool); err != nil {
		return fastPathResult{}, err
	}
	const held = "agent-held"
	if err := st.Dir.Load(ctx, directory.Seed{Agents: []directory.Agent{{ID: held, Name: held, TeamID: "team-atlas", OrgID: "org-acme", Environment: "production"}}}); err != nil {
		return fastPathResult{}, err
	}
	// A session, so that its requests meet the gate (one that finds none does not), and
	// the agent's gate held for longer than the run, so that every request loses it.
	if _, _, err := st.Sess.Start(ctx, held); err != nil {
		return fastPathResult{}, err
	}
	if err := st.AdminClient().Set(ctx, keyspace.For(benchDeployment).Gate(held), "1", 10*time.Minute).Err(); err != nil {
		return fastPathResult{}, err
	}
	var lfNext atomic.Int64
	paths := []*fastPath{
		{
			Name: "no-op /healthz", What: "the baseline: routing, request log, a constant JSON body",
			url: func(int64) string { return a.URL + "/healthz" },
			check: func(s int, _ http.Header, b []byte) bool {
				return s == http.StatusOK && bytes.Contains(b, []byte(`"ok":true`))
			},
		},
		{
			Name: "404", What: "JWT; 1 Redis round trip: the replica remembers the refusal for 2 s with the directory's generation, and reads only the generation (and the current session id) while it is unchanged",
			url: func(int64) string { return a.URL + "/v1/agents/agent-nova/worker/view" }, auth: true,
			check: func(s int, h http.Header, _ []byte) bool {
				return s == http.StatusNotFound && h.Get("Cache-Control") == "no-store"
			},
		},
		{
			Name: "429", What: "JWT; 4 Redis round trips: the agent's record, its hinted team's member set (a member) and the current session id, then the session's record, then the gate script, lost, with the view's grant written beside it (one pipeline), then the grant deleted; a key pair made for the grant",
			url: func(int64) string { return a.URL + "/v1/agents/" + held + "/worker/view" }, auth: true,
			check: func(s int, h http.Header, _ []byte) bool {
				return s == http.StatusTooManyRequests && h.Get("Retry-After") == "2"
			},
		},
		{
			Name: "live:false", What: "JWT; 2 Redis round trips: a new agent has no hint, so its record and the current session id, then the member set; no session, so no gate",
			url: func(int64) string {
				return a.URL + "/v1/agents/" + agentName("agent-lf", int(lfNext.Add(1)-1)) + "/worker/view"
			},
			auth: true,
			check: func(s int, _ http.Header, b []byte) bool {
				return s == http.StatusOK && bytes.Equal(bytes.TrimSpace(b), []byte(`{"live":false}`))
			},
			limit: func(round int) int64 { return int64(o.liveFalsePool * (round + 1)) },
		},
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = o.fastConcurrency
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	// Warm the connections and the handlers.
	for _, p := range paths[:3] {
		if _, _, err := runPhase(ctx, client, p, token, o.fastConcurrency, 200*time.Millisecond, 0); err != nil {
			return fastPathResult{}, err
		}
	}
	for round := range o.fastRounds {
		for k := range paths {
			p := paths[(round+k)%len(paths)]
			var limit int64
			if p.limit != nil {
				limit = p.limit(round) - lfNext.Load()
			}
			lat, elapsed, err := runPhase(ctx, client, p, token, o.fastConcurrency, o.fastPhase, limit)
			if err != nil {
				return fastPathResult{}, err
			}
			p.lat = append(p.lat, lat...)
			p.elapsed += elapsed
		}
	}
	for _, p := range paths {
		p.Requests += len(p.lat)
		p.Latency = summarize(p.lat)
		if p.elapsed > 0 {
			p.RPS = float64(len(p.lat)) / p.elapsed.Seconds()
		}
		p.lat = nil
	}
	for _, p := range paths {
		p.RPSRatio = p.RPS / paths[0].RPS
		p.P99Ratio = ratio(p.Latency.P99, paths[0].Latency.P99)
	}
	return fastPathResult{Concurrency: o.fastConcurrency, Phase: o.fastPhase, Rounds: o.fastRounds, Paths: paths}, nil
}

// runPhase sends p's requests from conc goroutines until d has passed or limit requests
// were sent (limit 0: no limit), and returns the latency of each and the phase's
// wall time. Unexpected answers are counted in p.Errors.
func runPhase(ctx context.Context, client *http.Client, p *fastPath, token string, conc int, d time.Duration, limit int64) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if limit == 0 || limit > int64(maxSamplesPerPhase) {
		limit = maxSamplesPerPhase
	}
	var sent atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	lats := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			buf := make([]byte, maxFastBody)
			for ctx.Err() == nil {
				i := sent.Add(1) - 1
				if i >= limit {
					return
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url(i), nil)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if p.auth {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() != nil {
						return // the phase ended mid-request: not counted
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				n, _ := io.ReadFull(resp.Body, buf)
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				lat := time.Since(t0)
				if !p.check(resp.StatusCode, resp.Header, buf[:n]) {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("%s: unexpected answer %d %q", p.Name, resp.StatusCode, buf[:n]))
					continue
				}
				lats[w] = append(lats[w], lat)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	p.Errors += int(errs.Load())
	if e, ok := firstErr.Load().(error); ok && errs.Load() > int64(len(all)/100+10) {
		// A few failures are reported as errors in the table; many mean the phase
		// measured something else.
		return nil, 0, fmt.Errorf("fast path %s: %d errors, first: %w", p.Name, errs.Load(), e)
	}
	return all, elapsed, nil
}

// agentName is the i-th agent of a generated pool.
func agentName(prefix string, i int) string { return fmt.Sprintf("%s%06d", prefix, i) }

// loadAgents adds n agents of team-atlas (org-acme, production) named prefix000000…,
// without sessions.
func loadAgents(ctx context.Context, st *stack.Stack, prefix string, n int) error {
	const chunk = 500
	var wg sync.WaitGroup
	errc := make(chan error, (n+chunk-1)/chunk)
	sem := make(chan struct{}, 8)
	for from := 0; from < n; from += chunk {
		seed := directory.Seed{}
		for i := from; i < min(from+chunk, n); i++ {
			id := agentName(prefix, i)
			seed.Agents = append(seed.Agents, directory.Agent{ID: id, Name: id, TeamID: "team-atlas", OrgID: "org-acme", Environment: "production"})
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := st.Dir.Load(ctx, seed); err != nil {
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
