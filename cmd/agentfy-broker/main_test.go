package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

const e2ePass = "e2e-broker-pass-4f1c9a"

// collectorKey is a trace collector's key in the broker's environment.
const collectorKey = "collector-key-7d2e0b"

// TestBrokerProcess runs the built binary against a local consumption
// endpoint and a local site: it serves the socket, opens a tab, answers an
// capture the test can open, keeps the pass out of Chromium's command
// lines and environments and out of the logs, keeps URLs and titles out of
// the logs, and on SIGTERM removes the socket and stops Chromium.
func TestBrokerProcess(t *testing.T) {
	testenv.SkipUnderShort(t, "TestBrokerProcess", testenv.NeedsChromium)
	bin := filepath.Join(t.TempDir(), "agentfy-broker")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The site the agent browses: its URL path and title must not be logged.
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Confidential Title</title><body style="background:rgb(0,0,255)">`)
	}))
	t.Cleanup(site.Close)
	pageURL := site.URL + "/private-path"

	// The API's consumption route, holding one grant, behind a replica that is
	// down: the broker moves on to the next URL.
	consume := testenv.NewConsumeAPI(e2ePass)
	api := httptest.NewServer(consume)
	t.Cleanup(api.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	ipc, err := os.MkdirTemp("", "agentfy-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(ipc) })
	// Searchable, not readable: a broker running as root starts Chromium as another
	// user, which must reach its profile.
	profiles := filepath.Join(ipc, "profiles")
	if err := os.Mkdir(profiles, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ipc, 0o711); err != nil { //nolint:gosec // searchable only
		t.Fatal(err)
	}
	chromium := os.Getenv("AGENTFY_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}

	var lc net.ListenConfig
	ml, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ml.Addr().String()
	_ = ml.Close()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		envMetricsAddr+"="+metricsAddr,
		envAPIURL+"="+down.URL+","+api.URL,
		envPass+"="+e2ePass,
		envIPCDir+"="+ipc,
		envChromium+"="+chromium,
		envProfileDir+"="+profiles,
		envLogLevel+"=debug",
		// The site is on loopback, which the agent's browser may not reach unless
		// allowed.
		envBrowserAllow+"="+site.Listener.Addr().String(),
		// A collector's key, which Chromium must never see.
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer "+collectorKey,
	)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited receives the exit once; waitDone is closed after it.
	exited := make(chan error, 1)
	waitDone := make(chan struct{})
	var logs testenv.Buffer
	listening := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintf(&logs, "%s\n", sc.Bytes())
			if strings.Contains(sc.Text(), `"message":"listening"`) {
				once.Do(func() { close(listening) })
			}
		}
	}()
	go func() {
		<-scanned
		exited <- cmd.Wait()
		close(waitDone)
	}()
	t.Cleanup(func() {
		// On failure the broker dies at once; its parent-death signal then kills Chromium.
		_ = cmd.Process.Kill()
		<-waitDone
	})
	select {
	case <-listening:
	case err := <-exited:
		t.Fatalf("broker exited: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not start listening")
	}
	// The pass came inline: the broker says where it stays and what to use instead.
	if !strings.Contains(logs.String(), "prefer "+envPassFile) {
		t.Errorf("no warning about the inline pass:\n%s", logs.String())
	}

	socket := filepath.Join(ipc, wire.SocketName)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}, Timeout: 30 * time.Second}
	post := func(path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://broker"+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	if fi, err := os.Lstat(socket); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, %v", fi, err)
	}
	if status, body := post("/tools/browser_open", `{"url":"`+pageURL+`"}`); status != 200 || !strings.Contains(string(body), "Confidential Title") {
		t.Fatalf("browser_open: %d %s\n%s", status, body, logs.String())
	}

	requestID, key := consume.Issue(t)
	status, body := post("/observe", `{"requestId":"`+requestID+`"}`)
	if status != 200 {
		t.Fatalf("capture: %d %s", status, body)
	}
	var sealed envelope.Sealed
	if err := json.Unmarshal(body, &sealed); err != nil {
		t.Fatal(err)
	}
	plaintext, err := envelope.Open(key, requestID, sealed.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	var page wire.Page
	if err := json.Unmarshal(plaintext, &page); err != nil || page.URL != pageURL || !isJPEGPage(page) {
		t.Fatalf("page %q %q: %v", page.URL, page.Title, err)
	}

	// The capture is counted on the metrics endpoint, with no URL or title in it.
	mreq, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	mresp, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	_ = mresp.Body.Close()
	for _, want := range []string{"agentfy_broker_chromium_sandboxed 1", `agentfy_broker_captures_total{result="ok"} 1`, `agentfy_broker_captures_total{result="failed"} 0`, "agentfy_broker_capture_duration_seconds_count 1", "agentfy_broker_frame_bytes_count 1"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(metrics), pageURL) || strings.Contains(string(metrics), "Confidential") {
		t.Error("/metrics names the page")
	}

	// The pass and the collector's key reach no child: neither its command line nor
	// its environment, which holds no variable of the broker's configuration or
	// traces at all.
	children := descendants(t, cmd.Process.Pid)
	if len(children) == 0 {
		t.Fatal("no child processes found")
	}
	for _, pid := range children {
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), f))
			if err == nil && bytes.Contains(b, []byte(e2ePass)) {
				t.Errorf("the pass is in the %s of child %d", f, pid)
			}
			if err == nil && bytes.Contains(b, []byte(collectorKey)) {
				t.Errorf("the collector's key is in the %s of child %d", f, pid)
			}
		}
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			continue // a helper that exited meanwhile
		}
		for kv := range bytes.SplitSeq(environ, []byte{0}) {
			if bytes.HasPrefix(kv, []byte("AGENTFY_")) || bytes.HasPrefix(kv, []byte("OTEL_")) {
				name, _, _ := bytes.Cut(kv, []byte("="))
				t.Errorf("child %d has %s in its environment", pid, name)
			}
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("broker exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop on SIGTERM")
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	if entries, _ := os.ReadDir(profiles); len(entries) != 0 {
		t.Errorf("profile left behind: %v", entries)
	}
	// Chromium's processes go with it; the browser process was waited for,
	// its helpers may take a moment longer.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range children {
		for alive(pid) && time.Now().Before(deadline) {
			<-time.After(50 * time.Millisecond) // polling another process's exit
		}
		if alive(pid) {
			t.Errorf("child %d still running", pid)
		}
	}

	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
	for _, secret := range []string{e2ePass, "private-path", "Confidential Title", site.URL, api.URL, down.URL} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs show %q:\n%s", secret, logs.String())
		}
	}
}

// isJPEGPage checks the page carries a JPEG.
func isJPEGPage(p wire.Page) bool {
	jpg := p.JPEG()
	return p.ContentType == "image/jpeg" && bytes.HasPrefix(jpg, []byte{0xFF, 0xD8, 0xFF}) && bytes.HasSuffix(jpg, []byte{0xFF, 0xD9})
}

// descendants lists the processes below pid.
func descendants(tb testing.TB, pid int) []int {
	tb.Helper()
	return testenv.Descendants(pid)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool { return testenv.Alive(pid) }
