package broker

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/wire"
)

// TestHTTPErrors checks the status, code and JSON shape of every refusal
// the API makes before any browser work.
func TestHTTPErrors(t *testing.T) {
	tb := newTestBroker(t, nil, nil)
	goodID := strings.Repeat("ab", 32)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"capture bad id", "POST", "/observe", `{"requestId":"abc"}`, 400, "bad_request"},
		{"capture uppercase id", "POST", "/observe", `{"requestId":"` + strings.ToUpper(goodID) + `"}`, 400, "bad_request"},
		{"capture no id", "POST", "/observe", `{}`, 400, "bad_request"},
		{"capture not json", "POST", "/observe", `requestId`, 400, "bad_request"},
		{"capture unknown field", "POST", "/observe", `{"requestId":"` + goodID + `","publicKey":"04"}`, 400, "bad_request"},
		{"capture two values", "POST", "/observe", `{"requestId":"` + goodID + `"}{}`, 400, "bad_request"},
		{"capture too large", "POST", "/observe", `{"requestId":"` + strings.Repeat(" ", MaxBodyBytes) + `"}`, 413, "body_too_large"},
		{"capture by GET", "GET", "/observe", ``, 405, "method_not_allowed"},
		{"unknown route", "POST", "/tools/browser_eval", `{}`, 404, "not_found"},
		{"open file url", "POST", "/tools/browser_open", `{"url":"file:///etc/passwd"}`, 400, "bad_url"},
		{"open no url", "POST", "/tools/browser_open", `{}`, 400, "bad_url"},
		{"play unknown tab", "POST", "/tools/browser_play", `{"tabId":"nope","steps":[]}`, 404, "unknown_tab"},
		{"play bad step", "POST", "/tools/browser_play", `{"tabId":"nope","steps":[{"action":"eval","text":"1"}]}`, 400, "bad_step"},
		{"play unknown step field", "POST", "/tools/browser_play", `{"tabId":"nope","steps":[{"action":"wait","ms":1,"expr":"1"}]}`, 400, "bad_request"},
		{"play too many steps", "POST", "/tools/browser_play", `{"tabId":"nope","steps":[` + strings.Repeat(`{"action":"wait","ms":1},`, MaxSteps) + `{"action":"wait","ms":1}]}`, 400, "bad_step"},
		{"close unknown tab", "POST", "/tools/browser_close", `{"tabId":"nope"}`, 404, "unknown_tab"},
		{"tabs with junk", "POST", "/tools/browser_tabs", `{"x":1}`, 400, "bad_request"},
		{"healthz by POST", "POST", "/healthz", `{}`, 405, "method_not_allowed"},
		// Read with wire.DecodeStrict: a member given twice or in another case than the
		// field's is refused before any browser work or consumption (encoding/json took the
		// last of two, or "URL" for "url").
		{"capture requestId twice", "POST", "/observe", `{"requestId":"` + goodID + `","requestId":"` + goodID + `"}`, 400, "bad_request"},
		{"capture RequestId", "POST", "/observe", `{"RequestId":"` + goodID + `"}`, 400, "bad_request"},
		{"capture requestID beside requestId", "POST", "/observe", `{"requestId":"` + goodID + `","requestID":"x"}`, 400, "bad_request"},
		{"open url twice", "POST", "/tools/browser_open", `{"url":"about:blank","url":"about:blank"}`, 400, "bad_request"},
		{"open URL", "POST", "/tools/browser_open", `{"URL":"about:blank"}`, 400, "bad_request"},
		{"play TabId", "POST", "/tools/browser_play", `{"TabId":"t1","steps":[]}`, 400, "bad_request"},
		{"play step action twice", "POST", "/tools/browser_play", `{"tabId":"t1","steps":[{"action":"wait","action":"click","ms":1}]}`, 400, "bad_request"},
		{"play step MS", "POST", "/tools/browser_play", `{"tabId":"t1","steps":[{"action":"wait","MS":1}]}`, 400, "bad_request"},
		{"close tabId twice", "POST", "/tools/browser_close", `{"tabId":"t1","tabId":"t2"}`, 400, "bad_request"},
		{"close tabID", "POST", "/tools/browser_close", `{"tabID":"t1"}`, 400, "bad_request"},
		{"open invalid UTF-8", "POST", "/tools/browser_open", "{\"url\":\"about:blank\xff\"}", 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, "http://broker"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tb.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string }
			}
			dec := json.NewDecoder(resp.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				t.Fatalf("body is not an error object: %v", err)
			}
			if resp.StatusCode != tt.wantStatus || body.Error.Code != tt.wantCode || body.Error.Message == "" {
				t.Errorf("%s %s: %d %+v, want %d %s", tt.method, tt.path, resp.StatusCode, body.Error, tt.wantStatus, tt.wantCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	if n := tb.api.calls.Load(); n != 0 {
		t.Errorf("%d consumptions for refused requests", n)
	}
	if tabs, err := tb.Tabs(t.Context()); err != nil || len(tabs) != 0 {
		t.Errorf("tabs after refused requests: %v %v, want none", tabs, err)
	}
}

func TestHealthz(t *testing.T) {
	tb := newTestBroker(t, nil, nil)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://broker/healthz", nil)
	resp, err := tb.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "{\"ok\":true}\n" {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
}

// TestToolSteps drives a form through type, press, click and navigate.
func TestToolSteps(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, nil)
	tab := tb.open(t, s.URL+"/form")
	if tab.Title != "form" || tab.URL != s.URL+"/form" {
		t.Fatalf("opened %+v", tab)
	}
	got := tb.play(t, tab.TabID,
		Step{Action: ActionType, Selector: "#q", Text: "héllo wörld"},
		Step{Action: ActionPress, Key: "Enter"},
	)
	if got.Title != "typed:héllo wörld" {
		t.Errorf("after type and Enter: title %q", got.Title)
	}
	if got = tb.play(t, tab.TabID, Step{Action: ActionClick, Selector: "#b"}); got.Title != "clicked" {
		t.Errorf("after click: title %q", got.Title)
	}
	got = tb.play(t, tab.TabID, Step{Action: ActionNavigate, URL: s.URL + "/color/next"}, Step{Action: ActionWait, MS: 10})
	if got.Title != "next" || got.URL != s.URL+"/color/next" || got.TabID != tab.TabID {
		t.Errorf("after navigate: %+v", got)
	}
}

// TestToolFailures checks a step that cannot be done in time and a full
// queue, while capture still answers.
func TestToolFailures(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) {
		c.ToolQueueSize = 1
		c.ToolTimeout = 3 * time.Second
		c.MinCaptureInterval = 0
	})
	tab := tb.open(t, s.URL+"/form")

	start := time.Now()
	status, body := tb.post(t, "/tools/browser_play", map[string]any{"tabId": tab.TabID, "steps": []Step{{Action: ActionClick, Selector: "#missing"}}})
	if status != http.StatusGatewayTimeout || !strings.Contains(string(body), `"tool_timeout"`) {
		t.Errorf("click on a missing element: %d %s, want 504 tool_timeout", status, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("timeout took %v", took)
	}

	done := make(chan int, 1)
	go func() {
		status, _ := tb.post(t, "/tools/browser_play", map[string]any{"tabId": tab.TabID, "steps": []Step{
			{Action: ActionNavigate, URL: s.URL + "/signal/busy"}, {Action: ActionWait, MS: 1000},
		}})
		done <- status
	}()
	select {
	case <-s.requested:
	case status := <-done:
		t.Fatalf("the play ended with %d before its page committed", status)
	case <-time.After(10 * time.Second):
		t.Fatal("the play never navigated")
	}
	status, body = tb.post(t, "/tools/browser_tabs", "{}")
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), `"queue_full"`) {
		t.Errorf("tool call on a full queue: %d %s, want 429 queue_full", status, body)
	}
	if p := tb.capturePage(t); p == nil || !strings.HasSuffix(p.URL, "/signal/busy") {
		t.Errorf("capture while the queue is full: %s", describe(p))
	}
	if status := <-done; status != http.StatusOK {
		t.Errorf("the queued play: %d", status)
	}
	if status, body := tb.post(t, "/tools/browser_tabs", "{}"); status != http.StatusOK {
		t.Errorf("after the queue drained: %d %s", status, body)
	}
}

// TestTooManyTabs refuses browser_open beyond MaxTabs.
func TestTooManyTabs(t *testing.T) {
	tb := newTestBroker(t, nil, func(c *Config) { c.MaxTabs = 2 })
	tb.open(t, "about:blank")
	tb.open(t, "about:blank")
	status, body := tb.post(t, "/tools/browser_open", map[string]string{"url": "about:blank"})
	if status != http.StatusConflict || !strings.Contains(string(body), `"too_many_tabs"`) {
		t.Errorf("third tab: %d %s, want 409 too_many_tabs", status, body)
	}
}

func TestListen(t *testing.T) {
	dir, err := os.MkdirTemp("", "agentfy-listen-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, wire.SocketName)

	// A stale socket, left by a listener that did not remove it, is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	_ = stale.Close()

	ln, err := Listen(t.Context(), dir)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != SocketMode || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, want %v socket", fi.Mode(), SocketMode)
	}
	if ln.Addr().String() != path {
		t.Errorf("Addr() = %s, want %s", ln.Addr(), path)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the socket", len(entries))
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close()
		}
	}()
	// A live socket is not taken over.
	if l2, err := Listen(t.Context(), dir); err == nil {
		_ = l2.Close()
		t.Error("Listen took over a live socket")
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}

	// A path that is not a socket is never removed.
	if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l3, err := Listen(context.Background(), dir); err == nil {
		_ = l3.Close()
		t.Error("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Error("the regular file changed")
	}
}
