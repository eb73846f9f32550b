package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// Faults found and fixed once, each broken again here on the suite's stack: a worker
// that stops answering pings, a status event that repeats the last one, a session check
// the replica's Redis user may not make, and a partner key revoked during a capture.

// TestWorkerThatStopsAnsweringPings: a worker that says its hello and then never reads
// again (a hung process, a half-open connection) is dropped by its replica within the
// ping interval and timeout; its agent's views are then 503 no_channel, never a wait
// on a dead socket, and the suite's other workers are untouched.
func TestWorkerThatStopsAnsweringPings(t *testing.T) {
	observed := ""
	bound := channel.PingInterval + channel.PingTimeout
	testenv.SkipSlowUnderShort(t, fmt.Sprintf("waits out the ping interval and timeout (%v)", bound))
	record(t, "Faults", fmt.Sprintf("dropped within %v, logged; then its views 503 no_channel", bound), &observed)
	agent := client.NewAgent(t, "agent-silent")
	sess, passes, err := st.Sess.Start(client.Context(t), agent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = st.Sess.Stop(context.Background(), sess.ID, "test") })
	url := "ws" + strings.TrimPrefix(st.Replicas[1].URL, "http") + "/v1/worker/channel"
	ctx := testenv.Context(t, 2*bound)
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + passes.Worker}}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	hello, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": jsonrpc.MethodHello,
		"params": map[string]any{"imageTag": "silent", "bootstrapRevision": 2, "capabilities": []string{wire.FeatureBrowserView}}})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		t.Fatal(err)
	}
	if _, data, err := ws.Read(ctx); err != nil || !strings.Contains(string(data), `"result"`) {
		t.Fatalf("hello: %s %v", data, err)
	}
	held := st.Replicas[1].Hub.Conns()
	logged := len(logs.String())
	start := time.Now()
	// From here on nothing reads the socket: no pong is ever sent.
	testenv.WaitFor(t, bound+5*time.Second, "the replica to drop the silent worker", func() bool {
		return strings.Contains(logs.String()[logged:], "worker did not answer a ping")
	})
	took := time.Since(start)
	testenv.WaitFor(t, 5*time.Second, "the connection count to fall", func() bool { return st.Replicas[1].Hub.Conns() == held-1 })
	before := client.UnavailableByReason(t)
	a := client.Poll(t, agent)
	reason := newReason(t, before, client.UnavailableByReason(t))
	observed = fmt.Sprintf("dropped after %v, logged; then its views %s %s", took.Round(time.Second), a.Summary(), reason)
	if took > bound+5*time.Second || a.Status != http.StatusServiceUnavailable || reason != wire.ReasonNoChannel {
		t.Errorf("got %s", observed)
	}
}

// TestStatusEventRepeated: a status event that repeats the last one a stream sent (the
// feed's listen-then-read race) is left out: a stream tells changes only.
func TestStatusEventRepeated(t *testing.T) {
	observed := ""
	record(t, "Faults", "the stream says running, then idle: the repeated running is left out", &observed)
	agent := client.NewAgent(t, "agent-repeat")
	sess, _, err := st.Sess.Start(client.Context(t), agent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = st.Sess.Stop(context.Background(), sess.ID, "test") })
	ctx := testenv.Context(t, 30*time.Second)
	stream := stacktest.StatusStream(ctx, t, st.Replicas[0].URL, agent, client.Token(t, "u-alice"))
	var said []string
	next := func() {
		select {
		case ev := <-stream:
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			said = append(said, string(ev.Status))
		case <-ctx.Done():
			t.Fatal("the stream said nothing")
		}
	}
	next()
	st.Replicas[0].Feed.Publish(ctx, session.Event{AgentID: agent, SessionID: sess.ID, Status: session.Running, At: time.Now()})
	st.Replicas[0].Feed.Publish(ctx, session.Event{AgentID: agent, SessionID: sess.ID, Status: session.Idle, At: time.Now()})
	next()
	observed = fmt.Sprintf("the stream says %s", strings.Join(said, ", then "))
	if strings.Join(said, ",") != "running,idle" {
		t.Errorf("got %s", observed)
	} else {
		observed += ": the repeated running is left out"
	}
}

// TestSessionCheckRefused: the session checks run as the replica's Redis user; a read
// that user may not make (an ACL changed under it; before, an HMGET it was never
// granted) fails every check. It must say so in the log, once a tick, and stop no
// session; with the grant back, the checks go on.
func TestSessionCheckRefused(t *testing.T) {
	observed := ""
	record(t, "Faults", "logged (session check failed); the session running or idle, never stopped; with the grant back, its views 200 frame", &observed)
	ss := liveSession(t, "agent-check", stack.SessionOptions{})
	admin := st.AdminClient()
	ctx := client.Context(t)
	// Take HMGET (what the checks read with) from the replicas' user, on the one server
	// the suite runs.
	if err := admin.Do(ctx, "ACL", "SETUSER", deploy.RedisReplica, "-hmget").Err(); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := admin.Do(context.Background(), "ACL", "SETUSER", deploy.RedisReplica, "+hmget").Err(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	logged := len(logs.String())
	testenv.WaitFor(t, 10*time.Second, "a logged session check failure", func() bool {
		return strings.Contains(logs.String()[logged:], "session check failed")
	})
	restore()
	got, err := st.Sess.Get(ctx, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := client.Poll(t, "agent-check")
	status := "running or idle, never stopped"
	if got.Stopped {
		status = "stopped (" + got.StopReason + ")"
	}
	observed = fmt.Sprintf("logged (session check failed); the session %s; with the grant back, its views %s", status, a.Summary())
	if got.Stopped || a.Summary() != "200 frame" {
		t.Errorf("got %s", observed)
	}
}

// TestPartnerKeyRevokedDuringCapture: the re-check before a frame leaves finds the
// partner's key revoked meanwhile: 404, access revoked (SPEC §3.9), never a frame and
// never a 401 that ends the partner's watch as if the key had never been good.
func TestPartnerKeyRevokedDuringCapture(t *testing.T) {
	observed := ""
	record(t, "Access (Cache-Control: no-store on every answer)", "404, no frame", &observed)
	liveSession(t, "agent-revoked", stack.SessionOptions{})
	ctx := client.Context(t)
	key, orgKey, err := st.Creds.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	views := st.Replicas[0]
	t.Cleanup(func() { views.SetHooks(nil) })
	views.SetHooks(&stack.Hooks{OnReply: func(b []byte) []byte {
		if _, err := st.Creds.RevokeOrgKey(ctx, "org-acme", orgKey.ID); err != nil {
			t.Error(err)
		}
		return b
	}})
	client.OpenGate(t, "agent-revoked")
	a := client.Do(t, http.MethodGet, client.PartnerViewURL(0, "org-acme", "agent-revoked"), key, nil)
	observed = a.Summary()
	if a.Status == http.StatusNotFound && !strings.Contains(a.Body, `"data"`) {
		observed += ", no frame"
	} else {
		t.Errorf("got %s", observed)
	}
}
