package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/view/envelope/envelopetest"
)

// fakeClock is a Clock that moves only when the test says so. Every After
// call is handed to the test on timers.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time // guarded by mu
	timers chan fakeTimer
}

type fakeTimer struct {
	d time.Duration
	c chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, timers: make(chan fakeTimer, 8)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	t := fakeTimer{d: d, c: make(chan time.Time, 1)}
	c.timers <- t
	return t.c
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// decodeJPEG decodes a capture.
func decodeJPEG(tb testing.TB, data []byte) image.Image {
	tb.Helper()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("decode jpeg: %v", err)
	}
	return img
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
	at, err := time.Parse(CapturedAtLayout, s)
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
// and checks which tab each observation captures, and that observing
// changes neither the selection nor the tab list.
func TestTabSelection(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })

	observedURL := func() string {
		t.Helper()
		p := tb.observePage(t)
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

	if got := observedURL(); got != "" {
		t.Fatalf("no tab: observed %q, want null", got)
	}
	a := tb.open(t, s.URL+"/color/a")
	b := tb.open(t, s.URL+"/color/b")
	if got := observedURL(); got != b.URL {
		t.Fatalf("after open a, b: observed %q, want b %q", got, b.URL)
	}
	tb.play(t, a.TabID)
	c := tb.open(t, s.URL+"/color/c")
	if got := observedURL(); got != a.URL {
		t.Fatalf("after play a, open c: observed %q, want a", got)
	}
	tb.play(t, b.TabID)
	before := tabList()
	for range 3 {
		if got := observedURL(); got != b.URL {
			t.Fatalf("after play b: observed %q, want b", got)
		}
	}
	if after := tabList(); !slices.Equal(before, after) || !slices.Equal(after, []string{a.TabID, b.TabID, c.TabID}) {
		t.Fatalf("tabs %v changed to %v by observing, want a, b, c", before, after)
	}
	if got, _ := tb.tabs.Selected(); got != b.TabID {
		t.Fatalf("observing changed the selection to %s", got)
	}
	tb.closeTab(t, b.TabID)
	if got := observedURL(); got != a.URL {
		t.Fatalf("after close b: observed %q, want a (previous play)", got)
	}
	tb.closeTab(t, a.TabID)
	if got := observedURL(); got != c.URL {
		t.Fatalf("after close a: observed %q, want c (last opened)", got)
	}

	// A tab the site opens itself counts as opened.
	f := tb.open(t, s.URL+"/form")
	tb.play(t, f.TabID, Step{Action: ActionClick, Selector: "#popup"})
	if got := observedURL(); got != f.URL {
		t.Fatalf("after play form: observed %q, want form", got)
	}
	ids := tabList()
	if len(ids) != 3 || ids[0] != c.TabID || ids[1] != f.TabID {
		t.Fatalf("tabs after the popup %v, want c, form, popup", ids)
	}
	popup := ids[2]
	tb.closeTab(t, f.TabID)
	if got := observedURL(); !strings.HasSuffix(got, "/color/popup?c=rgb(0,0,255)") {
		t.Fatalf("after close form: observed %q, want the popup", got)
	}
	tb.closeTab(t, popup)
	tb.closeTab(t, c.TabID)
	if got := observedURL(); got != "" {
		t.Fatalf("all closed: observed %q, want null", got)
	}
	if got := tabList(); len(got) != 0 {
		t.Fatalf("all closed: tabs %v", got)
	}
}

// TestObserveFreshPixels captures a tab that is not the last activated one,
// twice, after the test changed its colour through a CDP session of its own.
func TestObserveFreshPixels(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })

	a := tb.open(t, s.URL+"/color/a?c=rgb(255,0,0)")
	tb.play(t, a.TabID, Step{Action: ActionScroll, Y: 1})
	// b's window is opened and activated after a's: a is selected (the last
	// browser_play tab) but no longer the last activated one.
	b := tb.open(t, s.URL+"/color/b?c=rgb(0,0,255)")
	if err := (proto.TargetActivateTarget{TargetID: proto.TargetTargetID(b.TabID)}).Call(testChromium.Browser.Context(t.Context())); err != nil {
		t.Fatal(err)
	}
	sess := testSession(t, a.TabID)
	for _, want := range [][3]uint8{green, blue, red} {
		setBackground(t, sess, want)
		p := tb.observePage(t)
		if p == nil || p.URL != a.URL {
			t.Fatalf("observed %+v, want tab a", p)
		}
		img := decodeJPEG(t, p.Data)
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

// TestObserveNoTabs seals null when no tab is open, without capturing, and
// the Node reference opens it.
func TestObserveNoTabs(t *testing.T) {
	tb := newTestBroker(t, nil, nil)
	status, body, id, key := tb.observe(t)
	if status != http.StatusOK {
		t.Fatalf("observe: %d %s", status, body)
	}
	plaintext, err := envelopetest.NodeOpen(t, key, id, body)
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
