package jpegmask

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

// TestTrim cuts a 4:2:0 frame to a size with as many MCUs: the pixels kept are
// decoded exactly as before, and a size that would drop or add MCUs is refused.
func TestTrim(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			src.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 5), uint8(x * y), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	full, err := jpeg.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Trim(buf.Bytes(), 49, 33)
	if err != nil {
		t.Fatalf("trim: %v", err)
	}
	cut, err := jpeg.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("decode the trimmed frame: %v", err)
	}
	if cut.Bounds() != image.Rect(0, 0, 49, 33) {
		t.Fatalf("trimmed to %v, want 49×33", cut.Bounds())
	}
	for y := range 33 {
		for x := range 49 {
			if cut.At(x, y) != full.At(x, y) {
				t.Fatalf("pixel (%d, %d) is %v, was %v", x, y, cut.At(x, y), full.At(x, y))
			}
		}
	}
	for _, size := range [][2]int{{48, 33}, {49, 32}, {65, 48}, {0, 10}} {
		if _, err := Trim(buf.Bytes(), size[0], size[1]); err == nil {
			t.Errorf("trim to %v: no error, want a refusal (the MCUs change)", size)
		}
	}
	if _, err := Trim([]byte("not a jpeg"), 10, 10); err == nil {
		t.Error("trim of a non-JPEG: no error")
	}
	// Crop takes what Trim refuses by coding the frame again.
	out, err = Crop(buf.Bytes(), 48, 33, 80)
	if err != nil {
		t.Fatalf("crop: %v", err)
	}
	if cut, err = jpeg.Decode(bytes.NewReader(out)); err != nil || cut.Bounds() != image.Rect(0, 0, 48, 33) {
		t.Fatalf("cropped to %v (%v), want 48×33", cut.Bounds(), err)
	}
	if _, err := Crop(buf.Bytes(), 65, 48, 80); err == nil {
		t.Error("crop to a larger size: no error")
	}
}
