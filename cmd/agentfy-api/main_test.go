package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// bin is agentfy-api, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentfy-api-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "agentfy-api")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	cancel()
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "build agentfy-api: %v\n%s", err, out)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// apiProcess is a running agentfy-api and the addresses its log says it listens on.
type apiProcess struct {
	cmd    *exec.Cmd
	logs   testenv.Buffer
	exited chan error // receives the exit once
	mu     sync.Mutex
	addrs  map[string]string // message ("listening", …) → addr, guarded by mu
}

// startAPI runs agentfy-api with env (nothing of the test's own environment) and waits until
// its log says every listener in want listens.
func startAPI(t *testing.T, env []string, want ...string) *apiProcess {
	t.Helper()
	p := &apiProcess{cmd: exec.Command(bin), exited: make(chan error, 1), addrs: map[string]string{}}
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			_, _ = p.logs.Write(append(sc.Bytes(), '\n'))
			var line struct{ Message, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Addr != "" {
				p.mu.Lock()
				p.addrs[line.Message] = line.Addr
				p.mu.Unlock()
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("agentfy-api's log:\n%s", p.logs.String())
		}
	})
	testenv.WaitFor(t, 30*time.Second, "agentfy-api listening", func() bool {
		for _, m := range want {
			if p.addr(m) == "" {
				return false
			}
		}
		return true
	})
	return p
}

// addr is where the listener the log line message names listens; "" before that line.
func (p *apiProcess) addr(message string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addrs[message]
}

// stop sends SIGTERM and returns the exit.
func (p *apiProcess) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("agentfy-api did not stop within 30 s of SIGTERM\n%s", p.logs.String())
		return nil
	}
}

// get GETs url without a credential.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testenv.Context(t, 10*time.Second), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestMetricsListener runs agentfy-api as a deployment does, on a real Redis and NATS.
// With AGENTFY_METRICS_LISTEN its series are served there, without a credential, and
// nothing else is; without it no such listener is opened. Either way the public
// listener answers /metrics as any unknown path, 404, and so does the admin listener.
// SIGTERM stops every listener and the process exits 0.
func TestMetricsListener(t *testing.T) {
	st := stacktest.Start(t, stack.Options{Replicas: -1}).St
	base := append(st.RedisEnv(deploy.RedisReplica),
		"AGENTFY_NATS_URL="+strings.Join(st.NATSURLs(), ","),
		"AGENTFY_NATS_PASSWORD="+st.Secrets.NATS[bus.RoleReplica],
		"AGENTFY_JWT_HS256_SECRET="+string(st.Secret),
		"AGENTFY_LISTEN=127.0.0.1:0",
		"AGENTFY_ADMIN_LISTEN=127.0.0.1:0",
	)
	tests := []struct {
		name        string
		metrics     string // AGENTFY_METRICS_LISTEN
		wantMetrics bool
	}{
		{name: "on", metrics: "127.0.0.1:0", wantMetrics: true},
		{name: "off when unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := slices.Concat(base, []string{"AGENTFY_REPLICA_ID=metrics-" + strings.ReplaceAll(tt.name, " ", "-")})
			want := []string{"listening", "admin API listening"}
			if tt.metrics != "" {
				env = append(env, "AGENTFY_METRICS_LISTEN="+tt.metrics)
				want = append(want, "metrics listening")
			}
			p := startAPI(t, env, want...)
			public, admin := "http://"+p.addr("listening"), "http://"+p.addr("admin API listening")

			unknownStatus, unknownType, unknownBody := get(t, public+"/no-such-path")
			status, ctype, body := get(t, public+"/metrics")
			if status != http.StatusNotFound || unknownStatus != http.StatusNotFound || ctype != unknownType || body != unknownBody {
				t.Errorf("public /metrics: %d %s %q, want the answer of an unknown path: %d %s %q", status, ctype, body, unknownStatus, unknownType, unknownBody)
			}
			if status, _, body := get(t, admin+"/metrics"); status != http.StatusNotFound || strings.TrimSpace(body) != `{"error":{"code":"not_found","message":"no such admin route"}}` {
				t.Errorf("admin /metrics: %d %s, want the admin API's 404", status, body)
			}
			if strings.Contains(body, "agentfy_") || strings.Contains(body, "go_info") {
				t.Error("the public listener serves series")
			}

			if addr := p.addr("metrics listening"); tt.wantMetrics {
				status, ctype, body := get(t, "http://"+addr+"/metrics")
				if status != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(body, "agentfy_view_pending 0") || !strings.Contains(body, "agentfy_redis_up 1") {
					t.Errorf("metrics listener /metrics: %d %s %.300s", status, ctype, body)
				}
				if status, _, body := get(t, "http://"+addr+"/healthz"); status != http.StatusNotFound || strings.TrimSpace(body) != `{"error":{"code":"not_found","message":"no such route"}}` {
					t.Errorf("metrics listener /healthz: %d %s, want the API's 404", status, body)
				}
			} else if addr != "" {
				t.Errorf("a metrics listener on %s with AGENTFY_METRICS_LISTEN unset", addr)
			}
			if err := p.stop(t); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs.String())
			}
		})
	}
}

// TestListenersOfTheirOwn: the admin API and the metrics each need a listener of their
// own; an address that another listener has is refused before anything connects.
func TestListenersOfTheirOwn(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		wantErr string
	}{
		{name: "metrics on the public listener", env: []string{"AGENTFY_LISTEN=127.0.0.1:8080", "AGENTFY_METRICS_LISTEN=127.0.0.1:8080"}, wantErr: "AGENTFY_METRICS_LISTEN: the metrics need a listener of their own"},
		{name: "metrics on the admin listener", env: []string{"AGENTFY_ADMIN_LISTEN=127.0.0.1:9090", "AGENTFY_METRICS_LISTEN=127.0.0.1:9090"}, wantErr: "AGENTFY_METRICS_LISTEN: the metrics need a listener of their own"},
		{name: "admin on the public listener", env: []string{"AGENTFY_LISTEN=127.0.0.1:8080", "AGENTFY_ADMIN_LISTEN=127.0.0.1:8080"}, wantErr: "AGENTFY_ADMIN_LISTEN: the admin API needs a listener of its own"},
		{name: "metrics on the default public address", env: []string{"AGENTFY_METRICS_LISTEN=:8080"}, wantErr: "AGENTFY_METRICS_LISTEN: the metrics need a listener of their own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			// No Redis or NATS anywhere: the refusal comes first.
			cmd.Env = slices.Concat(tt.env, []string{"AGENTFY_REDIS_URL=redis://127.0.0.1:1/0", "AGENTFY_NATS_URL=nats://127.0.0.1:1"})
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.wantErr) {
				t.Fatalf("exit %v, output %s; want a failure naming %q", err, out, tt.wantErr)
			}
		})
	}
}
