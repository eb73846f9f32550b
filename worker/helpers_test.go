package worker

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// requestID is a well-formed view request id (64 lowercase hex).
const requestID = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// ipcDir makes an empty IPC directory. It is short on purpose: a unix socket's path must
// fit in 108 bytes, which a test's own TempDir (named after the test) may not.
func ipcDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "agentfy-ipc")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// brokerRequest is one request the fake broker received.
type brokerRequest struct {
	method, path, contentType string
	body                      []byte
}

// fakeBroker is a real HTTP server on a unix socket named wire.SocketName in its own IPC
// directory, standing in for the browser broker.
type fakeBroker struct {
	dir  string
	reqs chan brokerRequest // every request received, in order of arrival
	stop chan struct{}      // closed at cleanup: releases handlers that wait on it
}

// startBroker serves h on a fresh IPC directory's broker socket until the test ends.
func startBroker(tb testing.TB, h http.HandlerFunc) *fakeBroker {
	tb.Helper()
	b, _ := serveBroker(tb, ipcDir(tb), h)
	return b
}

// serveBroker serves h on the broker socket in dir, an IPC directory a worker may
// already use, until the test ends or kill is called. kill(true) stops it as a crash
// would, leaving the socket file behind (connections are then refused); kill(false)
// stops it and removes the socket, as a broker that shuts down does.
func serveBroker(tb testing.TB, dir string, h http.HandlerFunc) (b *fakeBroker, kill func(stale bool)) {
	tb.Helper()
	b = &fakeBroker{dir: dir, reqs: make(chan brokerRequest, 256), stop: make(chan struct{})}
	ln, err := net.Listen("unix", filepath.Join(b.dir, wire.SocketName))
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			select {
			case b.reqs <- brokerRequest{r.Method, r.URL.Path, r.Header.Get("Content-Type"), body}:
			default:
				tb.Errorf("fake broker: more than %d requests", cap(b.reqs))
			}
			h(w, r)
		}),
	}
	go func() { _ = srv.Serve(ln) }()
	var once sync.Once
	kill = func(stale bool) {
		once.Do(func() {
			ln.(*net.UnixListener).SetUnlinkOnClose(!stale)
			close(b.stop)
			_ = srv.Close()
		})
	}
	tb.Cleanup(func() { kill(false) })
	return b, kill
}

// seen returns the requests received so far.
func (b *fakeBroker) seen() []brokerRequest {
	var out []brokerRequest
	for {
		select {
		case r := <-b.reqs:
			out = append(out, r)
		default:
			return out
		}
	}
}

// answer returns a handler that answers every request with status and body.
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// newWorker returns a Worker for ipc (the API URL is never dialled by the tests that use
// it).
func newWorker(tb testing.TB, ipc string) *Worker {
	tb.Helper()
	w, err := New(Config{APIURLs: []string{"http://127.0.0.1:1"}, Pass: "wp_test", IPCDir: ipc, ImageTag: "worker:test", Log: testenv.Logger(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// parseResponse parses a worker's answer, which must be a JSON-RPC response to id.
func parseResponse(tb testing.TB, b []byte, id uint64) *jsonrpc.Message {
	tb.Helper()
	m, err := jsonrpc.Parse(b)
	if err != nil {
		tb.Fatalf("answer %s: %v", b, err)
	}
	if !m.IsResponse() || *m.ID != id {
		tb.Fatalf("answer %s: not a response to %d", b, id)
	}
	return m
}

// replica is a fake API replica: an httptest server that upgrades wire.ChannelPath with
// github.com/coder/websocket for the right worker pass, reads the hello and answers it,
// then hands the socket to the test.
type replica struct {
	srv      *httptest.Server
	conns    chan *replicaConn // accepted sockets whose hello was answered
	attempts chan int          // the status of each upgrade attempt
}

// replicaConn is one accepted worker socket.
type replicaConn struct {
	ws    *websocket.Conn
	hello jsonrpc.HelloParams
}

// startReplica starts a fake replica accepting pass. status, when not 0, refuses every
// upgrade with that status instead.
func startReplica(tb testing.TB, pass string, status int) *replica {
	tb.Helper()
	rp := &replica{conns: make(chan *replicaConn, 16), attempts: make(chan int, 64)}
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.ChannelPath, func(w http.ResponseWriter, r *http.Request) {
		code := status
		if code == 0 && r.Header.Get("Authorization") != "Bearer "+pass {
			code = http.StatusUnauthorized
		}
		select {
		case rp.attempts <- code:
		default:
		}
		if code != 0 {
			http.Error(w, "refused", code)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(jsonrpc.MaxMessage)
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		_, data, err := ws.Read(ctx)
		if err != nil {
			// The worker went away (its test is ending); a test waiting for this
			// socket fails on its own deadline.
			_ = ws.CloseNow()
			return
		}
		m, err := jsonrpc.Parse(data)
		var hello jsonrpc.HelloParams
		if err != nil || !m.IsRequest() || m.Method != jsonrpc.MethodHello || json.Unmarshal(m.Params, &hello) != nil {
			tb.Errorf("fake replica: first message %s is not a hello", data)
			_ = ws.CloseNow()
			return
		}
		res, _ := jsonrpc.NewResult(*m.ID, json.RawMessage(`{"sessionId":"s1"}`))
		if err := ws.Write(ctx, websocket.MessageText, res); err != nil {
			_ = ws.CloseNow()
			return
		}
		rp.conns <- &replicaConn{ws: ws, hello: hello}
		// The socket belongs to the test from here; the handler returns only at the
		// end, so that httptest's Close does not wait for it.
		<-done
		_ = ws.CloseNow()
	})
	rp.srv = httptest.NewServer(mux)
	tb.Cleanup(rp.srv.Close)
	tb.Cleanup(func() { close(done) })
	return rp
}

// runWorker runs w until the test ends and returns the channel of Run's result.
func runWorker(tb testing.TB, w *Worker) <-chan error {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- w.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			tb.Errorf("Run did not return after its context ended")
		}
	})
	return errc
}

// accept waits for the worker's next socket on rp.
func (rp *replica) accept(tb testing.TB, ctx context.Context) *replicaConn {
	tb.Helper()
	select {
	case c := <-rp.conns:
		return c
	case <-ctx.Done():
		tb.Fatal("the worker did not connect")
		return nil
	}
}

// send writes a request to the worker.
func (c *replicaConn) send(tb testing.TB, ctx context.Context, id uint64, method string, params any) {
	tb.Helper()
	b, err := jsonrpc.NewRequest(id, method, params)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		tb.Fatalf("send %s: %v", method, err)
	}
}

// receive reads the worker's next message, which must be a response.
func (c *replicaConn) receive(tb testing.TB, ctx context.Context) *jsonrpc.Message {
	tb.Helper()
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		tb.Fatalf("read from worker: %v", err)
	}
	m, err := jsonrpc.Parse(data)
	if err != nil || !m.IsResponse() {
		tb.Fatalf("worker sent %s, want a response", data)
	}
	return m
}

// waitResult waits for Run's result until ctx ends.
func waitResult(tb testing.TB, ctx context.Context, errc <-chan error) error {
	tb.Helper()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		tb.Fatal("Run did not return")
		return nil
	}
}
