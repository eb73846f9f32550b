package broker

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/cdp"
	"github.com/go-rod/rod/lib/proto"
)

// cdpCall is one command sent to Chromium.
type cdpCall struct {
	method      string
	session     string
	hasDeadline bool
	params      any
}

// recordingClient records the commands a browser sends, and sends them through
// the shared Chromium's browser.
type recordingClient struct {
	next *rod.Browser

	mu    sync.Mutex
	calls []cdpCall // guarded by mu
}

// Call records the command and sends it.
func (c *recordingClient) Call(ctx context.Context, sessionID, method string, params any) ([]byte, error) {
	_, ok := ctx.Deadline()
	c.mu.Lock()
	c.calls = append(c.calls, cdpCall{method, sessionID, ok, params})
	c.mu.Unlock()
	return c.next.Call(ctx, sessionID, method, params)
}

// Event is never read: the recorded browser is not connected on its own (see
// recordingBrowser).
func (c *recordingClient) Event() <-chan *cdp.Event { return nil }

// take returns the recorded commands and forgets them.
func (c *recordingClient) take() []cdpCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

// put records calls again, ahead of any recorded since.
func (c *recordingClient) put(calls []cdpCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(calls, c.calls...)
}

// recordingBrowser is the shared Chromium's browser with the commands it sends
// recorded, without a default device. Chromium has one DevTools connection, its
// pipe: the recorded browser is a copy of the shared one (its events, its
// connection) whose commands go through the recorder; the shared browser's own
// (the tests' sessions, closeAllTabs) are not recorded.
func recordingBrowser(tb testing.TB) (*rod.Browser, *recordingClient) {
	tb.Helper()
	shared := sharedChromium(tb).Browser
	rec := &recordingClient{next: shared}
	return shared.Context(tb.Context()).Client(rec), rec
}

// TestCaptureCDPCalls records what capture sends to Chromium: only the
// read-only capture sequence (and the attachment of its own session), each
// under a deadline; no activation, DOM change, input or emulation, and no script
// in the page's world. With masks, the sequence adds only DOM snapshots (never
// DOMSnapshot.enable), Chromium's work counters, and the read of what moves — one
// function, motion.js, called in an isolated world of the broker's own; without, it
// is exactly the three capture calls.
func TestCaptureCDPCalls(t *testing.T) {
	s := newSite(t)
	browser, rec := recordingBrowser(t)
	// The production deadline, not a short one: the stuck tab below waits it out, and a
	// 1 s deadline failed a healthy capture on a machine loaded by an image build.
	tb := newTestBrokerOn(t, browser, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	a := tb.open(t, s.URL+"/color/a")
	tb.play(t, a.TabID, Step{Action: ActionClick, Selector: "body"})
	b := tb.open(t, s.URL+"/bands")
	if got := rec.take(); !slices.ContainsFunc(got, func(c cdpCall) bool { return c.method == "Target.activateTarget" }) {
		t.Fatalf("the recorder missed the tools' calls: %v", got)
	}

	allowed := []string{
		"Target.attachToTarget", // once per tab, a session of its own
		"Target.getTargetInfo",
		"Page.getLayoutMetrics",
		"DOMSnapshot.captureSnapshot", // the masks' read, before and after the screenshot
		"Page.captureScreenshot",
		// What moves (motion.go): the broker's own world, the secrets resolved in it,
		// motion.js called there, its objects released; the work counters.
		"Page.createIsolatedWorld", "DOM.resolveNode", "Runtime.callFunctionOn", "Runtime.releaseObjectGroup",
		"Performance.enable", "Performance.getMetrics",
		// Frames of another process (frames.go): the frame element's frame and boxes,
		// a session of the broker's own on the frame, detached when it is not needed.
		"DOM.describeNode", "DOM.getBoxModel", "Target.detachFromTarget",
		// Pins (pins.go): sessions of the broker's own on the tab, with the DOM and
		// Overlay domains on (the overlay needs the DOM's), the secrets highlighted in
		// opaque grey for the screenshot and the highlights hidden again.
		"DOM.enable", "Overlay.enable", "Overlay.highlightNode", "Overlay.hideHighlight",
	}
	check := func(what string) (motionCalls int) {
		t.Helper()
		calls := rec.take()
		if len(calls) == 0 {
			t.Fatalf("%s: no CDP calls recorded", what)
		}
		for _, c := range calls {
			if !slices.Contains(allowed, c.method) {
				t.Errorf("%s sent %s", what, c.method)
			}
			if !c.hasDeadline {
				t.Errorf("%s sent %s without a deadline", what, c.method)
			}
			switch p := c.params.(type) {
			case proto.RuntimeCallFunctionOn:
				motionCalls++
				if !slices.Contains([]string{motionScript, watchStart, watchTake}, p.FunctionDeclaration) || p.ExecutionContextID == 0 || p.ObjectID != "" {
					t.Errorf("%s called a function other than motion.js's and watch.js's, or outside its isolated world", what)
				}
			case proto.PageCreateIsolatedWorld:
				if p.GrantUniveralAccess || p.WorldName != worldName {
					t.Errorf("%s created a world %+v", what, p)
				}
			case proto.OverlayHighlightNode:
				if p.HighlightConfig != pinConfig || p.BackendNodeID == 0 {
					t.Errorf("%s highlighted %+v, want a node in the pins' grey", what, p)
				}
			}
		}
		return motionCalls
	}

	for range 2 {
		if p := tb.capturePage(t); p == nil || p.URL != a.URL {
			t.Fatalf("observed %s, want a", describe(p))
		}
		check("capturing the played tab")
	}
	tb.closeTab(t, a.TabID)
	rec.take()
	if p := tb.capturePage(t); p == nil || p.URL != b.URL {
		t.Fatalf("observed %s, want b", describe(p))
	}
	check("capturing the last opened tab")

	// A page with secrets: the masks are painted from read-only reads alone.
	checkout := tb.open(t, demoSite(t).URL+"/checkout.html")
	rec.take()
	if p := tb.capturePage(t); p == nil || p.Masked == 0 {
		t.Fatalf("observed %s, want the checkout page masked", describe(p))
	}
	if check("capturing a page with secrets") == 0 {
		t.Error("the masked capture did not read what moves")
	}
	tb.closeTab(t, checkout.TabID)

	// A page with secrets in frames of another process: the same reads in each frame,
	// through a session of the broker's own on it.
	framed := tb.open(t, demoSite(t).URL+"/leaks/cross-site-frame.html")
	rec.take()
	if p := tb.capturePage(t); p == nil || p.Masked != 2 {
		t.Fatalf("observed %s, want the cross-site frame's two secrets masked", describe(p))
	}
	calls := rec.take()
	sessions := map[string]bool{}
	for _, c := range calls {
		if c.method == "DOMSnapshot.captureSnapshot" {
			sessions[c.session] = true
		}
	}
	if len(sessions) != 3 {
		t.Errorf("snapshots read through %d sessions, want the page's and its two frames'", len(sessions))
	}
	rec.put(calls)
	check("capturing a page with secrets in frames of another process")
	tb.closeTab(t, framed.TabID)

	// A stuck tab: the capture fails under its deadline, still with nothing
	// but the allowed calls.
	sess := testSession(t, b.TabID)
	evaluate(t, sess, `setTimeout(() => { for (;;) {} }, 0)`)
	rec.take()
	if status, body, _, _ := tb.capture(t); status != http.StatusServiceUnavailable {
		t.Fatalf("capturing a stuck tab: %d %s", status, body)
	}
	if err := (proto.RuntimeTerminateExecution{}).Call(sess); err != nil {
		t.Fatal(err)
	}
	check("a failed capture")

	tb.closeTab(t, b.TabID)
	rec.take()
	if p := tb.capturePage(t); p != nil {
		t.Fatalf("observed %s, want null", describe(p))
	}
	if calls := rec.take(); len(calls) != 0 {
		t.Errorf("a null capture sent %v", calls)
	}
}

// TestToolCallsUnderDeadline records the CDP calls of every tool step: all
// run under the operation's deadline, but for the two that rod's
// PageFromTarget makes once per tab, which the broker runs aside and
// abandons at the deadline.
func TestToolCallsUnderDeadline(t *testing.T) {
	s := newSite(t)
	browser, rec := recordingBrowser(t)
	tb := newTestBrokerOn(t, browser, nil, nil)
	rec.take()
	tab := tb.open(t, s.URL+"/form")
	tb.play(t, tab.TabID,
		Step{Action: ActionType, Selector: "#q", Text: "x"},
		Step{Action: ActionPress, Key: "Enter"},
		Step{Action: ActionClick, Selector: "#b"},
		Step{Action: ActionScroll, Y: 10},
		Step{Action: ActionWait, MS: 1},
		Step{Action: ActionNavigate, URL: s.URL + "/color/x"},
	)
	tb.post(t, "/tools/browser_tabs", "{}")
	tb.closeTab(t, tab.TabID)
	aside := []string{"Target.attachToTarget", "Page.enable"}
	calls := rec.take()
	if len(calls) < 10 {
		t.Fatalf("only %d calls recorded", len(calls))
	}
	for _, c := range calls {
		if !c.hasDeadline && !slices.Contains(aside, c.method) {
			t.Errorf("%s ran without a deadline", c.method)
		}
	}
}

// TestStuckPageReleasesToolQueue checks that a page stuck in script fails a
// tool call at its deadline and leaves the queue free.
func TestStuckPageReleasesToolQueue(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.ToolTimeout = 2 * time.Second })
	tab := tb.open(t, s.URL+"/form")
	sess := testSession(t, tab.TabID)
	evaluate(t, sess, `setTimeout(() => { for (;;) {} }, 0)`)
	t.Cleanup(func() { _ = proto.RuntimeTerminateExecution{}.Call(sess) })

	for _, step := range []Step{
		{Action: ActionClick, Selector: "#b"},
		{Action: ActionType, Selector: "#q", Text: "x"},
		{Action: ActionScroll, Y: 100},
	} {
		start := time.Now()
		status, body := tb.post(t, "/tools/browser_play", map[string]any{"tabId": tab.TabID, "steps": []Step{step}})
		if status != http.StatusGatewayTimeout {
			t.Errorf("%s on a stuck page: %d %s, want 504", step.Action, status, body)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("%s on a stuck page took %v", step.Action, took)
		}
	}
	if status, body := tb.post(t, "/tools/browser_tabs", "{}"); status != http.StatusOK {
		t.Fatalf("browser_tabs after the stuck page: %d %s", status, body)
	}
}

// TestOpenOfAHungPageAnswers opens a page whose script never yields: browser_open
// answers with the tab once the load wait is over, well within the tool's deadline
// (it once waited for the whole of it, reading the title of a page that cannot
// answer; and, on a loaded machine where the script began before rod's attach, in
// the attach: 1 run in 8 under -race beside three busy loops, CI once).
func TestOpenOfAHungPageAnswers(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.LoadTimeout = time.Second; c.ToolTimeout = 30 * time.Second })
	start := time.Now()
	status, body := tb.post(t, "/tools/browser_open", map[string]string{"url": s.URL + "/hung"})
	took := time.Since(start)
	var res struct{ Result Tab }
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Result.TabID == "" {
		t.Fatalf("browser_open of a hung page: %d %s", status, body)
	}
	sess := testSession(t, res.Result.TabID)
	t.Cleanup(func() { _ = proto.RuntimeTerminateExecution{}.Call(sess) })
	// The load wait (1 s) and the title's (titleWait); the tool's deadline is 30 s.
	if took > 10*time.Second {
		t.Errorf("browser_open of a hung page answered after %v", took)
	}
}

// TestCaptureCDPCallsMaskOff records a capture with masking off: exactly the
// three capture calls, as before masks existed.
func TestCaptureCDPCallsMaskOff(t *testing.T) {
	browser, rec := recordingBrowser(t)
	tb := newTestBrokerOn(t, browser, nil, func(c *Config) {
		c.MinCaptureInterval = 0
		c.NoMask = true
	})
	tb.open(t, demoSite(t).URL+"/checkout.html")
	tb.capturePage(t) // attaches the broker's session
	rec.take()
	if p := tb.capturePage(t); p == nil || p.Masked != 0 {
		t.Fatalf("observed %s, masked %d with masking off", describe(p), p.Masked)
	}
	var got []string
	for _, c := range rec.take() {
		got = append(got, c.method)
	}
	if want := []string{"Target.getTargetInfo", "Page.getLayoutMetrics", "Page.captureScreenshot"}; !slices.Equal(got, want) {
		t.Fatalf("a capture with masking off sent %v, want %v", got, want)
	}
}
