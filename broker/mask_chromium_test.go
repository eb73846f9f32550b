package broker

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"
)

// The demo site's checkout page (testdata/site/checkout.html): every kind of secret,
// each beside a control that looks the same and is not one. Ids of the elements.
var (
	checkoutSecrets = []string{
		"password", "shown", "cc-number", "cc-csc", "pin", "pay",
		"rr-block", "data-private", "dd", "clarity", "ph",
	}
	checkoutSecretsBelow = []string{"otp", "api-key"}
	checkoutControls     = []string{"email", "order", "receipt", "plan"}
	checkoutControlBelow = []string{"ticket"}
)

// demoSite serves testdata/site, the demo agent's website.
func demoSite(tb testing.TB) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join("..", "testdata", "site"))))
	tb.Cleanup(srv.Close)
	return srv
}

// cssRect is a getBoundingClientRect, in CSS pixels of the viewport.
type cssRect struct{ X, Y, W, H float64 }

// evalJSON runs expr in a tab through the test's own session and decodes its JSON
// value into out.
func evalJSON(tb testing.TB, s cdpSession, expr string, out any) {
	tb.Helper()
	res, err := proto.RuntimeEvaluate{Expression: "JSON.stringify(" + expr + ")", ReturnByValue: true, AwaitPromise: true}.Call(s)
	if err != nil {
		tb.Fatalf("evaluate: %v", err)
	}
	if res.ExceptionDetails != nil {
		tb.Fatalf("evaluate: %s", res.ExceptionDetails.Text)
	}
	if err := json.Unmarshal([]byte(res.Result.Value.Str()), out); err != nil {
		tb.Fatalf("evaluate: %v", err)
	}
}

// rects returns the viewport rectangles of the elements with these ids, and the
// viewport's width in CSS pixels.
func rects(tb testing.TB, s cdpSession, ids []string) (map[string]cssRect, float64) {
	tb.Helper()
	var got struct {
		Rects map[string]cssRect
		Width float64
	}
	js, _ := json.Marshal(ids)
	evalJSON(tb, s, fmt.Sprintf(`{Width: document.documentElement.clientWidth, Rects: Object.fromEntries(%s.map(id => {
		const r = document.getElementById(id).getBoundingClientRect();
		return [id, {X: r.x, Y: r.y, W: r.width, H: r.height}];
	}))}`, js), &got)
	return got.Rects, got.Width
}

// pixelsOf returns the frame's pixels inside r (CSS pixels, scaled by k), inset by
// 3 image pixels so that neither a mask's padding nor a border's antialiasing counts.
func pixelsOf(img *image.RGBA, r cssRect, k float64) [][3]uint8 {
	var px [][3]uint8
	b := img.Bounds()
	for y := int(r.Y*k) + 3; y < int((r.Y+r.H)*k)-3 && y < b.Max.Y; y++ {
		for x := int(r.X*k) + 3; x < int((r.X+r.W)*k)-3 && x < b.Max.X; x++ {
			if y >= 0 && x >= 0 {
				px = append(px, rgbAt(img, x, y))
			}
		}
	}
	return px
}

// isMaskPixel reports whether a pixel may be the mask's: dark and nearly grey. JPEG's
// blocks blur a little of the colour around a mask into its edges; grey reports
// whether it is the mask's plain grey itself.
func isMaskPixel(p [3]uint8) (mask, grey bool) {
	lo, hi := min(p[0], p[1], p[2]), max(p[0], p[1], p[2])
	return hi-lo <= 40 && hi <= 0x90 && !isSecretColour(p), hi-lo <= 12
}

// isSecretColour reports whether a pixel is the pale yellow or dark red every secret
// and control of the checkout page is drawn in.
func isSecretColour(p [3]uint8) bool {
	return near(color3(p), [3]uint8{0xff, 0xf2, 0xa8}) || near(color3(p), [3]uint8{0xa0, 0x10, 0x1e})
}

// checkMasked checks by the pixels that every secret is masked (each of its pixels is
// the mask's, none is the page's) and that every control is not (most of its pixels
// are the page's colours).
func checkMasked(tb testing.TB, img *image.RGBA, k float64, where map[string]cssRect, secrets, controls []string) {
	tb.Helper()
	for _, id := range secrets {
		px := pixelsOf(img, where[id], k)
		if len(px) < 100 {
			tb.Fatalf("%s: only %d pixels in view at %+v", id, len(px), where[id])
		}
		grey := 0
		for _, p := range px {
			mask, g := isMaskPixel(p)
			if !mask {
				tb.Fatalf("%s at %+v: pixel %v is not the mask's", id, where[id], p)
			}
			if g {
				grey++
			}
		}
		if grey < len(px)*9/10 {
			tb.Fatalf("%s at %+v: %d of %d pixels plain grey, want 90 %%", id, where[id], grey, len(px))
		}
	}
	for _, id := range controls {
		px := pixelsOf(img, where[id], k)
		page := 0
		for _, p := range px {
			if isSecretColour(p) {
				page++
			}
		}
		if len(px) < 100 || page < len(px)/2 {
			tb.Fatalf("control %s at %+v: %d of %d pixels in the page's colours, want most", id, where[id], page, len(px))
		}
	}
}

// TestMaskCheckout captures the demo site's checkout page: every secret in view is
// masked in the decoded frame and every control beside one is not; the page counts
// the masked regions; scrolled down, the secrets below the fold are masked in turn.
func TestMaskCheckout(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, site.URL+"/checkout.html")
	s := testSession(t, tab.TabID)

	all := append(append(append(append([]string{}, checkoutSecrets...), checkoutSecretsBelow...), checkoutControls...), checkoutControlBelow...)
	where, width := rects(t, s, all)
	p := tb.capturePage(t)
	img := decodeJPEG(t, p.JPEG())
	k := float64(img.Bounds().Dx()) / width
	checkMasked(t, img, k, where, checkoutSecrets, checkoutControls)
	if p.Masked != len(checkoutSecrets) {
		t.Errorf("masked %d regions, want %d (the secrets in view)", p.Masked, len(checkoutSecrets))
	}

	evaluate(t, s, `document.getElementById("below").scrollIntoView()`)
	where, _ = rects(t, s, all)
	p = tb.capturePage(t)
	img = decodeJPEG(t, p.JPEG())
	checkMasked(t, img, k, where, checkoutSecretsBelow, checkoutControlBelow)
	if p.Masked < len(checkoutSecretsBelow) {
		t.Errorf("masked %d regions, want at least %d", p.Masked, len(checkoutSecretsBelow))
	}
}

// TestMaskOff captures the checkout page with masking turned off: the secrets show.
func TestMaskOff(t *testing.T) {
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0; c.NoMask = true })
	tab := tb.open(t, site.URL+"/checkout.html")
	s := testSession(t, tab.TabID)
	where, width := rects(t, s, checkoutSecrets)
	p := tb.capturePage(t)
	img := decodeJPEG(t, p.JPEG())
	checkMasked(t, img, float64(img.Bounds().Dx())/width, where, nil, []string{"cc-number", "rr-block", "data-private"})
	if p.Masked != 0 {
		t.Errorf("masked %d regions with masking off", p.Masked)
	}
}

// TestMaskUnsteadyPage captures, many times, a page whose script scrolls it at random
// moments, some of them while it is captured: every view sends a frame (one that moved
// while it was captured is masked whole, not refused) and every frame has its secrets
// masked (no pixel of their colour anywhere).
func TestMaskUnsteadyPage(t *testing.T) {
	// moving.html: secrets in pure green, the page's only green, at 300, 1100 and 2300 px
	// down a page that scrolls itself at random moments.
	site := demoSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tb.open(t, site.URL+"/moving.html")

	const views = 30
	delivered, masked, whole := 0, 0, 0
	for range views {
		status, body, id, key := tb.capture(t)
		if status != http.StatusOK {
			t.Fatalf("capture: %d %s", status, body)
		}
		delivered++
		p := openPage(t, key, id, body, envelopeOpen)
		if p.Masked > 0 {
			masked++
		}
		if maskedWhole(t, p) {
			whole++
		}
		img := decodeJPEG(t, p.JPEG())
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if c := rgbAt(img, x, y); c[1] > 160 && c[0] < 120 && c[2] < 120 {
					t.Fatalf("view %d: secret pixel %v at (%d, %d) of a frame that left (masked %d)", delivered, c, x, y, p.Masked)
				}
			}
		}
	}
	t.Logf("%d of %d views delivered, %d of them with masks, %d masked whole", delivered, views, masked, whole)
	if delivered == 0 || masked == 0 {
		t.Fatalf("%d of %d views delivered, %d with masks: the test saw nothing to check", delivered, views, masked)
	}
}

// TestMaskWatchedPage captures a page whose script watches for every change a capture
// could make — DOM mutations, focus, blur, scroll, resize, visibility and the size of
// its elements: masking reads the page without any of them.
func TestMaskWatchedPage(t *testing.T) {
	site := demoSite(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "watched", `<iframe src="`+site.URL+`/checkout.html" style="width:1100px;height:700px;border:0" allow="payment"></iframe>
<input type="password" value="secret"><input autocomplete="one-time-code" value="123456">
<div data-private>private</div>
<script>
window.seen = [];
const note = what => window.seen.push(what);
new MutationObserver(rs => rs.forEach(r => note("mutation " + r.type + " " + (r.attributeName || ""))))
	.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
for (const ev of ["focus", "blur", "focusin", "focusout", "scroll", "resize", "visibilitychange", "pointermove", "mousemove", "keydown", "selectionchange"]) {
	addEventListener(ev, () => note(ev), true);
	document.addEventListener(ev, () => note(ev), true);
}
let first = true;
new ResizeObserver(() => { if (!first) note("resize-observer"); first = false; }).observe(document.body);
window.ready = true;
</script>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, srv.URL+"/")
	s := testSession(t, tab.TabID)
	var ready bool
	evalJSON(t, s, "window.ready === true", &ready)
	if !ready {
		t.Fatal("the watcher did not start")
	}
	// browser_open activated the tab: the focus that follows is the tool's, not a
	// view's. Wait for it (at most 3 s: a tab that never gets focus sends none), then
	// forget what the watcher saw so far.
	evaluate(t, s, `new Promise(done => {
		if (document.hasFocus()) return done(true);
		addEventListener("focus", () => done(true), {once: true});
		setTimeout(() => done(false), 3000);
	})`)
	evaluate(t, s, "window.seen = []")
	for i := range 5 {
		if p := tb.capturePage(t); p == nil || p.Masked < 3 {
			t.Fatalf("view %d: %s, masked %d, want the page's 3 secrets and its payment frame masked", i, describe(p), p.Masked)
		}
	}
	var seen []string
	evalJSON(t, s, "window.seen", &seen)
	if len(seen) != 0 {
		t.Fatalf("the page saw %v during views", seen)
	}
}

// TestMaskNothingToMask captures a page with no secret: nothing is painted, and the
// page says nothing of masks.
func TestMaskNothingToMask(t *testing.T) {
	site := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, site.URL+"/text")
	s, err := tb.session(t.Context(), proto.TargetTargetID(tab.TabID))
	if err != nil {
		t.Fatal(err)
	}
	page, err := tabPage(t.Context(), s, proto.TargetTargetID(tab.TabID), time.Now(), tb.mask)
	if err != nil {
		t.Fatal(err)
	}
	if page.Masked != 0 {
		t.Fatalf("masked %d, want 0", page.Masked)
	}
}

// color3 is an RGB triple as a colour.
func color3(p [3]uint8) color.Color { return color.RGBA{p[0], p[1], p[2], 0xff} }
