package reliability

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/wire"
)

// orderArea is the RELIABILITY.md section of these cases.
const orderArea = "Start order (parts start in any order; the broker redeems through any replica)"

// brokerUpWithin bounds how long after the broker's socket accepts the first live
// answer may take: the worker dials the socket per view, so the next poll should do.
const brokerUpWithin = 5 * time.Second

// pollsDown polls agent n times while its broker is away: each answer must be 503 with
// the reason broker_down in replica A's metric and log, never live:false.
func pollsDown(t *testing.T, agent string, n int) string {
	t.Helper()
	var got []string
	for range n {
		before := client.UnavailableByReason(t)
		logged := len(logs.String())
		a := client.Poll(t, agent)
		reason := newReason(t, before, client.UnavailableByReason(t))
		got = append(got, a.Summary()+" ("+reason+")")
		if a.Status != http.StatusServiceUnavailable || strings.Contains(a.Body, `"live":false`) {
			t.Errorf("broker away: %s, want 503", a.Summary())
		}
		if reason != wire.ReasonBrokerDown {
			t.Errorf("broker away: reason %q, want %q", reason, wire.ReasonBrokerDown)
		}
		if line := `"reason":"` + reason + `"`; !strings.Contains(logs.String()[logged:], line) {
			t.Errorf("no log line of the 503 carries %s", line)
		}
	}
	return strings.Join(got, ", ")
}

// firstLive polls agent from the moment its broker's socket accepts (up) until a live
// answer, and returns it with how long after up it came and the polls it took.
func firstLive(t *testing.T, agent string, up time.Time) (string, time.Duration, int) {
	t.Helper()
	for polls := 1; ; polls++ {
		a := client.Poll(t, agent)
		took := time.Since(up)
		if a.Status == http.StatusOK && strings.HasPrefix(a.Body, `{"live":true`) {
			return a.Summary(), took, polls
		}
		if a.Status != http.StatusServiceUnavailable {
			t.Fatalf("broker up: %s, want a live answer (or 503 until then)", a.Summary())
		}
		if took > brokerUpWithin {
			t.Fatalf("no live answer %v after the broker's socket accepted (last %s)", took, a.Summary())
		}
	}
}

// frameAfterTab opens a tab on the demo site and polls once: a frame, described with
// how long after up it came and how long the poll itself took.
func frameAfterTab(t *testing.T, ss *stack.Session, agent string, up time.Time) string {
	t.Helper()
	if _, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": st.Site + "/account.html"}); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	a := client.Poll(t, agent)
	if a.Summary() != "200 frame" {
		t.Errorf("after a tab opened: %s, want a frame", a.Summary())
	}
	return fmt.Sprintf("%s %v after it (the poll after browser_open, which took %v)", a.Summary(),
		time.Since(up).Round(time.Millisecond), time.Since(opened).Round(time.Millisecond))
}

// channelsOpened counts the worker's "tool channel open" log lines of session id: one
// means the worker never reconnected.
func channelsOpened(id string) int {
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"session":"`+id+`"`) && strings.Contains(line, `"message":"tool channel open"`) {
			n++
		}
	}
	return n
}

// socketState says whether the broker's socket file is in dir.
func socketState(t *testing.T, dir string) string {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, wire.SocketName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "none"
	case err != nil:
		t.Fatal(err)
	case fi.Mode().Type() == fs.ModeSocket:
		return "socket"
	}
	return "other"
}

func TestPartsStartInAnyOrder(t *testing.T) {
	t.Run("worker_before_its_broker", func(t *testing.T) {
		observed := ""
		record(t, orderArea, "the worker's hello accepted before the broker process exists (browserView announced): every view 503 broker_down, never unsupported or live:false; once the broker's socket accepts, a live answer at the next poll and a frame once a tab opens — the worker never reconnects, nothing restarts", &observed)
		agent := client.NewAgent(t, "agent-o-late")
		ss := stacktest.StartSession(client.Context(t), t, st, agent, stack.SessionOptions{Replica: 1, BrokerProcess: true, BrokerLater: true})
		// StartSession returned after the owner accepted the hello: the broker is not
		// started yet, so the hello cannot have seen its socket.
		if s := socketState(t, ss.IPCDir); s != "none" || ss.BrokerPID() != 0 {
			t.Fatalf("before the broker: socket %s, broker pid %d", s, ss.BrokerPID())
		}
		cur, err := st.Sess.Get(client.Context(t), ss.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !cur.HasFeature(wire.FeatureBrowserView) {
			t.Fatalf("hello %+v without browserView", cur.Hello)
		}
		during := pollsDown(t, agent, 3)

		if err := ss.StartBroker(client.Context(t)); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		live, tookLive, polls := firstLive(t, agent, up)
		frame := frameAfterTab(t, ss, agent, up)
		opened := channelsOpened(ss.ID)
		if opened != 1 {
			t.Errorf("the worker opened its channel %d times, want once", opened)
		}
		if cur, err := st.Sess.Get(client.Context(t), ss.ID); err != nil || cur.Owner != st.Replicas[1].ID {
			t.Errorf("after the broker came: owner %q (%v), want %s", cur.Owner, err, st.Replicas[1].ID)
		}
		observed = fmt.Sprintf("hello with browserView before the broker; %s; broker up: %s %v after its socket accepted (poll %d), %s; %d channel opened",
			during, live, tookLive.Round(time.Millisecond), polls, frame, opened)
		t.Log(observed)
	})

	t.Run("broker_killed_and_started_again", func(t *testing.T) {
		observed := ""
		record(t, orderArea, "the broker process SIGKILLed (its socket left behind, refusing): every view 503 broker_down; a broker started again on the same IPC directory gives a live answer at the next poll and a frame once a tab opens — the worker never reconnects", &observed)
		agent := "agent-o-restart"
		ss := liveSession(t, agent, stack.SessionOptions{BrokerProcess: true})
		ss.KillBroker()
		left := socketState(t, ss.IPCDir)
		during := pollsDown(t, agent, 2)

		if err := ss.StartBroker(client.Context(t)); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		live, tookLive, polls := firstLive(t, agent, up)
		frame := frameAfterTab(t, ss, agent, up)
		opened := channelsOpened(ss.ID)
		if opened != 1 {
			t.Errorf("the worker opened its channel %d times, want once", opened)
		}
		observed = fmt.Sprintf("socket left behind: %s; %s; broker started again: %s %v after its socket accepted (poll %d), %s; %d channel opened",
			left, during, live, tookLive.Round(time.Millisecond), polls, frame, opened)
		t.Log(observed)
	})

	t.Run("first_API_URL_of_the_broker_down", func(t *testing.T) {
		observed := ""
		record(t, orderArea, "the broker's AGENTFY_API_URL lists a replica that refuses connections (a stopped api-a) before the live one: every view still a frame, redeemed through the next URL", &observed)
		agent := "agent-o-api-down"
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		liveSession(t, agent, stack.SessionOptions{BrokerProcess: true, BrokerAPIURLs: []string{down.URL, st.Replicas[1].URL}})
		var got []string
		for range 2 {
			a := client.Poll(t, agent)
			got = append(got, a.Summary())
			if a.Summary() != "200 frame" {
				t.Errorf("first API URL down: %s, want a frame", a.Summary())
			}
		}
		observed = "a frame at the start, then " + strings.Join(got, ", ")
	})
}
