package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
	"github.com/agentfy/agentfy/worker"
)

// The stand-in broker seals as the real one does: behind a real worker attached to a
// real replica, a member's view through the API — whose requester opens, validates and
// renders it with the code that opens real frames — is the stand-in's JPEG, titled
// with its agent, byte for byte; and a request id it cannot redeem is refused with the
// broker's error body, which the viewer sees as a 503.
func TestStandInSealsAsTheBroker(t *testing.T) {
	c := stacktest.Start(t, stack.Options{Replicas: 1})
	ctx := c.Context(t)
	agent := c.NewAgent(t, "agent-standin")
	_, passes, err := c.St.Sess.Start(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	apiURL := c.St.Replicas[0].URL
	dir := t.TempDir()
	works := make(chan time.Duration, 4)
	stop, err := startStandIn(ctx, dir, agent, passes.Broker, []string{apiURL}, http.DefaultClient, func(d time.Duration) { works <- d })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	w, err := worker.New(worker.Config{APIURLs: []string{apiURL}, Pass: passes.Worker, IPCDir: dir, ImageTag: "capacity", Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})

	var r stacktest.Response
	testenv.WaitFor(t, 30*time.Second, "the worker's channel", func() bool {
		r = c.Poll(t, agent)
		return r.Status == http.StatusOK
	})
	res := r.Result(t)
	frame, err := standInFrame()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Live || res.Page == nil || res.Page.Title != agent || res.Page.URL != "https://capacity.invalid/"+agent {
		t.Fatalf("view %s", r.Summary())
	}
	got, err := base64.StdEncoding.DecodeString(res.Page.Data)
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("the frame is not the stand-in's JPEG (%d bytes, %v)", len(got), err)
	}
	if d := <-works; d <= 0 {
		t.Fatalf("work %v", d)
	}
	if len(frame) < standInFrameBytes*3/4 || len(frame) > standInFrameBytes*5/4 {
		t.Errorf("frame %d bytes, want about %d", len(frame), standInFrameBytes)
	}

	// A request id the API never issued: the consume route refuses it, and the stand-in
	// answers with the broker's error body and status.
	sock := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, wire.SocketName))
	}}}
	resp, err := sock.Post("http://broker"+wire.CapturePath, "application/json", strings.NewReader(`{"requestId":"`+strings.Repeat("cd", 32)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var e wire.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != wire.BrokerStatus(wire.ReasonRefused) || e.Error.Code != wire.ReasonRefused {
		t.Fatalf("unknown id: %d %+v %v", resp.StatusCode, e, err)
	}
}
