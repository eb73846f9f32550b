package broker

import (
	"image"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The pages below paint a secret where no box of it is: a copy by a shadow, a
// reflection, a filter, an SVG <use>, or inside a frame the snapshot cannot read. Each
// secret is drawn in rgb(0, 200, 0), the page's only green but for one control — plain
// text in the same green, never masked — which proves the colour reaches the frame.
// A frame that leaves must show no green outside the control.

// leakControl is the control's markup: green text at a fixed place of the viewport.
const leakControl = `<div id="control" style="position:fixed;left:900px;top:20px;width:300px;height:60px;font:bold 40px monospace;color:rgb(0,200,0)">CONTROL</div>`

// isLeakGreen reports whether a pixel is the secrets' green (JPEG-decoded).
func isLeakGreen(p [3]uint8) bool { return p[1] > 140 && p[0] < 110 && p[2] < 110 }

var leakPages = map[string]string{
	// Ink overflow: a text shadow 80 px below a marked API key, and one of a card number
	// (an input clips its text to its box, shadow included).
	"text-shadow": `<span data-sensitive style="position:absolute;left:40px;top:120px;font:bold 36px monospace;color:transparent;text-shadow:0 80px 0 rgb(0,200,0)">sk_live_SHADOW</span>` +
		`<input autocomplete="cc-number" value="4111 1111 1111 1111" style="position:absolute;left:40px;top:320px;width:420px;height:50px;font:bold 36px monospace;color:transparent;text-shadow:0 80px 0 rgb(0,200,0);border:0;background:#fff">`,
	// A reflection of a marked element below it.
	"box-reflect": `<div class="rr-block" style="position:absolute;left:40px;top:120px;font:bold 40px monospace;color:rgb(0,200,0);-webkit-box-reflect:below 30px">sk_live_REFLECT</div>`,
	// A drop shadow of a password field, far from it.
	"drop-shadow": `<input type="password" value="hunter2hunter2" style="position:absolute;left:40px;top:120px;width:420px;height:50px;font:bold 36px monospace;color:rgb(0,200,0);border:0;background:transparent;filter:drop-shadow(0 150px 0 rgb(0,200,0))">`,
	// An ancestor's drop shadow, scaled by a transform.
	"scaled-shadow": `<div style="position:absolute;left:40px;top:100px;transform:scale(2);transform-origin:0 0;filter:drop-shadow(0 60px 0 rgb(0,200,0))"><span data-private style="font:bold 20px monospace;color:rgb(0,200,0)">PRIVATE-SCALED</span></div>`,
	// An SVG <use> of a marked text kept in <defs>.
	"svg-use": `<svg width="800" height="400" style="position:absolute;left:0;top:100px"><defs><text id="t" class="rr-block" x="0" y="40" style="font:bold 40px monospace;fill:rgb(0,200,0)">SVG-SECRET</text></defs><use href="#t" x="60" y="200"/></svg>`,
	// A card field in a sandboxed frame (a process of its own: no snapshot sees in).
	"sandboxed-frame": `<iframe sandbox srcdoc="<input autocomplete='cc-number' value='5555 5555 5555 4444' style='font:bold 36px monospace;color:rgb(0,200,0);width:420px;height:50px;border:0'>" style="position:absolute;left:40px;top:120px;width:480px;height:90px;border:0"></iframe>`,
	// An SVG filter (feImage can draw any element anywhere) on a page with a secret.
	"svg-filter": `<svg width="0" height="0" style="position:absolute"><filter id="f"><feOffset dx="0" dy="150"/></filter></svg><div style="position:absolute;left:40px;top:120px;filter:url(#f)"><span class="rr-mask" style="font:bold 40px monospace;color:rgb(0,200,0)">FILTERED</span></div>`,
}

// TestMaskPaintedInk captures each leak page: no frame shows the secret's green
// outside the control, and each frame shows the control.
func TestMaskPaintedInk(t *testing.T) {
	mux := http.NewServeMux()
	for name, body := range leakPages {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, _ *http.Request) { writeHTML(w, name, leakControl+body) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	for name := range leakPages {
		t.Run(name, func(t *testing.T) {
			tab := tb.open(t, srv.URL+"/"+name)
			defer tb.closeTab(t, tab.TabID)
			s := testSession(t, tab.TabID)
			where, width := rects(t, s, []string{"control"})
			p := tb.observePage(t)
			img := decodeJPEG(t, p.Data)
			k := float64(img.Bounds().Dx()) / width
			c := where["control"]
			control := image.Rect(int(c.X*k)-4, int(c.Y*k)-4, int((c.X+c.W)*k)+4, int((c.Y+c.H)*k)+4)
			inControl, leaked := 0, 0
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					if !isLeakGreen(rgbOf(img.At(x, y))) {
						continue
					}
					if image.Pt(x, y).In(control) {
						inControl++
					} else {
						leaked++
					}
				}
			}
			if name == "svg-filter" {
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
