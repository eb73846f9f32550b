package monitoring

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/api"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// sample is one scraped sample, labelled with the target's job and instance as
// Prometheus would.
type sample struct {
	lbls labels.Labels
	v    float64
}

// scrape is every sample of one round over the stack's targets.
type scrape []sample

// target is a /metrics endpoint of the stack.
type target struct {
	job, instance, url string
}

// rig is a running stack with a live session whose broker is a process serving its
// metrics, a JWK set the test controls, and the scrapes taken of it.
type rig struct {
	t        *testing.T
	st       *stack.Stack
	c        *stacktest.Client
	ss       *stack.Session
	agent    string
	idp      *testenv.IDP
	idpToken string // a token of the JWK set's issuer, signed with its key
	broker   string // the broker's metrics URL
	names    map[string]bool
}

// freeAddr is a loopback TCP address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func startRig(t *testing.T) *rig {
	t.Helper()
	// Before the broker's build: the rig's session runs it with Chromium.
	testenv.SkipUnderShort(t, "startRig", testenv.NeedsChromium)
	ctx := testenv.Context(t, 3*time.Minute)
	root, err := stack.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	brokerBin := filepath.Join(t.TempDir(), "agentfy-broker")
	build := exec.CommandContext(ctx, "go", "build", "-o", brokerBin, "./cmd/agentfy-broker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the broker: %v\n%s", err, out)
	}

	// The identity provider: one ES256 key, refreshed every 2 s, stale after 10 s.
	idp := testenv.ServeIDP(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp.Set(func(s *testenv.IDPState) {
		s.Issuer = idp.URL()
		s.Keys = []json.RawMessage{testenv.JWK(t, &key.PublicKey, "k1", "ES256", "sig", nil)}
	})
	const period = 2 * time.Second
	provider := auth.JWTConfig{
		Issuer: idp.URL(), Audience: "agentfy-api", JWKSURL: idp.JWKSURL(),
		JWKS: stacktest.ProviderJWKS(period),
	}
	idpToken := stacktest.SignJWT(t, jwt.SigningMethodES256, key, "k1", jwt.MapClaims{
		"iss": idp.URL(), "aud": "agentfy-api", "sub": "u-alice",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	})

	c := stacktest.Start(t, stack.Options{PersistRedis: true, BrokerBin: brokerBin, ExtraJWT: []auth.JWTConfig{provider}})
	r := &rig{t: t, st: c.St, c: c, idp: idp, idpToken: idpToken, names: map[string]bool{}}
	r.agent = c.NewAgent(t, "agent-monitoring")
	addr := freeAddr(t)
	r.broker = "http://" + addr + "/metrics"
	// The worker on replica B: views asked at A cross NATS.
	r.ss = stacktest.LiveSession(ctx, t, r.st, r.agent, stack.SessionOptions{Replica: 1, BrokerProcess: true, BrokerEnv: []string{"AGENTFY_METRICS_ADDR=" + addr}}, "/")
	if a := r.view(r.c.Token(t, "u-alice")); a.Status != http.StatusOK {
		t.Fatalf("the first view: %s", a.Summary())
	}
	return r
}

// view asks replica A for the agent's view with bearer, its gate opened first.
func (r *rig) view(bearer string) stacktest.Response {
	r.t.Helper()
	_ = r.st.OpenGate(r.c.Context(r.t), r.agent) // fails only with Redis down
	return r.c.Do(r.t, http.MethodGet, r.c.ViewURL(0, r.agent), bearer, nil)
}

// views makes n views as u-alice and returns their statuses and bodies.
func (r *rig) views(n int) []string {
	r.t.Helper()
	var out []string
	for range n {
		out = append(out, r.view(r.c.Token(r.t, "u-alice")).Summary())
	}
	return out
}

// deleteAuditStream deletes the audit trail's stream as the platform's user, which made
// it (stack.Stack.MakeAuditStream makes it again).
func (r *rig) deleteAuditStream(ctx context.Context) {
	r.t.Helper()
	nc, err := r.st.ConnectPlatform("agentfy-monitoring-test")
	if err != nil {
		r.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, audit.Stream(r.st.NS).Name); err != nil {
		r.t.Fatalf("delete the audit stream: %v", err)
	}
}

// targets are the replicas' listeners and, while it runs, the broker's metrics.
func (r *rig) targets(withBroker bool) []target {
	var ts []target
	for _, rep := range r.st.Replicas {
		ts = append(ts, target{job: "agentfy-api", instance: rep.ID, url: rep.MetricsURL + "/metrics"})
	}
	if withBroker {
		ts = append(ts, target{job: "agentfy-broker", instance: "broker-" + r.agent, url: r.broker})
	}
	return ts
}

// scrape reads every target's /metrics with Prometheus's own text parser, as a scrape
// would, and notes the series names seen.
func (r *rig) scrape(withBroker bool) scrape {
	r.t.Helper()
	var out scrape
	for _, tg := range r.targets(withBroker) {
		body, ctype := r.get(tg.url)
		p, err := textparse.New(body, ctype, labels.NewSymbolTable(), textparse.ParserOptions{})
		if err != nil {
			r.t.Fatalf("%s: %v", tg.url, err)
		}
		for {
			et, err := p.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.t.Fatalf("%s: %v", tg.url, err)
			}
			if et != textparse.EntrySeries {
				continue
			}
			_, _, v := p.Series()
			var l labels.Labels
			p.Labels(&l)
			b := labels.NewBuilder(l)
			b.Set("job", tg.job)
			b.Set("instance", tg.instance)
			out = append(out, sample{lbls: b.Labels(), v: v})
			r.names[l.Get(model.MetricNameLabel)] = true
		}
	}
	return out
}

func (r *rig) get(url string) ([]byte, string) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.c.Context(r.t), http.MethodGet, url, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("scrape %s: %v", url, err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil || res.StatusCode != http.StatusOK {
		r.t.Fatalf("scrape %s: %d %v", url, res.StatusCode, err)
	}
	return b, res.Header.Get("Content-Type")
}

// value is the sum of the samples of name in s whose labels include the pairs of want.
func (s scrape) value(name string, want ...string) float64 {
	sum := 0.0
	for _, x := range s {
		if x.lbls.Get(model.MetricNameLabel) != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if x.lbls.Get(want[i]) != want[i+1] {
				match = false
			}
		}
		if match {
			sum += x.v
		}
	}
	return sum
}

// Times of the samples on the evaluation's time line: the healthy scrapes at t0 and
// t0+step, the faulty ones an hour later, out of every window of the healthy ones.
var (
	t0         = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	step       = 30 * time.Second
	faultStart = t0.Add(time.Hour)
)

// firing evaluates expr with Prometheus's engine at the time of the last of the
// scrapes, stored one step apart from start, and reports whether it returns anything
// (an alert's expression fires when it does).
func firing(t *testing.T, expr string, rounds ...[]scrape) (healthy, faulty bool) {
	t.Helper()
	db := teststorage.New(t)
	app := db.Appender(t.Context())
	starts := []time.Time{t0, faultStart}
	for i, scrapes := range rounds {
		for j, s := range scrapes {
			ts := starts[i].Add(time.Duration(j) * step).UnixMilli()
			for _, x := range s {
				if _, err := app.Append(0, x.lbls, ts, x.v); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
	eval := func(at time.Time) bool {
		q, err := ng.NewInstantQuery(t.Context(), db, nil, expr, at)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		defer q.Close()
		res := q.Exec(t.Context())
		if res.Err != nil {
			t.Fatalf("%s: %v", expr, res.Err)
		}
		v, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return len(v) > 0
	}
	healthy = eval(t0.Add(time.Duration(len(rounds[0])-1) * step))
	if len(rounds) > 1 {
		faulty = eval(faultStart.Add(time.Duration(len(rounds[1])-1) * step))
	}
	return healthy, faulty
}

// TestAlertsOnAStack runs a stack (two replicas, a session whose broker is a process
// with its metrics on, a JWK set the test controls), scrapes the replicas' and the
// broker's /metrics with Prometheus's parser, and checks with Prometheus's engine that
// every alert is false on the healthy stack and that each is true with its fault, one
// at a time. Then every series the dashboard and the rules name was exported by it.
func TestAlertsOnAStack(t *testing.T) {
	r := startRig(t)
	alerts := map[string]alert{}
	for _, a := range loadAlerts(t) {
		alerts[a.name] = a
	}
	ctx := testenv.Context(t, 5*time.Minute)

	// Healthy: views are frames, captures succeed, the JWK set is fresh.
	healthy := []scrape{r.scrape(true)}
	for _, s := range r.views(3) {
		if !strings.HasPrefix(s, "200") {
			t.Fatalf("a view of the healthy stack: %s", s)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "a JWK set refresh", func() bool {
		return r.scrape(true).value("agentfy_jwks_refreshes_total", "result", "ok") > healthy[0].value("agentfy_jwks_refreshes_total", "result", "ok")
	})
	healthy = append(healthy, r.scrape(true))
	// A machine too loaded to answer a frame within the latency alert's 2.5 s is slow
	// without a fault: then that alert may fire, rightly, and only its fault is checked.
	frames := func(s scrape, le string) float64 {
		return s.value("agentfy_view_duration_seconds_bucket", "status", "200", "le", le)
	}
	slow := (frames(healthy[1], "+Inf") - frames(healthy[0], "+Inf")) - (frames(healthy[1], "2.5") - frames(healthy[0], "2.5"))
	for name, a := range alerts {
		if on, _ := firing(t, a.expr, healthy); on {
			if name == "AgentfyViewLatencyHigh" && slow > 0 {
				t.Logf("%s fires on the healthy stack: %g of its frames took over 2.5 s (a loaded machine)", name, slow)
				continue
			}
			t.Errorf("%s fires on the healthy stack", name)
		}
	}

	// fault runs inject, scrapes, lets drive make the fault show, scrapes again, and
	// checks that the alert is false over the healthy scrapes and true over these.
	fault := func(name string, withBroker bool, inject, drive func(), restore func()) {
		t.Run(name, func(t *testing.T) {
			a, ok := alerts[name]
			if !ok {
				t.Fatalf("no alert %s", name)
			}
			inject()
			if restore != nil {
				defer restore()
			}
			faulty := []scrape{r.scrape(withBroker)}
			drive()
			faulty = append(faulty, r.scrape(withBroker))
			on, onFault := firing(t, a.expr, healthy, faulty)
			if name == "AgentfyViewLatencyHigh" && slow > 0 {
				on = false // logged above
			}
			if on || !onFault {
				t.Errorf("%s: %t without its fault, %t with it; want false, then true", name, on, onFault)
			}
		})
	}

	fault("AgentfyViewLatencyHigh", true, func() {
		// The way back to the requesting replica slowed by 5 s, as a congested network
		// would: the views are frames, late.
		r.st.Replicas[0].SetHooks(&stack.Hooks{OnReply: func(b []byte) []byte { <-time.After(5 * time.Second); return b }})
	}, func() {
		for _, s := range r.views(2) {
			if !strings.HasPrefix(s, "200") {
				t.Fatalf("a slowed view: %s", s)
			}
		}
	}, func() { r.st.Replicas[0].SetHooks(nil) })

	fault("AgentfyGrantsForged", true, func() {
		// A Redis writer rewrites each grant with its own public key, as in
		// reliability's TestGrantRedirectedInTheRace.
		attacker, err := envelope.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		r.st.Replicas[1].SetHooks(&stack.Hooks{OnRelay: func(_, k string) {
			var stored map[string]string
			if json.Unmarshal([]byte(r.st.AdminClient().Get(ctx, k).Val()), &stored) != nil {
				return
			}
			stored["publicKey"] = envelope.PublicKeyHex(attacker)
			b, _ := json.Marshal(stored)
			_ = r.st.AdminClient().SetArgs(ctx, k, b, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
		}})
	}, func() {
		r.views(1)
	}, func() { r.st.Replicas[1].SetHooks(nil) })

	fault("AgentfyCapturesFailing", true, func() {
		// Chromium frozen (SIGSTOP): the broker lives, its captures reach their deadline.
		for _, pid := range testenv.Descendants(r.ss.BrokerPID()) {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
	}, func() {
		before := r.scrape(true).value("agentfy_broker_captures_total", "result", "failed")
		r.views(1)
		testenv.WaitFor(t, 15*time.Second, "a failed capture", func() bool {
			return r.scrape(true).value("agentfy_broker_captures_total", "result", "failed") > before
		})
	}, func() {
		for _, pid := range testenv.Descendants(r.ss.BrokerPID()) {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		testenv.WaitFor(t, 30*time.Second, "a frame again", func() bool {
			return strings.HasPrefix(r.views(1)[0], "200")
		})
	})

	fault("AgentfyBrokerUnsandboxed", true, func() {
		// The broker restarted with its Chromium's sandbox off, as an operator who set
		// AGENTFY_CHROMIUM_SANDBOX=off to get past a refusal would.
		env := r.ss.BrokerEnv()
		r.ss.KillBroker()
		r.ss.SetBrokerEnv(append(env, "AGENTFY_CHROMIUM_SANDBOX=off"))
		if err := r.ss.StartBroker(ctx); err != nil {
			t.Fatal(err)
		}
		r.ss.SetBrokerEnv(env)
	}, func() {
		testenv.WaitFor(t, 15*time.Second, "the unsandboxed broker's gauge", func() bool {
			// A scrape that answers is the new broker's (the old one is gone), which
			// exports the gauge from its start.
			return r.scrape(true).value("agentfy_broker_chromium_sandboxed") == 0
		})
		// The broker says so at start, as a warning.
		if log := r.ss.BrokerLog(); !strings.Contains(log, `"level":"warn"`) || !strings.Contains(log, "chromium runs without its sandbox") {
			t.Errorf("no warning of the unsandboxed start in the broker's log:\n%s", log)
		}
	}, func() {
		r.ss.KillBroker()
		if err := r.ss.StartBroker(ctx); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 15*time.Second, "the sandboxed broker's gauge", func() bool {
			return r.scrape(true).value("agentfy_broker_chromium_sandboxed") == 1
		})
	})

	fault("AgentfyJWKSStale", true, func() {
		r.idp.Set(func(s *testenv.IDPState) { s.Status = http.StatusServiceUnavailable })
	}, func() {
		testenv.WaitFor(t, auth.MinJWKSMaxStale+10*time.Second, "no key verifying on either replica", func() bool {
			s := r.scrape(true)
			return s.value("agentfy_jwks_keys", "instance", r.st.Replicas[0].ID) == 0 && s.value("agentfy_jwks_keys", "instance", r.st.Replicas[1].ID) == 0
		})
		// The provider's users are answered identity_unavailable now.
		if a := r.view(r.idpToken); a.Status != http.StatusServiceUnavailable {
			t.Errorf("a view with the provider's token, its keys stale: %s", a.Summary())
		}
	}, nil)

	fault("AgentfyJWKSRefreshFailing", true, func() {}, func() {
		before := r.scrape(true).value("agentfy_jwks_refreshes_total", "result", "failed")
		testenv.WaitFor(t, 10*time.Second, "a failed refresh", func() bool {
			return r.scrape(true).value("agentfy_jwks_refreshes_total", "result", "failed") > before
		})
	}, func() {
		r.idp.Set(func(s *testenv.IDPState) { s.Status = 0 })
		testenv.WaitFor(t, 15*time.Second, "the provider's keys back", func() bool {
			return r.view(r.idpToken).Status == http.StatusOK
		})
	})

	// The audit trail's stream deleted, as a platform's user could: no event is
	// acknowledged until it is made again. The broker restarted above has no tab: one
	// opened, the views are frames again, which wait for the stream.
	if _, err := r.ss.Tool(ctx, wire.ToolOpen, map[string]string{"url": r.st.Site + "/"}); err != nil {
		t.Fatal(err)
	}
	const frame = "200 frame" // stacktest.Response.Summary of a frame
	restoreAuditStream := func() {
		if err := r.st.MakeAuditStream(ctx); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 30*time.Second, "a frame again", func() bool {
			return r.views(1)[0] == frame
		})
	}
	fault("AgentfyAuditDropped", false, func() { r.deleteAuditStream(ctx) }, func() {
		// A refusal's event waits in the replica's buffer for the stream's
		// acknowledgement, retried for audit.RetryFor, and is then dropped.
		before := r.scrape(false).value("agentfy_audit_dropped_total", "reason", audit.DropUnacknowledged)
		if a := r.view("not-a-token"); a.Status != http.StatusUnauthorized {
			t.Errorf("a view without a credential: %s", a.Summary())
		}
		testenv.WaitFor(t, audit.RetryFor+15*time.Second, "an audit event dropped unacknowledged", func() bool {
			return r.scrape(false).value("agentfy_audit_dropped_total", "reason", audit.DropUnacknowledged) > before
		})
	}, restoreAuditStream)

	fault("AgentfyAuditUnavailable", true, func() { r.deleteAuditStream(ctx) }, func() {
		// A frame is served only once the stream acknowledged its view's event: each
		// is discarded, the view answered 503 audit_unavailable.
		testenv.WaitFor(t, 30*time.Second, "a frame refused audit_unavailable", func() bool {
			r.views(1)
			return r.scrape(false).value("agentfy_view_unavailable_total", "reason", wire.ReasonAuditUnavailable) > 0
		})
		for _, s := range r.views(2) {
			if !strings.HasPrefix(s, "503") {
				t.Errorf("a view without the audit stream: %s", s)
			}
		}
	}, restoreAuditStream)

	fault("AgentfyNoBroker", false, func() { r.ss.KillBroker() }, func() {
		for _, s := range r.views(2) {
			if !strings.HasPrefix(s, "503") {
				t.Errorf("a view without its broker: %s", s)
			}
		}
		// The series the replica made up front (api.AgentViewRoute) are the ones its
		// route counts in.
		if v := r.scrape(false).value("agentfy_view_unavailable_total", "reason", wire.ReasonBrokerDown, "route", api.AgentViewRoute); v == 0 {
			t.Errorf("no broker_down counted on %s", api.AgentViewRoute)
		}
	}, nil)

	fault("AgentfyViewsFailing", false, func() { r.ss.StopWorker() }, func() {
		// Without its worker the session's views answer 503 no_channel.
		testenv.WaitFor(t, 15*time.Second, "views failing for want of the worker", func() bool {
			r.views(1)
			return r.scrape(false).value("agentfy_view_unavailable_total", "reason", wire.ReasonNoChannel) > 0
		})
		r.views(2)
	}, nil)

	fault("AgentfyRedisUnreachable", false, func() { r.st.StopRedis() }, func() {
		testenv.WaitFor(t, 10*time.Second, "Redis down on both replicas", func() bool {
			return r.scrape(false).value("agentfy_redis_up") == 0
		})
	}, func() {
		if err := r.st.RestartRedis(ctx); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 15*time.Second, "Redis back", func() bool { return r.scrape(false).value("agentfy_redis_up") == 2 })
	})

	fault("AgentfyNATSUnreachable", false, func() { r.st.StopNATS() }, func() {
		testenv.WaitFor(t, 10*time.Second, "NATS down on both replicas", func() bool {
			return r.scrape(false).value("agentfy_nats_connected") == 0
		})
	}, func() {
		if err := r.st.RestartNATS(); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 15*time.Second, "NATS back", func() bool {
			s := r.scrape(false)
			return s.value("agentfy_nats_connected") == 2 && s.value("agentfy_nats_reconnects_total") >= 2
		})
	})

	// Every alert was faulted above, and every series named was exported.
	// AgentfyAuditBestEffort is the exception: its fault is a setting of every replica
	// of a stack (stack.Options.AuditBestEffort), not one to turn on and off in this
	// one, so it is faulted over written series only (TestAlertRules); the healthy
	// stack above, durable, shows it quiet.
	seriesOnly := []string{"AgentfyAuditBestEffort"}
	for name := range alerts {
		found := slices.Contains(seriesOnly, name)
		for _, sub := range []string{"AgentfyViewLatencyHigh", "AgentfyGrantsForged", "AgentfyCapturesFailing", "AgentfyBrokerUnsandboxed", "AgentfyJWKSStale", "AgentfyJWKSRefreshFailing", "AgentfyAuditDropped", "AgentfyAuditUnavailable", "AgentfyNoBroker", "AgentfyViewsFailing", "AgentfyRedisUnreachable", "AgentfyNATSUnreachable"} {
			found = found || sub == name
		}
		if !found {
			t.Errorf("alert %s has no fault in this test", name)
		}
	}
	for _, q := range allQueries(t) {
		for _, n := range metricNames(t, q) {
			if !r.names[n] {
				t.Errorf("%s: %s is not exported by the stack", q.where, n)
			}
		}
	}
	// The other way round: every agentfy series the stack exports is on the dashboard
	// and in docs/operating.md's tables of metrics.
	shown := map[string]bool{}
	for _, q := range dashboardQueries(t, loadDashboard(t)) {
		for _, n := range metricNames(t, q) {
			shown[family(r.names, n)] = true
		}
	}
	doc, err := os.ReadFile(operatingFile)
	if err != nil {
		t.Fatal(err)
	}
	for n := range r.names {
		f := family(r.names, n)
		if !strings.HasPrefix(f, "agentfy_") {
			continue
		}
		if !shown[f] {
			t.Errorf("the stack exports %s; the dashboard does not show it", f)
		}
		if !strings.Contains(string(doc), "| `"+f+"` |") {
			t.Errorf("the stack exports %s; docs/operating.md's tables do not list it", f)
		}
	}
}

// family is the metric family of a series name: a histogram's without its _bucket,
// _sum or _count.
func family(names map[string]bool, n string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(n, suffix); ok && names[f+"_bucket"] {
			return f
		}
	}
	return n
}
