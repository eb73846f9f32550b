package wire_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// FuzzParsePage feeds decrypted plaintexts to the validator: it must never panic,
// and whatever it accepts must be a page whose data is a complete JPEG.
func FuzzParsePage(f *testing.F) {
	f.Add([]byte(`null`))
	f.Add([]byte(`{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}`))
	f.Add([]byte(`{"url":"","title":"","capturedAt":"","contentType":"","data":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := wire.ParsePage(b)
		if err != nil || p == nil {
			return
		}
		raw, derr := base64.StdEncoding.DecodeString(p.Data)
		if derr != nil || !bytes.HasPrefix(raw, []byte{0xFF, 0xD8, 0xFF}) || !bytes.HasSuffix(raw, []byte{0xFF, 0xD9}) || p.ContentType != wire.ContentTypeJPEG {
			t.Fatalf("accepted a page that is not a JPEG: %q", b)
		}
	})
}
