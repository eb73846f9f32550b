package wire_test

import (
	"bytes"
	"encoding/base64"
	"slices"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// FuzzParsePage feeds decrypted plaintexts to the validator: it must never panic,
// and whatever it accepts must be a page whose data is a complete JPEG, whose masked
// count is within its bounds, and whose hidden reason, when it has one, is a known one
// on a page with something masked.
func FuzzParsePage(f *testing.F) {
	f.Add([]byte(`null`))
	f.Add([]byte(`{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}`))
	f.Add([]byte(`{"url":"","title":"","capturedAt":"","contentType":"","data":""}`))
	f.Add([]byte(`{"url":"","title":"","capturedAt":"","contentType":"","data":"","masked":3}`))
	// Valid pages, so that mutations start from what the validator accepts.
	head := `{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"` +
		base64.StdEncoding.EncodeToString(encode(f, 1, 1)) + `"`
	for _, tail := range []string{`}`, `,"masked":1}`, `,"masked":10000}`, `,"masked":0}`, `,"masked":-1}`, `,"masked":1.5}`, `,"masked":null}`, `,"masked":2,"masked":2}`,
		`,"masked":1,"hidden":"motion"}`, `,"masked":3,"hidden":"view_transition"}`, `,"hidden":"ink"}`, `,"masked":0,"hidden":"changed"}`,
		`,"masked":1,"hidden":"blur"}`, `,"masked":1,"hidden":null}`, `,"masked":1,"hidden":""}`, `,"masked":1,"hidden":"ink","hidden":"ink"}`} {
		f.Add([]byte(head + tail))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := wire.ParsePage(b)
		if err != nil || p == nil {
			return
		}
		raw, derr := base64.StdEncoding.DecodeString(p.Data)
		if derr != nil || !bytes.HasPrefix(raw, []byte{0xFF, 0xD8, 0xFF}) || !bytes.HasSuffix(raw, []byte{0xFF, 0xD9}) || p.ContentType != wire.ContentTypeJPEG {
			t.Fatalf("accepted a page that is not a JPEG: %q", b)
		}
		if p.Masked < 0 || p.Masked > wire.MaxMasked {
			t.Fatalf("accepted masked %d: %q", p.Masked, b)
		}
		if p.Hidden != "" && (p.Masked < 1 || !slices.Contains(wire.HiddenReasons, p.Hidden)) {
			t.Fatalf("accepted hidden %q with masked %d: %q", p.Hidden, p.Masked, b)
		}
	})
}
