package broker

import (
	"encoding/binary"
	"errors"
	"image"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"
)

// ijgLuminance and ijgChrominance are the example quantization tables of
// the JPEG standard (Annex K), in natural order, which libjpeg scales by
// quality.
var (
	ijgLuminance = [64]int{
		16, 11, 10, 16, 24, 40, 51, 61,
		12, 12, 14, 19, 26, 58, 60, 55,
		14, 13, 16, 24, 40, 57, 69, 56,
		14, 17, 22, 29, 51, 87, 80, 62,
		18, 22, 37, 56, 68, 109, 103, 77,
		24, 35, 55, 64, 81, 104, 113, 92,
		49, 64, 78, 87, 103, 121, 120, 101,
		72, 92, 95, 98, 112, 100, 103, 99,
	}
	ijgChrominance = [64]int{
		17, 18, 24, 47, 99, 99, 99, 99,
		18, 21, 26, 66, 99, 99, 99, 99,
		24, 26, 56, 99, 99, 99, 99, 99,
		47, 66, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
	}
	// zigzag maps the k-th coefficient of a DQT segment to natural order.
	zigzag = [64]int{
		0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
		12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
		35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
		58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	}
)

// ijgTable scales a base table for quality as libjpeg's jpeg_set_quality
// does, with baseline clamping; the result is in natural order.
func ijgTable(base [64]int, quality int) [64]int {
	scale := 5000 / quality
	if quality >= 50 {
		scale = 200 - 2*quality
	}
	var t [64]int
	for i, v := range base {
		t[i] = min(max((v*scale+50)/100, 1), 255)
	}
	return t
}

// quantTables reads the DQT segments of a JPEG, in natural order, by id.
func quantTables(data []byte) (map[int][64]int, error) {
	tables := map[int][64]int{}
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return nil, errors.New("no SOI")
	}
	for i := 2; i+4 <= len(data); {
		if data[i] != 0xFF {
			return nil, errors.New("lost marker sync")
		}
		marker := data[i+1]
		if marker == 0xDA { // start of scan: the tables come before
			return tables, nil
		}
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if i+2+n > len(data) {
			return nil, errors.New("truncated segment")
		}
		seg := data[i+4 : i+2+n]
		if marker == 0xDB {
			for len(seg) > 0 {
				precision, id := seg[0]>>4, int(seg[0]&0x0F)
				size := 64
				if precision == 1 {
					size = 128
				}
				if len(seg) < 1+size {
					return nil, errors.New("truncated DQT")
				}
				var t [64]int
				for k := range 64 {
					v := int(seg[1+k])
					if precision == 1 {
						v = int(binary.BigEndian.Uint16(seg[1+2*k:]))
					}
					t[zigzag[k]] = v
				}
				tables[id] = t
				seg = seg[1+size:]
			}
		}
		i += 2 + n
	}
	return nil, errors.New("no SOS")
}

func TestIJGTableQuality60(t *testing.T) {
	// Spot values of libjpeg's quality 60 tables (scale factor 80).
	lum, chr := ijgTable(ijgLuminance, 60), ijgTable(ijgChrominance, 60)
	if lum[0] != 13 || lum[63] != 79 || chr[0] != 14 || chr[63] != 79 {
		t.Fatalf("q60 tables start %d/%d and end %d/%d", lum[0], chr[0], lum[63], chr[63])
	}
	if ijgTable(ijgLuminance, 80) == lum {
		t.Fatal("q80 and q60 tables are equal")
	}
}

// emulate sets a tab's viewport from the test's own session (never from
// capture) and clears it at the end of the test.
func emulate(tb testing.TB, s cdpSession, width, height int, dpr float64) {
	tb.Helper()
	err := proto.EmulationSetDeviceMetricsOverride{Width: width, Height: height, DeviceScaleFactor: dpr}.Call(s)
	if err != nil {
		tb.Fatalf("emulate: %v", err)
	}
	tb.Cleanup(func() { _ = proto.EmulationClearDeviceMetricsOverride{}.Call(s) })
}

// TestCaptureGeometryAndQuality checks the size, clipping, scaling, JPEG
// quality and timestamp of captures for several viewports.
func TestCaptureGeometryAndQuality(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, s.URL+"/stripes")
	sess := testSession(t, tab.TabID)

	tests := []struct {
		name          string
		width, height int
		dpr           float64
		wantSize      image.Point
		// colour at the bottom-left of the image, to tell clipping from
		// squeezing: the stripes change every 1000 CSS px.
		wantBottom [3]uint8
	}{
		{name: "window default 1280x800", wantSize: image.Pt(1280, 800), wantBottom: red},
		{name: "full hd scaled to 1280 wide", width: 1920, height: 1080, dpr: 1, wantSize: image.Pt(1280, 720), wantBottom: blue},
		{name: "taller than 2000 is clipped before scaling", width: 1920, height: 3000, dpr: 1, wantSize: image.Pt(1280, 1333), wantBottom: blue},
		{name: "tall and narrow is clipped, not scaled", width: 800, height: 2600, dpr: 1, wantSize: image.Pt(800, 2000), wantBottom: blue},
		{name: "device pixel ratio 2 stays 1280 wide", width: 1280, height: 800, dpr: 2, wantSize: image.Pt(1280, 800), wantBottom: red},
		// The case the API used to refuse: 800 CSS px wide at ratio 2 made a 1280 × 3200
		// image of a 2000-CSS-px clip. One image pixel per CSS pixel keeps it 800 × 2000.
		{name: "device pixel ratio 2, narrow and tall, is 2000 px at most", width: 800, height: 2600, dpr: 2, wantSize: image.Pt(800, 2000), wantBottom: blue},
	}
	lum, chr := ijgTable(ijgLuminance, CaptureQuality), ijgTable(ijgChrominance, CaptureQuality)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.width > 0 {
				emulate(t, sess, tt.width, tt.height, tt.dpr)
			}
			before := time.Now().UTC().Truncate(time.Millisecond)
			p := tb.capturePage(t)
			after := time.Now().UTC()
			if p == nil {
				t.Fatal("observed null")
			}
			img := decodeJPEG(t, p.JPEG())
			if got := img.Bounds().Size(); got != tt.wantSize {
				t.Fatalf("image %v, want %v", got, tt.wantSize)
			}
			if c := img.At(5, img.Bounds().Dy()-3); !near(c, tt.wantBottom) {
				t.Errorf("bottom-left pixel %v, want %v", rgbOf(c), tt.wantBottom)
			}
			if c := img.At(5, 3); !near(c, red) {
				t.Errorf("top-left pixel %v, want red", rgbOf(c))
			}
			tables, err := quantTables(p.JPEG())
			if err != nil {
				t.Fatal(err)
			}
			if len(tables) != 2 || tables[0] != lum || tables[1] != chr {
				t.Errorf("quantization tables %v are not libjpeg's quality %d tables", tables, CaptureQuality)
			}
			at := parseCapturedAt(t, p.CapturedAt)
			if at.Before(before) || at.After(after) {
				t.Errorf("capturedAt %v outside [%v, %v]", at, before, after)
			}
		})
	}
}

// TestCaptureFollowsScroll checks that the clip is the visible part of a
// scrolled page: a scroll step of 600 px hides the red band.
func TestCaptureFollowsScroll(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(t, s.URL+"/bands")
	img := decodeJPEG(t, tb.capturePage(t).JPEG())
	if c := img.At(5, 5); !near(c, red) {
		t.Fatalf("before scrolling: top pixel %v, want red", rgbOf(c))
	}
	// The visual viewport excludes the scrollbar.
	if got := img.Bounds().Size(); got != image.Pt(1280-15, 800) {
		t.Errorf("image %v, want 1265x800", got)
	}
	tb.play(t, tab.TabID, Step{Action: ActionScroll, Y: 600})
	img = decodeJPEG(t, tb.capturePage(t).JPEG())
	if c := img.At(5, 5); !near(c, green) {
		t.Fatalf("after scrolling 600: top pixel %v, want green", rgbOf(c))
	}
}
