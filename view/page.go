package view

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	_ "image/jpeg" // DecodeConfig reads JPEG headers
	"time"
	"unicode/utf8"
)

// Limits on a decrypted page. A broker's frame is at most 1280×2000 px; anything larger,
// or text fields beyond these sizes, is refused as invalid.
const (
	MaxFrameBytes  = 4 << 20  // 4 MiB of JPEG
	MaxURLBytes    = 16 << 10 // 16 KiB
	MaxTitleBytes  = 4 << 10  // 4 KiB
	MaxFrameWidth  = 1280     // px
	MaxFrameHeight = 2000     // px
	// MaxPlaintextBytes bounds a page's JSON: the JPEG in base64, and room for the URL
	// and title even if every byte of them were escaped (\u00XX).
	MaxPlaintextBytes = 4*((MaxFrameBytes+2)/3) + 6*(MaxURLBytes+MaxTitleBytes) + 256
	// MaxSealedBytes bounds a sealed page on the wire, {"envelope":{…}}: the
	// ciphertext in base64 and the keys, IV and tag in hex. It is the largest NATS
	// message of a view, so the NATS server's max_payload (bus.MaxPayload in the
	// development stack and the deployment template) must be at least this; a replica
	// checks it at start. A test checks the chain up to jsonrpc.MaxMessage and MaxReply.
	MaxSealedBytes = 4*((MaxPlaintextBytes+2)/3) + 512
	// CapturedAtLayout is UTC with milliseconds and a Z.
	CapturedAtLayout = "2006-01-02T15:04:05.000Z"
	ContentTypeJPEG  = "image/jpeg"
)

// Page is one frame of the agent's current tab. Data stays the base64 text the broker
// sealed: it is validated by decoding, then passed on without re-encoding.
type Page struct {
	URL         string `json:"url"`
	Title       string `json:"title"`
	CapturedAt  string `json:"capturedAt"`
	ContentType string `json:"contentType"`
	Data        string `json:"data"`
}

// errInvalidPage is the one error for a plaintext that is not a valid page.
var errInvalidPage = errors.New("view: invalid page")

// ParsePlaintext validates a decrypted plaintext: exactly `null` (no tab) or a page with
// exactly the five fields, a UTC millisecond timestamp, content type image/jpeg, strict
// standard base64 of a JPEG (FF D8 FF … FF D9) no larger than MaxFrameBytes whose header
// gives at most MaxFrameWidth × MaxFrameHeight.
func ParsePlaintext(b []byte) (*Page, error) {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Page
	if err := dec.Decode(&p); err != nil || dec.More() {
		return nil, errInvalidPage
	}
	if p.ContentType != ContentTypeJPEG || len(p.URL) > MaxURLBytes || len(p.Title) > MaxTitleBytes ||
		!utf8.ValidString(p.URL) || !utf8.ValidString(p.Title) {
		return nil, errInvalidPage
	}
	if _, err := time.Parse(CapturedAtLayout, p.CapturedAt); err != nil {
		return nil, errInvalidPage
	}
	if base64.StdEncoding.DecodedLen(len(p.Data)) > MaxFrameBytes+3 {
		return nil, errInvalidPage
	}
	jpg, err := base64.StdEncoding.Strict().DecodeString(p.Data)
	if err != nil || len(jpg) > MaxFrameBytes || len(jpg) < 5 {
		return nil, errInvalidPage
	}
	if !bytes.HasPrefix(jpg, []byte{0xFF, 0xD8, 0xFF}) || !bytes.HasSuffix(jpg, []byte{0xFF, 0xD9}) {
		return nil, errInvalidPage
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(jpg))
	if err != nil || format != "jpeg" || cfg.Width < 1 || cfg.Height < 1 || cfg.Width > MaxFrameWidth || cfg.Height > MaxFrameHeight {
		return nil, errInvalidPage
	}
	return &p, nil
}

// Result is the body of both view routes: {"live":false}, {"live":true,"page":null} or
// {"live":true,"page":{…}}. It has no success wrapper.
type Result struct {
	Live bool
	Page *Page
}

// MarshalJSON writes the three shapes exactly, in one pass: the frame's base64 (tens of
// KB) is copied as it is rather than scanned for characters to escape, which strict
// base64 never holds.
func (r Result) MarshalJSON() ([]byte, error) {
	switch {
	case !r.Live:
		return []byte(`{"live":false}`), nil
	case r.Page == nil:
		return []byte(`{"live":true,"page":null}`), nil
	case !isBase64Text(r.Page.Data):
		return json.Marshal(struct {
			Live bool  `json:"live"`
			Page *Page `json:"page"`
		}{true, r.Page})
	}
	p := r.Page
	b := make([]byte, 0, len(p.Data)+len(p.URL)+len(p.Title)+160)
	b = append(b, `{"live":true,"page":{"url":`...)
	b = appendString(b, p.URL)
	b = append(b, `,"title":`...)
	b = appendString(b, p.Title)
	b = append(b, `,"capturedAt":`...)
	b = appendString(b, p.CapturedAt)
	b = append(b, `,"contentType":`...)
	b = appendString(b, p.ContentType)
	b = append(b, `,"data":"`...)
	b = append(b, p.Data...)
	return append(b, `"}}`...), nil
}

// appendString appends s as a JSON string (short fields: URL, title, timestamp).
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// isBase64Text reports whether s holds only characters of standard base64.
func isBase64Text(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '+' && c != '/' && c != '=' {
			return false
		}
	}
	return true
}
