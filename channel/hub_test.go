package channel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// servers are the real servers one test shares between its hubs.
type servers struct {
	redis *redisserver.Server
	owner *nats.Conn // the hub's connection
	other *nats.Conn // another replica's connection
}

func startServers(t *testing.T) *servers {
	t.Helper()
	ns := testenv.NATS(t)
	return &servers{redis: testenv.Redis(t), owner: testenv.NATSConn(t, ns), other: testenv.NATSConn(t, ns)}
}

// eventLog records the status events a hub publishes.
type eventLog chan session.Event

func (e eventLog) Publish(_ context.Context, ev session.Event) {
	select {
	case e <- ev:
	default:
	}
}

// hubEnv is one replica's worker hub on a real Redis (its own deployment), a real NATS
// server and a real HTTP server.
type hubEnv struct {
	rdb      redis.UniversalClient
	creds    *auth.Store
	sessions *session.Store
	features *view.Grants
	ns       bus.Namespace
	other    *nats.Conn
	hub      *Hub
	url      string
	events   eventLog
	clock    *testenv.Clock
	relays   *testenv.Clock // the hub's relay clock (Config.RelayClock)
}

// refillPace fills the relay pace of the hub's connections, as if each had been quiet
// for a while: it moves the hub's relay clock on by the time the pace takes to fill,
// and no other clock.
func (e *hubEnv) refillPace() {
	e.relays.Advance(time.Duration(float64(RelayBurst) / float64(RelayRate) * float64(time.Second)))
}

// newHubEnv starts a hub; sessions, when not nil, replaces the session store the hub
// uses (the test's own store stays on the real Redis).
func newHubEnv(t *testing.T, s *servers, hubSessions func(*hubEnv) *session.Store) *hubEnv {
	t.Helper()
	dep := testenv.Deployment(t)
	e := &hubEnv{rdb: testenv.RedisClient(t, s.redis, 0), events: make(eventLog, 16), clock: testenv.NewClock(time.Now()), relays: testenv.NewClock(time.Now()), other: s.other}
	e.creds = auth.NewStore(e.rdb, dep, nil)
	e.sessions = session.NewStore(e.rdb, e.creds, dep, session.Policy{}, e.clock.Now)
	e.features = view.NewGrants(e.rdb, dep, view.GrantKeys{make([]byte, view.GrantKeyBytes)}, 0)
	ns, err := bus.NewNamespace(dep, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.ns = ns
	sessions := e.sessions
	if hubSessions != nil {
		sessions = hubSessions(e)
	}
	e.hub = NewHub(Config{
		ReplicaID: "r1", Creds: e.creds, Sessions: sessions, Grants: e.features, NATS: s.owner,
		Namespace: ns, Events: e.events, Log: testenv.Logger(t), Now: e.clock.Now, RelayClock: e.relays.Now,
	})
	srv := httptest.NewServer(e.hub)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.hub.Close(ctx)
	})
	e.url = "ws" + strings.TrimPrefix(srv.URL, "http") + wire.ChannelPath
	return e
}

// start starts a session of a new agent.
func (e *hubEnv) start(t *testing.T, ctx context.Context) (session.Session, session.Passes) {
	t.Helper()
	sess, passes, err := e.sessions.Start(ctx, "agent-"+randomHex(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	return sess, passes
}

// dial opens a worker socket with token; it returns the upgrade's status on refusal.
func (e *hubEnv) dial(t *testing.T, ctx context.Context, token string) (*websocket.Conn, int) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ws, resp, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: h})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return nil, resp.StatusCode
	}
	ws.SetReadLimit(jsonrpc.MaxMessage)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws, http.StatusSwitchingProtocols
}

// refused dials with token, wants the upgrade refused, and returns the refusal's
// status and its JSON error body.
func (e *hubEnv) refused(t *testing.T, ctx context.Context, token string) (int, wire.ErrorBody) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ws, resp, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		_ = ws.CloseNow()
		t.Fatal("the upgrade was not refused")
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		t.Fatal(err)
	}
	var body wire.ErrorBody
	if err := wire.DecodeStrict(b, &body); err != nil || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("refusal %d %q (%s): not the JSON error body: %v", resp.StatusCode, b, resp.Header.Get("Content-Type"), err)
	}
	return resp.StatusCode, body
}

// attach dials with the worker pass and says hello with caps.
func (e *hubEnv) attach(t *testing.T, ctx context.Context, sess session.Session, pass string, features []string) *websocket.Conn {
	t.Helper()
	ws, status := e.dial(t, ctx, pass)
	if ws == nil {
		t.Fatalf("upgrade refused with %d", status)
	}
	send(t, ctx, ws, must(jsonrpc.NewRequest(1, jsonrpc.MethodHello, jsonrpc.HelloParams{ImageTag: "worker:test", BootstrapRevision: wire.BootstrapRevision, Features: features})))
	m := receive(t, ctx, ws)
	var res jsonrpc.HelloResult
	if !m.IsResponse() || m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.SessionID != sess.ID {
		t.Fatalf("hello answered %+v %s, want the session id", m.Error, m.Result)
	}
	return ws
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func send(t *testing.T, ctx context.Context, ws *websocket.Conn, b []byte) {
	t.Helper()
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func receive(t *testing.T, ctx context.Context, ws *websocket.Conn) *jsonrpc.Message {
	t.Helper()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	m, err := jsonrpc.Parse(data)
	if err != nil {
		t.Fatalf("hub sent %s: %v", data, err)
	}
	return m
}

// closeStatus reads until the socket ends and returns its close status.
func closeStatus(ctx context.Context, ws *websocket.Conn) websocket.StatusCode {
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// watchClose reads ws on its own goroutine, so that a close the hub starts completes its
// handshake at once, and delivers the close status.
func watchClose(ctx context.Context, ws *websocket.Conn) <-chan websocket.StatusCode {
	out := make(chan websocket.StatusCode, 1)
	go func() { out <- closeStatus(ctx, ws) }()
	return out
}

// closed waits for the status watchClose delivers.
func closed(t *testing.T, ctx context.Context, c <-chan websocket.StatusCode) websocket.StatusCode {
	t.Helper()
	select {
	case st := <-c:
		return st
	case <-ctx.Done():
		t.Fatal("the socket was not closed")
		return 0
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// The upgrade is refused before any socket for anything but a live session's worker
// pass: 401 when the pass is unknown or the session over, 403 for a broker pass.
func TestHubRefusesCredentials(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 30*time.Second)

	live, livePasses := e.start(t, ctx)
	stopped, stoppedPasses := e.start(t, ctx)
	if _, err := e.sessions.Stop(ctx, stopped.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"no credential", "", http.StatusUnauthorized},
		{"garbage", "not-a-pass", http.StatusUnauthorized},
		{"broker pass", livePasses.Broker, http.StatusForbidden},
		{"stopped session", stoppedPasses.Worker, http.StatusUnauthorized},
		{"pass with a flipped character", livePasses.Worker[:len(livePasses.Worker)-1] + flip(livePasses.Worker[len(livePasses.Worker)-1]), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ws, status := e.dial(t, ctx, tt.token); ws != nil || status != tt.want {
				t.Fatalf("upgrade answered %d, want %d", status, tt.want)
			}
		})
	}
	if got, err := e.sessions.Get(ctx, live.ID); err != nil || got.Owner != "" || got.Stopped {
		t.Fatalf("session after refusals: %+v %v, want untouched", got, err)
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

// A worker returning after the idle timeout finds its session stopped: the stop is
// recorded (and announced) by the replica that refuses it.
func TestHubStopsIdleSessionOnReturn(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 30*time.Second)
	sess, passes := e.start(t, ctx)
	e.clock.Advance(session.DefaultPolicy.StopAfter + time.Second)

	if status, body := e.refused(t, ctx, passes.Worker); status != http.StatusUnauthorized || body != wire.FailChannelSessionEnded.Row().Body() {
		t.Fatalf("upgrade answered %d %+v, want 401 and the session's end", status, body)
	}
	got, err := e.sessions.Get(ctx, sess.ID)
	if err != nil || !got.Stopped || got.StopReason != "idle timeout" {
		t.Fatalf("session %+v %v, want stopped for idle timeout", got, err)
	}
	select {
	case ev := <-e.events:
		if ev.SessionID != sess.ID || ev.Status != session.Stopped {
			t.Fatalf("event %+v, want the session stopped", ev)
		}
	default:
		t.Fatal("no stop event")
	}
	if _, err := e.creds.VerifyPass(ctx, passes.Worker, auth.RoleWorker); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("worker pass after the stop: %v, want revoked", err)
	}
}

// BUG: when the session store cannot be read after the pass was verified (a Redis blip,
// a failover), ServeHTTP answers 401 "session is not live". A worker reads 401 as the
// end of its session (worker.ErrSessionEnded) and exits for good, although the session
// is live: views answer no_channel until it idles out. A failure to read should be 503,
// which the worker retries.
func TestHubSessionStoreDownIsUnavailable(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	dead := testenv.Redis(t)
	deadClient := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{dead.Addr()}, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = deadClient.Close() })
	dead.Stop()
	e := newHubEnv(t, s, func(e *hubEnv) *session.Store {
		return session.NewStore(deadClient, e.creds, e.ns.Deployment(), session.Policy{}, e.clock.Now)
	})
	ctx := testenv.Context(t, 30*time.Second)
	_, passes := e.start(t, ctx)
	if status, body := e.refused(t, ctx, passes.Worker); status != http.StatusServiceUnavailable || body != wire.FailChannelUnavailable.Row().Body() {
		t.Fatalf("upgrade with the session store down answered %d %+v, want 503 (a 401 ends the worker for good)", status, body)
	}
}

// A first message that is not an acceptable hello ends the socket with a policy
// violation (or "too big"), and the session is never attached.
func TestHubRefusesHello(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	hello := func(p jsonrpc.HelloParams) []byte { return must(jsonrpc.NewRequest(1, jsonrpc.MethodHello, p)) }
	tests := []struct {
		name       string
		first      []byte
		wantError  bool // an error answer comes before the close
		wantStatus websocket.StatusCode
	}{
		{"tool call first", must(jsonrpc.NewRequest(1, jsonrpc.MethodToolsCall, jsonrpc.ToolCallParams{Name: wire.ToolTabs})), false, websocket.StatusPolicyViolation},
		{"not json-rpc", []byte(`hello`), false, websocket.StatusPolicyViolation},
		{"notification", []byte(`{"jsonrpc":"2.0","method":"agentfy/hello","params":{}}`), false, websocket.StatusPolicyViolation},
		{"params not an object", []byte(`{"jsonrpc":"2.0","id":1,"method":"agentfy/hello","params":[1]}`), true, websocket.StatusPolicyViolation},
		{"bootstrap revision 1", hello(jsonrpc.HelloParams{ImageTag: "w", BootstrapRevision: 1}), true, websocket.StatusPolicyViolation},
		{"bad feature", hello(jsonrpc.HelloParams{ImageTag: "w", BootstrapRevision: 2, Features: []string{"browser view"}}), true, websocket.StatusPolicyViolation},
		{"too large", hello(jsonrpc.HelloParams{ImageTag: strings.Repeat("w", jsonrpc.MaxHelloBytes), BootstrapRevision: 2}), false, websocket.StatusMessageTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, 20*time.Second)
			sess, passes := e.start(t, ctx)
			ws, status := e.dial(t, ctx, passes.Worker)
			if ws == nil {
				t.Fatalf("upgrade refused with %d", status)
			}
			send(t, ctx, ws, tt.first)
			if tt.wantError {
				m := receive(t, ctx, ws)
				if m.Error == nil || m.Error.Code != wire.RPCInvalidParams {
					t.Fatalf("hello answered %+v, want invalid params", m.Error)
				}
			}
			if got := closeStatus(ctx, ws); got != tt.wantStatus {
				t.Fatalf("socket closed with %d, want %d", got, tt.wantStatus)
			}
			if got, err := e.sessions.Get(ctx, sess.ID); err != nil || got.Owner != "" {
				t.Fatalf("session %+v %v, want it never attached", got, err)
			}
		})
	}
}

// TestHubRefusesTwoCredentials: a worker's upgrade with two Authorization headers is
// 400, whichever comes first — Header.Get reads the first, so a stranger's header
// before a good pass (or a good pass before a broker's) would be read one way here and
// maybe another by a proxy — and the session is never attached.
func TestHubRefusesTwoCredentials(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	tests := []struct {
		name  string
		order func(worker, broker string) []string
	}{
		{"the worker pass twice", func(w, _ string) []string { return []string{w, w} }},
		{"worker pass then broker pass", func(w, b string) []string { return []string{w, b} }},
		{"garbage then worker pass", func(w, _ string) []string { return []string{"nope", w} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testenv.Context(t, 20*time.Second)
			sess, passes := e.start(t, ctx)
			h := http.Header{}
			for _, p := range tt.order(passes.Worker, passes.Broker) {
				h.Add("Authorization", "Bearer "+p)
			}
			ws, resp, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: h})
			if resp != nil && resp.Body != nil {
				_ = resp.Body.Close()
			}
			if err == nil {
				_ = ws.CloseNow()
				t.Fatal("upgraded with two Authorization headers")
			}
			if resp == nil || resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("dial: %v %v, want 400", resp, err)
			}
			if got, err := e.sessions.Get(ctx, sess.ID); err != nil || got.Owner != "" {
				t.Fatalf("session %+v %v, want it never attached", got, err)
			}
		})
	}
}

// A view request from the bus reaches the worker as agentfy/browserView with the request
// id alone, and its answer comes back: the envelope byte for byte, or the worker's
// reason in the error header. Requests whose grant no replica stored never reach
// the worker. Views never move the session clock nor write the activity log.
func TestHubRelaysView(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 60*time.Second)
	sess, passes := e.start(t, ctx)
	ws := e.attach(t, ctx, sess, passes.Worker, []string{wire.FeatureBrowserView})
	if got, err := e.sessions.Get(ctx, sess.ID); err != nil || got.Owner != "r1" || !got.HasFeature(wire.FeatureBrowserView) {
		t.Fatalf("session after the hello: %+v %v, want attached to r1 with browserView", got, err)
	}
	if e.hub.Conns() != 1 {
		t.Fatalf("Conns = %d, want 1", e.hub.Conns())
	}
	subject, err := e.ns.Subject(bus.VerbView, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	type reply struct {
		data []byte
		err  error
	}
	// requestWith sends a view request of rid with proof in its header; request sends
	// one that a replica made just now for this session.
	requestWith := func(rid, proof string) <-chan reply {
		out := make(chan reply, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, wire.ViewTimeout)
			defer cancel()
			b, err := bus.RequestMsg(rctx, e.other, &nats.Msg{Subject: subject, Data: []byte(rid), Header: nats.Header{bus.HeaderProof: {proof}}})
			out <- reply{b, err}
		}()
		return out
	}
	proof := func(t *testing.T, rid, sessionID string, at time.Time) string {
		t.Helper()
		p, err := e.features.Proof(rid, sessionID, at)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	request := func(rid string) <-chan reply { return requestWith(rid, proof(t, rid, sess.ID, time.Now())) }
	wait := func(t *testing.T, c <-chan reply) reply {
		t.Helper()
		select {
		case r := <-c:
			return r
		case <-ctx.Done():
			t.Fatal("no reply")
			return reply{}
		}
	}
	// relay puts a grant, sends its request id and has the worker answer with
	// answer(id); it returns the requester's reply.
	relay := func(t *testing.T, answer func(id uint64) []byte) reply {
		t.Helper()
		e.refillPace()
		rid := randomHex(t, 32)
		c := request(rid)
		m := receive(t, ctx, ws)
		var p jsonrpc.ViewParams
		if !m.IsRequest() || m.Method != jsonrpc.MethodView || json.Unmarshal(m.Params, &p) != nil || p.RequestID != rid {
			t.Fatalf("worker got %s %s, want browserView of %s", m.Method, m.Params, rid)
		}
		if string(m.Params) != `{"requestId":"`+rid+`"}` {
			t.Errorf("params %s carry more than the request id", m.Params)
		}
		if n := e.hub.RelayWaiters(); n != 1 {
			t.Errorf("RelayWaiters = %d while relaying, want 1", n)
		}
		send(t, ctx, ws, answer(*m.ID))
		return wait(t, c)
	}

	t.Run("envelope passes through", func(t *testing.T) {
		env := `{"envelope": {"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}}`
		r := relay(t, func(id uint64) []byte { return jsonrpc.NewRawResult(id, []byte(env)) })
		if r.err != nil || string(r.data) != env {
			t.Fatalf("reply %q %v, want the envelope as the worker sent it", r.data, r.err)
		}
	})
	answers := []struct {
		name   string
		answer func(id uint64) []byte
		want   string
	}{
		{"old image", func(id uint64) []byte {
			return must(jsonrpc.NewError(id, wire.RPCMethodNotFound, "method not found"))
		}, wire.ReasonUnsupported},
		{"worker busy without data", func(id uint64) []byte { return must(jsonrpc.NewError(id, wire.RPCBusy, "too many")) }, wire.ReasonBusy},
		{"made-up reason", func(id uint64) []byte {
			return []byte(`{"jsonrpc":"2.0","id":` + jsonID(id) + `,"error":{"code":-32004,"message":"m","data":{"reason":"user:alice"}}}`)
		}, wire.ReasonRefused},
	}
	for _, r := range wire.Reasons() {
		answers = append(answers, struct {
			name   string
			answer func(id uint64) []byte
			want   string
		}{"reason " + r, func(id uint64) []byte { return jsonrpc.NewViewError(id, r, "view failed") }, r})
	}
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			r := relay(t, tt.answer)
			var re *bus.RemoteError
			if !errors.As(r.err, &re) || re.Code != tt.want {
				t.Fatalf("reply %q %v, want error %q", r.data, r.err, tt.want)
			}
		})
	}

	t.Run("request no replica vouched for", func(t *testing.T) {
		// Nothing on the bus is believed on its word: a request id without a proof, with
		// another session's, with one made by another key, with one older than a grant
		// lives, or one this connection was already asked for (a replay) is refused
		// before the worker hears of it.
		before := e.hub.ViewsRefused.Load()
		relayed := randomHex(t, 32)
		replayed := proof(t, relayed, sess.ID, time.Now())
		e.refillPace()
		first := requestWith(relayed, replayed)
		m := receive(t, ctx, ws) // the worker is asked once
		send(t, ctx, ws, jsonrpc.NewRawResult(*m.ID, []byte("null")))
		if r := wait(t, first); r.err != nil {
			t.Fatalf("the first request: %v", r.err)
		}
		e.refillPace()
		foreign, err := view.NewGrants(e.rdb, "dev", view.GrantKeys{[]byte("another deployment's key 32 byte")}, 0).Proof(relayed, sess.ID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rid := randomHex(t, 32)
		for name, c := range map[string]<-chan reply{
			"no proof":          requestWith(randomHex(t, 32), ""),
			"another session's": requestWith(rid, proof(t, rid, "another-session", time.Now())),
			"another key's":     requestWith(rid, foreign),
			"stale":             requestWith(rid, proof(t, rid, sess.ID, time.Now().Add(-view.GrantTTL-time.Second))),
			"from the future":   requestWith(rid, proof(t, rid, sess.ID, time.Now().Add(view.ProofSkew+time.Second))),
			"another request's": requestWith(rid, replayed),
			"replayed":          requestWith(relayed, replayed),
		} {
			r := wait(t, c)
			var re *bus.RemoteError
			if !errors.As(r.err, &re) || re.Code != wire.ReasonRefused {
				t.Errorf("%s: reply %v, want refused", name, r.err)
			}
		}
		if n := e.hub.ViewsRefused.Load() - before; n != 7 {
			t.Fatalf("ViewsRefused grew by %d, want 7", n)
		}
		// The worker saw none of them: its next message is the next relayed request.
		relay(t, func(id uint64) []byte { return jsonrpc.NewRawResult(id, []byte("null")) })
	})

	testenv.WaitFor(t, 5*time.Second, "no relay waiters", func() bool { return e.hub.RelayWaiters() == 0 })
	if got, err := e.sessions.Get(ctx, sess.ID); err != nil || got.LastToolAt.UnixMilli() != sess.LastToolAt.UnixMilli() {
		t.Errorf("session clock %v (%v), want %v: views never move it", got.LastToolAt, err, sess.LastToolAt)
	}
	if log, err := e.sessions.ActivityLog(ctx, sess.ID); err != nil || len(log) != 0 {
		t.Errorf("activity log %+v %v, want empty: views never write it", log, err)
	}

	t.Run("worker drops the socket", func(t *testing.T) {
		e.refillPace()
		rid := randomHex(t, 32)
		c := request(rid)
		receive(t, ctx, ws)
		_ = ws.CloseNow()
		r := wait(t, c)
		var re *bus.RemoteError
		if !errors.As(r.err, &re) || re.Code != wire.ReasonNoChannel {
			t.Fatalf("reply %v, want no_channel", r.err)
		}
		testenv.WaitFor(t, 5*time.Second, "the hub to let the socket go", func() bool { return e.hub.Serving() == 0 })
		got, err := e.sessions.Get(ctx, sess.ID)
		if err != nil || got.Stopped || got.Owner != "" {
			t.Fatalf("session %+v %v, want live and detached: a lost socket never stops it", got, err)
		}
		if _, err := bus.Request(testenv.Context(t, 5*time.Second), e.other, subject, []byte(rid)); !errors.Is(err, bus.ErrNoResponders) {
			t.Fatalf("request after the socket went: %v, want no responders", err)
		}
	})
}

func jsonID(id uint64) string { b, _ := json.Marshal(id); return string(b) }

// A tool call travels sealed over NATS to the owner, reaches the worker as tools/call,
// and its result comes back sealed from the owner; it moves the session clock and
// appends to the activity log.
func TestHubRelaysToolCall(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 60*time.Second)
	sess, passes := e.start(t, ctx)
	ws := e.attach(t, ctx, sess, passes.Worker, []string{wire.FeatureBrowserView})
	e.clock.Advance(time.Minute)
	attached, err := e.sessions.Get(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := e.ns.Subject(bus.VerbTool, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	// What a subscriber on the bus sees of the call and its result.
	seen := make(chan *nats.Msg, 16)
	sub, err := e.other.ChanSubscribe(subject, seen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.other.Flush(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		res json.RawMessage
		err error
	}
	call := func(args any) <-chan result {
		out := make(chan result, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			res, err := CallTool(cctx, e.other, e.ns, attached, wire.ToolOpen, args)
			out <- result{res, err}
		}()
		return out
	}
	answerNext := func(t *testing.T, answer func(id uint64) []byte) {
		t.Helper()
		m := receive(t, ctx, ws)
		var p jsonrpc.ToolCallParams
		if m.Method != jsonrpc.MethodToolsCall || json.Unmarshal(m.Params, &p) != nil || p.Name != wire.ToolOpen || string(p.Arguments) != `{"url":"https://example.com/secret"}` {
			t.Fatalf("worker got %s %s", m.Method, m.Params)
		}
		send(t, ctx, ws, answer(*m.ID))
	}

	c := call(map[string]string{"url": "https://example.com/secret"})
	answerNext(t, func(id uint64) []byte {
		return must(jsonrpc.NewResult(id, json.RawMessage(`{"tabId":"t1","title":"Secret"}`)))
	})
	r := <-c
	if r.err != nil || string(r.res) != `{"tabId":"t1","title":"Secret"}` {
		t.Fatalf("CallTool = %s %v", r.res, r.err)
	}

	c = call(map[string]string{"url": "https://example.com/secret"})
	answerNext(t, func(id uint64) []byte {
		return must(jsonrpc.NewError(id, wire.RPCToolFailed, "unknown_tab: no open tab has this id"))
	})
	r = <-c
	var re *bus.RemoteError
	if !errors.As(r.err, &re) || re.Code != "tool_failed" || re.Description != "unknown_tab: no open tab has this id" {
		t.Fatalf("CallTool = %v, want tool_failed with the broker's message", r.err)
	}

	log, err := e.sessions.ActivityLog(ctx, sess.ID)
	if err != nil || len(log) != 2 || log[0].Tool != wire.ToolOpen || !log[0].OK || log[1].OK {
		t.Fatalf("activity log %+v %v, want an ok and a failed browser_open", log, err)
	}
	if got, err := e.sessions.Get(ctx, sess.ID); err != nil || !got.LastToolAt.After(sess.LastToolAt) {
		t.Fatalf("session clock %v (%v), want moved past %v", got.LastToolAt, err, sess.LastToolAt)
	}
	for len(seen) > 0 {
		if m := <-seen; strings.Contains(string(m.Data), "example.com") || strings.Contains(string(m.Data), wire.ToolOpen) {
			t.Fatalf("the bus carried %s in clear", m.Data)
		}
	}

	// A payload that does not open is refused without reaching the worker.
	_, err = bus.Request(testenv.Context(t, 5*time.Second), e.other, subject, []byte(`{"requestId":"x"}`))
	if !errors.As(err, &re) || re.Code != "bad_request" || re.Description != "tool call does not open" {
		t.Fatalf("garbage tool call: %v, want bad_request", err)
	}
}

// The session ends for good when the worker closes with wire.CloseSessionEnded, the
// operator stops it, or it idles out while held; its passes are revoked, so the worker
// cannot come back. A replica shutting down only lets the socket go, and the session
// lives on. (Which close code the worker sees is TestHubClosesWithItsCode's.)
func TestHubSessionEnd(t *testing.T) {
	t.Parallel()
	s := startServers(t)

	t.Run("worker ends it", func(t *testing.T) {
		t.Parallel()
		e := newHubEnv(t, s, nil)
		ctx := testenv.Context(t, 30*time.Second)
		sess, passes := e.start(t, ctx)
		ws := e.attach(t, ctx, sess, passes.Worker, nil)
		if err := ws.Close(wire.CloseSessionEnded, "session ended"); err != nil {
			t.Fatalf("close: %v", err)
		}
		testenv.WaitFor(t, 5*time.Second, "the session to stop", func() bool {
			got, err := e.sessions.Get(ctx, sess.ID)
			return err == nil && got.Stopped
		})
		if got, _ := e.sessions.Get(ctx, sess.ID); got.StopReason != "worker ended" {
			t.Errorf("stop reason %q, want worker ended", got.StopReason)
		}
		if _, status := e.dial(t, ctx, passes.Worker); status != http.StatusUnauthorized {
			t.Errorf("reconnect answered %d, want 401", status)
		}
		testenv.WaitFor(t, 5*time.Second, "the stop event", func() bool { return sawStatus(e.events, sess.ID, session.Stopped) })
	})
	for _, tt := range []struct {
		name       string
		stop       func(t *testing.T, e *hubEnv, ctx context.Context, sessionID string)
		wantReason string
	}{
		{"operator stops it", func(t *testing.T, e *hubEnv, ctx context.Context, id string) { e.operatorStop(t, ctx, id) }, "operator"},
		{"idle timeout on a held socket", func(_ *testing.T, e *hubEnv, ctx context.Context, _ string) {
			e.clock.Advance(session.DefaultPolicy.StopAfter + time.Second)
			e.hub.check(ctx)
		}, "idle timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newHubEnv(t, s, nil)
			ctx := testenv.Context(t, 30*time.Second)
			sess, passes := e.start(t, ctx)
			ws := e.attach(t, ctx, sess, passes.Worker, nil)
			c := watchClose(ctx, ws)
			tt.stop(t, e, ctx, sess.ID)
			closed(t, ctx, c)
			if got, err := e.sessions.Get(ctx, sess.ID); err != nil || !got.Stopped || got.StopReason != tt.wantReason {
				t.Fatalf("session %+v %v, want stopped: %s", got, err, tt.wantReason)
			}
			if _, status := e.dial(t, ctx, passes.Worker); status != http.StatusUnauthorized {
				t.Errorf("reconnect answered %d, want 401", status)
			}
			testenv.WaitFor(t, 5*time.Second, "the stop event", func() bool { return sawStatus(e.events, sess.ID, session.Stopped) })
		})
	}
	t.Run("replica shuts down", func(t *testing.T) {
		t.Parallel()
		e := newHubEnv(t, s, nil)
		ctx := testenv.Context(t, 30*time.Second)
		sess, passes := e.start(t, ctx)
		ws := e.attach(t, ctx, sess, passes.Worker, nil)
		c := watchClose(ctx, ws)
		e.hub.Close(ctx)
		closed(t, ctx, c)
		if got, err := e.sessions.Get(ctx, sess.ID); err != nil || got.Stopped {
			t.Fatalf("session %+v %v, want live", got, err)
		}
		if e.hub.Conns() != 0 {
			t.Fatalf("Conns = %d after Close", e.hub.Conns())
		}
		// A closed hub takes no new socket.
		if ws2, _ := e.dial(t, ctx, passes.Worker); ws2 != nil {
			send(t, ctx, ws2, must(jsonrpc.NewRequest(1, jsonrpc.MethodHello, jsonrpc.HelloParams{ImageTag: "w", BootstrapRevision: 2})))
			if _, _, err := ws2.Read(ctx); err == nil {
				t.Fatal("a closed hub answered a hello")
			}
		}
	})
}

// BUG: Conn.close cancels the connection's context before it writes the close frame.
// The read loop's pending Read runs on that context, and coder/websocket closes the
// connection as soon as a Read's context ends, so the close frame often never leaves:
// the worker sees an abnormal closure instead of wire.CloseSessionEnded (or going away,
// or policy violation for a replaced socket). A stopped session's worker then reconnects
// and only learns from the 401 that its session ended. Every stop should reach the
// worker as 4000.
func TestHubClosesWithItsCode(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 60*time.Second)
	for i := range 50 {
		sess, passes := e.start(t, ctx)
		ws := e.attach(t, ctx, sess, passes.Worker, nil)
		c := watchClose(ctx, ws)
		e.operatorStop(t, ctx, sess.ID)
		if got := closed(t, ctx, c); got != StatusSessionEnded {
			t.Fatalf("stop %d: the worker saw close status %d, want %d", i+1, got, StatusSessionEnded)
		}
	}
}

// operatorStop stops a session as `agentfy session stop` does — in the store, which
// revokes its passes — and runs the hub's session check, which finds it stopped and
// ends its socket.
func (e *hubEnv) operatorStop(t *testing.T, ctx context.Context, sessionID string) {
	t.Helper()
	if _, err := e.sessions.Stop(ctx, sessionID, "operator"); err != nil {
		t.Fatal(err)
	}
	e.hub.check(ctx)
}

// sawStatus reports whether events holds status for sessionID.
func sawStatus(events eventLog, sessionID string, status session.Status) bool {
	for {
		select {
		case ev := <-events:
			if ev.SessionID == sessionID && ev.Status == status {
				return true
			}
		default:
			return false
		}
	}
}

// BUG: a worker that reconnects to the same replica before its old socket was dropped
// (a network blip; the load balancer sends it back; the worker retries after 100 ms) is
// registered, and the old connection is closed. The old connection's unregister then
// calls Detach(session, its replica id), which matches the new connection's owner, so
// the session loses its owner while the new socket is live: every tool call
// (CallTool) fails with ErrNoOwner until the worker reconnects again.
func TestHubReconnectKeepsOwner(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 30*time.Second)
	sess, passes := e.start(t, ctx)
	old := e.attach(t, ctx, sess, passes.Worker, []string{wire.FeatureBrowserView})
	oldClosed := watchClose(ctx, old)
	e.attach(t, ctx, sess, passes.Worker, []string{wire.FeatureBrowserView})
	closed(t, ctx, oldClosed)
	testenv.WaitFor(t, 5*time.Second, "the old connection's socket to end", func() bool { return e.hub.Serving() == 1 })
	if e.hub.Conns() != 1 {
		t.Fatalf("Conns = %d, want 1", e.hub.Conns())
	}
	if got, err := e.sessions.Get(ctx, sess.ID); err != nil || got.Owner != "r1" {
		t.Fatalf("session owner %q (%v) while the new socket is live, want r1: CallTool fails with ErrNoOwner", got.Owner, err)
	}
}

// A call that reaches the subscriptions before the worker has read its hello's answer
// waits for that answer: the worker's first message is always the answer (a worker takes
// anything else as a refusal and backs off — CI once saw browser_open fail so). The
// hub's last step before the answer, the flush that confirms the subscriptions, is held
// back, as a slow NATS server would hold it, until the call is waiting on the connection.
func TestHubAnswersHelloBeforeAnyCall(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	ctx := testenv.Context(t, 30*time.Second)
	sess, passes := e.start(t, ctx)
	held, release := e.holdFlush(t)
	ws, status := e.dial(t, ctx, passes.Worker)
	if ws == nil {
		t.Fatalf("upgrade refused with %d", status)
	}
	send(t, ctx, ws, must(jsonrpc.NewRequest(1, jsonrpc.MethodHello, jsonrpc.HelloParams{ImageTag: "worker:test", BootstrapRevision: wire.BootstrapRevision, Features: []string{wire.FeatureBrowserView}})))
	select {
	case <-held: // the hub attached the session and the server has its subscriptions
	case <-ctx.Done():
		t.Fatal("the hub never subscribed the session's subjects")
	}
	attached, err := e.sessions.Get(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := CallTool(cctx, e.other, e.ns, attached, wire.ToolOpen, map[string]string{"url": "https://example.com/"})
		called <- err
	}()
	testenv.WaitFor(t, 10*time.Second, "the tool call to wait on the connection", func() bool {
		e.hub.mu.Lock()
		c := e.hub.conns[sess.ID]
		e.hub.mu.Unlock()
		if c == nil {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.toolWaiters) == 1
	})
	release()
	var res jsonrpc.HelloResult
	if m := receive(t, ctx, ws); !m.IsResponse() || m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.SessionID != sess.ID {
		t.Fatalf("first message %s %+v %s, want the hello's answer", m.Method, m.Error, m.Result)
	}
	m := receive(t, ctx, ws)
	if m.Method != jsonrpc.MethodToolsCall {
		t.Fatalf("second message %s, want the tool call", m.Method)
	}
	send(t, ctx, ws, must(jsonrpc.NewResult(*m.ID, json.RawMessage(`{"tabId":"t1"}`))))
	if err := <-called; err != nil {
		t.Fatalf("CallTool: %v", err)
	}
}

// holdFlush makes the flush that confirms the next session's subscriptions (the last
// step before the hello's answer) return only once release is called, as a NATS server
// slow to answer it would; held is closed once the server has the subscriptions.
func (e *hubEnv) holdFlush(t *testing.T) (held <-chan struct{}, release func()) {
	t.Helper()
	b := &flushHold{Bus: e.hub.cfg.NATS, held: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	release = func() { once.Do(func() { close(b.release) }) }
	t.Cleanup(release)
	e.hub.cfg.NATS = b
	return b.held, release
}

// flushHold is a hub's NATS connection whose first flush waits (holdFlush).
type flushHold struct {
	Bus
	once          sync.Once
	held, release chan struct{}
}

func (b *flushHold) FlushTimeout(timeout time.Duration) error {
	err := b.Bus.FlushTimeout(timeout)
	b.once.Do(func() {
		close(b.held)
		<-b.release
	})
	return err
}

// A worker that stops answering pings is dropped, and one that answers stays: the hub
// pings every worker from one loop (no goroutine per connection waits for the next
// ping), and a socket whose pong does not come within PingTimeout is dropped at once,
// which a worker takes as "reconnect". At once: a close handshake would wait 5 s for the
// close frame of a peer that reads nothing (the websocket library's bound), so the drop
// is awaited for less than that.
func TestHubDropsAWorkerThatDoesNotAnswerPings(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	logs := &testenv.Buffer{}
	e.hub.cfg.Log = zerolog.New(logs)
	e.hub.cfg.PingInterval, e.hub.cfg.PingTimeout = 50*time.Millisecond, 200*time.Millisecond
	ctx := testenv.Context(t, 30*time.Second)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); e.hub.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })

	answering, answeringPasses := e.start(t, ctx)
	silent, silentPasses := e.start(t, ctx)
	answered := watchClose(ctx, e.attach(t, ctx, answering, answeringPasses.Worker, []string{wire.FeatureBrowserView}))
	e.attach(t, ctx, silent, silentPasses.Worker, []string{wire.FeatureBrowserView}) // never read again: no pong
	testenv.WaitFor(t, 4*time.Second, "the hub to drop the silent worker", func() bool { return e.hub.Serving() == 1 })
	if n := strings.Count(logs.String(), "worker did not answer a ping"); n != 1 {
		t.Fatalf("%d ping timeouts logged, want the silent worker's alone:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), silent.ID) {
		t.Fatalf("the ping timeout is not the silent worker's:\n%s", logs)
	}
	select {
	case st := <-answered:
		t.Fatalf("the worker that answers pings was dropped too (%v)", st)
	default:
	}
	if e.hub.Conns() != 1 {
		t.Fatalf("Conns = %d, want the answering worker's", e.hub.Conns())
	}
}

// A worker that sends messages that are no JSON-RPC has each one counted and the
// socket kept, but cannot flood the log: PeerLogBurst lines a PeerLogPeriod.
func TestHubBoundsTheLogOfBadInput(t *testing.T) {
	t.Parallel()
	s := startServers(t)
	e := newHubEnv(t, s, nil)
	logs := &testenv.Buffer{}
	e.hub.peerLog = zerolog.New(logs).Sample(&zerolog.BurstSampler{Burst: PeerLogBurst, Period: PeerLogPeriod})
	ctx := testenv.Context(t, 30*time.Second)
	sess, passes := e.start(t, ctx)
	ws := e.attach(t, ctx, sess, passes.Worker, []string{wire.FeatureBrowserView})
	const bad = 200
	for range bad {
		send(t, ctx, ws, []byte(`{"not":"json-rpc"`))
	}
	testenv.WaitFor(t, 10*time.Second, "the bad messages counted", func() bool { return e.hub.InvalidMessages() == bad })
	if n := strings.Count(logs.String(), "invalid message from worker"); n != PeerLogBurst {
		t.Fatalf("%d log lines for %d bad messages, want %d", n, bad, PeerLogBurst)
	}
	if e.hub.Conns() != 1 {
		t.Fatalf("Conns = %d: the socket was dropped", e.hub.Conns())
	}
}
