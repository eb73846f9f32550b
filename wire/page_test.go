package wire_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/jpeg"
	"slices"
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

// TestParsePageHidden: the reason the broker masked a frame whole, written after masked,
// for each reason, and every other way of writing a member hidden.
func TestParsePageHidden(t *testing.T) {
	data := base64.StdEncoding.EncodeToString(encode(t, 8, 8))
	head := `{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"` + data + `"`
	type test struct {
		name       string
		page       string
		wantMasked int
		want       string // hidden
		wantErr    bool
	}
	var tests []test
	for _, reason := range wire.HiddenReasons {
		tests = append(tests, test{name: "broker's shape, " + reason, page: head + `,"masked":1,"hidden":"` + reason + `"}`, wantMasked: 1, want: reason})
	}
	tests = append(tests, []test{
		{name: "none", page: head + `,"masked":3}`, wantMasked: 3},
		{name: "largest count", page: head + `,"masked":10000,"hidden":"view_transition"}`, wantMasked: wire.MaxMasked, want: wire.HiddenViewTransition},
		{name: "spaced", page: head + "\n , \"masked\" : 2 , \"hidden\" :\t\"ink\" }\n", wantMasked: 2, want: wire.HiddenInk},
		{name: "before masked", page: head + `,"hidden":"changed","masked":1}`, wantMasked: 1, want: wire.HiddenChanged},
		{name: "first member", page: `{"hidden":"motion","masked":4,` + head[1:] + `}`, wantMasked: 4, want: wire.HiddenMotion},
		{name: "escaped", page: head + `,"masked":1,"hidden":"\u006dotion"}`, wantMasked: 1, want: wire.HiddenMotion},
		{name: "without masked", page: head + `,"hidden":"motion"}`, wantErr: true},
		{name: "with masked 0", page: head + `,"masked":0,"hidden":"motion"}`, wantErr: true},
		{name: "with masked -1", page: head + `,"masked":-1,"hidden":"motion"}`, wantErr: true},
		{name: "unknown reason", page: head + `,"masked":1,"hidden":"blur"}`, wantErr: true},
		{name: "reason differently cased", page: head + `,"masked":1,"hidden":"Motion"}`, wantErr: true},
		{name: "reason with a space", page: head + `,"masked":1,"hidden":"motion "}`, wantErr: true},
		{name: "reason hyphenated", page: head + `,"masked":1,"hidden":"view-transition"}`, wantErr: true},
		{name: "empty string", page: head + `,"masked":1,"hidden":""}`, wantErr: true},
		{name: "null", page: head + `,"masked":1,"hidden":null}`, wantErr: true},
		{name: "null without masked", page: head + `,"hidden":null}`, wantErr: true},
		{name: "number", page: head + `,"masked":1,"hidden":1}`, wantErr: true},
		{name: "boolean", page: head + `,"masked":1,"hidden":true}`, wantErr: true},
		{name: "array", page: head + `,"masked":1,"hidden":["motion"]}`, wantErr: true},
		{name: "object", page: head + `,"masked":1,"hidden":{"reason":"motion"}}`, wantErr: true},
		{name: "duplicate", page: head + `,"masked":1,"hidden":"motion","hidden":"motion"}`, wantErr: true},
		{name: "duplicate, another reason", page: head + `,"masked":1,"hidden":"motion","hidden":"ink"}`, wantErr: true},
		{name: "differently cased member", page: head + `,"masked":1,"Hidden":"motion"}`, wantErr: true},
		{name: "after a trailing comma", page: head + `,"masked":1,"hidden":"motion",}`, wantErr: true},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := wire.ParsePage([]byte(tt.page))
			if tt.wantErr {
				if p != nil || !errors.Is(err, wire.ErrInvalidPage) {
					t.Fatalf("ParsePage = %+v, %v; want ErrInvalidPage", p, err)
				}
				return
			}
			if err != nil || p == nil || p.Hidden != tt.want || p.Masked != tt.wantMasked || p.Data != data {
				t.Fatalf("ParsePage = %+v, %v; want masked %d, hidden %q", p, err, tt.wantMasked, tt.want)
			}
		})
	}
}

// TestHiddenReasons: the four reasons, each once, in the order the docs list them.
func TestHiddenReasons(t *testing.T) {
	want := []string{"motion", "changed", "view_transition", "ink"}
	if !slices.Equal(wire.HiddenReasons, want) {
		t.Fatalf("HiddenReasons = %q, want %q", wire.HiddenReasons, want)
	}
	if got := []string{wire.HiddenMotion, wire.HiddenChanged, wire.HiddenViewTransition, wire.HiddenInk}; !slices.Equal(got, want) {
		t.Fatalf("the constants are %q, want %q", got, want)
	}
}
