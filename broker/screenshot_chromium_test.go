package broker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// Pages whose secrets move while they are captured, for TestMaskOneScreenshot. Each
// draws its secrets in rgb(0, 200, 0), the page's only green but for the control at the
// top right, never masked (as the demo site's leak pages do): a frame that shows green
// outside the control leaked a secret, and one that shows none in the control is masked
// whole.
var movingSecretPages = []struct{ name, body string }{
	{"field-moved-by-a-timer", movingControl + `
<input id="p" type="password" value="hunter2hunter2" style="position:absolute;left:40px;top:120px;width:420px;height:50px;font:bold 36px monospace;color:rgb(0,200,0);border:0;background:transparent">
<script>let k = 0; setInterval(() => { k = (k + 1) % 40; p.style.top = (120 + 10 * k) + "px"; }, 1);</script>`},
	{"field-moved-by-css", movingControl + `
<style>@keyframes slide{from{top:120px}to{top:520px}}</style>
<input type="password" value="hunter2hunter2" style="position:absolute;left:40px;top:120px;width:420px;height:50px;font:bold 36px monospace;color:rgb(0,200,0);border:0;background:transparent;animation:slide 300ms linear infinite alternate">`},
	{"page-scrolled-by-a-timer", movingControl + `
<div data-private style="position:absolute;left:40px;top:300px;width:400px;height:120px;background:rgb(0,200,0)"></div>
<div data-private style="position:absolute;left:40px;top:1100px;width:400px;height:120px;background:rgb(0,200,0)"></div>
<div style="height:4000px"></div>
<script>let y = 0; setInterval(() => { y = (y + 37) % 2000; scrollTo(0, y); }, 2);</script>`},
}

// movingControl is the moving pages' control: green text fixed at the top right.
const movingControl = `<div id="control" style="position:fixed;left:900px;top:20px;width:300px;height:60px;font:bold 40px monospace;color:rgb(0,200,0)">CONTROL</div>`

// TestMaskOneScreenshot records what each capture sends to Chromium, on a page
// whose secrets stand still and on pages whose secrets move while they are captured: an
// capture takes at most one screenshot (SPEC §10), whatever moved, and every frame
// that leaves shows no secret's green outside the control.
func TestMaskOneScreenshot(t *testing.T) {
	mux := http.NewServeMux()
	for _, p := range movingSecretPages {
		mux.HandleFunc("/"+p.name, func(w http.ResponseWriter, _ *http.Request) { writeHTML(w, p.name, p.body) })
	}
	mux.Handle("/", http.FileServer(http.Dir("../testdata/site")))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	browser, rec := recordingBrowser(t)
	tb := newTestBrokerOn(t, browser, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	pages := []string{"checkout.html", "moving.html", "leaks/script-frames.html", "leaks/css-steps.html"}
	for _, p := range movingSecretPages {
		pages = append(pages, p.name)
	}
	for _, name := range pages {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, srv.URL+"/"+name)
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			// The checkout page's secrets are not green (TestMaskCheckout checks its
			// masks); moving.html's are, it has no control, and some of its frames show
			// no secret.
			var control cssRect
			var width float64
			hasControl := name != "checkout.html" && name != "moving.html"
			switch {
			case hasControl:
				where, w := rects(t, s, []string{"control"})
				control, width = where["control"], w
			case name == "moving.html":
				evalJSON(t, s, "document.documentElement.clientWidth", &width)
			}
			const views = 8
			most, total, delivered, whole := 0, 0, 0, 0
			for i := range views {
				rec.take()
				status, body, id, key := tb.capture(t)
				shots := 0
				for _, c := range rec.take() {
					if c.method == "Page.captureScreenshot" {
						shots++
					}
				}
				most, total = max(most, shots), total+shots
				if shots > 1 {
					t.Errorf("view %d took %d screenshots, want at most 1 (status %d)", i, shots, status)
				}
				if status != http.StatusOK {
					continue
				}
				delivered++
				p := openPage(t, key, id, body, envelopeOpen)
				if maskedWhole(t, p) {
					whole++
				}
				if width == 0 {
					continue
				}
				inControl, leaked := greenPixels(t, p, control, width)
				if leaked > 0 || (hasControl && p.Masked == 0) {
					t.Fatalf("view %d: %d green pixels outside the control, masked %d", i, leaked, p.Masked)
				}
				if hasControl && inControl > 0 && maskedWhole(t, p) {
					t.Fatalf("view %d: the control shows in a frame masked whole", i)
				}
			}
			t.Logf("%s: %d views: %d screenshots, at most %d in one; %d delivered, %d of them masked whole", name, views, total, most, delivered, whole)
		})
	}
}

// maskedWhole reports whether every pixel of a frame may be the mask's.
func maskedWhole(tb testing.TB, p *wire.Page) bool {
	tb.Helper()
	img := decodeJPEG(tb, p.JPEG())
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if mask, _ := isMaskPixel(rgbAt(img, x, y)); !mask {
				return false
			}
		}
	}
	return true
}
