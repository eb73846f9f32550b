package reliability

import (
	"fmt"
	"image"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/wire"
)

// TestMasks views pages with secrets through the whole path: the checkout page's
// secrets are counted masked, and a page that scrolls itself at random moments while it
// is captured never sends a frame with a secret pixel in it: one screenshot a view, and
// what may have moved between the reads around it is masked (over both its places, or
// the frame whole), never captured again and never refused.
func TestMasks(t *testing.T) {
	t.Run("checkout_page", func(t *testing.T) {
		observed := ""
		record(t, "Privacy masks", "200 with masked 11 (the secrets in view), for a member", &observed)
		agent := "agent-m-checkout"
		ss := liveSession(t, agent, stack.SessionOptions{})
		if _, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/checkout.html"}); err != nil {
			t.Fatal(err)
		}
		r := client.Poll(t, agent)
		res := r.Result(t)
		if r.Status != http.StatusOK || res.Page == nil {
			t.Fatalf("view: %s", r.Summary())
		}
		observed = fmt.Sprintf("%s, masked %d", r.Summary(), res.Page.Masked)
		if res.Page.Masked != 11 {
			t.Errorf("masked %d, want 11", res.Page.Masked)
		}
	})
	t.Run("page_moving_while_captured", func(t *testing.T) {
		observed := ""
		record(t, "Privacy masks", "every view of a page that scrolls itself while captured is a frame with its secrets masked (one screenshot a view; no secret pixel, no 503)", &observed)
		agent := "agent-m-moving"
		ss := liveSession(t, agent, stack.SessionOptions{})
		if _, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/moving.html"}); err != nil {
			t.Fatal(err)
		}
		const views = 12
		frames, masked, refused := 0, 0, 0
		for range views {
			page := frameOrRefused(t, agent)
			if page == nil {
				refused++
				continue
			}
			frames++
			if page.Masked > 0 {
				masked++
			}
			img := stacktest.DecodeFrame(t, page)
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					if cr, cg, cb, _ := img.At(x, y).RGBA(); cg>>8 > 160 && cr>>8 < 120 && cb>>8 < 120 {
						t.Fatalf("a secret pixel at (%d, %d) of a frame that left (masked %d)", x, y, page.Masked)
					}
				}
			}
		}
		observed = fmt.Sprintf("%d views: %d frames (%d with masks), %d × 503 capture; no secret pixel", views, frames, masked, refused)
		if frames != views || masked == 0 {
			t.Errorf("%s: want every view a frame, with masks", observed)
		}
	})
	// The demo site's leak pages (testdata/site/leaks): each paints a secret in rgb(0,
	// 200, 0) where no box of it is, or moves it while it is captured; the page's only
	// other green is a control at the top right, never masked.
	t.Run("painted_where_no_box_is", func(t *testing.T) {
		leaks := []struct{ page, expected string }{
			{"text-shadow", "the text shadows of a marked key and of a card field are masked with them"},
			{"box-reflect", "the reflection of a marked element is masked"},
			{"drop-shadow", "a password field's drop shadow 150 px away is masked"},
			{"scaled-shadow", "an ancestor's drop shadow, scaled by its transform, is masked"},
			{"svg-use", "an SVG <use> of a marked text is masked where it draws"},
			{"sandboxed-frame", "a card field in a sandboxed frame (a process of its own) is masked where the frame draws it, the rest of the frame shown"},
			{"cross-site-frame", "a password field in a cross-site frame, scrolled, and a card code in a sandboxed frame inside it (three processes): each masked where drawn, the rest shown"},
			{"frame-motion", "a card field moved by CSS steps() in a sandboxed frame: that frame masked whole, every view a frame"},
			{"svg-filter", "an SVG filter on a page with a secret masks the frame whole"},
			{"css-steps", "a marked element moved by CSS steps() every 20 ms: masked where each frame paints it, the control shown"},
			{"css-layout", "a marked element moved by its ancestor's layout animation: masked where each frame paints it, the control shown"},
			{"script-frames", "a password field moved by a script every frame and back: masked where each frame paints it, the control shown"},
			{"view-transition", "a view transition of a minute showing the removed secret: frames masked whole"},
			{"frame-view-transition", "the same in a same-origin frame: frames masked whole"},
			{"cross-site-view-transition", "the same in a cross-site frame (a process of its own): frames masked whole"},
			{"motion-elsewhere", "a spinner, a colour animation and an ended fade beside a password field: the field alone masked, the control shown"},
			{"compositor-transform", "a form floating by a CSS transform animation (one Chromium would run on its compositor thread): masked where each frame paints it, the control shown"},
			{"smooth-scroll", "a page scrolling itself smoothly past a password field: masked where each frame paints it, the control shown"},
			{"shadow-animation", "a marked text whose text shadow jumps 160 px every 20 ms: frames masked whole"},
			{"overflow-motion", "a marked element whose text overflows its box, on a page animating every frame: frames masked whole"},
			{"appears-in-frame", "a password field inserted for one animation frame at random: frames with it masked whole, never a frame with it shown"},
			{"secret-replaced", "a password field in a shadow root replaced by a clone every frame: frames masked whole"},
		}
		pages := make([]string, len(leaks))
		for i, lp := range leaks {
			pages[i] = lp.page
		}
		sideBySide(t, "agent-m-leaks", pages, func(t *testing.T, i int, ss *stack.Session, agent string) {
			lp := leaks[i]
			observed := ""
			record(t, "Privacy masks", "no green pixel outside the control in any frame: "+lp.expected, &observed)
			res, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/leaks/" + lp.page + ".html"})
			if err != nil {
				t.Fatal(err)
			}
			tab := tabID(t, res)
			defer func() { _, _ = ss.Tool(client.Context(t), wire.ToolClose, map[string]string{"tabId": tab}) }()
			const views = 4
			frames, whole, refused := 0, 0, 0
			for range views {
				page := frameOrRefused(t, agent)
				if page == nil {
					refused++
					continue
				}
				frames++
				img := stacktest.DecodeFrame(t, page)
				inControl, leaked := leakGreen(img)
				if leaked > 0 {
					t.Fatalf("%d green pixels outside the control (masked %d)", leaked, page.Masked)
				}
				switch blue := leakBlue(img); lp.page {
				case "sandboxed-frame", "cross-site-frame":
					if blue < 5000 {
						t.Fatalf("%d blue pixels: the frame's document was not shown (masked %d)", blue, page.Masked)
					}
				case "frame-motion":
					if blue > 0 {
						t.Fatalf("%d blue pixels: the moving frame was not masked whole (masked %d)", blue, page.Masked)
					}
				}
				if page.Masked == 0 && lp.page != "appears-in-frame" {
					t.Fatal("a frame says nothing masked")
				}
				if inControl == 0 {
					whole++
					if page.Hidden == "" {
						t.Fatalf("a frame masked whole that does not say why (masked %d)", page.Masked)
					}
				}
			}
			observed = fmt.Sprintf("%d views: %d frames (%d with the whole page masked), %d × 503 capture; no green outside the control", views, frames, whole, refused)
			switch lp.page {
			case "sandboxed-frame", "cross-site-frame", "text-shadow", "box-reflect", "drop-shadow", "scaled-shadow", "svg-use", "motion-elsewhere",
				"css-steps", "css-layout", "script-frames", "compositor-transform", "smooth-scroll":
				if frames == 0 || whole > 0 {
					t.Errorf("%s: want frames with the control shown", observed)
				}
			case "frame-motion":
				// The moving frame masked whole (no blue, checked above), the page not.
				if frames != views {
					t.Errorf("%s: want every view a frame", observed)
				}
			case "svg-filter", "view-transition", "frame-view-transition", "cross-site-view-transition",
				"shadow-animation", "overflow-motion", "secret-replaced":
				if frames != views || whole != frames {
					t.Errorf("%s: want frames masked whole", observed)
				}
			}
		})
	})
}

// TestMasksFollowMotion views each of the demo site's moving pages (testdata/site/moving:
// a filled sign-in and payment form beside one kind of motion, or moving itself)
// through the whole path: no frame shows a pixel of a secret, a frame masked whole says
// why, and of all their frames at least 95 % show the page with its secrets masked
// where the frame painted them. The agent also types into a secret field of a page that
// animates every frame while it is viewed.
func TestMasksFollowMotion(t *testing.T) {
	const views = 5
	var mu sync.Mutex // guards total and shownAll, which the pages add to side by side
	total, shownAll := 0, 0
	moving := []struct{ page, expected string }{
		{"still", "nothing moving"},
		{"clock", "a clock updated by setInterval"},
		{"typing", "a search field typed into by script"},
		{"spinner", "a CSS spinner"},
		{"carousel", "a carousel sliding every 1.5 s"},
		{"progress", "a progress bar driven by requestAnimationFrame"},
		{"canvas", "a chart drawn on a canvas every animation frame"},
		{"banner", "a banner moved by script every animation frame"},
		{"floating", "the form itself floating by a CSS transform animation"},
		{"dialog", "the form in a dialog sliding in and out"},
		{"scrolling", "the page scrolling itself every animation frame"},
		{"secret-moves", "the form moved by script every animation frame"},
		{"secret-appears", "the form appearing mid-animation"},
		{"agent-types", "the agent typing a password and a card number while a progress bar animates"},
	}
	pages := make([]string, len(moving))
	for i, mp := range moving {
		pages[i] = mp.page
	}
	sideBySide(t, "agent-m-motion", pages, func(t *testing.T, i int, ss *stack.Session, agent string) {
		mp := moving[i]
		observed := ""
		record(t, "Privacy masks that follow motion", "no green pixel of a secret in any frame, the page shown with its secrets masked: "+mp.expected, &observed)
		res, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/moving/" + mp.page + ".html"})
		if err != nil {
			t.Fatal(err)
		}
		tab := tabID(t, res)
		defer func() { _, _ = ss.Tool(client.Context(t), wire.ToolClose, map[string]string{"tabId": tab}) }()
		typed := make(chan error, 1)
		if mp.page == "agent-types" {
			go func() {
				var steps []map[string]string
				for range 4 {
					steps = append(steps,
						map[string]string{"action": "click", "selector": "#p"}, map[string]string{"action": "type", "selector": "#p", "text": "hunter2"},
						map[string]string{"action": "click", "selector": "#card"}, map[string]string{"action": "type", "selector": "#card", "text": "4111"})
				}
				_, err := ss.Tool(client.Context(t), wire.ToolPlay, map[string]any{"tabId": tab, "steps": steps})
				typed <- err
			}()
		} else {
			typed <- nil
		}
		frames, shown, whole := 0, 0, map[string]int{}
		for range views {
			page := frameOrRefused(t, agent)
			if page == nil {
				continue
			}
			frames++
			inControl, leaked := leakGreen(stacktest.DecodeFrame(t, page))
			if leaked > 0 {
				t.Fatalf("%d green pixels of a secret outside the control (masked %d, hidden %q)", leaked, page.Masked, page.Hidden)
			}
			switch {
			case page.Hidden != "" && inControl == 0:
				whole[page.Hidden]++
			case page.Hidden == "" && inControl > 0:
				shown++
			default:
				t.Fatalf("hidden %q with %d green pixels in the control: a frame masked whole must say why, and only then", page.Hidden, inControl)
			}
		}
		if err := <-typed; err != nil {
			t.Fatalf("the agent's typing: %v", err)
		}
		mu.Lock()
		total, shownAll = total+views, shownAll+shown
		mu.Unlock()
		observed = fmt.Sprintf("%d views: %d frames, %d shown masked in part, %s; no green outside the control", views, frames, shown, wholeByReason(whole))
		if frames != views {
			t.Errorf("%s: want every view a frame", observed)
		}
	})
	t.Run("share_shown", func(t *testing.T) {
		observed := ""
		record(t, "Privacy masks that follow motion", "at least 95 % of all the moving pages' frames show the page, its secrets masked in part", &observed)
		observed = fmt.Sprintf("%d of %d frames (%.0f %%)", shownAll, total, 100*float64(shownAll)/float64(max(total, 1)))
		if total == 0 || float64(shownAll) < 0.95*float64(total) {
			t.Errorf("%s: want at least 95 %%", observed)
		}
	})
}

// maskSessions is how many live sessions sideBySide views pages on at once.
const maskSessions = 3

// sideBySide runs a subtest of t for each of pages, named by it, on maskSessions live
// sessions at once (an agent each, named prefix-1, prefix-2, …): run gets the page's
// index, its session and agent. A session's views wait out its broker's 2 s between
// captures, and the pages' frames are judged in that time; three sessions view three
// pages in the time of one, every page's views and spacing as before. The rows keep the
// pages' order.
func sideBySide(t *testing.T, prefix string, pages []string, run func(t *testing.T, i int, ss *stack.Session, agent string)) {
	t.Helper()
	reserve(t, pages...)
	type live struct {
		ss    *stack.Session
		agent string
	}
	sessions := make([]live, min(maskSessions, len(pages)))
	for n := range sessions {
		agent := fmt.Sprintf("%s-%d", prefix, n+1)
		sessions[n] = live{liveSession(t, agent, stack.SessionOptions{}), agent}
	}
	next := make(chan int, len(pages))
	for i := range pages {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for _, l := range sessions {
		wg.Go(func() {
			for i := range next {
				t.Run(pages[i], func(t *testing.T) { run(t, i, l.ss, l.agent) })
			}
		})
	}
	wg.Wait()
}

// wholeByReason says how many frames were masked whole, by reason, for a row.
func wholeByReason(whole map[string]int) string {
	if len(whole) == 0 {
		return "none masked whole"
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(whole)) {
		parts = append(parts, fmt.Sprintf("%s %d", why, whole[why]))
	}
	return "masked whole: " + strings.Join(parts, ", ")
}

// leakGreen counts a frame's pixels of the leak pages' green inside the control (CSS
// 900,20 300×60 of a 1280-px-wide viewport, padded) and outside it.
func leakGreen(img image.Image) (inControl, leaked int) {
	b := img.Bounds()
	k := float64(b.Dx()) / 1280
	control := image.Rect(int(900*k)-4, int(20*k)-4, int(1200*k)+4, int(80*k)+4)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if g>>8 <= 140 || r>>8 >= 110 || bl>>8 >= 110 {
				continue
			}
			if image.Pt(x, y).In(control) {
				inControl++
			} else {
				leaked++
			}
		}
	}
	return inControl, leaked
}

// leakBlue counts a frame's pixels of the blue the leak pages' frames show beside their
// secrets (no secret): a frame that shows them was read into, not masked whole.
func leakBlue(img image.Image) int {
	b, n := img.Bounds(), 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); bl>>8 > 160 && r>>8 < 80 && g>>8 < 80 {
				n++
			}
		}
	}
	return n
}

// frameOrRefused views agent once: the page of a 200, or nil for a 503, which must be
// of reason capture (a capture that failed: Chromium did not answer in time).
func frameOrRefused(t *testing.T, agent string) *wire.Page {
	t.Helper()
	before := client.UnavailableByReason(t)
	r := client.Poll(t, agent)
	if r.Status == http.StatusServiceUnavailable {
		if reason := newReason(t, before, client.UnavailableByReason(t)); reason != wire.ReasonCapture {
			t.Errorf("a 503 of reason %q, want capture", reason)
		}
		return nil
	}
	page := r.Result(t).Page
	if r.Status != http.StatusOK || page == nil {
		t.Fatalf("view: %s", r.Summary())
	}
	return page
}
