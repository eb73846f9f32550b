package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// viewParams is the params of a browserView request for id.
func viewParams(id string) json.RawMessage {
	b, _ := json.Marshal(jsonrpc.ViewParams{RequestID: id})
	return b
}

// The broker's sealed envelope passes through byte for byte: the worker neither reads
// nor re-encodes it, and relays nothing but the request id.
func TestCapturePassesEnvelopeThrough(t *testing.T) {
	t.Parallel()
	// Spacing and key order a re-encoding would change.
	envelope := `{"envelope": {"publicKey":"04aa", "iv":"00",  "tag":"11","ciphertext":"AAAA+/=="}}`
	b := startBroker(t, answer(http.StatusOK, envelope+"\n"))
	w := newWorker(t, b.dir)

	got, err := w.capture(testenv.Context(t, 10*time.Second), 42, viewParams(requestID))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":42,"result":` + envelope + `}`
	if string(got) != want {
		t.Fatalf("answer\n%s\nwant\n%s", got, want)
	}
	if m := parseResponse(t, got, 42); !bytes.Equal(m.Result, []byte(envelope)) {
		t.Fatalf("result %s, want the envelope as the broker sent it", m.Result)
	}
	reqs := b.seen()
	if len(reqs) != 1 {
		t.Fatalf("broker saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != wire.CapturePath || r.contentType != "application/json" {
		t.Errorf("broker saw %s %s (%s), want POST %s (application/json)", r.method, r.path, r.contentType, wire.CapturePath)
	}
	if string(r.body) != `{"requestId":"`+requestID+`"}` {
		t.Errorf("broker got %s, want only the request id", r.body)
	}
}

// Every failure the broker names reaches the replica as the JSON-RPC error's data.reason
// and the code that stands for it; anything else it says is broker_error. The broker's
// own message is never relayed.
func TestCaptureMapsBrokerErrors(t *testing.T) {
	t.Parallel()
	errBody := func(code string) string {
		return `{"error":{"code":"` + code + `","message":"detail only the broker log may hold"}}`
	}
	tests := []struct {
		name       string
		status     int
		body       string
		wantReason string
		wantCode   int
	}{
		{"busy", http.StatusConflict, errBody("busy"), wire.ReasonBusy, wire.RPCBusy},
		{"refused", http.StatusBadGateway, errBody("refused"), wire.ReasonRefused, wire.RPCRefused},
		{"capture", http.StatusServiceUnavailable, errBody("capture"), wire.ReasonCapture, wire.RPCUnavailable},
		{"broker shutting down", http.StatusServiceUnavailable, errBody("broker_down"), wire.ReasonBrokerDown, wire.RPCUnavailable},
		{"broker internal error", http.StatusInternalServerError, errBody("broker_error"), wire.ReasonBrokerError, wire.RPCUnavailable},
		{"bad request", http.StatusBadRequest, errBody("bad_request"), wire.ReasonBadRequest, wire.RPCInvalidParams},
		{"html page", http.StatusBadGateway, "<html><body>502 Bad Gateway</body></html>", wire.ReasonBrokerError, wire.RPCUnavailable},
		{"unknown code", http.StatusServiceUnavailable, errBody("exploded"), wire.ReasonBrokerError, wire.RPCUnavailable},
		{"code of another case", http.StatusServiceUnavailable, errBody("Capture"), wire.ReasonBrokerError, wire.RPCUnavailable},
		{"body too large", http.StatusRequestEntityTooLarge, errBody("body_too_large"), wire.ReasonBrokerError, wire.RPCUnavailable},
		{"empty body", http.StatusInternalServerError, "", wire.ReasonBrokerError, wire.RPCUnavailable},
		{"error without code", http.StatusServiceUnavailable, `{"error":{"message":"x"}}`, wire.ReasonBrokerError, wire.RPCUnavailable},
		{"not 200 but no error", http.StatusAccepted, `{"envelope":{}}`, wire.ReasonBrokerError, wire.RPCUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, answer(tt.status, tt.body))
			w := newWorker(t, b.dir)
			got, err := w.capture(testenv.Context(t, 10*time.Second), 7, viewParams(requestID))
			if err != nil {
				t.Fatal(err)
			}
			m := parseResponse(t, got, 7)
			if m.Error == nil || m.Error.Data == nil {
				t.Fatalf("answer %s: want an error with data", got)
			}
			if m.Error.Data.Reason != tt.wantReason || m.Error.Code != tt.wantCode {
				t.Errorf("reason %q code %d, want %q %d", m.Error.Data.Reason, m.Error.Code, tt.wantReason, tt.wantCode)
			}
			if jsonrpc.ReasonOf(m.Error) != tt.wantReason {
				t.Errorf("ReasonOf = %q, want %q", jsonrpc.ReasonOf(m.Error), tt.wantReason)
			}
			if strings.Contains(string(got), "detail") || strings.Contains(string(got), "html") {
				t.Errorf("answer %s relays the broker's text", got)
			}
			if n := len(b.seen()); n != 1 {
				t.Errorf("broker saw %d requests, want 1", n)
			}
		})
	}
}

// A request id that is not 64 lowercase hex is refused as bad_request without reaching
// the broker.
func TestCaptureRefusesBadParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params string
	}{
		{"not json", `{"requestId":`},
		{"not an object", `"` + requestID + `"`},
		{"missing", `{}`},
		{"short", `{"requestId":"` + requestID[:63] + `"}`},
		{"uppercase", `{"requestId":"` + strings.ToUpper(requestID) + `"}`},
		{"not hex", `{"requestId":"` + strings.Repeat("g", 64) + `"}`},
		{"number", `{"requestId":42}`},
	}
	b := startBroker(t, answer(http.StatusOK, `{"envelope":{}}`))
	w := newWorker(t, b.dir)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uint64(i + 1)
			got, err := w.capture(testenv.Context(t, 10*time.Second), id, json.RawMessage(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			m := parseResponse(t, got, id)
			if m.Error == nil || m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonBadRequest || m.Error.Code != wire.RPCInvalidParams {
				t.Fatalf("answer %s, want bad_request with wire.RPCInvalidParams", got)
			}
		})
	}
	if reqs := b.seen(); len(reqs) != 0 {
		t.Fatalf("broker saw %d requests for bad params, want none", len(reqs))
	}
}

// A broker the worker cannot reach is broker_down: no socket, a socket nobody listens
// on any more, or a regular file where the socket should be.
func TestCaptureBrokerDown(t *testing.T) {
	t.Parallel()
	stale := func(t *testing.T) string {
		dir := ipcDir(t)
		ln, err := net.Listen("unix", filepath.Join(dir, wire.SocketName))
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		_ = ln.Close()
		return dir
	}
	tests := []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"no socket", func(t *testing.T) string { return ipcDir(t) }},
		{"stale socket", stale},
		{"regular file", func(t *testing.T) string {
			dir := ipcDir(t)
			if err := os.WriteFile(filepath.Join(dir, wire.SocketName), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{"no directory", func(t *testing.T) string { return filepath.Join(ipcDir(t), "missing") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorker(t, tt.dir(t))
			ctx := testenv.Context(t, 10*time.Second)
			got, err := w.capture(ctx, 3, viewParams(requestID))
			if err != nil {
				t.Fatal(err)
			}
			m := parseResponse(t, got, 3)
			if m.Error == nil || m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonBrokerDown || m.Error.Code != wire.RPCUnavailable {
				t.Fatalf("answer %s, want broker_down", got)
			}
		})
	}
}

// A broker that never answers is a timeout, after wire.WorkerCaptureTimeout and not much later.
func TestCaptureTimeout(t *testing.T) {
	testenv.SkipSlowUnderShort(t, fmt.Sprintf("waits wire.WorkerCaptureTimeout (%v)", wire.WorkerCaptureTimeout))
	t.Parallel()
	var b *fakeBroker
	b = startBroker(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-b.stop:
		case <-r.Context().Done():
		}
	})
	w := newWorker(t, b.dir)
	start := time.Now()
	got, err := w.capture(testenv.Context(t, wire.WorkerCaptureTimeout+5*time.Second), 9, viewParams(requestID))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	m := parseResponse(t, got, 9)
	if m.Error == nil || m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonTimeout {
		t.Fatalf("answer %s, want timeout", got)
	}
	if took < wire.WorkerCaptureTimeout || took > wire.WorkerCaptureTimeout+wire.HopMargin {
		t.Errorf("answered after %v, want within [%v, %v]", took, wire.WorkerCaptureTimeout, wire.WorkerCaptureTimeout+wire.HopMargin)
	}
}

// The caller's own deadline, when shorter, ends the wait too, and is reported as a
// timeout rather than a broker that is down.
func TestCaptureCallerDeadline(t *testing.T) {
	t.Parallel()
	var b *fakeBroker
	b = startBroker(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-b.stop:
		case <-r.Context().Done():
		}
	})
	w := newWorker(t, b.dir)
	ctx, cancel := context.WithTimeout(testenv.Context(t, 10*time.Second), 100*time.Millisecond)
	defer cancel()
	got, err := w.capture(ctx, 9, viewParams(requestID))
	if err != nil {
		t.Fatal(err)
	}
	if m := parseResponse(t, got, 9); m.Error == nil || m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonTimeout {
		t.Fatalf("answer %s, want timeout", got)
	}
}

func TestBrokerReason(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"unknown code", `{"error":{"code":"exploded"}}`, wire.ReasonBrokerError},
		{"empty code", `{"error":{"code":""}}`, wire.ReasonBrokerError},
		{"no error member", `{"result":{}}`, wire.ReasonBrokerError},
		{"code not a string", `{"error":{"code":503}}`, wire.ReasonBrokerError},
		{"html", `<html>oops</html>`, wire.ReasonBrokerError},
		{"empty", ``, wire.ReasonBrokerError},
		{"null", `null`, wire.ReasonBrokerError},
		{"label injection", `{"error":{"code":"capture\",reason=\"x"}}`, wire.ReasonBrokerError},
	}
	for _, r := range wire.Reasons() {
		tests = append(tests, struct {
			name string
			body string
			want string
		}{r, `{"error":{"code":"` + r + `","message":"m"}}`, r})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := brokerReason([]byte(tt.body)); got != tt.want {
				t.Fatalf("brokerReason(%s) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

// features lists browserView for every worker configured with an IPC directory,
// whatever is (or is not yet) in it: the broker may start after the hello. Only a
// worker without one (the shell image) lists nothing.
func TestHelloFeatures(t *testing.T) {
	t.Parallel()
	browser := []string{wire.FeatureBrowserView}
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{"socket", func(t *testing.T) string { return startBroker(t, answer(http.StatusOK, "{}")).dir }, browser},
		{"no IPC dir configured", func(*testing.T) string { return "" }, []string{}},
		{"no socket yet", func(t *testing.T) string { return ipcDir(t) }, browser},
		{"no directory yet", func(t *testing.T) string { return filepath.Join(ipcDir(t), "missing") }, browser},
		{"regular file", func(t *testing.T) string {
			dir := ipcDir(t)
			if err := os.WriteFile(filepath.Join(dir, wire.SocketName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, browser},
		{"socket of another name", func(t *testing.T) string {
			dir := ipcDir(t)
			ln, err := net.Listen("unix", filepath.Join(dir, "other.sock"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
			return dir
		}, browser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorker(t, tt.dir(t))
			got := w.features()
			if got == nil || !slices.Equal(got, tt.want) {
				t.Fatalf("features() = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// A tool call reaches the broker's route for that tool and nothing else; its result,
// or its error, comes back.
func TestToolRelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		params   string
		status   int
		body     string
		wantPath string // "" when the broker must not be asked
		wantArgs string
		wantCode int // 0 for a result
		wantMsg  string
		wantRes  string
	}{
		{name: "result", params: `{"name":"browser_open","arguments":{"url":"https://example.com/"}}`,
			status: 200, body: `{"result":{"tabId":"t1"}}`,
			wantPath: "/tools/browser_open", wantArgs: `{"url":"https://example.com/"}`, wantRes: `{"tabId":"t1"}`},
		{name: "no arguments", params: `{"name":"browser_tabs"}`,
			status: 200, body: `{"result":{"tabs":[]}}`,
			wantPath: "/tools/browser_tabs", wantArgs: `{}`, wantRes: `{"tabs":[]}`},
		{name: "broker error", params: `{"name":"browser_close","arguments":{"tabId":"t9"}}`,
			status: 404, body: `{"error":{"code":"unknown_tab","message":"no open tab has this id"}}`,
			wantPath: "/tools/browser_close", wantArgs: `{"tabId":"t9"}`, wantCode: wire.RPCToolFailed, wantMsg: "unknown_tab: no open tab has this id"},
		{name: "error with 200", params: `{"name":"browser_play","arguments":{}}`,
			status: 200, body: `{"error":{"code":"step_failed","message":"the browser could not perform a step"}}`,
			wantPath: "/tools/browser_play", wantArgs: `{}`, wantCode: wire.RPCToolFailed, wantMsg: "step_failed: the browser could not perform a step"},
		{name: "failure without error body", params: `{"name":"browser_tabs"}`,
			status: 500, body: `{}`,
			wantPath: "/tools/browser_tabs", wantArgs: `{}`, wantCode: wire.RPCToolFailed, wantMsg: "tool failed"},
		{name: "unreadable answer", params: `{"name":"browser_tabs"}`,
			status: 502, body: `<html>bad gateway</html>`,
			wantPath: "/tools/browser_tabs", wantArgs: `{}`, wantCode: wire.RPCUnavailable, wantMsg: "broker answered badly"},
		{name: "unknown tool", params: `{"name":"browser_view"}`, wantCode: wire.RPCInvalidParams, wantMsg: "unknown tool"},
		{name: "path in the name", params: `{"name":"../observe"}`, wantCode: wire.RPCInvalidParams, wantMsg: "unknown tool"},
		{name: "no name", params: `{"arguments":{}}`, wantCode: wire.RPCInvalidParams, wantMsg: "unknown tool"},
		{name: "malformed params", params: `[1,2]`, wantCode: wire.RPCInvalidParams, wantMsg: "unknown tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, answer(tt.status, tt.body))
			w := newWorker(t, b.dir)
			got, err := w.tool(testenv.Context(t, 10*time.Second), 5, json.RawMessage(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			m := parseResponse(t, got, 5)
			switch {
			case tt.wantCode == 0 && m.Error != nil:
				t.Fatalf("answer %s, want a result", got)
			case tt.wantCode == 0 && string(m.Result) != tt.wantRes:
				t.Errorf("result %s, want %s", m.Result, tt.wantRes)
			case tt.wantCode != 0 && (m.Error == nil || m.Error.Code != tt.wantCode || m.Error.Message != tt.wantMsg):
				t.Errorf("answer %s, want error %d %q", got, tt.wantCode, tt.wantMsg)
			}
			reqs := b.seen()
			if tt.wantPath == "" {
				if len(reqs) != 0 {
					t.Fatalf("broker saw %+v, want no request", reqs)
				}
				return
			}
			if len(reqs) != 1 || reqs[0].method != http.MethodPost || reqs[0].path != tt.wantPath || string(reqs[0].body) != tt.wantArgs {
				t.Fatalf("broker saw %+v, want one POST %s %s", reqs, tt.wantPath, tt.wantArgs)
			}
		})
	}
}

// Without a browser (the shell image: no IPC directory) a known tool fails at once; a
// browser image whose broker is not there (no socket yet, or one nobody serves any more)
// is unavailable, which the agent may retry.
func TestToolWithoutBroker(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 10*time.Second)
	got, err := newWorker(t, "").tool(ctx, 1, json.RawMessage(`{"name":"browser_tabs"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m := parseResponse(t, got, 1); m.Error == nil || m.Error.Code != wire.RPCToolFailed {
		t.Errorf("shell image: answer %s, want CodeToolFailed", got)
	}

	got, err = newWorker(t, ipcDir(t)).tool(ctx, 2, json.RawMessage(`{"name":"browser_tabs"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m := parseResponse(t, got, 2); m.Error == nil || m.Error.Code != wire.RPCUnavailable {
		t.Errorf("no socket yet: answer %s, want wire.RPCUnavailable", got)
	}

	// A socket file that nobody serves any more: the image has a browser, which is down.
	dir := ipcDir(t)
	ln, err := net.Listen("unix", filepath.Join(dir, wire.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	got, err = newWorker(t, dir).tool(ctx, 3, json.RawMessage(`{"name":"browser_tabs"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m := parseResponse(t, got, 3); m.Error == nil || m.Error.Code != wire.RPCUnavailable {
		t.Errorf("stale socket: answer %s, want wire.RPCUnavailable", got)
	}
}

func TestNewAndChannelURL(t *testing.T) {
	if _, err := New(Config{Pass: "p"}); err == nil {
		t.Error("New without an API URL: no error")
	}
	if _, err := New(Config{APIURLs: []string{"http://x"}}); err == nil {
		t.Error("New without a pass: no error")
	}
	tests := []struct {
		name    string
		base    string
		want    string
		wantErr bool
	}{
		{name: "http", base: "http://api:8080", want: "ws://api:8080" + wire.ChannelPath},
		{name: "https with slash", base: "https://api.example.com/", want: "wss://api.example.com" + wire.ChannelPath},
		{name: "with a prefix", base: "https://lb/agentfy", want: "wss://lb/agentfy" + wire.ChannelPath},
		{name: "ws scheme", base: "ws://api", wantErr: true},
		{name: "no scheme", base: "api:8080", wantErr: true},
		{name: "bad url", base: "http://[::1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := channelURL(tt.base)
			if (err != nil) != tt.wantErr || got != tt.want && !tt.wantErr {
				t.Fatalf("channelURL(%q) = %q, %v; want %q (error %v)", tt.base, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestWorkerRefusesAmbiguousMembers: what the worker reads from another process — a
// view's and a tool call's params from the replica, the broker's answers — goes through
// wire.DecodeStrict, so a member given twice or in another case than the field's is
// refused, never taken for it (encoding/json kept the last of two and matched names in
// any case). A refused params object never reaches the broker.
func TestWorkerRefusesAmbiguousMembers(t *testing.T) {
	t.Parallel()
	other := strings.Repeat("f", 64)
	const (
		viewParams   = "view params"   // input: the params of agentfy/browserView
		toolParams   = "tool params"   // input: the params of tools/call
		toolAnswer   = "tool answer"   // input: the broker's answer to a tool call
		brokerFailed = "broker failed" // input: the broker's error body to /observe
	)
	tests := []struct {
		name, kind, input string
	}{
		{"view requestId twice", viewParams, `{"requestId":"` + requestID + `","requestId":"` + other + `"}`},
		{"view RequestId", viewParams, `{"RequestId":"` + requestID + `"}`},
		{"view requestID beside requestId", viewParams, `{"requestId":"` + requestID + `","requestID":"` + other + `"}`},
		{"view _meta twice", viewParams, `{"requestId":"` + requestID + `","_meta":{},"_meta":{}}`},
		{"view _Meta", viewParams, `{"requestId":"` + requestID + `","_Meta":{}}`},
		{"view unknown member beside _meta", viewParams, `{"requestId":"` + requestID + `","_meta":{},"progressToken":1}`},
		{"view _meta with an unknown member", viewParams, `{"requestId":"` + requestID + `","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","progressToken":1}}`},
		{"view _meta traceparent twice", viewParams, `{"requestId":"` + requestID + `","_meta":{"traceparent":"a","traceparent":"b"}}`},
		{"view _meta Traceparent", viewParams, `{"requestId":"` + requestID + `","_meta":{"Traceparent":"a"}}`},
		{"tool name twice", toolParams, `{"name":"browser_tabs","name":"browser_open"}`},
		{"tool Name", toolParams, `{"Name":"browser_tabs"}`},
		{"tool Arguments", toolParams, `{"name":"browser_tabs","Arguments":{}}`},
		{"answer result twice", toolAnswer, `{"result":{"tabId":"t1"},"result":{"tabId":"t2"}}`},
		{"answer Result", toolAnswer, `{"Result":{"tabId":"t1"}}`},
		{"answer ERROR beside result", toolAnswer, `{"result":{"tabId":"t1"},"ERROR":{"code":"x","message":"y"}}`},
		{"error code twice", brokerFailed, `{"error":{"code":"capture","code":"busy","message":"m"}}`},
		{"error Code", brokerFailed, `{"error":{"Code":"busy","message":"m"}}`},
		{"Error", brokerFailed, `{"Error":{"code":"busy","message":"m"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, 10*time.Second)
			switch tt.kind {
			case viewParams, toolParams:
				b := startBroker(t, answer(http.StatusOK, `{"result":{}}`))
				w := newWorker(t, b.dir)
				call, want := w.capture, wire.RPCInvalidParams
				if tt.kind == toolParams {
					call = w.tool
				}
				got, err := call(ctx, 1, json.RawMessage(tt.input))
				if err != nil {
					t.Fatal(err)
				}
				if m := parseResponse(t, got, 1); m.Error == nil || m.Error.Code != want {
					t.Errorf("answer %s, want error %d", got, want)
				}
				if n := len(b.seen()); n != 0 {
					t.Errorf("the broker saw %d requests, want none", n)
				}
			case toolAnswer:
				b := startBroker(t, answer(http.StatusOK, tt.input))
				w := newWorker(t, b.dir)
				got, err := w.tool(ctx, 1, json.RawMessage(`{"name":"browser_tabs"}`))
				if err != nil {
					t.Fatal(err)
				}
				if m := parseResponse(t, got, 1); m.Error == nil || m.Error.Code != wire.RPCUnavailable {
					t.Errorf("relayed %s, want unavailable (broker answered badly)", got)
				}
			case brokerFailed:
				if got := brokerReason([]byte(tt.input)); got != wire.ReasonBrokerError {
					t.Errorf("brokerReason = %q, want %q", got, wire.ReasonBrokerError)
				}
			}
		})
	}
}
