package worker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

const pass = "wp_0123456789abcdef"

// newRunWorker returns a Worker that dials rp with the right pass.
func newRunWorker(t *testing.T, rp *replica, ipc, health string) *Worker {
	t.Helper()
	w, err := New(Config{APIURLs: []string{rp.srv.URL}, Pass: pass, IPCDir: ipc, ImageTag: "worker:1.2.3", HealthFile: health, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The hello states the image tag, bootstrap revision 2 and the features of the
// image: browserView for a browser image (an IPC directory), whether or not its broker
// is up yet; the health file exists exactly while the channel is open.
func TestRunHello(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ipc  string // "socket": a broker serves; "empty": no broker yet; "": shell image
		want []string
	}{
		{"browser image", "socket", []string{wire.FeatureBrowserView}},
		{"browser image before its broker", "empty", []string{wire.FeatureBrowserView}},
		{"shell image", "", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, 20*time.Second)
			var dir string
			switch tt.ipc {
			case "socket":
				dir = startBroker(t, answer(http.StatusOK, `{"envelope":{}}`)).dir
			case "empty":
				dir = ipcDir(t)
			}
			health := filepath.Join(t.TempDir(), "healthy")
			rp := startReplica(t, pass, 0)
			w := newRunWorker(t, rp, dir, health)
			errc := runWorker(t, w)

			c := rp.accept(t, ctx)
			if c.hello.ImageTag != "worker:1.2.3" || c.hello.BootstrapRevision != wire.BootstrapRevision ||
				c.hello.Features == nil || !slices.Equal(c.hello.Features, tt.want) {
				t.Fatalf("hello %+v, want image worker:1.2.3, revision 2, features %v", c.hello, tt.want)
			}
			if why := jsonrpc.ValidHello(c.hello); why != "" {
				t.Fatalf("a replica would refuse the hello: %s", why)
			}
			testenv.WaitFor(t, 5*time.Second, "health file", func() bool {
				_, err := os.Stat(health)
				return err == nil
			})

			// A shell image refuses browserView as method-not-found (an old image's
			// answer); a browser image whose broker is not up yet says broker_down; an
			// unknown method is method-not-found.
			switch tt.ipc {
			case "":
				c.send(t, ctx, 10, jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: requestID})
				if m := c.receive(t, ctx); m.Error == nil || m.Error.Code != wire.RPCMethodNotFound || m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonUnsupported {
					t.Errorf("browserView on a shell image: %+v, want method not found", m.Error)
				}
			case "empty":
				c.send(t, ctx, 10, jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: requestID})
				if m := c.receive(t, ctx); m.Error == nil || m.Error.Code != wire.RPCUnavailable || m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonBrokerDown {
					t.Errorf("browserView before the broker: %+v, want broker_down", m.Error)
				}
			}
			c.send(t, ctx, 11, "agentfy/unknown", struct{}{})
			if m := c.receive(t, ctx); m.Error == nil || m.Error.Code != wire.RPCMethodNotFound || *m.ID != 11 {
				t.Errorf("unknown method: %+v, want method not found", m.Error)
			}

			w.EndSession()
			// Reading completes the close handshake the worker started.
			if _, _, err := c.ws.Read(ctx); websocket.CloseStatus(err) != wire.CloseSessionEnded {
				t.Fatalf("the replica saw %v, want close %d", err, wire.CloseSessionEnded)
			}
			if err := waitResult(t, ctx, errc); !errors.Is(err, ErrSessionEnded) {
				t.Fatalf("Run = %v, want ErrSessionEnded", err)
			}
			if _, err := os.Stat(health); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("health file after the channel closed: %v, want none", err)
			}
		})
	}
}

// A worker that connected before its broker relays views as soon as the broker's socket
// accepts, and says broker_down while it does not — before the broker starts, after it
// stops (socket removed) or crashes (socket left behind, refusing) — all on one
// connection: nothing reconnects or restarts.
func TestViewsFollowTheBroker(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 30*time.Second)
	dir := ipcDir(t)
	rp := startReplica(t, pass, 0)
	runWorker(t, newRunWorker(t, rp, dir, ""))
	c := rp.accept(t, ctx)
	if !slices.Equal(c.hello.Features, []string{wire.FeatureBrowserView}) {
		t.Fatalf("hello features %v before the broker, want browserView", c.hello.Features)
	}
	const envelope = `{"envelope":{"publicKey":"04","iv":"00","tag":"11","ciphertext":"AA=="}}`
	id := uint64(100)
	view := func(step, wantReason string) {
		t.Helper()
		id++
		c.send(t, ctx, id, jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: requestID})
		m := c.receive(t, ctx)
		switch {
		case *m.ID != id:
			t.Fatalf("%s: answer to %d, want %d", step, *m.ID, id)
		case wantReason == "" && (m.Error != nil || string(m.Result) != envelope):
			t.Fatalf("%s: %+v %s, want the envelope", step, m.Error, m.Result)
		case wantReason != "" && (m.Error == nil || m.Error.Data == nil || m.Error.Data.Reason != wantReason || m.Error.Code != wire.RPCUnavailable):
			t.Fatalf("%s: %+v, want %s", step, m.Error, wantReason)
		}
	}

	view("before the broker", wire.ReasonBrokerDown)
	view("still before the broker", wire.ReasonBrokerDown)
	b, kill := serveBroker(t, dir, answer(http.StatusOK, envelope))
	view("broker started", "")
	kill(true)
	view("broker crashed, its socket left behind", wire.ReasonBrokerDown)
	if err := os.Remove(filepath.Join(dir, wire.SocketName)); err != nil {
		t.Fatal(err)
	}
	_, kill = serveBroker(t, dir, answer(http.StatusOK, envelope))
	view("broker restarted", "")
	kill(false)
	view("broker stopped", wire.ReasonBrokerDown)
	serveBroker(t, dir, answer(http.StatusOK, envelope))
	view("broker started again", "")

	if n := len(b.seen()); n != 1 {
		t.Errorf("the first broker saw %d requests, want 1", n)
	}
	if n := len(rp.attempts); n != 1 {
		t.Errorf("%d connections to the replica, want 1: nothing reconnects", n)
	}
}

// More requests in flight than the bound are refused busy at once, without reaching the
// broker; a finished one frees its slot.
func TestDispatchBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		params any
		bound  int
		path   string
	}{
		{"views", jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: requestID}, MaxConcurrentViews, wire.CapturePath},
		{"tools", jsonrpc.MethodToolsCall, jsonrpc.ToolCallParams{Name: wire.ToolTabs}, MaxConcurrentTools, wire.ToolPathPrefix + wire.ToolTabs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, 30*time.Second)
			release := make(chan struct{})
			var b *fakeBroker
			b = startBroker(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-b.stop:
					return
				}
				// The broker's two answers: a tool's result, a capture's envelope
				// (the worker reads a tool's answer strictly: no member of the other).
				if r.URL.Path == wire.CapturePath {
					answer(http.StatusOK, `{"envelope":{}}`)(w, r)
					return
				}
				answer(http.StatusOK, `{"result":{"ok":true}}`)(w, r)
			})
			rp := startReplica(t, pass, 0)
			w := newRunWorker(t, rp, b.dir, "")
			runWorker(t, w)
			c := rp.accept(t, ctx)

			for id := 1; id <= tt.bound; id++ {
				c.send(t, ctx, uint64(id), tt.method, tt.params)
			}
			// Every slot is taken once the broker holds them all.
			for range tt.bound {
				select {
				case r := <-b.reqs:
					if r.path != tt.path {
						t.Fatalf("broker got %s, want %s", r.path, tt.path)
					}
				case <-ctx.Done():
					t.Fatal("the broker did not get every request within the bound")
				}
			}
			over := uint64(tt.bound + 1)
			c.send(t, ctx, over, tt.method, tt.params)
			m := c.receive(t, ctx)
			if *m.ID != over || m.Error == nil || m.Error.Code != wire.RPCBusy || jsonrpc.ReasonOf(m.Error) != wire.ReasonBusy ||
				(tt.method == jsonrpc.MethodView && (m.Error.Data == nil || m.Error.Data.Reason != wire.ReasonBusy)) {
				t.Fatalf("request %d over the bound: %+v %+v, want busy", over, *m.ID, m.Error)
			}
			if n := len(b.seen()); n != 0 {
				t.Fatalf("broker saw %d requests over the bound, want none", n)
			}

			close(release)
			answered := map[uint64]bool{}
			for range tt.bound {
				m := c.receive(t, ctx)
				if m.Error != nil {
					t.Fatalf("request %d: %+v, want a result", *m.ID, m.Error)
				}
				answered[*m.ID] = true
			}
			if len(answered) != tt.bound {
				t.Fatalf("%d distinct answers, want %d", len(answered), tt.bound)
			}
			// The slots are free again.
			c.send(t, ctx, over+1, tt.method, tt.params)
			if m := c.receive(t, ctx); *m.ID != over+1 || m.Error != nil {
				t.Fatalf("after the release: %+v, want a result", m.Error)
			}
		})
	}
}

// The session ends for good — Run returns ErrSessionEnded and does not reconnect — only
// when the replica closes with wire.CloseSessionEnded or refuses the pass. Any other
// loss is reconnected.
func TestRunSessionEnd(t *testing.T) {
	t.Parallel()
	t.Run("replica closes with 4000", func(t *testing.T) {
		t.Parallel()
		ctx := testenv.Context(t, 20*time.Second)
		rp := startReplica(t, pass, 0)
		errc := runWorker(t, newRunWorker(t, rp, ipcDir(t), ""))
		c := rp.accept(t, ctx)
		if err := c.ws.Close(wire.CloseSessionEnded, "session stopped"); err != nil {
			t.Fatalf("close handshake: %v", err)
		}
		if err := waitResult(t, ctx, errc); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("Run = %v, want ErrSessionEnded", err)
		}
		if n := len(rp.attempts); n != 1 {
			t.Fatalf("%d attempts, want 1: no reconnect after the session ended", n)
		}
	})
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status)+" on the upgrade", func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, 20*time.Second)
			rp := startReplica(t, pass, status)
			errc := runWorker(t, newRunWorker(t, rp, ipcDir(t), ""))
			if err := waitResult(t, ctx, errc); !errors.Is(err, ErrSessionEnded) {
				t.Fatalf("Run = %v, want ErrSessionEnded", err)
			}
			if n := len(rp.attempts); n != 1 {
				t.Fatalf("%d attempts, want exactly 1", n)
			}
		})
	}
	t.Run("wrong pass", func(t *testing.T) {
		t.Parallel()
		ctx := testenv.Context(t, 20*time.Second)
		rp := startReplica(t, "another pass", 0)
		errc := runWorker(t, newRunWorker(t, rp, ipcDir(t), ""))
		if err := waitResult(t, ctx, errc); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("Run = %v, want ErrSessionEnded", err)
		}
		if got := <-rp.attempts; got != http.StatusUnauthorized {
			t.Fatalf("upgrade answered %d, want 401", got)
		}
	})
	t.Run("EndSession closes with 4000", func(t *testing.T) {
		t.Parallel()
		ctx := testenv.Context(t, 20*time.Second)
		rp := startReplica(t, pass, 0)
		w := newRunWorker(t, rp, ipcDir(t), "")
		errc := runWorker(t, w)
		c := rp.accept(t, ctx)
		w.EndSession()
		w.EndSession() // twice is harmless
		_, _, err := c.ws.Read(ctx)
		if got := websocket.CloseStatus(err); got != wire.CloseSessionEnded {
			t.Fatalf("the replica saw %v (status %d), want close %d", err, got, wire.CloseSessionEnded)
		}
		if err := waitResult(t, ctx, errc); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("Run = %v, want ErrSessionEnded", err)
		}
	})
	t.Run("lost socket reconnects", func(t *testing.T) {
		t.Parallel()
		ctx := testenv.Context(t, 20*time.Second)
		rp := startReplica(t, pass, 0)
		errc := runWorker(t, newRunWorker(t, rp, ipcDir(t), ""))
		c := rp.accept(t, ctx)
		if err := c.ws.Close(websocket.StatusGoingAway, "replica shutting down"); err != nil {
			t.Fatalf("close handshake: %v", err)
		}
		c2 := rp.accept(t, ctx) // the worker came back
		select {
		case err := <-errc:
			t.Fatalf("Run returned %v after a lost socket, want a reconnect", err)
		default:
		}
		// A policy close (a replaced connection) is a lost socket too.
		if err := c2.ws.Close(websocket.StatusPolicyViolation, "replaced"); err != nil {
			t.Fatalf("close handshake: %v", err)
		}
		c3 := rp.accept(t, ctx)
		if err := c3.ws.Close(wire.CloseSessionEnded, "session stopped"); err != nil {
			t.Fatalf("close handshake: %v", err)
		}
		if err := waitResult(t, ctx, errc); !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("Run = %v, want ErrSessionEnded", err)
		}
	})
	t.Run("server error retries", func(t *testing.T) {
		t.Parallel()
		ctx := testenv.Context(t, 20*time.Second)
		rp := startReplica(t, pass, http.StatusServiceUnavailable)
		runCtx, cancel := context.WithCancel(ctx)
		w := newRunWorker(t, rp, ipcDir(t), "")
		errc := make(chan error, 1)
		go func() { errc <- w.Run(runCtx) }()
		for range 2 {
			select {
			case <-rp.attempts:
			case <-ctx.Done():
				t.Fatal("the worker did not retry after a 503")
			}
		}
		cancel()
		if err := waitResult(t, ctx, errc); err != nil {
			t.Fatalf("Run after its context ended = %v, want nil", err)
		}
	})
}
