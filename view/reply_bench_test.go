package view

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/wire"
)

// These benchmarks price what the requesting replica does with a sealed reply, on one
// core and without the rest of the system: the end-to-end suite of `agentfy-bench`
// finds that, after the capture, most of a view's time goes to handling the frame's
// bytes (JSON and base64 at every hop), and these say how much of it is the requester's.

// benchFrame is a 1280×800 JPEG at quality 60 of a page-like picture (a header band,
// cards, lines of "text"), about the size of a real capture of the demo site.
func benchFrame(b *testing.B) []byte {
	b.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for y := range 800 {
		for x := range 1280 {
			c := color.RGBA{0xf4, 0xf6, 0xfb, 0xff}
			switch {
			case y < 120:
				c = color.RGBA{0x2f, 0x5b, 0xea, 0xff}
			case x%420 > 40 && x%420 < 400 && y > 160 && y < 330:
				c = color.RGBA{0xff, 0xff, 0xff, 0xff}
				if y%28 < 12 && x%420 < 330 && (x/9)%5 != 0 {
					c = color.RGBA{0x1d, 0x24, 0x33, 0xff}
				}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 60}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkOpenReply is the requester's whole handling of a sealed reply: strict JSON
// decode of the envelope, open (ECDH, HKDF, AES-GCM), strict JSON decode of the page,
// base64 and JPEG-header validation. SetBytes is the reply's size on NATS.
func BenchmarkOpenReply(b *testing.B) {
	frame := benchFrame(b)
	key, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	idb := make([]byte, 32)
	_, _ = rand.Read(idb)
	id := hex.EncodeToString(idb)
	plain, err := json.Marshal(map[string]string{
		"url": "http://127.0.0.1:8080/", "title": "Northwind Supplies — Home", "capturedAt": "2026-11-30T12:00:00.000Z",
		"contentType": wire.ContentTypeJPEG, "data": base64.StdEncoding.EncodeToString(frame),
	})
	if err != nil {
		b.Fatal(err)
	}
	env, err := envelope.Seal(rand.Reader, key.PublicKey(), id, plain)
	if err != nil {
		b.Fatal(err)
	}
	reply, err := json.Marshal(envelope.Sealed{Envelope: env})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("JPEG %d bytes, page JSON %d, sealed reply %d", len(frame), len(plain), len(reply))

	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(reply)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openReply(key, id, reply); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The envelope's decode: wire.DecodeStrict (encoding/json/v2's decoder), which
	// openReply takes, and encoding/json with the same strictness, in the same run — the
	// figure that chose the library over a hand-written scanner (BENCHMARKS.md).
	b.Run("envelope-json", func(b *testing.B) {
		b.SetBytes(int64(len(reply)))
		b.ReportAllocs()
		for b.Loop() {
			var sealed envelope.Sealed
			if err := wire.DecodeStrict(reply, &sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope-json-v1", func(b *testing.B) {
		b.SetBytes(int64(len(reply)))
		b.ReportAllocs()
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(reply))
			dec.DisallowUnknownFields()
			var sealed envelope.Sealed
			if err := dec.Decode(&sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(len(reply)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := envelope.Open(key, id, env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.ParsePage(plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What the HTTP edge does next: encode the result (encoding/json, no HTML
	// escaping), as api's jsonRender does.
	page, err := wire.ParsePage(plain)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("render", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		// What api's renderView writes: Result.MarshalJSON's bytes as they are (an
		// encoding/json Encoder would scan them again to compact them).
		for b.Loop() {
			if _, err := (Result{Live: true, Page: page}).MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
