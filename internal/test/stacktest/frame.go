package stacktest

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/jpeg"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// DecodeBase64 decodes a page's data: strict standard base64, as the view validates it.
func DecodeBase64(s string) ([]byte, error) { return base64.StdEncoding.Strict().DecodeString(s) }

// DecodeFrame checks that a page's data is a complete JPEG (FF D8 FF … FF D9) and
// returns it decoded; anything else fails the test.
func DecodeFrame(tb testing.TB, p *wire.Page) image.Image {
	tb.Helper()
	raw, err := DecodeBase64(p.Data)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte{0xFF, 0xD8, 0xFF}) || !bytes.HasSuffix(raw, []byte{0xFF, 0xD9}) {
		tb.Fatal("frame is not a complete JPEG")
	}
	img, err := jpeg.Decode(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	return img
}

// EncodeJPEG returns a grey w×h JPEG in standard base64, as a page carries it.
func EncodeJPEG(tb testing.TB, w, h int) string {
	tb.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 60}); err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}
