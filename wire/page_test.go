package wire_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/jpeg"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/wire"
)

func encode(tb testing.TB, w, h int) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckFrame(t *testing.T) {
	good := encode(t, 16, 9)
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"jpeg", good, true},
		{"largest", encode(t, wire.MaxFrameWidth, wire.MaxFrameHeight), true},
		{"too wide", encode(t, wire.MaxFrameWidth+1, 10), false},
		{"too tall", encode(t, 10, wire.MaxFrameHeight+1), false},
		{"markers only", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xD9}, false},
		{"no end marker", good[:len(good)-2], false},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00"), false},
		{"too short", []byte{0xFF, 0xD8, 0xFF, 0xD9}, false},
		{"empty", nil, false},
		{"too large", append(append([]byte{}, good[:len(good)-2]...), append(make([]byte, wire.MaxFrameBytes), 0xFF, 0xD9)...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wire.CheckFrame(tt.b)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, wire.ErrInvalidPage)) {
				t.Fatalf("CheckFrame = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestParsePage(t *testing.T) {
	data := base64.StdEncoding.EncodeToString(encode(t, 8, 8))
	at := wire.FormatCapturedAt(time.Date(2026, 11, 30, 18, 0, 0, 123e6, time.FixedZone("x", 3600)))
	if at != "2026-11-30T17:00:00.123Z" {
		t.Fatalf("FormatCapturedAt = %q", at)
	}
	page := func(mod func(string) string) []byte {
		s := `{"url":"https://example.com/","title":"Example","capturedAt":"` + at + `","contentType":"image/jpeg","data":"` + data + `"}`
		return []byte(mod(s))
	}
	same := func(s string) string { return s }
	p, err := wire.ParsePage(page(same))
	if err != nil || p.URL != "https://example.com/" || p.Data != data {
		t.Fatalf("ParsePage(good) = %+v, %v", p, err)
	}
	if p, err := wire.ParsePage([]byte(" null\n")); p != nil || err != nil {
		t.Fatalf("ParsePage(null) = %+v, %v; want no tab", p, err)
	}
	bad := map[string]func(string) string{
		"unknown field": func(s string) string { return strings.Replace(s, `{"url"`, `{"x":1,"url"`, 1) },
		"png type":      func(s string) string { return strings.Replace(s, "image/jpeg", "image/png", 1) },
		"local time":    func(s string) string { return strings.Replace(s, at, "2026-11-30T18:00:00.123+01:00", 1) },
		"no millis":     func(s string) string { return strings.Replace(s, at, "2026-11-30T17:00:00Z", 1) },
		"url bound": func(s string) string {
			return strings.Replace(s, "https://example.com/", strings.Repeat("a", wire.MaxURLBytes+1), 1)
		},
		"title bound": func(s string) string {
			return strings.Replace(s, "Example", strings.Repeat("a", wire.MaxTitleBytes+1), 1)
		},
		"url-safe b64": func(s string) string {
			return strings.Replace(s, data, strings.NewReplacer("+", "-", "/", "_").Replace(data)+"-", 1)
		},
		"trailing": func(s string) string { return s + "{}" },
		"not jpeg": func(s string) string {
			return strings.Replace(s, data, base64.StdEncoding.EncodeToString([]byte("hello, world")), 1)
		},
	}
	for name, mod := range bad {
		if p, err := wire.ParsePage(page(mod)); err == nil || p != nil || !errors.Is(err, wire.ErrInvalidPage) {
			t.Errorf("%s: ParsePage = %+v, %v; want ErrInvalidPage", name, p, err)
		}
	}
}

// TestParsePageMasked: the count of masked regions the broker writes last, and every
// other way of writing a member masked.
func TestParsePageMasked(t *testing.T) {
	data := base64.StdEncoding.EncodeToString(encode(t, 8, 8))
	head := `{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"` + data + `"`
	tests := []struct {
		name    string
		page    string
		want    int
		wantErr bool
	}{
		{name: "none", page: head + `}`, want: 0},
		{name: "broker's shape", page: head + `,"masked":3}`, want: 3},
		{name: "spaced", page: head + "\n , \"masked\" : 3 }\n", want: 3},
		{name: "explicit 0", page: head + `,"masked":0}`, want: 0},
		{name: "largest", page: head + `,"masked":10000}`, want: wire.MaxMasked},
		{name: "first member", page: `{"masked":2,` + head[1:] + `}`, want: 2},
		{name: "negative", page: head + `,"masked":-1}`, wantErr: true},
		{name: "fraction", page: head + `,"masked":1.5}`, wantErr: true},
		{name: "integral fraction", page: head + `,"masked":1.0}`, wantErr: true},
		{name: "exponent", page: head + `,"masked":1e1}`, wantErr: true},
		{name: "string", page: head + `,"masked":"3"}`, wantErr: true},
		{name: "null", page: head + `,"masked":null}`, wantErr: true},
		{name: "boolean", page: head + `,"masked":true}`, wantErr: true},
		{name: "array", page: head + `,"masked":[3]}`, wantErr: true},
		{name: "too large", page: head + `,"masked":10001}`, wantErr: true},
		{name: "huge", page: head + `,"masked":1000000}`, wantErr: true},
		{name: "beyond int64", page: head + `,"masked":99999999999999999999}`, wantErr: true},
		{name: "duplicate", page: head + `,"masked":3,"masked":3}`, wantErr: true},
		{name: "duplicate, 0 first", page: head + `,"masked":0,"masked":3}`, wantErr: true},
		{name: "after a trailing comma", page: head + `,"masked":3,}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := wire.ParsePage([]byte(tt.page))
			if tt.wantErr {
				if p != nil || !errors.Is(err, wire.ErrInvalidPage) {
					t.Fatalf("ParsePage = %+v, %v; want ErrInvalidPage", p, err)
				}
				return
			}
			if err != nil || p == nil || p.Masked != tt.want || p.Data != data {
				t.Fatalf("ParsePage = %+v, %v; want masked %d", p, err, tt.want)
			}
		})
	}
}
