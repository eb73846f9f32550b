package wire

import (
	"strings"
	"testing"
)

// pageSeeds are pages as the broker writes them, and near misses of every kind.
var pageSeeds = []string{
	`{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}`,
	` { "data" : "/9j/2Q==" , "contentType":"image/jpeg","capturedAt":"2026-11-30T12:00:00.000Z","title":"Ünïcode — ok","url":""}` + "\n",
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
	`null`,
	``,
}

// TestPageFastPathAgreesWithStrict: what the fast path accepts, the strict decoder
// accepts with the same values; and the fast path takes the broker's own shape.
func TestPageFastPathAgreesWithStrict(t *testing.T) {
	for _, s := range pageSeeds {
		checkPageFastPath(t, []byte(s))
	}
	for _, s := range pageSeeds[:2] {
		if _, ok := decodePageFast([]byte(s)); !ok {
			t.Errorf("the fast path refused the broker's shape %q", s)
		}
	}
	// Trailing data the strict decoder's More() let through before: refused now.
	if _, err := decodePageStrict([]byte(pageSeeds[5])); err == nil {
		t.Error("a trailing } was accepted")
	}
}

func FuzzPageFastPath(f *testing.F) {
	for _, s := range pageSeeds {
		f.Add([]byte(s))
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
// ParsePage takes and the strict encoding/json path it falls back to, on a page of a
// 36 KB base64 frame.
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
