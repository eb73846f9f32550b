package jpegmask

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

// captureQuality is the broker's CaptureQuality, the quality Chromium encodes frames at
// and Paint encodes again at when it decodes.
const captureQuality = 60

// decodeJPEG decodes a frame.
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

func color3(p [3]uint8) color.Color { return color.RGBA{p[0], p[1], p[2], 0xff} }

// isMaskPixel reports whether a pixel may be the mask's: dark and nearly grey, and
// not the pale yellow or dark red the broker's test pages draw secrets in. JPEG's
// blocks blur a little of the colour around a mask into its edges; grey reports
// whether it is the mask's plain grey itself. (The broker's tests judge Chromium's
// frames by the same rule.)
func isMaskPixel(p [3]uint8) (mask, grey bool) {
	lo, hi := min(p[0], p[1], p[2]), max(p[0], p[1], p[2])
	secretColour := near(color3(p), [3]uint8{0xff, 0xf2, 0xa8}) || near(color3(p), [3]uint8{0xa0, 0x10, 0x1e})
	return hi-lo <= 40 && hi <= 0x90 && !secretColour, hi-lo <= 12
}

// TestPaintMasks paints a box, decoding and encoding the frame, on a yellow JPEG, as
// Chromium writes it (YCbCr), and on a grey one: inside the box every pixel is the
// mask's grey; outside, the colour stays.
func TestPaintMasks(t *testing.T) {
	yellow := image.NewRGBA(image.Rect(0, 0, 96, 64))
	grey := image.NewGray(image.Rect(0, 0, 96, 64))
	for y := range 64 {
		for x := range 96 {
			yellow.Set(x, y, color.RGBA{0xff, 0xf2, 0xa8, 0xff})
			grey.Set(x, y, color.Gray{Y: 0xe0})
		}
	}
	for _, tt := range []struct {
		name string
		img  image.Image
		want [3]uint8
	}{
		{"ycbcr", yellow, [3]uint8{0xff, 0xf2, 0xa8}},
		{"grey", grey, [3]uint8{0xe0, 0xe0, 0xe0}},
	} {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, tt.img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		out, err := paintPixels(buf.Bytes(), []image.Rectangle{image.Rect(9, 7, 61, 45)}, captureQuality)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeJPEG(t, out)
		for y := range 64 {
			for x := range 96 {
				p := rgbOf(got.At(x, y))
				inside := x >= 9 && x < 61 && y >= 7 && y < 45
				deep := x >= 12 && x < 58 && y >= 10 && y < 42
				switch {
				case deep:
					if mask, _ := isMaskPixel(p); !mask {
						t.Fatalf("%s: (%d, %d) inside the mask is %v", tt.name, x, y, p)
					}
				case !inside && (x < 4 || x >= 68 || y >= 50):
					if !near(color3(p), tt.want) {
						t.Fatalf("%s: (%d, %d) away from the mask is %v", tt.name, x, y, p)
					}
				}
			}
		}
	}
	if _, err := Paint([]byte("not a jpeg"), nil, captureQuality); err == nil {
		t.Fatal("painted on something that is not a JPEG")
	}
}

// TestPaintMasksDCT paints boxes in the DCT domain on a 4:2:0 JPEG of a photo-like
// gradient with text-like detail: every pixel of a box is the mask's, every pixel
// outside the boxes grown to the 16-pixel blocks of chroma is exactly what the frame
// decoded to before; with no box the frame comes back byte for byte. A JPEG it does
// not re-code (grey, progressive-like, cut short) is refused, and Paint paints
// it by decoding.
func TestPaintMasksDCT(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 203, 117)) // not a multiple of the blocks
	for y := range 117 {
		for x := range 203 {
			v := uint8((x*7 + y*13) % 256)
			if (x/3+y/5)%4 == 0 {
				v = 255 - v // detail in every block
			}
			src.Set(x, y, color.RGBA{v, uint8(x), uint8(y * 2), 0xff})
		}
	}
	for _, q := range []int{30, 60, 95} {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: q}); err != nil {
			t.Fatal(err)
		}
		if same, err := PaintDCT(buf.Bytes(), nil); err != nil || !bytes.Equal(same, buf.Bytes()) {
			t.Fatalf("q%d: no box changed the frame (%v)", q, err)
		}
		boxes := []image.Rectangle{image.Rect(9, 7, 61, 45), image.Rect(150, 90, 203, 117), image.Rect(100, 20, 101, 21)}
		out, err := PaintDCT(buf.Bytes(), boxes)
		if err != nil {
			t.Fatalf("q%d: %v", q, err)
		}
		before, after := decodeJPEG(t, buf.Bytes()), decodeJPEG(t, out)
		grown := func(x, y int) bool { // within a 16-px block that touches a box
			for _, b := range boxes {
				if x/16*16 < b.Max.X && b.Min.X < x/16*16+16 && y/16*16 < b.Max.Y && b.Min.Y < y/16*16+16 {
					return true
				}
			}
			return false
		}
		for y := range 117 {
			for x := range 203 {
				p := rgbOf(after.At(x, y))
				in := false
				for _, b := range boxes {
					in = in || image.Pt(x, y).In(b)
				}
				switch {
				case in:
					if mask, grey := isMaskPixel(p); !mask || !grey {
						t.Fatalf("q%d: (%d, %d) inside a box is %v", q, x, y, p)
					}
				case !grown(x, y):
					if o := rgbOf(before.At(x, y)); o != p {
						t.Fatalf("q%d: (%d, %d) away from the boxes changed from %v to %v", q, x, y, o, p)
					}
				}
			}
		}
	}

	var grey bytes.Buffer
	_ = jpeg.Encode(&grey, image.NewGray(image.Rect(0, 0, 32, 32)), nil)
	var colour bytes.Buffer
	_ = jpeg.Encode(&colour, src, nil)
	cut := colour.Bytes()[:colour.Len()-40]
	for name, b := range map[string][]byte{"grey": grey.Bytes(), "cut short": cut, "empty": nil} {
		if _, err := PaintDCT(b, []image.Rectangle{image.Rect(0, 0, 8, 8)}); err == nil {
			t.Errorf("%s: re-coded", name)
		}
	}
	if _, err := Paint(grey.Bytes(), []image.Rectangle{image.Rect(0, 0, 8, 8)}, captureQuality); err != nil {
		t.Errorf("a grey JPEG was not painted by decoding: %v", err)
	}
}

// BenchmarkPaintMasks paints the checkout page's eleven masks on a 1280×800 frame of
// photo-like detail encoded as Chromium does (JPEG q60, 4:2:0): in the DCT domain, as
// the broker does, against decoding, painting and encoding again, in one run.
func BenchmarkPaintMasks(b *testing.B) {
	src := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for y := range 800 {
		for x := range 1280 {
			v := uint8((x*7 + y*13) % 256)
			if (x/3+y/5)%4 == 0 {
				v = 255 - v
			}
			src.Set(x, y, color.RGBA{v, uint8(x), uint8(y), 0xff})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: captureQuality}); err != nil {
		b.Fatal(err)
	}
	var boxes []image.Rectangle
	for i := range 11 { // eleven fields of 300×44, as the checkout page's
		x, y := 40+(i%3)*340, 160+(i/3)*150
		boxes = append(boxes, image.Rect(x, y, x+300, y+44))
	}
	pixels := func(jpg []byte, boxes []image.Rectangle) ([]byte, error) {
		return paintPixels(jpg, boxes, captureQuality)
	}
	for _, p := range []struct {
		name  string
		paint func([]byte, []image.Rectangle) ([]byte, error)
	}{{"dct", PaintDCT}, {"pixels", pixels}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(buf.Len()))
			for b.Loop() {
				if _, err := p.paint(buf.Bytes(), boxes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
