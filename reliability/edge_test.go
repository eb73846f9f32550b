package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
)

// TestEveryV1AnswerIsNoStoreJSON sends what the routes do not take: other methods, a
// trailing slash, unknown paths. Every answer under /v1 carries Cache-Control: no-store
// and a JSON error body, and none is a redirect.
func TestEveryV1AnswerIsNoStoreJSON(t *testing.T) {
	agent := client.NewAgent(t, "agent-edge")
	base := st.Replicas[0].URL
	view := stacktest.ViewPath(agent)
	partner := stacktest.PartnerViewPath("org-acme", agent)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type tc struct {
		name, method, path string
		want               int
	}
	var cases []tc
	for _, m := range []string{http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
		cases = append(cases,
			tc{m + "_on_the_agent_view", m, view, http.StatusMethodNotAllowed},
			tc{m + "_on_the_partner_view", m, partner, http.StatusMethodNotAllowed},
			tc{m + "_on_the_agent_list", m, "/v1/agents", http.StatusMethodNotAllowed})
	}
	cases = append(cases,
		tc{"trailing_slash", http.MethodGet, view + "/", http.StatusNotFound},
		tc{"upper_case_path", http.MethodGet, strings.ToUpper(view), http.StatusNotFound},
		tc{"unknown_v1_path", http.MethodGet, "/v1/nothing-here", http.StatusNotFound},
		tc{"v1_itself", http.MethodGet, "/v1", http.StatusNotFound},
		tc{"POST_to_an_unknown_v1_path", http.MethodPost, "/v1/nothing-here", http.StatusNotFound},
		tc{"agent_list_with_a_trailing_slash", http.MethodGet, "/v1/agents/", http.StatusNotFound},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			observed := ""
			record(t, "Every /v1 answer", fmt.Sprintf("%d, Cache-Control: no-store, a JSON error body", c.want), &observed)
			req, err := http.NewRequestWithContext(client.Context(t), c.method, base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+client.Token(t, "u-alice"))
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			_ = resp.Body.Close()
			observed = fmt.Sprintf("%d, %s, %s", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"))
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			jsonOK := c.method == http.MethodHead || (json.Unmarshal(body, &e) == nil && e.Error.Code != "")
			if resp.StatusCode != c.want || resp.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !jsonOK {
				t.Fatalf("%s %s: %s body %.100q", c.method, c.path, observed, body)
			}
		})
	}
}

// TestRequestIDIsSanitised: a client's X-Request-Id is used (and logged) only when it is
// a short token of safe characters; anything else is replaced by a fresh id.
func TestRequestIDIsSanitised(t *testing.T) {
	observed := ""
	record(t, "Every /v1 answer", "a safe X-Request-Id is kept; one with spaces, quotes, control characters or over 64 characters is replaced and never logged", &observed)
	url := client.ViewURL(0, "agent-nobody")
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"abc-123_XYZ", true},
		{strings.Repeat("a", 65), false},
		{`x" injected="1`, false},
		{"a b", false},
		{"évasion", false},
		{"line\tbreak", false},
	} {
		req, err := http.NewRequestWithContext(client.Context(t), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", tc.sent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		got := resp.Header.Get("X-Request-Id")
		if (got == tc.sent) != tc.kept || !requestIDOK(got) {
			t.Fatalf("sent %q, answered %q", tc.sent, got)
		}
		if !tc.kept && strings.Contains(logs.String(), tc.sent) {
			t.Fatalf("the logs hold the unsafe request id %q", tc.sent)
		}
	}
	observed = "1 kept; 5 replaced, none in the logs"
}

func requestIDOK(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// TestSlowClientsAreCut holds hundreds of connections open the slow way — bodies
// announced and never sent (to the consume route without a credential, and to a view
// route that takes no body), and headers never finished — while a member views: every
// such connection is closed within the server's documented timeouts, the refused bodies
// are never read, and real views go on.
func TestSlowClientsAreCut(t *testing.T) {
	observed := ""
	record(t, "Bounds", fmt.Sprintf("300 slow bodies (Content-Length 200000, one byte sent) and 50 unfinished headers: bodies refused and closed at once, headers cut within %v, every connection closed within %v; real views 200 meanwhile", replica.HeaderTimeout, replica.BodyTimeout), &observed)
	agent := "agent-slow-clients"
	liveSession(t, agent, stack.SessionOptions{})
	addr := strings.TrimPrefix(st.Replicas[0].URL, "http://")
	type result struct {
		kind   string
		took   time.Duration
		status string
		err    error
	}
	results := make(chan result, 400)
	start := time.Now()
	open := func(kind, head string) {
		var d net.Dialer
		c, err := d.DialContext(client.Context(t), "tcp", addr)
		if err != nil {
			results <- result{kind: kind, err: err}
			return
		}
		defer func() { _ = c.Close() }()
		if _, err := io.WriteString(c, head); err != nil {
			results <- result{kind: kind, err: err}
			return
		}
		// Wait (bounded) for the server to answer and close.
		_ = c.SetReadDeadline(time.Now().Add(replica.BodyTimeout + 5*time.Second))
		b, err := io.ReadAll(c)
		status := ""
		if line, _, ok := strings.Cut(string(b), "\r\n"); ok {
			status = line
		}
		if err != nil {
			results <- result{kind: kind, err: fmt.Errorf("not closed: %w", err)}
			return
		}
		results <- result{kind: kind, took: time.Since(start), status: status}
	}
	slowBody := "POST /v1/internal/worker-observations/consume HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{"
	slowView := "POST /v1/agents/" + agent + "/worker/view HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n{"
	slowHead := "GET /v1/agents/" + agent + "/worker/view HTTP/1.1\r\nHost: x\r\n"
	for i := range 300 {
		if i%2 == 0 {
			go open("body", slowBody)
		} else {
			go open("view-body", slowView)
		}
	}
	for range 50 {
		go open("head", slowHead)
	}
	if a := client.Poll(t, agent); a.Summary() != "200 frame" {
		t.Fatalf("a real view while 350 slow clients hold connections: %s", a.Summary())
	}
	viewAt := time.Since(start)
	var worstBody, worstHead time.Duration
	for range 350 {
		r := <-results
		if r.err != nil {
			t.Fatalf("%s: %v", r.kind, r.err)
		}
		switch r.kind {
		case "body", "view-body":
			if !strings.Contains(r.status, " 401 ") && !strings.Contains(r.status, " 405 ") {
				t.Fatalf("%s answered %q", r.kind, r.status)
			}
			worstBody = max(worstBody, r.took)
		case "head":
			worstHead = max(worstHead, r.took)
		}
	}
	if worstBody > time.Second || worstHead > replica.HeaderTimeout+2*time.Second {
		t.Fatalf("slowest body connection closed after %v, slowest header connection after %v", worstBody, worstHead)
	}
	observed = fmt.Sprintf("bodies answered 401/405 and closed within %v, headers cut within %v; a real view 200 frame %v into it",
		worstBody.Round(time.Millisecond), worstHead.Round(100*time.Millisecond), viewAt.Round(time.Millisecond))
}

// TestStatusStreamsPerUser: one member cannot take every status stream of a replica —
// past feed.MaxListenersPerCaller streams the next is refused with 429, while another
// member still gets one, and closing a stream frees its place.
func TestStatusStreamsPerUser(t *testing.T) {
	observed := ""
	record(t, "Bounds", fmt.Sprintf("one user holds at most %d status streams per replica (the next: 429); another user still gets one; a closed stream frees its place", feed.MaxListenersPerCaller), &observed)
	agent := client.NewAgent(t, "agent-streams")
	url := st.Replicas[0].URL + stacktest.StatusPath(agent)
	// open opens a stream and returns its status and a function that closes it.
	type stream struct {
		status int
		header http.Header
		close  func()
	}
	open := func(user string) stream {
		t.Helper()
		c, cancel := context.WithCancel(client.Context(t))
		req, err := http.NewRequestWithContext(c, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+client.Token(t, user))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		closeIt := func() { cancel(); _ = resp.Body.Close() }
		t.Cleanup(closeIt)
		return stream{resp.StatusCode, resp.Header, closeIt}
	}
	var first stream
	for i := range feed.MaxListenersPerCaller {
		s := open("u-alice")
		if s.status != http.StatusOK {
			t.Fatalf("stream %d: %d", i+1, s.status)
		}
		if i == 0 {
			first = s
		}
	}
	extra := open("u-alice")
	other := open("u-bob")
	if extra.status != http.StatusTooManyRequests || extra.header.Get("Cache-Control") != "no-store" || other.status != http.StatusOK {
		t.Fatalf("stream %d of one user: %d; another user's: %d", feed.MaxListenersPerCaller+1, extra.status, other.status)
	}
	first.close()
	var again int
	testenv.WaitFor(t, 5*time.Second, "the closed stream's place", func() bool {
		s := open("u-alice")
		again = s.status
		if again != http.StatusOK {
			s.close()
		}
		return again == http.StatusOK
	})
	observed = fmt.Sprintf("%d streams of u-alice 200, the next %d; u-bob 200; after closing one, u-alice %d", feed.MaxListenersPerCaller, extra.status, again)
}

// TestHelloIsBounded dials the tool channel with a real worker pass and says hellos no
// worker would: each is refused with a close reason naming the rule, nothing of it is
// stored in the session or logged, and a proper hello still works.
func TestHelloIsBounded(t *testing.T) {
	observed := ""
	record(t, "Bounds", fmt.Sprintf("a hello over %d bytes, with over %d tool names in \"capabilities\", a tool name that is not a token or an image tag over %d bytes is refused with a close reason; nothing of it reaches Redis or the logs", jsonrpc.MaxHelloBytes, jsonrpc.MaxFeatures, jsonrpc.MaxImageTagBytes), &observed)
	agent := client.NewAgent(t, "agent-hello")
	sess, passes, err := st.Sess.Start(client.Context(t), agent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = st.Sess.Stop(context.Background(), sess.ID, "test") })
	url := "ws" + strings.TrimPrefix(st.Replicas[0].URL, "http") + "/v1/worker/channel"
	say := func(params any) (websocket.StatusCode, string, error) {
		ws, resp, err := websocket.Dial(client.Context(t), url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + passes.Worker}}})
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = ws.CloseNow() }()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": jsonrpc.MethodHello, "params": params})
		if err := ws.Write(client.Context(t), websocket.MessageText, b); err != nil {
			return 0, "", err
		}
		for {
			_, data, err := ws.Read(client.Context(t))
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					return ce.Code, ce.Reason, nil
				}
				return -1, "", err
			}
			if strings.Contains(string(data), `"result"`) {
				return websocket.StatusNormalClosure, "hello accepted", nil
			}
		}
	}
	huge := strings.Repeat("x", 1<<20)
	var many []string
	for i := range jsonrpc.MaxFeatures + 1 {
		many = append(many, fmt.Sprintf("cap%d", i))
	}
	var results []string
	for _, tc := range []struct {
		name   string
		params any
		want   string
	}{
		// The socket's read limit ends it before the message is read whole.
		{"1 MiB tool name", map[string]any{"imageTag": "t", "bootstrapRevision": 2, "capabilities": []string{huge}}, "read limited at"},
		{"too many tool names", map[string]any{"imageTag": "t", "bootstrapRevision": 2, "capabilities": many}, "too many capabilities"},
		{"tool name with a newline", map[string]any{"imageTag": "t", "bootstrapRevision": 2, "capabilities": []string{"browser\nView"}}, "bad capability"},
		{"long image tag", map[string]any{"imageTag": strings.Repeat("t", jsonrpc.MaxImageTagBytes+1), "bootstrapRevision": 2}, "bad image tag"},
		{"params not an object", []int{1}, "not an object"},
	} {
		code, reason, err := say(tc.params)
		want := websocket.StatusPolicyViolation
		if tc.name == "1 MiB tool name" {
			want = websocket.StatusMessageTooBig
		}
		if err != nil || code != want || !strings.Contains(reason, tc.want) {
			t.Fatalf("%s: close %d %q (%v), want policy violation %q", tc.name, code, reason, err, tc.want)
		}
		results = append(results, reason)
	}
	cur, err := st.Sess.Get(client.Context(t), sess.ID)
	if err != nil || cur.Hello.ImageTag != "" || len(cur.Hello.Features) != 0 {
		t.Fatalf("a refused hello reached the session: %+v (%v)", cur.Hello, err)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > 8<<10 || strings.Contains(line, "xxxxxxxxxxxxxxxx") {
			t.Fatalf("a log line of %d bytes carries the hello", len(line))
		}
	}
	if _, reason, err := say(map[string]any{"imageTag": "browser-worker:1", "bootstrapRevision": 2, "capabilities": []string{"browserView"}}); err != nil || reason != "hello accepted" {
		t.Fatalf("a proper hello: %q %v", reason, err)
	}
	observed = "closed with: " + strings.Join(results, "; ") + "; a proper hello accepted"
}
