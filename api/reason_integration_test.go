package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/internal/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// stack is one real replica (replica.New) on real Redis and NATS, serving on a loopback
// port.
type stack struct {
	r     *replica.Replica
	dep   string
	base  string
	token string // a member of team t1
}

// testCapabilityKeys is the replica's capability key in these tests.
var testCapabilityKeys = view.CapabilityKeys{[]byte("0123456789abcdef0123456789abcdef")}

func startStack(t *testing.T, ctx context.Context) *stack {
	t.Helper()
	rs := testenv.Redis(t)
	ns := testenv.NATS(t)
	dep := testenv.Deployment(t)
	secret := []byte("0123456789abcdef0123456789abcdef")
	jwtCfg := auth.JWTConfig{Issuer: "agentfy-test", Audience: "agentfy-api", HS256Secret: secret}
	r, err := replica.New(ctx, replica.Options{
		ReplicaID: "r1", Deployment: dep,
		Redis: &redis.UniversalOptions{Addrs: []string{rs.Addr()}, MaxRetries: -1},
		NATS:  bus.Config{Servers: []string{ns.ClientURL()}}, JWT: []auth.JWTConfig{jwtCfg}, OpenAPI: []byte("openapi: 3.1.0"),
		CapabilityKeys: testCapabilityKeys,
		Log:            testenv.Logger(t), DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("the replica did not shut down")
		}
	})
	err = r.Dir.Load(ctx, directory.Seed{
		Teams: []directory.Team{{ID: "t1", Name: "Team"}},
		Users: []directory.User{{ID: "u1", Name: "User", Teams: []string{"t1"}}},
		Orgs:  []directory.Org{{ID: "o1", Name: "Org", Environments: []string{"prod"}}},
		Agents: []directory.Agent{
			{ID: "idle", Name: "No session", TeamID: "t1", OrgID: "o1", Environment: "prod"},
			{ID: "orphan", Name: "No worker", TeamID: "t1", OrgID: "o1", Environment: "prod"},
			{ID: "camera", Name: "Capture fails", TeamID: "t1", OrgID: "o1", Environment: "prod"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	token, err := auth.MintHS256(secret, jwtCfg.Issuer, jwtCfg.Audience, "u1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{r: r, dep: dep, base: "http://" + ln.Addr().String(), token: token}
}

// get fetches path with the member's token.
func (s *stack) get(t *testing.T, ctx context.Context, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// unavailable reads agentfy_view_unavailable_total{route,reason} of the agent view
// route from /metrics, by reason.
func (s *stack) unavailable(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	status, _, body := s.get(t, ctx, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics answered %d", status)
	}
	out := map[string]float64{}
	const route = `,route="/v1/agents/:id/worker/view"} `
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), `agentfy_view_unavailable_total{reason="`)
		if !ok {
			continue
		}
		reason, value, ok := strings.Cut(rest, `"`+route)
		if !ok {
			t.Fatalf("sample %q of another route", line)
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[reason] = n
	}
	return out
}

// attachWorker connects a worker for the agent's new session that answers every view
// request with the wire reason given, as a worker relaying its broker's failure would.
func (s *stack) attachWorker(t *testing.T, ctx context.Context, agentID, reason string) {
	t.Helper()
	_, passes, err := s.r.Sessions.Start(ctx, agentID)
	if err != nil {
		t.Fatal(err)
	}
	url := "ws" + strings.TrimPrefix(s.base, "http") + wire.ChannelPath
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + passes.Worker}}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	hello, _ := jsonrpc.NewRequest(1, jsonrpc.MethodHello, jsonrpc.HelloParams{ImageTag: "worker:test", BootstrapRevision: wire.BootstrapRevision, Capabilities: []string{wire.CapabilityBrowserView}})
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		t.Fatal(err)
	}
	if _, data, err := ws.Read(ctx); err != nil || !strings.Contains(string(data), `"result"`) {
		t.Fatalf("hello answered %s %v", data, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		defer func() { _ = ws.CloseNow() }()
		for {
			_, data, err := ws.Read(wctx)
			if err != nil {
				return
			}
			m, err := jsonrpc.Parse(data)
			if err != nil || !m.IsRequest() {
				continue
			}
			_ = ws.Write(wctx, websocket.MessageText, jsonrpc.NewViewError(*m.ID, reason, "view failed at the broker: "+reason))
		}
	}()
}

// A view's failure reason reaches the API's metric through every hop on real servers
// (worker answer → owner replica's NATS header → view service → reasonOf), while the
// client sees the plain 503 body only; an answer that is not a 503 counts no reason.
func TestViewUnavailableReasonEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	s.attachWorker(t, ctx, "camera", wire.ReasonCapture)
	if _, _, err := s.r.Sessions.Start(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		agent      string
		wantStatus int
		wantBody   string
		wantReason string // "" when no reason may move
	}{
		{"no session", "idle", http.StatusOK, `{"live":false}`, ""},
		{"no worker socket", "orphan", http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"the browser view is temporarily unavailable; retry later"}}`, wire.ReasonNoChannel},
		{"capture failed at the broker", "camera", http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"the browser view is temporarily unavailable; retry later"}}`, wire.ReasonCapture},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.unavailable(t, ctx)
			status, h, body := s.get(t, ctx, "/v1/agents/"+tt.agent+"/worker/view")
			if status != tt.wantStatus || strings.TrimSpace(body) != tt.wantBody {
				t.Fatalf("answer %d %s, want %d %s", status, body, tt.wantStatus, tt.wantBody)
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", h.Get("Cache-Control"))
			}
			var anyBody map[string]any
			if err := json.Unmarshal([]byte(body), &anyBody); err != nil {
				t.Fatalf("body %s is not JSON", body)
			}
			after := s.unavailable(t, ctx)
			for r, n := range after {
				want := before[r]
				if r == tt.wantReason {
					want++
				}
				if n != want {
					t.Errorf("agentfy_view_unavailable_total{reason=%q} = %v, want %v", r, n, want)
				}
			}
			if tt.wantReason != "" && after[tt.wantReason] != before[tt.wantReason]+1 {
				t.Errorf("agentfy_view_unavailable_total{reason=%q} = %v, want %v", tt.wantReason, after[tt.wantReason], before[tt.wantReason]+1)
			}
		})
	}
}

// The consume route on a real replica: the credential is checked before the body is
// read, the body is decoded strictly, and an error answer to a request with a body
// closes the connection.
func TestConsumeRoute(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	sess, passes, err := s.r.Sessions.Start(ctx, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	caps := view.NewCapabilities(s.r.Redis, s.dep, testCapabilityKeys, 0)
	stored := strings.Repeat("cd", 32)
	if err := caps.Put(ctx, stored, sess.ID, "04"+strings.Repeat("ab", 64)); err != nil {
		t.Fatal(err)
	}
	body := func(id string) string { return `{"requestId":"` + id + `"}` }
	tests := []struct {
		name       string
		token      string
		body       string
		wantStatus int
		wantCode   string
		wantClose  bool
	}{
		{"no credential", "", body(stored), http.StatusUnauthorized, "unauthenticated", true},
		{"worker pass", passes.Worker, body(stored), http.StatusForbidden, "forbidden", true},
		{"human token", s.token, body(stored), http.StatusForbidden, "forbidden", true},
		{"unknown field", passes.Broker, `{"requestId":"` + stored + `","publicKey":"04"}`, http.StatusBadRequest, "bad_request", false},
		{"trailing data", passes.Broker, body(stored) + `{}`, http.StatusBadRequest, "bad_request", false},
		{"over the bound", passes.Broker, body(stored) + strings.Repeat(" ", 2<<10), http.StatusBadRequest, "bad_request", false},
		{"unknown request id", passes.Broker, body(strings.Repeat("ef", 32)), http.StatusNotFound, "not_found", true},
		{"stored", passes.Broker, body(stored), http.StatusOK, "", false},
		{"already consumed", passes.Broker, body(stored), http.StatusNotFound, "not_found", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+wire.ConsumePath, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var out struct {
				PublicKey string `json:"publicKey"`
				Error     struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
				t.Fatalf("body: %v", err)
			}
			if resp.StatusCode != tt.wantStatus || out.Error.Code != tt.wantCode {
				t.Fatalf("answer %d %q, want %d %q", resp.StatusCode, out.Error.Code, tt.wantStatus, tt.wantCode)
			}
			if tt.wantStatus == http.StatusOK && out.PublicKey != "04"+strings.Repeat("ab", 64) {
				t.Fatalf("public key %q", out.PublicKey)
			}
			if tt.wantClose && !resp.Close {
				t.Errorf("an error answer to a request with a body kept the connection open")
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
			}
		})
	}
}
