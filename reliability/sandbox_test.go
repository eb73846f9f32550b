package reliability

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestChromiumIsSandboxed reads, from /proc, every process of the Chromium of a live
// session's broker (the agentfy-broker binary) once it renders the demo site: none runs
// with --no-sandbox or as root, each renderer is under a seccomp-bpf filter (Seccomp: 2)
// in a user and a PID namespace other than the browser process's, and no process has a
// variable of the broker's (AGENTFY_*, OTEL_*) in its environment.
func TestChromiumIsSandboxed(t *testing.T) {
	observed := ""
	record(t, "Sandbox (the broker's Chromium)", "no --no-sandbox, no uid 0; every renderer Seccomp 2 in its own user and PID namespaces; no AGENTFY_*/OTEL_* in any environment", &observed)
	ss := liveSession(t, "agent-sandbox", stack.SessionOptions{BrokerProcess: true})
	pid := ss.BrokerPID()
	if pid == 0 {
		t.Fatal("the suite's broker is not a process of its own")
	}
	var browser procInfo
	var procs []procInfo
	for _, p := range testenv.Descendants(pid) {
		info, err := readProc(p)
		if err != nil {
			continue // gone meanwhile
		}
		if info.chromium && !strings.Contains(info.cmdline, "--type=") {
			browser = info
		}
		procs = append(procs, info)
	}
	if browser.pid == 0 {
		t.Fatalf("no Chromium browser process under the broker (%d processes)", len(procs))
	}
	var problems []string
	renderers := 0
	for _, p := range procs {
		if strings.Contains(p.cmdline, "--no-sandbox") {
			problems = append(problems, fmt.Sprintf("pid %d has --no-sandbox", p.pid))
		}
		if p.uid == "0" {
			problems = append(problems, fmt.Sprintf("pid %d runs as root", p.pid))
		}
		for _, kv := range p.environ {
			if strings.HasPrefix(kv, "AGENTFY_") || strings.HasPrefix(kv, "OTEL_") {
				name, _, _ := strings.Cut(kv, "=")
				problems = append(problems, fmt.Sprintf("pid %d has %s", p.pid, name))
			}
		}
		if !strings.Contains(p.cmdline, "--type=renderer") {
			continue
		}
		renderers++
		if p.seccomp != "2" || p.userNS == browser.userNS || p.pidNS == browser.pidNS {
			problems = append(problems, fmt.Sprintf("renderer %d: Seccomp %s, %s, %s (the browser's: %s, %s)", p.pid, p.seccomp, p.userNS, p.pidNS, browser.userNS, browser.pidNS))
		}
	}
	if renderers == 0 {
		problems = append(problems, "no renderer")
	}
	if len(problems) > 0 {
		observed = strings.Join(problems, "; ")
		t.Error(observed)
		return
	}
	observed = fmt.Sprintf("%d processes as uid %s, %d renderers each Seccomp 2 in its own user and PID namespaces; no AGENTFY_*/OTEL_*", len(procs), browser.uid, renderers)
}

// procInfo is what TestChromiumIsSandboxed reads of a process.
type procInfo struct {
	pid                   int
	chromium              bool
	cmdline, uid, seccomp string
	userNS, pidNS         string
	environ               []string
}

func readProc(pid int) (procInfo, error) {
	base := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(base, "cmdline"))
	if err != nil {
		return procInfo{}, err
	}
	status, err := os.ReadFile(filepath.Join(base, "status"))
	if err != nil {
		return procInfo{}, err
	}
	environ, err := os.ReadFile(filepath.Join(base, "environ"))
	if err != nil {
		return procInfo{}, err
	}
	p := procInfo{pid: pid, cmdline: strings.ReplaceAll(string(cmdline), "\x00", " "), environ: strings.Split(string(environ), "\x00")}
	args := strings.SplitN(string(cmdline), "\x00", 2)
	p.chromium = strings.Contains(filepath.Base(args[0]), "chrom")
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok && len(strings.Fields(v)) > 1 {
			p.uid = strings.Fields(v)[1]
		}
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			p.seccomp = strings.TrimSpace(v)
		}
	}
	if p.userNS, err = os.Readlink(filepath.Join(base, "ns", "user")); err != nil {
		return procInfo{}, err
	}
	if p.pidNS, err = os.Readlink(filepath.Join(base, "ns", "pid")); err != nil {
		return procInfo{}, err
	}
	return p, nil
}

// TestBrowserRefusesTheDeployment tells the agent's browser, through the tool channel as
// a prompt-injected agent would, to open each of the deployment's own listeners (the
// replicas' public, admin and metrics listeners, NATS, Redis, all on loopback as in the
// dev stack), a listener the test watches, and the cloud metadata addresses: each tool
// call is refused naming its rule, no connection reaches the watched listener, and the
// demo site still opens.
func TestBrowserRefusesTheDeployment(t *testing.T) {
	ss := liveSession(t, "agent-egress", stack.SessionOptions{})
	var accepted atomic.Int64
	var lc net.ListenConfig
	watched, err := lc.Listen(client.Context(t), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watched.Close() })
	go func() {
		for {
			c, err := watched.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	targets := []struct{ name, url, rule string }{
		{"replica A's public listener", st.Replicas[0].URL + "/v1/agents", "loopback"},
		{"replica B's public listener", st.Replicas[1].URL + "/", "loopback"},
		{"replica A's admin listener", st.Replicas[0].AdminURL + "/v1/admin/teams", "loopback"},
		{"replica A's metrics", st.Replicas[0].MetricsURL + "/metrics", "loopback"},
		{"NATS", "http://" + strings.TrimPrefix(st.NATS.ClientURL(), "nats://") + "/", "loopback"},
		{"Redis", "http://" + st.Redis.Addr() + "/", "loopback"},
		{"a watched listener on loopback", "http://" + watched.Addr().String() + "/", "loopback"},
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", "link-local or cloud metadata"},
		{"cloud metadata (IPv6)", "http://[fd00:ec2::254]/latest/meta-data/", "link-local or cloud metadata"},
	}
	for _, tt := range targets {
		t.Run(tt.name, func(t *testing.T) {
			observed := ""
			record(t, "Egress (the agent's browser)", "browser_open refused: "+tt.rule+" address", &observed)
			_, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": tt.url})
			switch {
			case err == nil:
				observed = "opened"
				t.Errorf("browser_open of %s was not refused", tt.name)
			case !strings.Contains(err.Error(), tt.rule+" address"):
				observed = "refused without naming the rule"
				t.Errorf("browser_open of %s: %v, want the rule %q", tt.name, err, tt.rule)
			default:
				observed = "browser_open refused: " + tt.rule + " address"
			}
		})
	}
	observed := ""
	record(t, "Egress (the agent's browser)", "0 connections to the watched listener; the demo site opens", &observed)
	if _, err := ss.Tool(context.WithoutCancel(client.Context(t)), "browser_open", map[string]string{"url": st.Site + "/index.html"}); err != nil {
		t.Errorf("the demo site: %v", err)
	}
	n := accepted.Load()
	observed = fmt.Sprintf("%d connections to the watched listener; the demo site opens", n)
	if n != 0 {
		t.Error(observed)
	}
}
