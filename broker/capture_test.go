package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// describe shows a page without its image.
func describe(p *wire.Page) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("{url %q, title %q, capturedAt %s, %d bytes}", p.URL, p.Title, p.CapturedAt, len(p.JPEG()))
}

// decodeJPEG decodes a capture.
func decodeJPEG(tb testing.TB, data []byte) *image.RGBA {
	tb.Helper()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("decode jpeg: %v", err)
	}
	// In RGBA once (image/draw's path from YCbCr), so that a test judging every pixel
	// of a frame reads bytes (rgbAt) rather than boxing a color.Color per pixel.
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	return rgba
}

// rgbAt is the pixel at (x, y) of a decoded frame.
func rgbAt(img *image.RGBA, x, y int) [3]uint8 {
	i := img.PixOffset(x, y)
	return [3]uint8{img.Pix[i], img.Pix[i+1], img.Pix[i+2]}
}

// near reports whether c is within tolerance of the RGB colour want, per
// channel; JPEG moves colours a little.
func near(c color.Color, want [3]uint8) bool {
	r, g, b, _ := c.RGBA()
	got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
	for i := range got {
		if d := got[i] - int(want[i]); d < -24 || d > 24 {
			return false
		}
	}
	return true
}

func rgbOf(c color.Color) [3]uint8 {
	r, g, b, _ := c.RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

func parseCapturedAt(tb testing.TB, s string) time.Time {
	tb.Helper()
	at, err := time.Parse(wire.CapturedAtLayout, s)
	if err != nil || !strings.HasSuffix(s, "Z") || len(s) != len("2006-01-02T15:04:05.000Z") {
		tb.Fatalf("capturedAt %q is not UTC with milliseconds: %v", s, err)
	}
	return at
}

var (
	red   = [3]uint8{255, 0, 0}
	green = [3]uint8{0, 255, 0}
	blue  = [3]uint8{0, 0, 255}
)

// TestTabSelection walks open / play / close sequences through the socket
// and checks which tab each capture captures, and that capturing
// changes neither the selection nor the tab list.
func TestTabSelection(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })

	capturedURL := func() string {
		t.Helper()
		p := tb.capturePage(t)
		if p == nil {
			return ""
		}
		return p.URL
	}
	tabList := func() []string {
		t.Helper()
		status, body := tb.post(t, "/tools/browser_tabs", "{}")
		if status != http.StatusOK {
			t.Fatalf("browser_tabs: %d %s", status, body)
		}
		var res struct{ Result struct{ Tabs []Tab } }
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tab := range res.Result.Tabs {
			ids = append(ids, tab.TabID)
		}
		return ids
	}

	if got := capturedURL(); got != "" {
		t.Fatalf("no tab: observed %q, want null", got)
	}
	a := tb.open(t, s.URL+"/color/a")
	b := tb.open(t, s.URL+"/color/b")
	if got := capturedURL(); got != b.URL {
		t.Fatalf("after open a, b: observed %q, want b %q", got, b.URL)
	}
	tb.play(t, a.TabID)
	c := tb.open(t, s.URL+"/color/c")
	if got := capturedURL(); got != a.URL {
		t.Fatalf("after play a, open c: observed %q, want a", got)
	}
	tb.play(t, b.TabID)
	before := tabList()
	for range 3 {
		if got := capturedURL(); got != b.URL {
			t.Fatalf("after play b: observed %q, want b", got)
		}
	}
	if after := tabList(); !slices.Equal(before, after) || !slices.Equal(after, []string{a.TabID, b.TabID, c.TabID}) {
		t.Fatalf("tabs %v changed to %v by capturing, want a, b, c", before, after)
	}
	if got, _ := tb.tabs.Selected(); got != b.TabID {
		t.Fatalf("capturing changed the selection to %s", got)
	}
	tb.closeTab(t, b.TabID)
	if got := capturedURL(); got != a.URL {
		t.Fatalf("after close b: observed %q, want a (previous play)", got)
	}
	tb.closeTab(t, a.TabID)
	if got := capturedURL(); got != c.URL {
		t.Fatalf("after close a: observed %q, want c (last opened)", got)
	}

	// A tab the site opens itself counts as opened.
	f := tb.open(t, s.URL+"/form")
	tb.play(t, f.TabID, Step{Action: ActionClick, Selector: "#popup"})
	if got := capturedURL(); got != f.URL {
		t.Fatalf("after play form: observed %q, want form", got)
	}
	ids := tabList()
	if len(ids) != 3 || ids[0] != c.TabID || ids[1] != f.TabID {
		t.Fatalf("tabs after the popup %v, want c, form, popup", ids)
	}
	popup := ids[2]
	tb.closeTab(t, f.TabID)
	// The popup may still be loading (a tab that has not committed its first page
	// reports no URL, or about:blank): the selection is right once its URL shows.
	var got string
	for range 50 {
		if got = capturedURL(); strings.HasSuffix(got, "/color/popup?c=rgb(0,0,255)") {
			break
		}
	}
	if !strings.HasSuffix(got, "/color/popup?c=rgb(0,0,255)") {
		t.Fatalf("after close form: observed %q, want the popup", got)
	}
	tb.closeTab(t, popup)
	tb.closeTab(t, c.TabID)
	if got := capturedURL(); got != "" {
		t.Fatalf("all closed: observed %q, want null", got)
	}
	if got := tabList(); len(got) != 0 {
		t.Fatalf("all closed: tabs %v", got)
	}
}

// TestCaptureFreshPixels captures a tab that is not the last activated one,
// twice, after the test changed its colour through a CDP session of its own.
func TestCaptureFreshPixels(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })

	a := tb.open(t, s.URL+"/color/a?c=rgb(255,0,0)")
	tb.play(t, a.TabID, Step{Action: ActionScroll, Y: 1})
	// b's window is opened and activated after a's: a is selected (the last
	// browser_play tab) but no longer the last activated one.
	b := tb.open(t, s.URL+"/color/b?c=rgb(0,0,255)")
	if err := (proto.TargetActivateTarget{TargetID: proto.TargetTargetID(b.TabID)}).Call(sharedChromium(t).Browser.Context(t.Context())); err != nil {
		t.Fatal(err)
	}
	sess := testSession(t, a.TabID)
	for _, want := range [][3]uint8{green, blue, red} {
		setBackground(t, sess, want)
		p := tb.capturePage(t)
		if p == nil || p.URL != a.URL {
			t.Fatalf("observed %s, want tab a", describe(p))
		}
		img := decodeJPEG(t, p.JPEG())
		for _, pt := range []image.Point{{10, 10}, {640, 400}, {1270, 790}} {
			if c := img.At(pt.X, pt.Y); !near(c, want) {
				t.Fatalf("pixel %v = %v, want %v", pt, rgbOf(c), want)
			}
		}
	}
}

// setBackground paints a tab's page in one colour through the test's own
// CDP session.
func setBackground(tb testing.TB, s cdpSession, c [3]uint8) {
	tb.Helper()
	evaluate(tb, s, fmt.Sprintf(`document.documentElement.style.background = document.body.style.background = 'rgb(%d,%d,%d)'`, c[0], c[1], c[2]))
}

// TestCaptureNoTabs seals null when no tab is open, without capturing, and
// the Node reference opens it.
func TestCaptureNoTabs(t *testing.T) {
	tb := newTestBroker(t, nil, nil)
	status, body, id, key := tb.capture(t)
	if status != http.StatusOK {
		t.Fatalf("capture: %d %s", status, body)
	}
	plaintext, err := testenv.NodeOpen(t, key, id, body)
	if err != nil {
		t.Fatal(err)
	}
	if string(plaintext) != "null" {
		t.Fatalf("plaintext %q, want null", plaintext)
	}
	if n := tb.captures.Load(); n != 0 {
		t.Fatalf("%d captures, want none", n)
	}
}

// TestCaptureDuringPlayWait captures while a browser_play call is in its 5 s
// wait step: capture does not wait for the tool queue.
func TestCaptureDuringPlayWait(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, nil)
	tab := tb.open(t, s.URL+"/color/start?c=rgb(255,0,0)")

	played := make(chan Tab, 1)
	go func() {
		status, body := tb.post(t, "/tools/browser_play", map[string]any{"tabId": tab.TabID, "steps": []Step{
			{Action: ActionNavigate, URL: s.URL + "/signal/waiting"},
			{Action: ActionWait, MS: 5000},
		}})
		var res struct{ Result Tab }
		if status != http.StatusOK || json.Unmarshal(body, &res) != nil {
			t.Errorf("browser_play: %d %s", status, body)
		}
		played <- res.Result
	}()
	select {
	case <-s.requested:
	case <-time.After(10 * time.Second):
		t.Fatal("the play never navigated")
	}

	start := time.Now()
	p := tb.capturePage(t)
	took := time.Since(start)
	select {
	case <-played:
		t.Fatalf("the play finished before the capture (%v)", took)
	default:
	}
	if p == nil || !strings.HasSuffix(p.URL, "/signal/waiting") {
		t.Fatalf("observed %s, want the page being played", describe(p))
	}
	if took > 2*time.Second {
		t.Errorf("capture took %v while the play waited", took)
	}
	if got := <-played; !strings.HasSuffix(got.URL, "/signal/waiting") || got.Title != "waiting" {
		t.Errorf("play result %+v", got)
	}
}

// TestCaptureBusy refuses a second capture while one is in flight,
// without redeeming its request id.
func TestCaptureBusy(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, nil)
	tb.open(t, s.URL+"/color/a")
	tb.api.hold, tb.api.entered = make(chan struct{}), make(chan struct{}, 1)

	first := make(chan int, 1)
	go func() {
		status, body, id, key := tb.capture(t)
		if status == http.StatusOK {
			openPage(t, key, id, body, envelopeOpen)
		}
		first <- status
	}()
	<-tb.api.entered // the first capture is redeeming its id

	status, body, _, _ := tb.capture(t)
	if status != http.StatusConflict || !strings.Contains(string(body), `"code":"busy"`) {
		t.Errorf("concurrent capture: %d %s, want 409 busy", status, body)
	}
	if n := tb.api.calls.Load(); n != 1 {
		t.Errorf("%d consumptions, want only the first", n)
	}
	close(tb.api.hold)
	if status := <-first; status != http.StatusOK {
		t.Errorf("first capture: %d", status)
	}
	tb.api.hold = nil
	if n := tb.captures.Load(); n != 1 {
		t.Errorf("%d captures, want 1", n)
	}
}

// TestCaptureSpacing sends two captures 0.5 s apart with the default
// 2 s spacing: both succeed and their screenshots are at least 2 s apart.
func TestCaptureSpacing(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, nil)
	if tb.cfg.MinCaptureInterval != 2*time.Second {
		t.Fatalf("default spacing %v", tb.cfg.MinCaptureInterval)
	}
	tb.open(t, s.URL+"/color/a")

	first := tb.capturePage(t)
	<-time.After(500 * time.Millisecond) // the gap is the scenario, not a synchronisation
	start := time.Now()
	second := tb.capturePage(t)
	waited := time.Since(start)

	gap := parseCapturedAt(t, second.CapturedAt).Sub(parseCapturedAt(t, first.CapturedAt))
	if gap < 2*time.Second {
		t.Errorf("captures %v apart, want at least 2s", gap)
	}
	// The spacing counts from the start of the first capture: the second capture
	// waits for whatever of the 2 s had not passed when it began.
	if due := parseCapturedAt(t, first.CapturedAt).Add(2 * time.Second).Sub(start); waited < due-100*time.Millisecond {
		t.Errorf("second capture took %v, it should have waited the %v left of the spacing", waited, due)
	}
}

// TestCaptureSpacingClock checks the spacing with a clock the test moves:
// the broker asks to wait exactly the rest of the interval, stamps the
// capture with the clock, and refuses a wait past its deadline at once.
func TestCaptureSpacingClock(t *testing.T) {
	s := newSite(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	clock := testenv.NewClock(t0)
	tb := newTestBroker(t, clock, nil)
	tb.open(t, s.URL+"/color/a")

	first := tb.capturePage(t)
	if first.CapturedAt != "2030-01-02T03:04:05.678Z" {
		t.Fatalf("capturedAt %q, want the clock's time", first.CapturedAt)
	}

	clock.Advance(500 * time.Millisecond)
	done := make(chan *wire.Page, 1)
	go func() { done <- tb.capturePage(t) }()
	timer := <-clock.Timers()
	if timer.D != 1500*time.Millisecond {
		t.Fatalf("broker waits %v, want 1.5s", timer.D)
	}
	select {
	case p := <-done:
		t.Fatalf("capture finished before its wait: %s", describe(p))
	default:
	}
	timer.C <- clock.Advance(timer.D)
	second := <-done
	gap := parseCapturedAt(t, second.CapturedAt).Sub(parseCapturedAt(t, first.CapturedAt))
	if gap != 2*time.Second {
		t.Fatalf("captures %v apart on the clock, want 2s", gap)
	}

	// Right after a capture, with an interval longer than the capture
	// deadline, the broker refuses at once rather than wait in vain.
	tb.cfg.MinCaptureInterval = 2 * tb.cfg.CaptureTimeout
	captures := tb.captures.Load()
	start := time.Now()
	status, body, _, _ := tb.capture(t)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"capture"`) {
		t.Fatalf("capture due after its deadline: %d %s, want 503 capture", status, body)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refusal took %v", took)
	}
	if tb.captures.Load() != captures {
		t.Error("a capture ran")
	}
	select {
	case timer := <-clock.Timers():
		t.Errorf("broker started a wait of %v", timer.D)
	default:
	}
}

// TestCaptureRefused answers 502 and captures nothing when the API refuses
// the request id, answers a malformed key or cannot be reached.
func TestCaptureRefused(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tb.open(t, s.URL+"/color/a")

	tests := []struct {
		name  string
		setup func()
	}{
		{"forbidden", func() { tb.api.refuse(http.StatusForbidden) }},
		{"not found", func() { tb.api.refuse(http.StatusNotFound) }},
		{"malformed key", func() { tb.api.refuse(0); tb.api.answer(`{"publicKey":"04zz"}`) }},
		{"no key", func() { tb.api.answer(`{}`) }},
		{"unreachable", func() { tb.api.answer(""); tb.api.srv.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup()
			status, body, _, _ := tb.capture(t)
			if status != http.StatusBadGateway || string(body) != `{"error":{"code":"refused","message":"the grant was refused"}}`+"\n" {
				t.Errorf("capture: %d %s, want 502 refused", status, body)
			}
			if n := tb.captures.Load(); n != 0 {
				t.Errorf("%d captures after a refusal", n)
			}
		})
	}
}

// TestCaptureScreenshotFailure answers 503 within the capture deadline when
// the tab's renderer is stuck in script, and the next capture of a
// healthy tab works.
func TestCaptureScreenshotFailure(t *testing.T) {
	s := newSite(t)
	// The production deadline: a shorter one could fail the healthy capture after the
	// stuck one on a loaded machine.
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	deadline := wire.BrokerScreenshotTimeout
	tab := tb.open(t, s.URL+"/color/stuck")
	sess := testSession(t, tab.TabID)
	evaluate(t, sess, `setTimeout(() => { for (;;) {} }, 0)`)
	t.Cleanup(func() { _ = proto.RuntimeTerminateExecution{}.Call(sess) })

	start := time.Now()
	status, body, _, _ := tb.capture(t)
	took := time.Since(start)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"capture"`) {
		t.Fatalf("capture of a stuck tab: %d %s, want 503 capture", status, body)
	}
	if took > deadline+2*time.Second {
		t.Errorf("failure took %v, want about the %v capture deadline", took, deadline)
	}
	if err := (proto.RuntimeTerminateExecution{}).Call(sess); err != nil {
		t.Fatal(err)
	}
	tb.closeTab(t, tab.TabID)
	healthy := tb.open(t, s.URL+"/color/healthy")
	if p := tb.capturePage(t); p == nil || p.URL != healthy.URL {
		t.Fatalf("after a failure: observed %s", describe(p))
	}
}

// TestCaptureNodeOpensPage checks the Node reference opens a real page's
// envelope and reads the same page as Go.
func TestCaptureNodeOpensPage(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, nil)
	tab := tb.open(t, s.URL+"/color/node?c=rgb(0,255,0)")
	status, body, id, key := tb.capture(t)
	if status != http.StatusOK {
		t.Fatalf("capture: %d %s", status, body)
	}
	node := openPage(t, key, id, body, testenv.NodeOpen)
	goPage := openPage(t, key, id, body, envelopeOpen)
	// (The title is not compared with the tab's: Chromium's target info
	// learns a new title from the renderer a moment after the load.)
	if node.URL != tab.URL || node.Title != goPage.Title || !bytes.Equal(node.JPEG(), goPage.JPEG()) || node.CapturedAt != goPage.CapturedAt {
		t.Fatalf("node read %s %q, go read %s %q", node.URL, node.Title, goPage.URL, goPage.Title)
	}
	if c := decodeJPEG(t, node.JPEG()).At(100, 100); !near(c, green) {
		t.Errorf("pixel %v, want green", rgbOf(c))
	}
	// The envelope is bound to its request id.
	other, _ := tb.api.issue(t)
	if _, err := testenv.NodeOpen(t, key, other, body); err == nil {
		t.Error("node opened the envelope under another request id")
	}
	if _, err := envelopeOpen(t, key, other, body); err == nil {
		t.Error("go opened the envelope under another request id")
	}
}
