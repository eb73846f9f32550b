package broker

import (
	"image"
	"net/http"
	"sync"
	"testing"
	"time"
)

// The demo site's moving/ pages each show a filled sign-in and payment form — a
// password, a card number and a one-time code, drawn in the secrets' green — beside
// one kind of motion real pages have: a clock, a script typing, a spinner, a carousel,
// a progress bar, a canvas chart, a banner moved every animation frame; the form itself
// floating, sliding in as a dialog, moved every frame, scrolled by the page; a form that
// comes and goes. Masks placed where the frame painted the secrets (pins.go) show the
// page in nearly every frame and a secret in none.

// movingFrames is how many frames TestMaskFollowsMotion judges of each page.
const movingFrames = 20

// minShown is the share of a moving page's frames that must show the page (masked in
// part, or with no secret in it): the 95 %.
const minShown = 0.95

// judgeFrames captures n frames of the open tab and judges each by its pixels: no green
// of a secret outside the control, and, in a frame that shows the page (not masked
// whole), the control's green. It returns how many showed the page, and why the others
// were masked whole.
func judgeFrames(t *testing.T, tb *testBroker, control cssRect, width float64, n int) (shown int, whole map[string]int) {
	t.Helper()
	whole = map[string]int{}
	for i := range n {
		status, body, id, key := tb.capture(t)
		if status != http.StatusOK {
			t.Fatalf("frame %d: capture %d %s", i, status, body)
		}
		p := openPage(t, key, id, body, envelopeOpen)
		inControl, leaked := greenPixels(t, p, control, width)
		if leaked > 0 {
			t.Fatalf("frame %d: %d green pixels of a secret outside the control (masked %d, hidden %q)", i, leaked, p.Masked, p.Hidden)
		}
		if p.Hidden != "" {
			if inControl > 0 {
				t.Fatalf("frame %d: masked whole (%s), yet the control shows", i, p.Hidden)
			}
			whole[p.Hidden]++
			continue
		}
		if inControl < 200 {
			t.Fatalf("frame %d: the control shows %d green pixels, yet the frame is not masked whole (masked %d)", i, inControl, p.Masked)
		}
		shown++
	}
	return shown, whole
}

// TestMaskFollowsMotion captures each moving page movingFrames times: no frame shows a
// pixel of a secret, and at least minShown of them show the page with its secrets
// masked in part.
func TestMaskFollowsMotion(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	pages := []string{
		"still", "clock", "typing", "spinner", "carousel", "progress", "canvas", "banner",
		"floating", "dialog", "scrolling", "secret-moves", "secret-appears",
	}
	for _, name := range pages {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, site.URL+"/moving/"+name+".html")
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			where, width := rects(t, s, []string{"control"})
			shown, whole := judgeFrames(t, tb, where["control"], width, movingFrames)
			t.Logf("%s: %d of %d frames show the page, masked whole: %v", name, shown, movingFrames, whole)
			if float64(shown) < minShown*movingFrames {
				t.Fatalf("%d of %d frames show the page, want at least %.0f %% (masked whole: %v)", shown, movingFrames, 100*minShown, whole)
			}
		})
	}
}

// TestMaskFollowsTyping captures a page that animates every frame while the agent
// clicks into its password and card fields and types into them: the typed secrets
// never show, the agent's clicks (which would clear a pin) wait for the capture, and
// the page shows in at least minShown of the frames.
func TestMaskFollowsTyping(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, site.URL+"/moving/agent-types.html")
	defer tb.closeTab(t, tab.TabID)
	s := testSession(t, tab.TabID)
	where, width := rects(t, s, []string{"control"})

	var steps []Step
	for range 7 {
		steps = append(steps,
			Step{Action: ActionClick, Selector: "#p"}, Step{Action: ActionType, Selector: "#p", Text: "hunter2"},
			Step{Action: ActionClick, Selector: "#card"}, Step{Action: ActionType, Selector: "#card", Text: "4111"})
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		tb.play(t, tab.TabID, steps...)
	})
	shown, whole, frames := 0, map[string]int{}, 0
	for {
		n, w := judgeFrames(t, tb, where["control"], width, 1)
		shown, frames = shown+n, frames+1
		for k, v := range w {
			whole[k] += v
		}
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	wg.Wait()
	var typed string
	evalJSON(t, s, `document.getElementById("p").value`, &typed)
	if len(typed) != 7*len("hunter2") {
		t.Fatalf("the agent typed %d characters into the field, want %d", len(typed), 7*len("hunter2"))
	}
	// And after the typing, the typed secrets in the frame.
	n, w := judgeFrames(t, tb, where["control"], width, movingFrames)
	shown, frames = shown+n, frames+movingFrames
	for k, v := range w {
		whole[k] += v
	}
	t.Logf("%d of %d frames show the page, masked whole: %v", shown, frames, whole)
	if float64(shown) < minShown*float64(frames) {
		t.Fatalf("%d of %d frames show the page, want at least %.0f %% (masked whole: %v)", shown, frames, 100*minShown, whole)
	}
}

// followLeaks are the demo site's leaks/ pages for the rules the pins need: each
// paints a secret where a mask on its element's box would not cover it, or where a
// mask painted from an earlier frame's layout would not be, while the page moves.
var followLeaks = []string{
	"compositor-transform", "smooth-scroll", "shadow-animation", "overflow-motion",
	"appears-in-frame", "secret-replaced",
}

// TestMaskFollowLeaks captures each of followLeaks movingFrames times: no frame shows a
// pixel of a secret.
func TestMaskFollowLeaks(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	for _, name := range followLeaks {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, site.URL+"/leaks/"+name+".html")
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			where, width := rects(t, s, []string{"control"})
			shown, whole := judgeFrames(t, tb, where["control"], width, movingFrames)
			t.Logf("%s: %d of %d frames show the page, masked whole: %v", name, shown, movingFrames, whole)
		})
	}
}

// TestPinsHoldTheMouse: while a capture holds the input gate (its pins are on the
// page), the agent's click cannot move the mouse — which would clear a pin — and fails
// at its deadline having clicked nothing; once the gate is free, the same click lands.
func TestPinsHoldTheMouse(t *testing.T) {
	site := demoSite(t)
	// 5 s, not the 60 s default, for the held click to fail in; not 1 s either, which the
	// click after the gate is freed, on a loaded machine, could need.
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0; c.ToolTimeout = 5 * time.Second })
	tab := tb.open(t, site.URL+"/moving/agent-types.html")
	defer tb.closeTab(t, tab.TabID)
	s := testSession(t, tab.TabID)
	evaluate(t, s, `window.downs = 0; document.addEventListener("mousedown", () => window.downs++)`)

	release, err := tb.input.hold(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	status, body := tb.post(t, "/tools/browser_play", map[string]any{"tabId": tab.TabID, "steps": []Step{{Action: ActionClick, Selector: "#p"}}})
	if status == http.StatusOK {
		t.Fatalf("a click while the gate is held: %d %s, want it to fail at its deadline", status, body)
	}
	var downs int
	evalJSON(t, s, "window.downs", &downs)
	if downs != 0 {
		t.Fatalf("%d mousedown events while the gate was held, want 0", downs)
	}
	release()
	tb.play(t, tab.TabID, Step{Action: ActionClick, Selector: "#p"})
	evalJSON(t, s, "window.downs", &downs)
	if downs != 1 {
		t.Fatalf("%d mousedown events after the gate was freed, want 1", downs)
	}
}

// TestPinnedFrameGeometry: a pinned frame is the viewport without its scrollbars, as a
// clipped one is, whether or not the cut keeps the JPEG's blocks (a 1000-px-wide viewport
// with a scrollbar does not: it is coded again), and shows no secret.
func TestPinnedFrameGeometry(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, site.URL+"/moving/scrolling.html")
	defer tb.closeTab(t, tab.TabID)
	s := testSession(t, tab.TabID)
	for _, width := range []int{1280, 1000} {
		emulate(t, s, width, 700, 1)
		var vp struct{ W, H int }
		evalJSON(t, s, `({W: document.documentElement.clientWidth, H: document.documentElement.clientHeight})`, &vp)
		if vp.W >= width {
			t.Fatalf("a %d-px viewport %d px wide inside: the page has no scrollbar to cut", width, vp.W)
		}
		for range 3 {
			p := tb.capturePage(t)
			if p.Masked == 0 || p.Hidden != "" {
				t.Fatalf("width %d: masked %d, hidden %q: want the page shown with its secrets pinned", width, p.Masked, p.Hidden)
			}
			img := decodeJPEG(t, p.JPEG())
			if got := img.Bounds().Size(); got != image.Pt(vp.W, vp.H) {
				t.Fatalf("width %d: a %v frame, want the %d×%d viewport without its scrollbar", width, got, vp.W, vp.H)
			}
			if _, leaked := greenPixels(t, p, cssRect{X: 900, Y: 20, W: 300, H: 60}, float64(vp.W)); leaked > 0 {
				t.Fatalf("width %d: %d green pixels of a secret", width, leaked)
			}
		}
	}
}
