package broker

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/wire"
)

func TestTruncateUTF8(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{name: "short stays", in: "héllo", n: 16, want: "héllo"},
		{name: "cut on a boundary", in: "abcdef", n: 4, want: "abcd"},
		{name: "never inside a character", in: "aжb", n: 2, want: "a"},
		{name: "four-byte character", in: "x😀y", n: 4, want: "x"},
		{name: "exactly at the end of a character", in: "aжb", n: 3, want: "aж"},
		{name: "invalid bytes are replaced", in: "a\xffb", n: 16, want: "a\uFFFDb"},
		{name: "zero", in: "abc", n: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncateUTF8(tt.in, tt.n)
			if got != tt.want || len(got) > max(tt.n, len(tt.want)) || !utf8.ValidString(got) {
				t.Fatalf("truncateUTF8(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

// TestPageURLRemembersTheLastOne: a capture that saw no URL (the tab navigates)
// reports the last one seen of that tab; a closed tab's is forgotten.
func TestPageURLRemembersTheLastOne(t *testing.T) {
	b := &Broker{lastURLs: map[proto.TargetTargetID]string{}, sessions: map[proto.TargetTargetID]tabSession{}}
	if got := b.pageURL("t1", ""); got != "" {
		t.Fatalf("nothing seen yet: %q", got)
	}
	b.pageURL("t1", "https://a.example/")
	b.pageURL("t2", "https://b.example/")
	if got := b.pageURL("t1", ""); got != "https://a.example/" {
		t.Fatalf("mid-navigation: %q", got)
	}
	if got := b.pageURL("t1", "https://c.example/"); got != "https://c.example/" {
		t.Fatalf("new URL: %q", got)
	}
	b.forgetTab("t1")
	if got := b.pageURL("t1", ""); got != "" {
		t.Fatalf("closed tab: %q", got)
	}
}

// TestPageCannotHideFromViewers: a page that makes its URL and title longer than the
// API accepts is still seen, shortened on a character boundary, in a valid page.
func TestPageCannotHideFromViewers(t *testing.T) {
	s := newSite(t)
	tb := newTestBroker(t, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tb.open(t, s.URL+"/hiding")
	var p *wire.Page
	// The script runs as the page loads; wait until the capture shows it.
	for range 100 {
		if p = tb.capturePage(t); p != nil && strings.HasSuffix(p.Title, "ж") {
			break
		}
	}
	if p == nil || len(p.URL) != wire.MaxURLBytes || !strings.HasPrefix(p.URL, s.URL+"/hiding?qqq") {
		t.Fatalf("URL of %d bytes: %.80q", len(p.URL), p.URL)
	}
	if len(p.Title) > wire.MaxTitleBytes || len(p.Title) < wire.MaxTitleBytes-3 || !utf8.ValidString(p.Title) || strings.Contains(p.Title, "end") {
		t.Fatalf("title of %d bytes, valid %v", len(p.Title), utf8.ValidString(p.Title))
	}
}
