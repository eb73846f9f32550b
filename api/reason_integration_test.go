package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// one is replica A of a stack of the test's own (stacktest.Start, one replica), with the
// directory these tests read: team t1 whose member is u1, and its agents idle (no
// session), orphan (a session without a worker), camera (a worker whose broker fails)
// and one relay agent per wire reason (relayAgent).
type one struct {
	c     *stacktest.Client
	r     *stack.Replica
	base  string
	token string // u1's
}

func startStack(t *testing.T, ctx context.Context) *one {
	t.Helper()
	c := stacktest.Start(t, stack.Options{Replicas: 1})
	agents := []directory.Agent{
		{ID: "idle", Name: "No session", TeamID: "t1", OrgID: "o1", Environment: "prod"},
		{ID: "orphan", Name: "No worker", TeamID: "t1", OrgID: "o1", Environment: "prod"},
		{ID: "camera", Name: "Capture fails", TeamID: "t1", OrgID: "o1", Environment: "prod"},
	}
	for _, r := range wire.Reasons() {
		agents = append(agents, directory.Agent{ID: relayAgent(r), Name: "Fails for " + r, TeamID: "t1", OrgID: "o1", Environment: "prod"})
	}
	err := c.St.Dir.Load(ctx, directory.Seed{
		Teams:  []directory.Team{{ID: "t1", Name: "Team"}},
		Users:  []directory.User{{ID: "u1", Name: "User", Teams: []string{"t1"}}},
		Orgs:   []directory.Org{{ID: "o1", Name: "Org", Environments: []string{"prod"}}},
		Agents: agents,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := c.St.Replicas[0]
	return &one{c: c, r: r, base: r.URL, token: c.Token(t, "u1")}
}

// relayAgent is the agent whose worker answers every view with reason.
func relayAgent(reason string) string { return "relay-" + reason }

// get fetches path of the public listener with the member's token.
func (s *one) get(t *testing.T, ctx context.Context, path string) (int, http.Header, string) {
	t.Helper()
	return fetch(t, ctx, s.base+path, s.token)
}

// fetch GETs url, with bearer unless it is empty.
func fetch(t *testing.T, ctx context.Context, url, bearer string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
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
	return resp.StatusCode, resp.Header, string(b)
}

// unavailable reads agentfy_view_unavailable_total{route,reason} of the agent view
// route from /metrics of the replica's metrics listener, by reason.
func (s *one) unavailable(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	status, _, body := fetch(t, ctx, s.r.MetricsURL+metrics.Path, "")
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
			// Every route's reasons are exported from the start, at 0: only this
			// route may count.
			if !strings.HasSuffix(strings.TrimSpace(line), "} 0") {
				t.Fatalf("sample %q of another route", line)
			}
			continue
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
func (s *one) attachWorker(t *testing.T, ctx context.Context, agentID, reason string) {
	t.Helper()
	_, passes, err := s.c.St.Sess.Start(ctx, agentID)
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
	hello, _ := jsonrpc.NewRequest(1, jsonrpc.MethodHello, jsonrpc.HelloParams{ImageTag: "worker:test", BootstrapRevision: wire.BootstrapRevision, Features: []string{wire.FeatureBrowserView}})
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
// (worker answer → owner replica's NATS header → view service → reasonLabel), while the
// client sees the plain 503 body only; an answer that is not a 503 counts no reason.
// Every reason of the table that crosses processes (wire.Reasons) is walked from the
// worker, the hop furthest from the viewer that names it: a new one is tested as soon as
// it is a row. Those raised on the requesting replica alone are walked by TestAbort.
func TestViewUnavailableReasonEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	s.attachWorker(t, ctx, "camera", wire.ReasonCapture)
	if _, _, err := s.c.St.Sess.Start(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	const unavailable = `{"error":{"code":"unavailable","message":"the browser view is temporarily unavailable; retry later"}}`

	tests := []struct {
		name       string
		agent      string
		wantStatus int
		wantBody   string
		wantReason string // "" when no reason may move
	}{
		{"no session", "idle", http.StatusOK, `{"live":false}`, ""},
		{"no worker socket", "orphan", http.StatusServiceUnavailable, unavailable, wire.ReasonNoChannel},
		{"capture failed at the broker", "camera", http.StatusServiceUnavailable, unavailable, wire.ReasonCapture},
	}
	for _, r := range wire.Reasons() {
		s.attachWorker(t, ctx, relayAgent(r), r)
		tests = append(tests, struct {
			name       string
			agent      string
			wantStatus int
			wantBody   string
			wantReason string
		}{"the worker names " + r, relayAgent(r), wire.APIStatus(r), unavailable, r})
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

// The consume route's table on a real replica: the credential is checked before the
// body is read, the body is decoded strictly, every 404 has one body (no oracle), an
// error answer to a request with a body closes the connection, no refusal destroys the
// grant, and a stopped session's broker pass is revoked. Attacks on it (replay,
// expiry, a Redis writer redirecting it) are in reliability/.
func TestConsumeRoute(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	sess, passes, err := s.c.St.Sess.Start(ctx, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	_, otherPasses, err := s.c.St.Sess.Start(ctx, "camera")
	if err != nil {
		t.Fatal(err)
	}
	orgKey, _, err := s.c.St.Creds.CreateOrgKey(ctx, "o1", "prod", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	publicKey := "04" + strings.Repeat("ab", 64)
	grants := view.NewGrants(s.r.Redis, s.c.St.NS.Deployment(), s.c.St.GrantKeys, 0)
	stored := strings.Repeat("cd", 32)
	if err := grants.Put(ctx, stored, sess.ID, sess.BrokerPassID, publicKey); err != nil {
		t.Fatal(err)
	}
	body := stacktest.ConsumeRequest
	tests := []struct {
		name       string
		token      string
		body       string
		wantStatus int
		wantCode   string
		wantClose  bool
	}{
		{"no credential", "", body(stored), http.StatusUnauthorized, "unauthenticated", true},
		{"garbage", "not-a-pass", body(stored), http.StatusUnauthorized, "unauthenticated", true},
		{"forged pass", "afp_0123456789abcdef_" + strings.Repeat("cd", 32), body(stored), http.StatusUnauthorized, "unauthenticated", true},
		{"worker pass", passes.Worker, body(stored), http.StatusForbidden, "forbidden", true},
		{"human token", s.token, body(stored), http.StatusForbidden, "forbidden", true},
		{"organisation key", orgKey, body(stored), http.StatusForbidden, "forbidden", true},
		{"another session's broker pass", otherPasses.Broker, body(stored), http.StatusNotFound, "not_found", true},
		{"malformed body", passes.Broker, `{"requestId":`, http.StatusBadRequest, "bad_request", false},
		{"unknown field", passes.Broker, `{"requestId":"` + stored + `","publicKey":"04"}`, http.StatusBadRequest, "bad_request", false},
		{"trailing data", passes.Broker, body(stored) + `{}`, http.StatusBadRequest, "bad_request", false},
		{"over the bound", passes.Broker, body(stored) + strings.Repeat(" ", 2<<10), http.StatusBadRequest, "bad_request", false},
		{"unknown request id", passes.Broker, body(strings.Repeat("ef", 32)), http.StatusNotFound, "not_found", true},
		{"malformed request id", passes.Broker, body("xyz"), http.StatusNotFound, "not_found", true},
		{"stored", passes.Broker, body(stored), http.StatusOK, "", false},
		{"already consumed", passes.Broker, body(stored), http.StatusNotFound, "not_found", true},
	}
	notFound := map[string]bool{}
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
			raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				PublicKey string `json:"publicKey"`
				Error     struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("body %q: %v", raw, err)
			}
			if resp.StatusCode != tt.wantStatus || out.Error.Code != tt.wantCode {
				t.Fatalf("answer %d %q, want %d %q", resp.StatusCode, out.Error.Code, tt.wantStatus, tt.wantCode)
			}
			if tt.wantStatus == http.StatusOK && out.PublicKey != publicKey {
				t.Fatalf("public key %q", out.PublicKey)
			}
			if tt.wantStatus == http.StatusNotFound {
				notFound[string(raw)] = true
			}
			if tt.wantClose && !resp.Close {
				t.Errorf("an error answer to a request with a body kept the connection open")
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
			}
		})
	}
	if len(notFound) != 1 {
		t.Errorf("the 404 bodies differ (an oracle): %v", notFound)
	}
	// A stopped session's broker pass is revoked.
	id := strings.Repeat("0a", 32)
	if err := grants.Put(ctx, id, sess.ID, sess.BrokerPassID, publicKey); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.St.Sess.Stop(ctx, sess.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	if r := s.c.Consume(t, passes.Broker, body(id)); r.Status != http.StatusUnauthorized {
		t.Fatalf("stopped session's broker pass: %d %s", r.Status, r.Body)
	}
}
