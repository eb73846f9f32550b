package reliability

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// liveSession starts a session for a fresh agent whose worker is on replica B, with one
// tab open on the demo site.
func liveSession(t *testing.T, agent string, o stack.SessionOptions) *stack.Session {
	t.Helper()
	client.NewAgent(t, agent)
	o.Replica = 1
	ss := stacktest.LiveSession(client.Context(t), t, st, agent, o, "/account.html")
	if a := client.Poll(t, agent); a.Summary() != "200 frame" {
		t.Fatalf("before the fault: %s", a.Summary())
	}
	return ss
}

// fault runs one fault case: the answer during the fault must be 503 with one of
// reasons in the requesting replica's log and metric (the reason named by the hop that
// failed, carried unchanged), and the first poll after recovery must be a live answer.
func fault(t *testing.T, agent string, reasons []string, inject func(), recover func()) string {
	t.Helper()
	before := client.UnavailableByReason(t)
	logged := len(logs.String())
	inject()
	during := client.Poll(t, agent)
	reason := newReason(t, before, client.UnavailableByReason(t))
	if line := `"reason":"` + reason + `"`; !strings.Contains(logs.String()[logged:], line) {
		t.Errorf("no log line of the 503 carries %s", line)
	}
	recover()
	after := client.Poll(t, agent)
	observed := during.Summary() + " (reason " + reason + "); after recovery " + after.Summary()
	if during.Status != http.StatusServiceUnavailable {
		t.Errorf("during the fault: %s, want 503", during.Summary())
	}
	if strings.Contains(during.Body, `"live":false`) {
		t.Errorf("a failure answered live:false")
	}
	if !slices.Contains(reasons, reason) {
		t.Errorf("the 503's reason is %q, want one of %q", reason, reasons)
	}
	if after.Status != http.StatusOK || !strings.HasPrefix(after.Body, `{"live":true`) {
		t.Errorf("after recovery: %s, want a live answer", after.Summary())
	}
	return observed
}

// metricValue reads the counter name of replica i (the sum over its labels).
func metricValue(t *testing.T, name string, i int) float64 {
	t.Helper()
	f := client.Metrics(t, i)[name]
	if f == nil {
		t.Fatalf("metrics: no %s", name)
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// newReason is the one reason whose count grew by exactly one between two readings.
func newReason(t *testing.T, before, after map[string]float64) string {
	t.Helper()
	grew := []string{}
	for r, n := range after {
		switch d := n - before[r]; {
		case d == 1:
			grew = append(grew, r)
		case d != 0:
			t.Errorf("reason %s grew by %v, want at most one 503", r, d)
		}
	}
	if len(grew) != 1 {
		t.Errorf("reasons counted for one 503: %q, want exactly one", grew)
		return strings.Join(grew, ",")
	}
	return grew[0]
}

func TestFaults(t *testing.T) {
	t.Run("Redis_stopped", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "503 (reason internal) while Redis is down; a frame once it is back", &observed)
		agent := "agent-f-redis"
		liveSession(t, agent, stack.SessionOptions{})
		observed = fault(t, agent, []string{"internal"}, st.StopRedis, func() {
			if err := st.RestartRedis(client.Context(t)); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("NATS_stopped", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "503 (reason no_channel) while NATS is down; a frame once every replica reconnected", &observed)
		agent := "agent-f-nats"
		ss := liveSession(t, agent, stack.SessionOptions{})
		observed = fault(t, agent, []string{wire.ReasonNoChannel}, st.StopNATS, func() {
			if err := st.RestartNATS(); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 15*time.Second, "reconnection of every replica", func() bool {
				for _, r := range st.Replicas {
					if !r.NATS.IsConnected() {
						return false
					}
				}
				return st.Bus.IsConnected()
			})
			if err := ss.WaitAttached(client.Context(t), st.Replicas[1].ID); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("worker_socket_dropped_mid_view", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "503 (reason no_channel: the owner loses the socket while waiting); a frame after the worker reconnects (to either replica)", &observed)
		agent := "agent-f-socket"
		ss := liveSession(t, agent, stack.SessionOptions{CuttableLink: true})
		observed = fault(t, agent, []string{wire.ReasonNoChannel}, func() {
			st.SetConsumeHook(func() { st.SetConsumeHook(nil); ss.CutLink() })
		}, func() {
			st.SetConsumeHook(nil)
			if err := ss.WaitAttached(client.Context(t), ""); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("broker_process_killed_mid_capture", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "503 (reason broker_down: the worker reaches no broker); after the broker restarts (a fresh browser) a live answer", &observed)
		agent := "agent-f-broker"
		ss := liveSession(t, agent, stack.SessionOptions{BrokerProcess: true})
		observed = fault(t, agent, []string{wire.ReasonBrokerDown}, func() {
			st.SetConsumeHook(func() { st.SetConsumeHook(nil); ss.KillBroker() })
		}, func() {
			st.SetConsumeHook(nil)
			if err := ss.StartBroker(client.Context(t)); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("Chromium_killed", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "503 (reason capture or broker_down, as the broker notices first); the broker exits with its browser and, restarted, answers again", &observed)
		agent := "agent-f-chromium"
		ss := liveSession(t, agent, stack.SessionOptions{BrokerProcess: true})
		observed = fault(t, agent, []string{wire.ReasonCapture, wire.ReasonBrokerDown}, func() {
			pid := chromiumOf(t, ss.BrokerPID())
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, func() {
			select {
			case <-ss.BrokerExited():
			case <-time.After(15 * time.Second):
				t.Error("the broker kept running without its browser")
				ss.KillBroker()
			}
			if err := ss.StartBroker(client.Context(t)); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("capture_deadline_on_a_hung_tab", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "503 (reason capture) after the broker's 5 s capture deadline, within the 9 s bound; a frame once the agent closes the tab", &observed)
		agent := "agent-f-hung"
		ss := liveSession(t, agent, stack.SessionOptions{})
		var hung string
		start := time.Time{}
		observed = fault(t, agent, []string{wire.ReasonCapture}, func() {
			res, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": st.Site + "/hang.html"})
			if err != nil {
				t.Fatal(err)
			}
			hung = tabID(t, res)
			start = time.Now()
		}, func() {
			if took := time.Since(start); took > 9*time.Second || took < 4*time.Second {
				t.Errorf("the hung capture answered after %v", took)
			}
			if _, err := ss.Tool(client.Context(t), "browser_close", map[string]string{"tabId": hung}); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("session_stopped_mid_capture", func(t *testing.T) {
		observed := ""
		record(t, "Faults", `200 {"live":false}: the session really stopped`, &observed)
		agent := "agent-f-stop"
		ss := liveSession(t, agent, stack.SessionOptions{})
		st.SetConsumeHook(func() {
			st.SetConsumeHook(nil)
			if err := ss.Stop(client.Context(t)); err != nil {
				t.Error(err)
			}
		})
		a := client.Poll(t, agent)
		observed = a.Summary()
		if a.Status != http.StatusOK || strings.TrimSpace(a.Body) != `{"live":false}` {
			t.Errorf("got %s", observed)
		}
	})

	t.Run("membership_revoked_mid_capture", func(t *testing.T) {
		observed := ""
		record(t, "Faults", "404, the same body as for an unknown agent; no frame", &observed)
		agent := "agent-f-member"
		liveSession(t, agent, stack.SessionOptions{})
		st.SetConsumeHook(func() {
			st.SetConsumeHook(nil)
			if err := st.Dir.RemoveMember(client.Context(t), "team-atlas", "u-alice"); err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(func() { _ = st.Dir.AddMember(client.Context(t), "team-atlas", "u-alice") })
		a := client.Poll(t, agent)
		unknown := client.Do(t, http.MethodGet, client.ViewURL(0, "agent-nobody"), client.Token(t, "u-bob"), nil)
		observed = a.Summary()
		if a.Status != http.StatusNotFound || a.Body != unknown.Body {
			t.Errorf("got %s %.80s, want the unknown agent's 404", observed, a.Body)
		}
	})
}

// chromiumOf finds the main Chromium process below a broker process.
func chromiumOf(t *testing.T, brokerPID int) int {
	t.Helper()
	for _, p := range testenv.Descendants(brokerPID) {
		cmdline, _ := os.ReadFile("/proc/" + itoa(p) + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "/chromium") && !strings.Contains(string(cmdline), "--type=") {
			return p
		}
	}
	t.Fatal("no Chromium below the broker")
	return 0
}

// oldGoneAfter is how long a lost worker used to be allowed to stay away before its
// session was stopped (30 s); a lost socket now never stops a session.
const oldGoneAfter = 30 * time.Second

func TestSocketLossIsUnavailableNotStopped(t *testing.T) {
	observed := ""
	record(t, "Faults", "the worker cut off from every replica for longer than the old 30 s: every view 503 (never live:false), the session not stopped and its passes valid; a frame once the worker reconnects", &observed)
	agent := "agent-f-socket-loss"
	ss := liveSession(t, agent, stack.SessionOptions{LinkOnly: true})
	ss.SetLinkDown(true)
	testenv.WaitFor(t, 10*time.Second, "the owner to let the session go", func() bool {
		cur, err := st.Sess.Get(client.Context(t), ss.ID)
		return err == nil && cur.Owner == ""
	})
	lost := time.Now()
	polls := 0
	tick := time.NewTicker(time.Second) // a poll a second: the sampling rate of the check
	defer tick.Stop()
	for time.Since(lost) < oldGoneAfter+5*time.Second {
		a := client.Poll(t, agent)
		polls++
		if a.Status != http.StatusServiceUnavailable {
			t.Fatalf("poll %d, %v after the loss: %s, want 503", polls, time.Since(lost).Round(time.Second), a.Summary())
		}
		<-tick.C
	}
	cur, err := st.Sess.Get(client.Context(t), ss.ID)
	if err != nil || cur.Stopped {
		t.Fatalf("after %v without a socket the session is %+v (%v)", time.Since(lost).Round(time.Second), cur, err)
	}
	if _, err := st.Creds.VerifyPass(client.Context(t), ss.Passes.Worker, auth.RoleWorker); err != nil {
		t.Fatalf("the worker pass was revoked: %v", err)
	}
	down := time.Since(lost)
	ss.SetLinkDown(false)
	back := time.Now()
	if err := ss.WaitAttached(client.Context(t), ""); err != nil {
		t.Fatal(err)
	}
	a := client.Poll(t, agent)
	if a.Summary() != "200 frame" {
		t.Fatalf("after the worker came back: %s", a.Summary())
	}
	observed = fmt.Sprintf("%d polls over %v without a socket: all 503; session live, passes valid; a frame %v after the link came back",
		polls, down.Round(time.Second), time.Since(back).Round(100*time.Millisecond))
}

func TestCrashedBrokerProfileIsSwept(t *testing.T) {
	observed := ""
	record(t, "Faults", "the Chromium profile a SIGKILLed broker left behind is removed when a broker starts", &observed)
	ss := liveSession(t, "agent-f-sweep", stack.SessionOptions{BrokerProcess: true})
	pid := ss.BrokerPID()
	owned := func() []string {
		var dirs []string
		matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "agentfy-chromium-*"))
		for _, d := range matches {
			if b, err := os.ReadFile(filepath.Join(d, "agentfy-owner")); err == nil && strings.HasPrefix(string(b), strconv.Itoa(pid)+" ") {
				dirs = append(dirs, d)
			}
		}
		return dirs
	}
	if len(owned()) != 1 {
		t.Fatalf("the broker (pid %d) owns %d profiles", pid, len(owned()))
	}
	ss.KillBroker()
	left := owned()
	if len(left) != 1 {
		t.Fatalf("after SIGKILL %d profiles of the dead broker remain, want the one it left", len(left))
	}
	if err := ss.StartBroker(client.Context(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Fatalf("the dead broker's profile %s is still there (%v)", filepath.Base(left[0]), err)
	}
	observed = "1 profile left by the killed broker; removed when the next broker started"
}
