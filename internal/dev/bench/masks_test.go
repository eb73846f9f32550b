package bench

import (
	"strings"
	"testing"
	"time"
)

// TestRenderMasks renders section 2 from fixed results: both rows, the masked counts
// (a range when the views disagreed) and the verdict on each side of masksTarget.
func TestRenderMasks(t *testing.T) {
	page := func(name, path string, capture, bare time.Duration, masked ...int) maskPageResult {
		return maskPageResult{
			Name: name, Path: path, Warm: 3, Pairs: 40,
			View:  dist{N: 40, P50: capture + 6*time.Millisecond, P95: capture + 12*time.Millisecond},
			InCap: dist{N: 40, P50: capture}, Bare: dist{N: 40, P50: bare},
			ViewRatio: ratio(capture+6*time.Millisecond, bare), CaptureRatio: ratio(capture, bare),
			JPEGBytes: 27 << 10, MaskedMin: masked[0], MaskedMax: masked[len(masked)-1],
		}
	}
	tests := []struct {
		name          string
		none          maskPageResult
		want, notWant []string // in the full report; not in it
	}{
		{
			name: "within",
			none: page(masksPages[0].name, benchPage, 90*time.Millisecond, 85*time.Millisecond, 0),
			want: []string{
				"| view of a page with nothing to mask (`/`) | 40 | 96.00 | 102.00 | 90.00 | 85.00 | 1.13× | **1.06×** | 27.0 KiB | 0 |",
				"| view of a page with masked fields (`/checkout.html`) | 40 | 126.00 | 132.00 | 120.00 | 85.00 | 1.48× | **1.41×** | 27.0 KiB | 10–11 |",
				"**within** the 1.10× target; the masks' reads add 5.00 ms to the p50 (+5.9 % of the bare capture)",
				"Section 1's views of the same page, masks on too, put it at 1.00× over 200 pairs.",
				"With 10–11 regions masked, it is 1.41×",
			},
			notWant: []string{"**not within**"},
		},
		{
			name:    "not within",
			none:    page(masksPages[0].name, benchPage, 100*time.Millisecond, 85*time.Millisecond, 0),
			want:    []string{"is 1.18× the bare capture p50 85.00 ms measured beside it: **not within** the 1.10× target"},
			notWant: []string{"**within**"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Results{E2E: e2eResult{Pairs: 200, InCap: dist{N: 100, P50: 86 * time.Millisecond}, Bare: dist{N: 200, P50: 86 * time.Millisecond}}, Masks: masksResult{Pages: []maskPageResult{
				tt.none,
				page(masksPages[1].name, maskedPage, 120*time.Millisecond, 85*time.Millisecond, 10, 11),
			}}}
			for _, full := range []bool{true, false} {
				md := r.Markdown(full)
				i, j := strings.Index(md, benchSections[1]), strings.Index(md, benchSections[2])
				if i < 0 || j < i {
					t.Fatalf("full %v: no section 2 before section 3 in\n%s", full, md)
				}
				sec := md[i:j]
				for _, w := range tt.want {
					if !strings.Contains(sec, w) {
						t.Errorf("full %v: section 2 lacks %q:\n%s", full, w, sec)
					}
				}
				for _, w := range tt.notWant {
					if strings.Contains(sec, w) {
						t.Errorf("full %v: section 2 has %q:\n%s", full, w, sec)
					}
				}
				if strings.Contains(sec, "navigate step") != full {
					t.Errorf("full %v: the method notes are there: %v", full, !full)
				}
			}
		})
	}
}

// TestCheckMasked checks what makes the suite refuse a view: a frame of another page,
// a capture the hook did not see, a count other than the broker's, and a count of the
// wrong kind for the page.
func TestCheckMasked(t *testing.T) {
	const site = "http://127.0.0.1:8000"
	hop := func(masked int) hopSample { return hopSample{capture: 90 * time.Millisecond, masked: masked} }
	tests := []struct {
		name    string
		f       frame
		h       hopSample
		path    string
		secrets bool
		wantErr bool
	}{
		{name: "nothing to mask", f: frame{url: site + "/"}, h: hop(0), path: "/"},
		{name: "masked fields", f: frame{url: site + "/checkout.html", masked: 11}, h: hop(11), path: "/checkout.html", secrets: true},
		{name: "secrets shown unmasked", f: frame{url: site + "/checkout.html"}, h: hop(0), path: "/checkout.html", secrets: true, wantErr: true},
		{name: "masks where there is nothing", f: frame{url: site + "/", masked: 1}, h: hop(1), path: "/", wantErr: true},
		{name: "another page", f: frame{url: site + "/account.html"}, h: hop(0), path: "/", wantErr: true},
		{name: "not the broker's count", f: frame{url: site + "/checkout.html", masked: 11}, h: hop(10), path: "/checkout.html", secrets: true, wantErr: true},
		{name: "no capture seen", f: frame{url: site + "/"}, h: hopSample{}, path: "/", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkMasked(tt.f, tt.h, tt.path, tt.secrets); (err != nil) != tt.wantErr {
				t.Errorf("checkMasked: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
