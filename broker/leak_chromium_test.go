package broker

import (
	"fmt"
	"image"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/jpegmask"
	"github.com/agentfy/agentfy/wire"
)

// The demo site's leak pages (testdata/site/leaks) paint a secret where no box of it
// is — a copy by a shadow, a reflection, a filter, an SVG <use>, inside a frame the
// snapshot cannot read — or move it while it is captured. Each secret is drawn in
// rgb(0, 200, 0), the page's only green but for one control — plain text in the same
// green, never masked — which proves the colour reaches the frame. A frame that leaves
// must show no green outside the control.

// isLeakGreen reports whether a pixel is the secrets' green (JPEG-decoded).
func isLeakGreen(p [3]uint8) bool { return p[1] > 140 && p[0] < 110 && p[2] < 110 }

// inkPages are the demo site's pages (testdata/site/leaks) that paint a secret where no
// box of it is; wholePages those whose frame is masked whole, the control too.
var (
	inkPages   = []string{"text-shadow", "box-reflect", "drop-shadow", "scaled-shadow", "svg-use", "sandboxed-frame", "svg-filter"}
	wholePages = []string{"svg-filter"}
)

// TestMaskPaintedInk captures each ink page: no frame shows the secret's green outside
// the control, and each frame shows the control (but one masked whole).
func TestMaskPaintedInk(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	for _, name := range inkPages {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, site.URL+"/leaks/"+name+".html")
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			where, width := rects(t, s, []string{"control"})
			p := tb.capturePage(t)
			inControl, leaked := greenPixels(t, p, where["control"], width)
			if slices.Contains(wholePages, name) {
				// Ink that cannot be placed: the frame is masked whole, the control too.
				if inControl+leaked > 0 || p.Masked == 0 {
					t.Fatalf("%d green pixels in a frame that should be masked whole (masked %d)", inControl+leaked, p.Masked)
				}
				return
			}
			if inControl < 200 {
				t.Fatalf("the control shows %d green pixels: the frame does not show the colour", inControl)
			}
			if leaked > 0 || p.Masked == 0 {
				t.Fatalf("%d green pixels outside the control (masked %d)", leaked, p.Masked)
			}
		})
	}
}

// motionPages are the demo site's pages that move a secret while it is captured, or
// paint an old image of it.
var motionPages = []string{"css-steps", "css-layout", "script-frames", "view-transition"}

// TestMaskMotion captures each motion page several times: no frame that leaves shows
// the secret's green outside the control.
func TestMaskMotion(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	for _, name := range motionPages {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, site.URL+"/leaks/"+name+".html")
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			if name == "view-transition" {
				evaluate(t, s, "window.go()") // until the transition's animations run (it starts on its own too)
				var gone bool
				evalJSON(t, s, `document.getElementById("v") === null`, &gone)
				if !gone {
					t.Fatal("the view transition did not start")
				}
			}
			where, width := rects(t, s, []string{"control"})
			whole := 0
			delivered := captureFrames(t, tb, 7, func(i int, p *wire.Page) {
				inControl, leaked := greenPixels(t, p, where["control"], width)
				if leaked > 0 {
					t.Fatalf("frame %d: %d green pixels outside the control (masked %d)", i, leaked, p.Masked)
				}
				if inControl == 0 {
					whole++
				}
			})
			t.Logf("%d of 7 frames delivered, %d of them masked whole", delivered, whole)
		})
	}
}

// greenPixels counts the secrets' green pixels of a frame inside the control (its
// CSS rect at a viewport width in CSS pixels) and outside it.
func greenPixels(tb testing.TB, p *wire.Page, c cssRect, width float64) (inControl, leaked int) {
	tb.Helper()
	img := decodeJPEG(tb, p.JPEG())
	k := float64(img.Bounds().Dx()) / width
	control := image.Rect(int(c.X*k)-4, int(c.Y*k)-4, int((c.X+c.W)*k)+4, int((c.Y+c.H)*k)+4)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if !isLeakGreen(rgbAt(img, x, y)) {
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

// TestMaskMotionElsewhere: what moves away from the secrets masks nothing whole — a
// spinner beside a password field, an animation of the field's colour, one that ended
// on its ancestor — so a page that animates something is not hidden for it.
func TestMaskMotionElsewhere(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, site.URL+"/leaks/motion-elsewhere.html")
	s := testSession(t, tab.TabID)
	where, width := rects(t, s, []string{"control"})
	for i := range 3 {
		p := tb.capturePage(t)
		inControl, leaked := greenPixels(t, p, where["control"], width)
		if leaked > 0 || inControl < 200 || p.Masked != 1 {
			t.Fatalf("frame %d: %d green pixels in the control, %d outside, masked %d; want the control shown and the field alone masked", i, inControl, leaked, p.Masked)
		}
	}
}

// TestPaintMasksDCTOnChromium: the frames Chromium encodes are ones the masks re-code
// in the DCT domain (jpegmask.PaintDCT), not decoded and encoded again — at the sizes a
// viewport takes, with boxes at its edges.
func TestPaintMasksDCTOnChromium(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, site.URL+"/checkout.html")
	defer tb.closeTab(t, tab.TabID)
	s, err := tb.session(t.Context(), proto.TargetTargetID(tab.TabID))
	if err != nil {
		t.Fatal(err)
	}
	page, err := tabPage(t.Context(), s, proto.TargetTargetID(tab.TabID), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := decodeJPEG(t, page.JPEG()).Bounds()
	out, err := jpegmask.PaintDCT(page.JPEG(), []image.Rectangle{image.Rect(0, 0, 40, 40), image.Rect(b.Dx()-33, b.Dy()-21, b.Dx(), b.Dy()), image.Rect(300, 200, 700, 260)})
	if err != nil {
		t.Fatalf("Chromium's frame was not re-coded: %v", err)
	}
	if p := rgbOf(decodeJPEG(t, out).At(310, 210)); !isMaskGrey(p) {
		t.Fatalf("inside a mask: %v", p)
	}
}

func isMaskGrey(p [3]uint8) bool { _, grey := isMaskPixel(p); return grey }

// framePages are the demo site's pages whose secrets are in frames Chromium runs in a
// process of their own, and how many regions each masks.
var framePages = []struct {
	page   string
	frames []string // the URLs of its frames' targets
	masked int
}{
	{"sandboxed-frame", []string{"about:srcdoc"}, 1},
	{"cross-site-frame", []string{"/leaks/frame-login.html", "about:srcdoc"}, 2},
}

// TestMaskFramesOfAnotherProcess: the broker reads into the frames of another process
// — a sandboxed frame, a cross-site frame scrolled, a sandboxed frame inside that — and
// masks each secret where the frame draws it: no green outside the control, the
// frames' blue blocks (no secret) shown. It does so whether or not the deployment
// shows the frames it cannot read into. A secret that moves in such a frame masks the
// frame whole.
func TestMaskFramesOfAnotherProcess(t *testing.T) {
	site := demoSite(t)
	for _, shown := range []bool{false, true} {
		tb := newTestBroker(t, nil, func(c *Config) {
			c.MinCaptureInterval = 0
			c.ShowOpaqueFrames = shown
		})
		for _, fp := range framePages {
			t.Run(fmt.Sprintf("%s/frames shown %v", fp.page, shown), func(t *testing.T) {
				tab := tb.open(t, site.URL+"/leaks/"+fp.page+".html")
				defer tb.closeTab(t, tab.TabID)
				// The frames are targets of their own: processes the page's snapshot
				// does not see into.
				for _, want := range fp.frames {
					frameSession(t, want)
				}
				s := testSession(t, tab.TabID)
				where, width := rects(t, s, []string{"control"})
				for i := range 2 {
					p := tb.capturePage(t)
					inControl, leaked := greenPixels(t, p, where["control"], width)
					blue := bluePixels(t, p)
					if leaked > 0 || inControl < 200 || p.Masked != fp.masked || blue < 10000 {
						t.Fatalf("frame %d: %d green pixels in the control, %d outside, %d blue, masked %d; want the control and the blue shown, %d regions masked",
							i, inControl, leaked, blue, p.Masked, fp.masked)
					}
				}
			})
		}
	}
	t.Run("frame-motion", func(t *testing.T) {
		tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
		tab := tb.open(t, site.URL+"/leaks/frame-motion.html")
		defer tb.closeTab(t, tab.TabID)
		s := testSession(t, tab.TabID)
		where, width := rects(t, s, []string{"control"})
		delivered := captureFrames(t, tb, 5, func(i int, p *wire.Page) {
			_, leaked := greenPixels(t, p, where["control"], width)
			if blue := bluePixels(t, p); leaked > 0 || blue > 0 || p.Masked == 0 {
				t.Fatalf("frame %d: %d green pixels outside the control, %d blue, masked %d; want the frame masked whole", i, leaked, blue, p.Masked)
			}
		})
		t.Logf("%d of 5 frames delivered", delivered)
	})
}

// bluePixels counts the pixels of a frame in the blue of the leak pages' blocks that
// are no secret.
func bluePixels(tb testing.TB, p *wire.Page) int {
	tb.Helper()
	img := decodeJPEG(tb, p.JPEG())
	b, n := img.Bounds(), 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if c := rgbAt(img, x, y); c[2] > 160 && c[0] < 80 && c[1] < 80 {
				n++
			}
		}
	}
	return n
}

// TestMaskFrameTransitions: a frame that runs a view transition removing its secret —
// in the page's process (same-origin) or in one of its own (cross-site) — paints the
// old image with the secret, which no snapshot holds: every frame that leaves is masked
// whole.
func TestMaskFrameTransitions(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	for _, name := range []string{"frame-view-transition", "cross-site-view-transition"} {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, site.URL+"/leaks/"+name+".html")
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			// Until the transition's animations run (it starts on its own too), asked
			// in the frame's own document.
			if name == "frame-view-transition" {
				evaluate(t, s, `document.getElementById("frame").contentWindow.go()`)
			} else {
				evaluate(t, frameSession(t, "/leaks/frame-transition-inner.html"), "window.go()")
			}
			where, width := rects(t, s, []string{"control"})
			delivered := captureFrames(t, tb, 4, func(i int, p *wire.Page) {
				inControl, leaked := greenPixels(t, p, where["control"], width)
				if leaked > 0 || inControl > 0 || p.Masked == 0 {
					t.Fatalf("frame %d: %d green pixels outside the control, %d in it, masked %d; want the frame masked whole", i, leaked, inControl, p.Masked)
				}
			})
			if delivered == 0 {
				t.Fatal("no frame delivered: nothing to judge")
			}
		})
	}
}

// frameSession attaches the test's own session to the frame of another process whose
// URL ends in suffix.
func frameSession(tb testing.TB, suffix string) cdpSession {
	tb.Helper()
	targets, err := proto.TargetGetTargets{}.Call(sharedChromium(tb).Browser.Context(tb.Context()))
	if err != nil {
		tb.Fatal(err)
	}
	for _, ti := range targets.TargetInfos {
		if ti.Type == "iframe" && strings.HasSuffix(ti.URL, suffix) {
			return testSession(tb, string(ti.TargetID))
		}
	}
	tb.Fatalf("no frame target %s", suffix)
	return cdpSession{}
}

// captureFrames captures the tab n times and hands each frame that leaves, numbered
// from 1, to check: a 503 (a page that moved while it was captured) is skipped, any
// other answer fails the test. It returns how many frames left.
func captureFrames(t *testing.T, tb *testBroker, n int, check func(i int, p *wire.Page)) (delivered int) {
	t.Helper()
	for range n {
		status, body, id, key := tb.capture(t)
		if status != http.StatusOK {
			if status != http.StatusServiceUnavailable {
				t.Fatalf("capture: %d %s", status, body)
			}
			continue
		}
		delivered++
		check(delivered, openPage(t, key, id, body, envelopeOpen))
	}
	return delivered
}
