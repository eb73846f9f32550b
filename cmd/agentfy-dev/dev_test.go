package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// bannerSub is a `nats … sub` line of the banner: server, user, password, subject.
var bannerSub = regexp.MustCompile(`(?m)^ *nats --server (\S+) --user (\S+) --password '([^']*)' sub '([^']+)'$`)

// TestBannerWatchesTheStacksNamespace prints the banner of a stack on Redis database 3
// and runs its `nats sub` lines, as printed, against a NATS server configured for that
// namespace as deploy renders it (the permissions are per namespace): each names the
// namespace's subjects, and the server lets its user subscribe to them — but not to
// database 0's, which the banner once printed whatever the database.
func TestBannerWatchesTheStacksNamespace(t *testing.T) {
	ns, err := bus.NewNamespace("dev", 3)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := deploy.NATSConfig(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Run(natsserver.Options{Name: "banner", Port: -1, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cred := func(r bus.Role) natsCredential { return natsCredential{User: r.User(), Password: secrets.NATS[r]} }
	rf := readyFile{
		Replicas: []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082"}, App: "http://127.0.0.1:8081/",
		Metrics: []string{"http://127.0.0.1:9091/metrics", "http://127.0.0.1:9092/metrics"},
		NATS:    srv.ClientURL(), Deployment: ns.Deployment(),
		NATSDebug: cred(bus.RoleDebug), NATSAudit: cred(bus.RoleAudit), NATSSystem: cred(bus.RoleSystem), NATSOperator: cred(bus.RoleOperator),
		Agent: demoAgent, IdleAgent: idleAgent, EmptyAgent: emptyAgent, ForeignAgent: foreignAgent, OrgID: demoOrg,
		Tokens: map[string]string{"member": "a-token"}, OrgKeys: map[string]string{"reader": "a-key"},
	}
	var banner strings.Builder
	printBanner(&banner, rf, ns, time.Second)
	if strings.Contains(banner.String(), ".db0.") {
		t.Fatalf("the banner of a stack on database 3 names database 0:\n%s", banner.String())
	}
	lines := map[string][]string{} // by user
	for _, m := range bannerSub.FindAllStringSubmatch(banner.String(), -1) {
		lines[m[2]] = m[1:]
	}

	for _, tc := range []struct {
		name string
		user string
		want string
	}{
		{name: "debug", user: bus.RoleDebug.User(), want: "agentfy.dev.db3.>"},
		{name: "audit", user: bus.RoleAudit.User(), want: "agentfy.dev.db3.audit.>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := lines[tc.user]
			if line == nil {
				t.Fatalf("no `nats sub` line for %s:\n%s", tc.user, banner.String())
			}
			server, user, password, subject := line[0], line[1], line[2], line[3]
			if subject != tc.want {
				t.Fatalf("%s watches %q, want %q", tc.user, subject, tc.want)
			}
			for _, sub := range []struct {
				subject string
				allowed bool
			}{{subject, true}, {strings.Replace(subject, ".db3.", ".db0.", 1), false}} {
				nc, err := nats.Connect(server, nats.UserInfo(user, password), nats.Timeout(5*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
				if err != nil {
					t.Fatalf("nats as %s: %v", user, err)
				}
				if _, err := nc.SubscribeSync(sub.subject); err != nil {
					t.Fatal(err)
				}
				// The server answers a refusal with -ERR before the flush's PONG.
				ferr := nc.FlushTimeout(5 * time.Second)
				refused := errors.Is(nc.LastError(), nats.ErrPermissionViolation)
				nc.Close()
				if ferr != nil || refused == sub.allowed {
					t.Fatalf("%s may subscribe to %s: %v (flush %v), want %v", user, sub.subject, !refused, ferr, sub.allowed)
				}
			}
		})
	}
}

// TestDevStackStartsAndStopsCleanly runs `agentfy-dev dev` as a user would: it becomes ready
// well within a minute, the first replica serves a live JPEG of the demo agent, and
// Ctrl-C (SIGINT) ends it with no process left behind.
func TestDevStackStartsAndStopsCleanly(t *testing.T) {
	testenv.SkipUnderShort(t, "TestDevStackStartsAndStopsCleanly", testenv.NeedsChromium)
	dir := t.TempDir()
	bin, operator := filepath.Join(dir, "agentfy-dev"), filepath.Join(dir, "agentfy")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", ".", "../agentfy")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ready := filepath.Join(dir, "ready.json")
	// A company's identity provider: a JWK set with one key of the test's.
	idpKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp := testenv.ServeIDP(t)
	idp.Set(func(s *testenv.IDPState) {
		s.Keys = []json.RawMessage{testenv.JWK(t, &idpKey.PublicKey, "company-1", "ES256", "sig", nil)}
	})
	cmd := exec.CommandContext(ctx, bin, "dev", "--ready-file", ready)
	cmd.Env = append(os.Environ(), "AGENTFY_JWT_JWKS_URL="+idp.JWKSURL(), "AGENTFY_JWT_ISSUER=https://idp.example.com", "AGENTFY_JWT_AUDIENCE=agentfy-api")
	cmd.Dir = "../.."
	cmd.Stdout, cmd.Stderr = &strings.Builder{}, &strings.Builder{}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var rf readyFile
	for {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &rf) == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("dev exited before ready: %v\n%s", err, cmd.Stderr)
		case <-time.After(50 * time.Millisecond): // polling for the ready file
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("not ready within 60 s\n%s", cmd.Stderr)
		}
	}
	t.Logf("ready in %v", time.Since(start))
	for _, f := range []string{rf.App, rf.NATS, rf.Redis, rf.Agent, rf.IdleAgent, rf.ForeignAgent, rf.Tokens["member"], rf.Tokens["outsider"], rf.OrgID, rf.OrgKeys["reader"], rf.OrgKeys["noScope"], rf.OrgKeys["otherOrg"]} {
		if f == "" {
			t.Fatalf("ready file lacks a field: %+v", rf)
		}
	}
	if len(rf.Replicas) != 2 || rf.Deployment != "dev" || !strings.HasPrefix(rf.Redis, "redis://agentfy-operator:") {
		t.Fatalf("ready file: %+v", rf)
	}
	if rf.NATSDebug.User != "agentfy-debug" || rf.NATSSystem.User != "agentfy-system" || rf.NATSDebug.Password == "" || rf.NATSSystem.Password == "" {
		t.Fatalf("ready file NATS credentials: debug %q, system %q", rf.NATSDebug.User, rf.NATSSystem.User)
	}
	// The printed NATS lines work: the debug user watches the namespace, the system
	// user sees the connections, and no credential means no connection.
	ns, _ := bus.NewNamespace("dev", 0)
	for _, c := range []natsCredential{rf.NATSDebug, rf.NATSSystem} {
		nc, err := nats.Connect(rf.NATS, nats.UserInfo(c.User, c.Password), nats.Timeout(5*time.Second))
		if err != nil {
			t.Fatalf("nats as %s: %v", c.User, err)
		}
		if c.User == rf.NATSDebug.User {
			if _, err := nc.SubscribeSync(ns.Wildcard()); err != nil {
				t.Fatal(err)
			}
		} else if _, err := nc.Request("$SYS.REQ.SERVER.PING.CONNZ", nil, 5*time.Second); err != nil {
			t.Fatalf("the system user's connection report: %v", err)
		}
		if err := nc.FlushTimeout(5 * time.Second); err != nil || nc.LastError() != nil {
			t.Fatalf("nats as %s: %v %v", c.User, err, nc.LastError())
		}
		nc.Close()
	}
	if nc, err := nats.Connect(rf.NATS, nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("the dev NATS server accepted a client without a credential")
	}
	// The audit user reads the audit subjects, and may neither read the view and tool
	// subjects nor publish.
	if rf.NATSAudit.User != "agentfy-audit" || rf.NATSAudit.Password == "" {
		t.Fatalf("ready file natsAudit: %q", rf.NATSAudit.User)
	}
	viewSubject, _ := ns.Subject(bus.VerbView, rf.SessionID)
	for _, step := range []struct {
		name    string
		do      func(*nats.Conn) error
		allowed bool
	}{
		{"subscribe to the audit subjects", func(nc *nats.Conn) error { _, err := nc.SubscribeSync(ns.AuditWildcard()); return err }, true},
		{"subscribe to a view subject", func(nc *nats.Conn) error { _, err := nc.SubscribeSync(viewSubject); return err }, false},
		{"subscribe to the tool subjects", func(nc *nats.Conn) error { _, err := nc.SubscribeSync(ns.AllOf(bus.VerbTool)); return err }, false},
		{"publish an audit event", func(nc *nats.Conn) error { return nc.Publish(ns.AuditView(rf.Agent), []byte("{}")) }, false},
	} {
		nc, err := nats.Connect(rf.NATS, nats.UserInfo(rf.NATSAudit.User, rf.NATSAudit.Password), nats.Timeout(5*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatalf("nats as the audit user: %v", err)
		}
		if err := step.do(nc); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		// The server answers a refusal with -ERR before the flush's PONG.
		ferr := nc.FlushTimeout(5 * time.Second)
		refused := errors.Is(nc.LastError(), nats.ErrPermissionViolation)
		nc.Close()
		if ferr != nil || refused == step.allowed {
			t.Fatalf("audit user may %s: %v (flush %v), want allowed %v", step.name, !refused, ferr, step.allowed)
		}
	}

	// The README's curl line: a live JPEG from the first replica.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rf.Replicas[0]+"/v1/agents/"+rf.Agent+"/worker/view", nil)
	req.Header.Set("Authorization", "Bearer "+rf.Tokens["member"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Live bool `json:"live"`
		Page *struct {
			Data string `json:"data"`
		} `json:"page"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !body.Live || body.Page == nil {
		t.Fatalf("view: %d live=%v err=%v", resp.StatusCode, body.Live, err)
	}
	jpg, err := base64.StdEncoding.DecodeString(body.Page.Data)
	if err != nil || len(jpg) < 1000 || jpg[0] != 0xFF || jpg[1] != 0xD8 {
		t.Fatalf("frame is not a JPEG (%d bytes, %v)", len(jpg), err)
	}

	// A token of the company's provider views too, beside the development tokens.
	company := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": "https://idp.example.com", "aud": "agentfy-api", "sub": "u-alice", "exp": time.Now().Add(time.Hour).Unix(),
	})
	company.Header["kid"] = "company-1"
	companyToken, err := company.SignedString(idpKey)
	if err != nil {
		t.Fatal(err)
	}
	creq, _ := http.NewRequestWithContext(ctx, http.MethodGet, rf.Replicas[1]+"/v1/agents/"+rf.Agent+"/worker/view", nil)
	creq.Header.Set("Authorization", "Bearer "+companyToken)
	cresp, err := http.DefaultClient.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	_ = cresp.Body.Close()
	if cresp.StatusCode != http.StatusOK && cresp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the company provider's token: %d, want 200 (or 429: the view just before took the window)", cresp.StatusCode)
	}

	// The banner's admin call: u-dave becomes a member of team Atlas through the ready
	// file's admin listener and key, and can see the demo agent at once.
	if rf.Admin.URL == "" || !strings.HasPrefix(rf.Admin.Key, "afa_") {
		t.Fatalf("ready file admin: %+v", rf.Admin)
	}
	areq, _ := http.NewRequestWithContext(ctx, http.MethodPut, rf.Admin.URL+"/v1/admin/teams/team-atlas/members/u-dave", nil)
	areq.Header.Set("Authorization", "Bearer "+rf.Admin.Key)
	aresp, err := http.DefaultClient.Do(areq)
	if err != nil {
		t.Fatal(err)
	}
	_ = aresp.Body.Close()
	if aresp.StatusCode != http.StatusNoContent {
		t.Fatalf("the banner's admin call: %d", aresp.StatusCode)
	}

	// The ready file's metrics are each replica's series, without a credential, on a
	// listener of its own: the replica's public listener answers /metrics 404.
	if len(rf.Metrics) != len(rf.Replicas) {
		t.Fatalf("ready file metrics: %q for replicas %q", rf.Metrics, rf.Replicas)
	}
	for i, u := range rf.Metrics {
		for _, tc := range []struct {
			url    string
			status int
		}{{u, http.StatusOK}, {rf.Replicas[i] + "/metrics", http.StatusNotFound}} {
			mreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			mresp, err := http.DefaultClient.Do(mreq)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(mresp.Body, 1<<20))
			_ = mresp.Body.Close()
			if mresp.StatusCode != tc.status || (tc.status == http.StatusOK) != strings.Contains(string(body), "agentfy_worker_connections ") {
				t.Fatalf("GET %s: %d %.200s, want %d", tc.url, mresp.StatusCode, body, tc.status)
			}
		}
	}

	// The banner's stop line, by the operator CLI, with the ready file's Redis URL and
	// NATS credential (the operator's users), as the banner exports them: the change is
	// recorded in the audit trail (exit 0; 3 would be a change made but unrecorded).
	stop := exec.CommandContext(ctx, operator, "session", "stop", "-agent", rf.Agent)
	stop.Env = append(os.Environ(), "AGENTFY_REDIS_URL="+rf.Redis, "AGENTFY_DEPLOYMENT=dev",
		"AGENTFY_NATS_URL="+rf.NATS, "AGENTFY_NATS_PASSWORD="+rf.NATSOperator.Password)
	if stopped, err := stop.Output(); err != nil || !strings.Contains(string(stopped), `"stopped"`) {
		t.Fatalf("agentfy session stop as printed: %v %s", err, stopped)
	}

	children := testenv.Descendants(cmd.Process.Pid)
	if len(children) < 3 { // redis-server, Chromium and its helpers
		t.Fatalf("dev runs only %d child processes", len(children))
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dev exited with %v after Ctrl-C\n%s", err, cmd.Stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop within 30 s of Ctrl-C")
	}
	for _, p := range children {
		if testenv.Alive(p) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
			t.Errorf("process %d (%.80s) survived Ctrl-C", p, cmdline)
		}
	}
}
