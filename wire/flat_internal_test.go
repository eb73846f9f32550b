package wire

import (
	"strings"
	"testing"
)

// brokerPages is how many of pageSeeds, from the first, are pages as the broker writes
// them (or spaced out), which the fast path must take.
const brokerPages = 4

// pageSeeds are pages as the broker writes them, with and without masked regions, and
// near misses of every kind (maskedPages has more of masked).
var pageSeeds = []string{
	`{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}`,
	` { "data" : "/9j/2Q==" , "contentType":"image/jpeg","capturedAt":"2026-11-30T12:00:00.000Z","title":"Ünïcode — ok","url":""}` + "\n",
	`{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q==","masked":3}`,
	"\t{ \"url\" : \"\" , \"title\":\"Ünïcode\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\"\n, \"masked\" :\r10000 }\n",
	`{"url":"a\/b","title":"x","capturedAt":"","contentType":"","data":""}`,
	`{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","url":"b"}`,
	`{"URL":"a","title":"x","capturedAt":"","contentType":"","data":""}`,
	`{"url":"a","title":"x","capturedAt":"","contentType":"","data":""}}`,
	`{"url":"a","title":"x","capturedAt":"","contentType":"","data":""} {}`,
	`{"url":"a","title":"x","capturedAt":"","contentType":"","data":""`,
	`{"url":"a","title":"x","capturedAt":"","contentType":""}`,
	`{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","extra":""}`,
	`{"url":1,"title":"x","capturedAt":"","contentType":"","data":""}`,
	"{\"url\":\"\xff\",\"title\":\"x\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\"}",
	"{\"url\":\"\t\",\"title\":\"x\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\"}",
	`{"masked":3}`,
	`3}`,
	`}`,
	`null`,
	``,
}

// maskedPages are pages ending in a masked member or near it: which decoder reads each
// (fast: the one-pass path takes it), and the strict decoder's answer. ParsePage then
// refuses a count outside 0…MaxMasked.
var maskedPages = []struct {
	name    string
	page    string
	fast    bool
	want    int
	wantErr bool
}{
	{name: "broker's shape", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":3}`, fast: true, want: 3},
	{name: "five digits", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":99999}`, fast: true, want: 99999},
	{name: "six digits", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":100000}`, want: 100000},
	{name: "zero", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":0}`, want: 0},
	{name: "minus zero", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":-0}`, want: 0},
	{name: "negative", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":-1}`, want: -1},
	{name: "first member", page: `{"masked":3,"url":"a","title":"x","capturedAt":"","contentType":"","data":""}`, want: 3},
	{name: "other order", page: `{"title":"x","url":"a","capturedAt":"","contentType":"","data":"","masked":3}`, want: 3},
	{name: "escaped data", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"a\/b","masked":3}`, want: 3},
	{name: "differently cased", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","Masked":3}`, want: 3},
	{name: "leading zero", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":01}`, wantErr: true},
	{name: "plus sign", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":+1}`, wantErr: true},
	{name: "fraction", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":1.5}`, wantErr: true},
	{name: "integral fraction", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":2.0}`, wantErr: true},
	{name: "exponent", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":1e2}`, wantErr: true},
	{name: "overflow", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":99999999999999999999}`, wantErr: true},
	{name: "string", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":"3"}`, wantErr: true},
	{name: "null", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":null}`, wantErr: true},
	{name: "duplicate", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":3,"masked":4}`, wantErr: true},
	{name: "duplicate, differently cased", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":3,"MASKED":4}`, wantErr: true},
	{name: "duplicate url", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","url":"b","masked":3}`, want: 3},
	{name: "trailing comma", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":3,}`, wantErr: true},
	{name: "trailing brace", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":3}}`, wantErr: true},
	{name: "trailing value", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","masked":3} 4`, wantErr: true},
	{name: "unknown member", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","data":"","mask":3}`, wantErr: true},
	{name: "no data", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","masked":3}`, want: 3}, // ParsePage: no frame
	{name: "invalid UTF-8", page: "{\"url\":\"\xff\",\"title\":\"x\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\",\"masked\":3}", want: 3},
}

// TestPageFastPathAgreesWithStrict: what the fast path accepts, the strict decoder
// accepts with the same values; and the fast path takes the broker's own shape.
func TestPageFastPathAgreesWithStrict(t *testing.T) {
	for _, s := range pageSeeds {
		checkPageFastPath(t, []byte(s))
	}
	for _, s := range pageSeeds[:brokerPages] {
		if _, ok := decodePageFast([]byte(s)); !ok {
			t.Errorf("the fast path refused the broker's shape %q", s)
		}
	}
	// Trailing data the strict decoder's More() let through before: refused now.
	if _, err := decodePageStrict([]byte(pageSeeds[7])); err == nil {
		t.Error("a trailing } was accepted")
	}
}

// TestMaskedDecoders: the fast path takes a masked page only in the broker's shape; the
// strict decoder reads the rest, refusing what encoding/json lets through for an int
// (null, a second member).
func TestMaskedDecoders(t *testing.T) {
	for _, tt := range maskedPages {
		t.Run(tt.name, func(t *testing.T) {
			checkPageFastPath(t, []byte(tt.page))
			if _, ok := decodePageFast([]byte(tt.page)); ok != tt.fast {
				t.Errorf("fast path took it: %v, want %v", ok, tt.fast)
			}
			p, err := decodePageStrict([]byte(tt.page))
			if (err != nil) != tt.wantErr || p.Masked != tt.want {
				t.Fatalf("strict = %+v, %v; want masked %d, error %v", p, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzPageFastPath(f *testing.F) {
	for _, s := range pageSeeds {
		f.Add([]byte(s))
	}
	for _, tt := range maskedPages {
		f.Add([]byte(tt.page))
	}
	f.Fuzz(checkPageFastPath)
}

func checkPageFastPath(t *testing.T, b []byte) {
	fast, ok := decodePageFast(b)
	if !ok {
		return
	}
	strict, err := decodePageStrict(b)
	if err != nil || strict != fast {
		t.Fatalf("%q: fast %+v, strict %+v (%v)", b, fast, strict, err)
	}
	if strings.ContainsRune(fast.URL+fast.Title, '\uFFFD') && !strings.Contains(string(b), "\uFFFD") {
		t.Fatalf("%q: the fast path replaced bytes", b)
	}
}

// BenchmarkDecodePage prices the page's decode alone: the one-pass fast path
// ParsePage takes, without and with masked regions, and the strict encoding/json path
// it falls back to, on a page of a 36 KB base64 frame.
func BenchmarkDecodePage(b *testing.B) {
	page := []byte(`{"url":"http://127.0.0.1:8080/","title":"Northwind Supplies — Home","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"` +
		strings.Repeat("QUJD", 9000) + `"}`)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodePageFast(page); !ok {
				b.Fatal("refused")
			}
		}
	})
	masked := append(page[:len(page)-1:len(page)-1], `,"masked":3}`...)
	b.Run("fast masked", func(b *testing.B) {
		b.SetBytes(int64(len(masked)))
		b.ReportAllocs()
		for b.Loop() {
			if p, ok := decodePageFast(masked); !ok || p.Masked != 3 {
				b.Fatal("refused")
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodePageStrict(page); err != nil {
				b.Fatal(err)
			}
		}
	})
}
