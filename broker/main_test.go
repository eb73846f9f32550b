package broker

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/broker/egress"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// testChromium is the one Chromium the package's tests share, launched by the first
// test that asks for it (sharedChromium) and closed by TestMain: the machine has two
// cores and a launch costs about 0.4 s. Tests that use it must not run in parallel
// with each other, since each broker follows every tab. Under -short none is launched
// and the tests that need one skip.
var testChromium struct {
	once sync.Once
	c    *Chromium
	err  error
}

// testLoopback is the egress policy of the shared Chromium: loopback allowed, for the
// test sites.
var testLoopback egress.Policy

// testPass is the broker pass the fake API expects.
const testPass = "test-broker-pass-0123456789"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// The test sites listen on loopback: the shared Chromium's proxy lets it reach
	// them (TestEgressOfThePage checks a Chromium that may not).
	var err error
	if testLoopback, err = egress.Parse("127.0.0.0/8,::1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if c := testChromium.c; c != nil {
			_ = c.Close(context.Background())
		}
	}()
	return m.Run()
}

// sharedChromium returns the package's shared Chromium, launching it on first use; a
// launch that failed fails every test that asks. Under -short it skips tb.
func sharedChromium(tb testing.TB) *Chromium {
	tb.Helper()
	testenv.SkipUnderShort(tb, "sharedChromium", testenv.NeedsChromium)
	testChromium.once.Do(func() {
		logger := zerolog.New(zerolog.NewTestWriter(nil)).Level(zerolog.Disabled)
		ctx, cancel := context.WithTimeout(context.Background(), DefaultLaunchTimeout)
		defer cancel()
		testChromium.c, testChromium.err = LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(tb), Leakless: true, Egress: testLoopback}, logger)
	})
	if testChromium.err != nil {
		tb.Fatalf("broker tests need Chromium: %v", testChromium.err)
	}
	return testChromium.c
}

// testLogger writes the broker's logs to the test log.
func testLogger(tb testing.TB) zerolog.Logger {
	tb.Helper()
	return zerolog.New(zerolog.NewTestWriter(tb)).Level(zerolog.DebugLevel).With().Timestamp().Logger()
}

// fakeAPI serves the shared fake consume route (testenv.ConsumeAPI) and adds what this
// package's tests watch: how many calls it got, and a way to keep one in flight.
type fakeAPI struct {
	consume *testenv.ConsumeAPI
	srv     *httptest.Server

	calls atomic.Int64
	// hold, if set, is received from before answering, to keep a
	// consumption in flight; entered is sent to when one is held.
	hold    chan struct{}
	entered chan struct{}
}

func newFakeAPI(tb testing.TB) *fakeAPI {
	tb.Helper()
	a := &fakeAPI{consume: testenv.NewConsumeAPI(testPass)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		if a.hold != nil {
			a.entered <- struct{}{}
			<-a.hold
		}
		a.consume.ServeHTTP(w, r)
	}))
	tb.Cleanup(a.srv.Close)
	return a
}

// issue, refuse and answer are testenv.ConsumeAPI's Issue, Refuse and Answer under the names
// this package's tests call.
func (a *fakeAPI) issue(tb testing.TB) (string, *ecdh.PrivateKey) {
	tb.Helper()
	return a.consume.Issue(tb)
}

func (a *fakeAPI) refuse(status int) { a.consume.Refuse(status) }

func (a *fakeAPI) answer(body string) { a.consume.Answer(body) }

// testBroker is a broker on the shared Chromium, served on a unix socket.
type testBroker struct {
	*Broker
	api      *fakeAPI
	client   *http.Client
	socket   string
	captures atomic.Int64 // capture attempts, from Config.OnCapture
}

// newTestBroker starts a broker on the shared Chromium with no tab open, and
// serves it on a socket in a fresh directory. edit may change the config.
func newTestBroker(tb testing.TB, clock Clock, edit func(*Config)) *testBroker {
	tb.Helper()
	return newTestBrokerOn(tb, sharedChromium(tb).Browser, clock, edit)
}

// newTestBrokerOn is newTestBroker on a given connection to the shared
// Chromium.
func newTestBrokerOn(tb testing.TB, browser *rod.Browser, clock Clock, edit func(*Config)) *testBroker {
	tb.Helper()
	closeAllTabs(tb)
	tb.Cleanup(func() { closeAllTabs(tb) })

	tbr := &testBroker{api: newFakeAPI(tb)}
	consume, err := NewConsumeClient(tbr.api.srv.Client(), tbr.api.srv.URL, testPass)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.OnCapture = func(CaptureStats) { tbr.captures.Add(1) }
	// The test sites listen on loopback (newSite); TestEgressRefused checks the
	// refusal with the default policy.
	cfg.Egress = testEgress(tb, "127.0.0.1")
	if edit != nil {
		edit(&cfg)
	}
	if clock == nil {
		clock = SystemClock{}
	}
	b, err := New(tb.Context(), browser, consume, cfg, testLogger(tb), clock)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Shutdown)
	tbr.Broker = b

	// Unix socket paths are limited to about 100 bytes; t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "agentfy-broker-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	ln, err := Listen(tb.Context(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	tbr.socket = ln.Addr().String()
	srv := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	tbr.client = &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", tbr.socket)
			},
		},
		Timeout: 90 * time.Second,
	}
	tb.Cleanup(tbr.client.CloseIdleConnections)
	return tbr
}

// post sends a JSON body to path on the broker's socket and returns the
// status and body.
func (tbr *testBroker) post(tb testing.TB, path string, body any) (int, []byte) {
	tb.Helper()
	var data []byte
	switch v := body.(type) {
	case string:
		data = []byte(v)
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			tb.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, "http://broker"+path, strings.NewReader(string(data)))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := tbr.client.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, out
}

// open opens url through browser_open and returns the tab.
func (tbr *testBroker) open(tb testing.TB, url string) Tab {
	tb.Helper()
	status, body := tbr.post(tb, "/tools/browser_open", map[string]string{"url": url})
	if status != http.StatusOK {
		tb.Fatalf("browser_open: %d %s", status, body)
	}
	var res struct{ Result Tab }
	if err := json.Unmarshal(body, &res); err != nil || res.Result.TabID == "" {
		tb.Fatalf("browser_open: %s (%v)", body, err)
	}
	return res.Result
}

// play runs steps through browser_play and returns the tab.
func (tbr *testBroker) play(tb testing.TB, tabID string, steps ...Step) Tab {
	tb.Helper()
	if steps == nil {
		steps = []Step{}
	}
	status, body := tbr.post(tb, "/tools/browser_play", map[string]any{"tabId": tabID, "steps": steps})
	if status != http.StatusOK {
		tb.Fatalf("browser_play: %d %s", status, body)
	}
	var res struct{ Result Tab }
	if err := json.Unmarshal(body, &res); err != nil {
		tb.Fatal(err)
	}
	return res.Result
}

// closeTab closes a tab through browser_close.
func (tbr *testBroker) closeTab(tb testing.TB, tabID string) {
	tb.Helper()
	status, body := tbr.post(tb, "/tools/browser_close", map[string]string{"tabId": tabID})
	if status != http.StatusOK || string(body) != `{"result":{"closed":true}}`+"\n" {
		tb.Fatalf("browser_close: %d %s", status, body)
	}
}

// capture issues a request id, captures through the socket and returns the
// status, the body and the key that opens it.
func (tbr *testBroker) capture(tb testing.TB) (int, []byte, string, *ecdh.PrivateKey) {
	tb.Helper()
	id, key := tbr.api.issue(tb)
	status, body := tbr.post(tb, "/observe", map[string]string{"requestId": id})
	return status, body, id, key
}

// capturePage captures, expects 200, opens the envelope with envelope.Open
// and returns the page, or nil for a null plaintext.
func (tbr *testBroker) capturePage(tb testing.TB) *wire.Page {
	tb.Helper()
	status, body, id, key := tbr.capture(tb)
	if status != http.StatusOK {
		tb.Fatalf("capture: %d %s", status, body)
	}
	return openPage(tb, key, id, body, envelopeOpen)
}

// opener opens a wire body and returns the plaintext.
type opener func(tb testing.TB, key *ecdh.PrivateKey, requestID string, body []byte) ([]byte, error)

// envelopeOpen opens a wire body with the Go envelope package.
func envelopeOpen(tb testing.TB, key *ecdh.PrivateKey, requestID string, body []byte) ([]byte, error) {
	tb.Helper()
	var sealed envelope.Sealed
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sealed); err != nil {
		return nil, err
	}
	return envelope.Open(key, requestID, sealed.Envelope)
}

// openPage opens a wire body and checks the plaintext's exact shape.
func openPage(tb testing.TB, key *ecdh.PrivateKey, requestID string, body []byte, open opener) *wire.Page {
	tb.Helper()
	plaintext, err := open(tb, key, requestID, body)
	if err != nil {
		tb.Fatalf("open envelope: %v (body %.200s)", err, body)
	}
	if string(plaintext) == "null" {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(plaintext, &fields); err != nil {
		tb.Fatalf("plaintext: %v", err)
	}
	want := []string{"url", "title", "capturedAt", "contentType", "data"}
	if _, ok := fields["masked"]; ok {
		// Only a masked frame says so, with a positive count, after the data; and, when
		// it is masked whole, why, last.
		want = append(want, "masked")
		tail := `","masked":` + string(fields["masked"]) + `}`
		if hidden, ok := fields["hidden"]; ok {
			want = append(want, "hidden")
			var why string
			if err := json.Unmarshal(hidden, &why); err != nil || !slices.Contains(wire.HiddenReasons, why) {
				tb.Fatalf("hidden is %s, want one of %v", hidden, wire.HiddenReasons)
			}
			tail = `","masked":` + string(fields["masked"]) + `,"hidden":` + string(hidden) + `}`
		}
		if n, err := strconv.Atoi(string(fields["masked"])); err != nil || n < 1 || !bytes.HasSuffix(plaintext, []byte(tail)) {
			tb.Fatalf("masked is %s, want a positive count after the data (and hidden after it, last)", fields["masked"])
		}
	}
	if len(fields) != len(want) {
		tb.Fatalf("plaintext fields %v, want exactly %v", keys(fields), want)
	}
	for _, k := range want {
		if _, ok := fields[k]; !ok {
			tb.Fatalf("plaintext lacks %q", k)
		}
	}
	// The requesting replica's own check of a page.
	p, err := wire.ParsePage(plaintext)
	if err != nil || p == nil {
		tb.Fatalf("plaintext is not a page the API accepts: %v", err)
	}
	return p
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// closeAllTabs closes every page target of the shared Chromium and waits
// until Chromium lists none. A target may be closing already (listed, but
// unknown to closeTarget); its destruction is awaited all the same.
func closeAllTabs(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := sharedChromium(tb).Browser.Context(ctx)
	events := b.Event()
	for {
		targets, err := proto.TargetGetTargets{}.Call(b)
		if err != nil {
			tb.Fatalf("list targets: %v", err)
		}
		pages := 0
		for _, t := range targets.TargetInfos {
			if t.Type == proto.TargetTargetInfoTypePage {
				pages++
				_, _ = proto.TargetCloseTarget{TargetID: t.TargetID}.Call(b)
			}
		}
		if pages == 0 {
			return
		}
		// Wait for a destruction before listing again.
		for destroyed := false; !destroyed; {
			select {
			case msg, ok := <-events:
				if !ok {
					tb.Fatalf("closing tabs: %v", ctx.Err())
				}
				destroyed = msg.Method == "Target.targetDestroyed"
			case <-ctx.Done():
				tb.Fatalf("closing tabs: %d still open", pages)
			}
		}
	}
}

// testSession attaches the test's own CDP session to a tab, to change it
// or its emulation from outside the broker.
func testSession(tb testing.TB, tabID string) cdpSession {
	tb.Helper()
	browser := sharedChromium(tb).Browser
	res, err := proto.TargetAttachToTarget{TargetID: proto.TargetTargetID(tabID), Flatten: true}.Call(browser.Context(tb.Context()))
	if err != nil {
		tb.Fatalf("attach: %v", err)
	}
	s := cdpSession{ctx: tb.Context(), browser: browser, id: res.SessionID}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = proto.TargetDetachFromTarget{SessionID: res.SessionID}.Call(browser.Context(ctx))
	})
	return s
}

// evaluate runs script in a tab through the test's session.
func evaluate(tb testing.TB, s cdpSession, script string) {
	tb.Helper()
	res, err := proto.RuntimeEvaluate{Expression: script, AwaitPromise: true}.Call(s)
	if err != nil {
		tb.Fatalf("evaluate: %v", err)
	}
	if res.ExceptionDetails != nil {
		tb.Fatalf("evaluate: %s", res.ExceptionDetails.Text)
	}
}
