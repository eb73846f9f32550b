package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/openapi"
)

// replicaA and replicaB: requests go to A, workers attach to B.
func replicaA() string { return st.Replicas[0].URL }

func startSession(t *testing.T, agent string, o stack.SessionOptions) *stack.Session {
	t.Helper()
	o.Replica = 1
	ss := stacktest.StartSession(client.Context(t), t, st, agent, o)
	return ss
}

func TestFrameOfTheOpenedPage(t *testing.T) {
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{})
	if _, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": st.Site + "/"}); err != nil {
		t.Fatal(err)
	}

	// Watch the namespace on NATS while viewing, as a person does with the debug user.
	// Every role may publish only inside the namespace (a replica's reply outside it
	// would be refused by the server and the view would fail), so what this subscriber
	// sees is the whole conversation.
	watcher, err := st.ConnectNATS(bus.RoleDebug, "watcher")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Close)
	onBus := stacktest.Watch(t, watcher, st.NS.Wildcard())

	r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice"))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	res := r.Result(t)
	if !res.Live || res.Page == nil {
		t.Fatalf("result %.200s", r.Body)
	}
	if res.Page.URL != st.Site+"/" || res.Page.Title != "Northwind Supplies — Home" || res.Page.ContentType != "image/jpeg" {
		t.Fatalf("page url %q title %q type %q", res.Page.URL, res.Page.Title, res.Page.ContentType)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", res.Page.CapturedAt); err != nil {
		t.Fatalf("capturedAt %q: %v", res.Page.CapturedAt, err)
	}
	img := stacktest.DecodeFrame(t, res.Page)
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() < 700 || b.Dy() > 900 {
		t.Fatalf("frame size %v, want the 1280×800 viewport", b)
	}
	// The header of the demo page is blue (#2f5bea).
	if r, g, b, _ := img.At(40, 10).RGBA(); b>>8 <= 180 || r>>8 >= 90 || g>>8 >= 130 {
		t.Fatalf("pixel at the header is %d,%d,%d; want the page's blue", r>>8, g>>8, b>>8)
	}

	// The partner route gives the same kind of answer.
	key, _, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	client.OpenGate(t, agent)
	r = client.Get(t, replicaA(), stacktest.PartnerViewPath("org-acme", agent), key)
	if res := r.Result(t); r.Status != http.StatusOK || res.Page == nil || res.Page.Title != "Northwind Supplies — Home" {
		t.Fatalf("partner view: %d %.200s", r.Status, r.Body)
	}

	// And one tool call, which travels sealed too.
	if _, err := ss.Tool(client.Context(t), "browser_tabs", struct{}{}); err != nil {
		t.Fatal(err)
	}
	// Every message of those requests was processed by the server before their replies
	// reached the requesters: the watcher has them all.
	seen := onBus.Messages(t)
	raw, _ := stacktest.DecodeBase64(res.Page.Data)
	var viewRequests, envelopes, acks, toolRequests, toolReplies int
	prefix := st.NS.Prefix() + "."
	for _, m := range seen {
		if !strings.HasPrefix(m.Subject, prefix) {
			t.Fatalf("message on %s, outside the namespace %s", m.Subject, prefix)
		}
		data := string(m.Data)
		// A JPEG in base64 begins "/9j/"; a JSON string that begins so is a frame in clear.
		// (The four characters alone turn up by chance in 48 KB of ciphertext's base64,
		// about once in 300 views: CI saw it.)
		for _, secret := range []string{st.Site, "Northwind", res.Page.Data[:64], string(raw[:64]), `"/9j/`} {
			if strings.Contains(data, secret) {
				t.Fatalf("NATS message on %s carries frame data (%q…)", m.Subject, secret[:min(16, len(secret))])
			}
		}
		switch {
		case strings.HasPrefix(m.Subject, prefix+bus.AuditToken+"."):
			// The views' audit events (audit_test.go checks them): ids, no frame data.
		case strings.Contains(m.Subject, ".view."):
			if _, err := hex.DecodeString(data); err != nil || len(data) != 64 {
				t.Fatalf("view request on %s is not just a request id: %.100q", m.Subject, data)
			}
			viewRequests++
		case strings.Contains(m.Subject, ".tool."):
			toolRequests++
		case strings.HasPrefix(m.Subject, st.NS.InboxPrefix(bus.RoleReplica)+"."):
			var reply struct {
				Envelope map[string]string `json:"envelope"`
				Stream   string            `json:"stream"`
				Seq      uint64            `json:"seq"`
			}
			switch err := json.Unmarshal(m.Data, &reply); {
			case err == nil && len(reply.Envelope) == 4:
				envelopes++
			case err == nil && reply.Stream == bus.AuditStream && reply.Seq > 0:
				acks++ // the audit stream's acknowledgement of an event
			default:
				t.Fatalf("reply on %s is neither an envelope nor the audit stream's ack: %.100q", m.Subject, data)
			}
		case strings.HasPrefix(m.Subject, st.NS.InboxPrefix(bus.RoleOperator)+"."):
			toolReplies++
		}
	}
	// Each frame's event was acknowledged before its frame was answered; the stream
	// acknowledges other events meanwhile too (an earlier test's refusals, released at
	// the end of their second), so at least two.
	if viewRequests != 2 || envelopes != 2 || acks < 2 || toolRequests != 1 || toolReplies != 1 {
		t.Fatalf("saw %d view requests, %d envelopes, %d acks of audit events, %d tool requests and %d tool replies in the namespace, want 2, 2, at least 2, 1 and 1",
			viewRequests, envelopes, acks, toolRequests, toolReplies)
	}
}

func TestNoTabIsPageNull(t *testing.T) {
	agent := client.NewAgent(t, "")
	startSession(t, agent, stack.SessionOptions{})
	r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-bob"))
	if r.Status != http.StatusOK || r.Body != "{\"live\":true,\"page\":null}\n" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

// TestNoSessionIsNotLive: a request that finds no session is not a capture request
// (SPEC §3.2): polled as fast as anyone likes, by a member and a partner on both
// replicas, the agent answers live:false every time, and no window or pace is taken —
// so the first view of a new session passes at once.
func TestNoSessionIsNotLive(t *testing.T) {
	agent := client.NewAgent(t, "")
	key, _, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		r := client.Get(t, st.Replicas[i%2].URL, stacktest.ViewPath(agent), client.Token(t, "u-alice"))
		p := client.Get(t, st.Replicas[(i+1)%2].URL, stacktest.PartnerViewPath("org-acme", agent), key)
		for _, a := range []stacktest.Response{r, p} {
			if a.Status != http.StatusOK || a.Body != "{\"live\":false}\n" {
				t.Fatalf("poll %d: %d %s", i, a.Status, a.Body)
			}
		}
	}
	keys := keyspace.For("dev")
	if n, err := st.AdminClient().Exists(client.Context(t), keys.Gate(agent), keys.Pace(agent, "user:u-alice")).Result(); err != nil || n != 0 {
		t.Fatalf("polling an agent without a session took %d gate keys (%v)", n, err)
	}
	startSession(t, agent, stack.SessionOptions{})
	if r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice")); r.Status != http.StatusOK || r.Body != "{\"live\":true,\"page\":null}\n" {
		t.Fatalf("the first view of the new session: %d %s", r.Status, r.Body)
	}
}

func TestRechecksAfterCapture(t *testing.T) {
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{})
	if _, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": st.Site + "/account.html"}); err != nil {
		t.Fatal(err)
	}
	views := st.Replicas[0]
	t.Cleanup(func() { views.SetHooks(nil) })

	// Membership revoked while the capture runs: 404, no frame.
	views.SetHooks(&stack.Hooks{OnReply: func(b []byte) []byte {
		if err := st.Dir.RemoveMember(client.Context(t), "team-atlas", "u-bob"); err != nil {
			t.Error(err)
		}
		return b
	}})
	t.Cleanup(func() { _ = st.Dir.AddMember(client.Context(t), "team-atlas", "u-bob") })
	r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-bob"))
	if r.Status != http.StatusNotFound || strings.Contains(r.Body, "data") {
		t.Fatalf("revoked during capture: %d %.200s", r.Status, r.Body)
	}
	if err := st.Dir.AddMember(client.Context(t), "team-atlas", "u-bob"); err != nil {
		t.Fatal(err)
	}

	// The partner's key revoked while the capture runs: 404 (access revoked meanwhile,
	// SPEC §3.9), not 401, and no frame.
	client.OpenGate(t, agent)
	key, orgKey, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	views.SetHooks(&stack.Hooks{OnReply: func(b []byte) []byte {
		if _, err := st.Creds.RevokeOrgKey(client.Context(t), "org-acme", orgKey.ID); err != nil {
			t.Error(err)
		}
		return b
	}})
	r = client.Get(t, replicaA(), stacktest.PartnerViewPath("org-acme", agent), key)
	if r.Status != http.StatusNotFound || strings.Contains(r.Body, "data") {
		t.Fatalf("partner key revoked during capture: %d %.200s, want 404", r.Status, r.Body)
	}

	// Session stopped while the capture runs: live:false, never a frame.
	client.OpenGate(t, agent)
	views.SetHooks(&stack.Hooks{OnReply: func(b []byte) []byte {
		if err := ss.Stop(client.Context(t)); err != nil {
			t.Error(err)
		}
		return b
	}})
	r = client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice"))
	if r.Status != http.StatusOK || r.Body != "{\"live\":false}\n" {
		t.Fatalf("stopped during capture: %d %.200s", r.Status, r.Body)
	}
}

func TestGateAcrossReplicas(t *testing.T) {
	agent := client.NewAgent(t, "")
	startSession(t, agent, stack.SessionOptions{}) // only a request that finds a session meets the gate
	member := client.Token(t, "u-alice")
	if r := client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(agent), member); r.Status != http.StatusOK {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	r := client.Get(t, st.Replicas[1].URL, stacktest.ViewPath(agent), member)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "3" {
		t.Fatalf("the same member within 2 s on the other replica: %d Retry-After=%q %s, want 429 with the 3-s pace's time left", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	r = client.Get(t, st.Replicas[1].URL, stacktest.ViewPath(agent), client.Token(t, "u-bob"))
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "2" {
		t.Fatalf("another member within 2 s on the other replica: %d Retry-After=%q %s, want 429 with the window", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
}

func TestUnavailable(t *testing.T) {
	member := client.Token(t, "u-alice")

	t.Run("no replica holds the socket", func(t *testing.T) {
		agent := client.NewAgent(t, "")
		if _, _, err := st.Sess.Start(client.Context(t), agent); err != nil {
			t.Fatal(err)
		}
		r := client.Get(t, replicaA(), stacktest.ViewPath(agent), member)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("worker image without the browserView feature", func(t *testing.T) {
		agent := client.NewAgent(t, "")
		ss := startSession(t, agent, stack.SessionOptions{Shell: true, ImageTag: "shell:1.0"})
		r := client.Get(t, replicaA(), stacktest.ViewPath(agent), member)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		// Capture never restarts the session.
		cur, err := st.Sess.Current(client.Context(t), agent)
		if err != nil || cur.ID != ss.ID || cur.Hello.ImageTag != "shell:1.0" {
			t.Fatalf("session after a refused view: %+v %v", cur, err)
		}
	})
	t.Run("broker socket gone", func(t *testing.T) {
		// The hello listed browserView, but by the time a view arrives the worker has no
		// broker socket any more: 503 (broker_down), and the session lives on.
		agent := client.NewAgent(t, "")
		ss := startSession(t, agent, stack.SessionOptions{BrokerHandler: http.NotFoundHandler()})
		if err := os.Remove(filepath.Join(ss.IPCDir, "browser.sock")); err != nil {
			t.Fatal(err)
		}
		r := client.Get(t, replicaA(), stacktest.ViewPath(agent), member)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if cur, err := st.Sess.Current(client.Context(t), agent); err != nil || cur.ID != ss.ID {
			t.Fatalf("session after a view without a broker: %+v %v", cur, err)
		}
	})
	t.Run("worker socket gone", func(t *testing.T) {
		agent := client.NewAgent(t, "")
		ss := startSession(t, agent, stack.SessionOptions{})
		ss.StopWorker()
		waitOwner(t, ss.ID, "")
		r := client.Get(t, replicaA(), stacktest.ViewPath(agent), member)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
}

// waitOwner waits until Redis names owner as the session's replica.
func waitOwner(t *testing.T, sessionID, owner string) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, "owner "+owner, func() bool {
		s, err := st.Sess.Get(client.Context(t), sessionID)
		return err == nil && s.Owner == owner
	})
}

func TestServiceRoutes(t *testing.T) {
	for _, r := range st.Replicas {
		for path, want := range map[string]string{"/healthz": `{"ok":true}`, "/readyz": `{"ok":true}`} {
			req, _ := http.NewRequestWithContext(client.Context(t), http.MethodGet, r.URL+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != want {
				t.Fatalf("%s%s: %d %s", r.URL, path, resp.StatusCode, b)
			}
		}
		req, _ := http.NewRequestWithContext(client.Context(t), http.MethodGet, r.URL+"/openapi.yaml", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, openapi.Document) {
			t.Fatalf("/openapi.yaml: %d, %d bytes", resp.StatusCode, len(b))
		}
	}
}

// TestSessionStartIsQuietOnTheBus: what a new session puts on NATS, as a person watching
// with the debug user sees it, holds no error — the harness's readiness probe is the
// view subject's ping, an empty request answered empty.
func TestSessionStartIsQuietOnTheBus(t *testing.T) {
	watcher, err := st.ConnectNATS(bus.RoleDebug, "watcher")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Close)
	onBus := stacktest.Watch(t, watcher, st.NS.Wildcard())
	ss := startSession(t, client.NewAgent(t, ""), stack.SessionOptions{Shell: true})
	if err := st.Bus.Flush(); err != nil {
		t.Fatal(err)
	}
	viewSubject, _ := st.NS.Subject(bus.VerbView, ss.ID)
	pings, replies := 0, 0
	for _, m := range onBus.Messages(t) {
		if code := m.Header.Get(bus.HeaderErrorCode); code != "" {
			t.Fatalf("%s carries error %q (%s)", m.Subject, code, m.Header.Get(bus.HeaderErrorDescription))
		}
		switch {
		case m.Subject == viewSubject && len(m.Data) == 0:
			pings++
		case strings.HasPrefix(m.Subject, st.NS.InboxPrefix(bus.RoleReplica)+".") && len(m.Data) == 0:
			replies++
		}
	}
	// A ping sent before the owner subscribed finds no responder (the harness sends
	// another); every answered one is answered empty.
	if pings == 0 || replies == 0 || replies > pings {
		t.Fatalf("saw %d pings and %d empty replies", pings, replies)
	}
}
