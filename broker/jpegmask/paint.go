// Package jpegmask paints privacy masks over a JPEG frame: each box becomes a plain
// pattern of two dark greys, and nothing of what was under it survives. It is a pure
// algorithm on the JPEG's bytes, with no browser and no notion of what is secret: the
// broker decides where the boxes are (package masks) and paints them here.
package jpegmask

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
)

// The mask's pattern: diagonal stripes of two dark greys, 12 image pixels apart. It
// is plain (no colour, no edge of the content under it survives) and recognisable as a
// mask rather than a dark part of the page.
const (
	maskStripe = 12   // px, the width of one stripe measured across
	maskDark   = 0x3a // luma of the darker stripe
	maskLight  = 0x5c // luma of the lighter stripe
)

// maskLuma is the pattern's luma at image pixel (x, y).
func maskLuma(x, y int) uint8 {
	if ((x+y)/maskStripe)%2 == 0 {
		return maskDark
	}
	return maskLight
}

// Paint paints the mask over every box (in image pixels, [Min, Max)) of a JPEG: in the
// DCT domain when it can (PaintDCT: every 8×8 block, and every chroma block, that
// touches a box becomes a flat block of the mask; the rest of the frame is left as
// Chromium encoded it), else by decoding, painting the pattern and encoding again at
// quality, the capture's. Either way every pixel of a box, and every chroma sample that
// touches one, is replaced: nothing of what was under a mask survives in the result. It
// fails only for data that does not decode as a JPEG.
func Paint(jpg []byte, boxes []image.Rectangle, quality int) ([]byte, error) {
	if out, err := PaintDCT(jpg, boxes); err == nil {
		return out, nil
	}
	return paintPixels(jpg, boxes, quality)
}

// paintPixels is Paint for a JPEG PaintDCT does not re-code: it decodes the frame,
// paints the boxes pixel by pixel and encodes it again at quality.
func paintPixels(jpg []byte, boxes []image.Rectangle, quality int) ([]byte, error) {
	img, err := jpeg.Decode(bytes.NewReader(jpg))
	if err != nil {
		return nil, err
	}
	if m, ok := img.(*image.YCbCr); ok {
		paintYCbCr(m, boxes)
	} else {
		// Chromium writes YCbCr; any other kind (grey, CMYK) is painted as RGBA.
		rgba := image.NewRGBA(img.Bounds())
		draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
		for _, b := range boxes {
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					l := maskLuma(x, y)
					rgba.SetRGBA(x, y, color.RGBA{l, l, l, 0xff})
				}
			}
		}
		img = rgba
	}
	var out bytes.Buffer
	out.Grow(len(jpg) + len(jpg)/4)
	if err := jpeg.Encode(&out, img, &jpeg.Options{Quality: quality}); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// paintYCbCr paints the boxes on a decoded JPEG in place: the pattern in luma, neutral
// chroma (128) in every chroma sample that covers a pixel of a box.
func paintYCbCr(m *image.YCbCr, boxes []image.Rectangle) {
	r := m.Bounds()
	for _, b := range boxes {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				m.Y[m.YOffset(r.Min.X+x, r.Min.Y+y)] = maskLuma(x, y)
				c := m.COffset(r.Min.X+x, r.Min.Y+y)
				m.Cb[c], m.Cr[c] = 128, 128
			}
		}
	}
}
