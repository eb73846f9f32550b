package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/worker"
)

// TestPollingDoesNotKeepASessionAlive polls an agent every second for 30 s without any
// tool call: the session still goes idle and stops on time, the views never touch the
// activity log, and every replica's status feed tells.
func TestPollingDoesNotKeepASessionAlive(t *testing.T) {
	t.Parallel()
	const idleAfter, stopAfter = 10 * time.Second, 20 * time.Second
	c := client.Context(t)
	s2 := stacktest.Start(t, stack.Options{
		Policy: session.Policy{IdleAfter: idleAfter, StopAfter: stopAfter}, Tick: 100 * time.Millisecond,
		Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel),
	}).St
	member, err := s2.Token("u-alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	feedCtx, stopFeed := context.WithTimeout(context.Background(), time.Minute)
	defer stopFeed()
	events := stacktest.StatusStream(feedCtx, t, s2.Replicas[0].URL, "agent-scout", member)
	if ev := <-events; ev.Status != session.Stopped || ev.Live {
		t.Fatalf("first event before any session: %v", ev)
	}

	ss := stacktest.LiveSession(c, t, s2, "agent-scout", stack.SessionOptions{Replica: 1}, "/catalog.html")
	sess, err := s2.Sess.Get(c, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	lastTool := sess.LastToolAt

	// Record each status change with the time it arrived, while polling.
	type change struct {
		status string
		at     time.Duration
	}
	changes := make(chan change, 16)
	go func() {
		last := ""
		for ev := range events {
			if status := string(ev.Status); status != last {
				last = status
				changes <- change{status, time.Since(lastTool)}
			}
		}
		close(changes)
	}()

	type sample struct {
		at     time.Duration
		status int
		live   bool
	}
	var samples []sample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range 30 {
		<-tick.C
		req, _ := http.NewRequestWithContext(c, http.MethodGet, s2.Replicas[0].URL+stacktest.ViewPath("agent-scout"), nil)
		req.Header.Set("Authorization", "Bearer "+member)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Live bool }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		samples = append(samples, sample{time.Since(lastTool), resp.StatusCode, body.Live})
	}
	stopFeed()

	// The feed said running, then idle after 10 s, then stopped after 20 s (the replica
	// checks every 100 ms; allow a second for scheduling on a loaded machine).
	var got []change
	for ch := range changes {
		got = append(got, ch)
	}
	if len(got) != 3 || got[0].status != "running" || got[1].status != "idle" || got[2].status != "stopped" {
		t.Fatalf("status changes %+v, want running, idle, stopped", got)
	}
	if got[1].at < idleAfter || got[1].at > idleAfter+time.Second {
		t.Errorf("idle reported %v after the last tool call, want %v", got[1].at, idleAfter)
	}
	if got[2].at < stopAfter || got[2].at > stopAfter+time.Second {
		t.Errorf("stop reported %v after the last tool call, want %v", got[2].at, stopAfter)
	}
	var frames, notLive int
	for _, s := range samples {
		switch {
		case s.status == http.StatusOK && s.live:
			frames++
			if s.at > stopAfter+time.Second {
				t.Fatalf("a frame %v after the last tool call, past the idle timeout", s.at)
			}
		case s.status == http.StatusOK && !s.live:
			notLive++
			if s.at < stopAfter {
				t.Fatalf("live:false %v after the last tool call, before the idle timeout", s.at)
			}
		case s.status == http.StatusTooManyRequests:
		default:
			t.Fatalf("poll at %v answered %d", s.at, s.status)
		}
	}
	// Polls every second against a 2 s gate: about half pass, on either side of the stop.
	if frames < 4 || notLive < 2 {
		t.Fatalf("%d frames and %d live:false answers over 30 polls", frames, notLive)
	}
	after, err := s2.Sess.Get(c, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Stopped || after.StopReason != "idle timeout" || !after.LastToolAt.Equal(lastTool) {
		t.Fatalf("session after polling: stopped=%v reason=%q lastTool moved=%v", after.Stopped, after.StopReason, !after.LastToolAt.Equal(lastTool))
	}
	log, err := s2.Sess.ActivityLog(c, ss.ID)
	if err != nil || len(log) != 1 || log[0].Tool != "browser_open" {
		t.Fatalf("activity log = %+v %v; views must add nothing", log, err)
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	t.Parallel()
	s2 := stacktest.Start(t, stack.Options{Log: zerolog.New(os.Stderr).Level(zerolog.Disabled)}).St
	member, _ := s2.Token("u-alice", time.Hour)
	s2.Redis.Stop()
	for _, path := range []string{stacktest.ViewPath("agent-scout"), stacktest.PartnerViewPath("org-acme", "agent-scout")} {
		bearer := member
		if strings.HasPrefix(path, "/v1/orgs") {
			bearer = "afk_0123456789abcdef_" + strings.Repeat("ab", 32)
		}
		r := client.Get(t, s2.Replicas[0].URL, path, bearer)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s with Redis down: %d %s", path, r.Status, r.Body)
		}
	}
}

// TestWorkerEndsItsSession: the worker's own end-of-session close stops the session —
// recorded with its reason, told on every replica's status feed, and the view says
// live:false — unlike a lost socket, which never does.
func TestWorkerEndsItsSession(t *testing.T) {
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{Shell: true})
	c, cancel := context.WithCancel(client.Context(t))
	defer cancel()
	stream := stacktest.StatusStream(c, t, replicaA(), agent, client.Token(t, "u-alice"))
	if ev := <-stream; !ev.Live {
		t.Fatalf("first event %v", ev)
	}
	if err := ss.EndWorker(client.Context(t)); !errors.Is(err, worker.ErrSessionEnded) {
		t.Fatalf("worker ended with %v", err)
	}
	select {
	case ev := <-stream:
		if ev.Status != session.Stopped || ev.Live {
			t.Fatalf("status event %v, want stopped", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the status feed did not say stopped")
	}
	sess, err := st.Sess.Get(client.Context(t), ss.ID)
	if err != nil || !sess.Stopped || sess.StopReason != "worker ended" {
		t.Fatalf("session %+v (%v)", sess, err)
	}
	if r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice")); r.Status != http.StatusOK || r.Body != "{\"live\":false}\n" {
		t.Fatalf("view after the worker ended: %d %s", r.Status, r.Body)
	}
}
