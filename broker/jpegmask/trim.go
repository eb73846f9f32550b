package jpegmask

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/jpeg"
	"slices"
)

// errNoTrim is a JPEG Trim cannot cut without re-coding it.
var errNoTrim = errors.New("jpegmask: cannot trim without re-coding")

// Crop cuts a JPEG down to its top-left w × h pixels: through Trim, when the cut keeps
// every MCU, or else by decoding it, cropping and encoding it again at quality. It cuts
// a screenshot of the whole viewport to the part a clip would have shown: without its
// scrollbars.
func Crop(jpg []byte, w, h, quality int) ([]byte, error) {
	if out, err := Trim(jpg, w, h); err == nil {
		return out, nil
	}
	img, err := jpeg.Decode(bytes.NewReader(jpg))
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	if w <= 0 || h <= 0 || w > b.Dx() || h > b.Dy() {
		return nil, errNoTrim
	}
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok {
		return nil, errNoTrim
	}
	var out bytes.Buffer
	if err := jpeg.Encode(&out, sub.SubImage(image.Rect(b.Min.X, b.Min.Y, b.Min.X+w, b.Min.Y+h)), &jpeg.Options{Quality: quality}); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Trim cuts a baseline JPEG down to its top-left w × h pixels without touching its
// coded data: it rewrites the frame header's size alone. That is exact only when the
// smaller image has as many MCUs across and down as the larger (a decoder lays the
// same blocks out and drops the pixels past the new edges), so it refuses otherwise,
// and refuses anything but a baseline frame.
func Trim(jpg []byte, w, h int) ([]byte, error) {
	if len(jpg) < 4 || jpg[0] != 0xFF || jpg[1] != 0xD8 || w <= 0 || h <= 0 {
		return nil, errNoTrim
	}
	pos := 2
	for {
		if pos+4 > len(jpg) || jpg[pos] != 0xFF {
			return nil, errNoTrim
		}
		marker := jpg[pos+1]
		if marker == 0xFF { // fill byte
			pos++
			continue
		}
		length := int(jpg[pos+2])<<8 | int(jpg[pos+3])
		if length < 2 || pos+2+length > len(jpg) {
			return nil, errNoTrim
		}
		seg := jpg[pos+4 : pos+2+length]
		switch {
		case marker == 0xC0: // SOF0, baseline
			if len(seg) < 6 {
				return nil, errNoTrim
			}
			oldH, oldW := int(seg[1])<<8|int(seg[2]), int(seg[3])<<8|int(seg[4])
			n := int(seg[5])
			if n < 1 || len(seg) < 6+3*n {
				return nil, errNoTrim
			}
			hmax, vmax := 1, 1
			for i := range n {
				s := seg[6+3*i+1]
				hmax, vmax = max(hmax, int(s>>4)), max(vmax, int(s&15))
			}
			mw, mh := 8*hmax, 8*vmax
			if w > oldW || h > oldH || (w+mw-1)/mw != (oldW+mw-1)/mw || (h+mh-1)/mh != (oldH+mh-1)/mh {
				return nil, errNoTrim
			}
			out := slices.Clone(jpg)
			at := pos + 4
			// w ≤ oldW and h ≤ oldH, both read from two bytes.
			binary.BigEndian.PutUint16(out[at+1:], uint16(h)) //nolint:gosec // h ≤ oldH ≤ 65535
			binary.BigEndian.PutUint16(out[at+3:], uint16(w)) //nolint:gosec // w ≤ oldW ≤ 65535
			return out, nil
		case marker >= 0xC1 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
			return nil, errNoTrim // progressive, lossless, arithmetic
		case marker == 0xDA: // SOS before any frame header
			return nil, errNoTrim
		}
		pos += 2 + length
	}
}
