package bench

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/wire"
)

// TestRenderMasks renders section 2 from fixed results: every row, the masked counts
// (a range when the views disagreed), the share masked whole with its reasons, the
// verdict on each side of masksTarget and the moving pages' figures.
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
	moving := func(path string, capture time.Duration, whole map[string]int, outside int, masked ...int) maskPageResult {
		pg := page("moving page "+path, path, capture, 85*time.Millisecond, masked...)
		pg.Moving, pg.Warm, pg.Pairs, pg.View.N, pg.InCap.N, pg.Bare.N = true, 3, 20, 20, 20, 20
		pg.Whole, pg.Outside = whole, outside
		return pg
	}
	movingRows := []maskPageResult{
		moving("/moving/still.html", 95*time.Millisecond, nil, 0, 3),
		moving("/moving/progress.html", 110*time.Millisecond, map[string]int{wire.HiddenChanged: 1, wire.HiddenMotion: 4}, 0, 3),
		moving("/moving/dialog.html", 100*time.Millisecond, nil, 7, 0, 3),
	}
	tests := []struct {
		name          string
		none          maskPageResult
		moving        []maskPageResult
		want, notWant []string // in the full report; not in it
	}{
		{
			name:   "within",
			none:   page(masksPages[0].name, benchPage, 90*time.Millisecond, 85*time.Millisecond, 0),
			moving: movingRows,
			want: []string{
				"| view of a page with nothing to mask (`/`) | 40 | 96.00 | 102.00 | 90.00 | 85.00 | 1.13× | **1.06×** | 27.0 KiB | 0 | — |",
				"| view of a page with masked fields (`/checkout.html`) | 40 | 126.00 | 132.00 | 120.00 | 85.00 | 1.48× | **1.41×** | 27.0 KiB | 10–11 | 0 % |",
				"| moving: moving page /moving/still.html (`/moving/still.html`) | 20 | 101.00 | 107.00 | 95.00 | 85.00 | 1.19× | **1.12×** | 27.0 KiB | 3 | 0 % |",
				"| moving: moving page /moving/progress.html (`/moving/progress.html`) | 20 | 116.00 | 122.00 | 110.00 | 85.00 | 1.36× | **1.29×** | 27.0 KiB | 3 | 25 % (motion 4, changed 1) |",
				"| moving: moving page /moving/dialog.html (`/moving/dialog.html`) | 20 | 106.00 | 112.00 | 100.00 | 85.00 | 1.25× | **1.18×** | 27.0 KiB | 0–3 | 0 % |",
				"**within** the 1.10× target; the masks' reads add 5.00 ms to the p50 (+5.9 % of the bare capture)",
				"Section 1's views of the same page, masks on too, put it at 1.00× over 200 pairs.",
				"With 10–11 regions masked, it is 1.41×",
				"On the 3 moving pages (20 pairs each), the broker's capture p50 is 1.12× to 1.29× the bare capture p50 measured beside it (median 1.18×): 1.12× on `still`, 1.29× on `progress`.",
				"Of their 60 views, 5 were masked whole (8 %): none on 2 of the 3 pages; 25 % (motion 4, changed 1) on `progress`.",
				"On `dialog`, 7 of the 20 views said `masked` 0",
			},
			notWant: []string{"**not within**"},
		},
		{
			name:    "not within",
			none:    page(masksPages[0].name, benchPage, 100*time.Millisecond, 85*time.Millisecond, 0),
			moving:  movingRows[:1],
			want:    []string{"is 1.18× the bare capture p50 85.00 ms measured beside it: **not within** the 1.10× target", "No view of theirs was masked whole."},
			notWant: []string{"**within**", "said `masked` 0"},
		},
		{
			name:    "no moving page",
			none:    page(masksPages[0].name, benchPage, 90*time.Millisecond, 85*time.Millisecond, 0),
			notWant: []string{"pairs each)", "masked whole (", "No view of theirs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := append([]maskPageResult{tt.none, page(masksPages[1].name, maskedPage, 120*time.Millisecond, 85*time.Millisecond, 10, 11)}, tt.moving...)
			r := &Results{E2E: e2eResult{Pairs: 200, InCap: dist{N: 100, P50: 86 * time.Millisecond}, Bare: dist{N: 200, P50: 86 * time.Millisecond}}, Masks: masksResult{Pages: pages}}
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
// a capture the hook did not see, a count or a reason other than the broker's, a count
// of the wrong kind for the page, and a reason the contract does not name.
func TestCheckMasked(t *testing.T) {
	const site = "http://127.0.0.1:8000"
	hop := func(masked int, hidden string) hopSample {
		return hopSample{capture: 90 * time.Millisecond, masked: masked, hidden: hidden}
	}
	home := masksPage{path: "/"}
	checkout := masksPage{path: "/checkout.html", secrets: true}
	progress := masksPage{path: "/moving/progress.html", secrets: true, moving: true}
	dialog := masksPage{path: "/moving/dialog.html", secrets: true, moving: true, leaves: true}
	tests := []struct {
		name    string
		f       frame
		h       hopSample
		pg      masksPage
		wantErr bool
	}{
		{name: "nothing to mask", f: frame{url: site + "/"}, h: hop(0, ""), pg: home},
		{name: "masked fields", f: frame{url: site + "/checkout.html", masked: 11}, h: hop(11, ""), pg: checkout},
		{name: "secrets shown unmasked", f: frame{url: site + "/checkout.html"}, h: hop(0, ""), pg: checkout, wantErr: true},
		{name: "masks where there is nothing", f: frame{url: site + "/", masked: 1}, h: hop(1, ""), pg: home, wantErr: true},
		{name: "masked whole where there is nothing", f: frame{url: site + "/", masked: 1, hidden: wire.HiddenMotion}, h: hop(1, wire.HiddenMotion), pg: home, wantErr: true},
		{name: "another page", f: frame{url: site + "/account.html"}, h: hop(0, ""), pg: home, wantErr: true},
		{name: "not the broker's count", f: frame{url: site + "/checkout.html", masked: 11}, h: hop(10, ""), pg: checkout, wantErr: true},
		{name: "no capture seen", f: frame{url: site + "/"}, h: hopSample{}, pg: home, wantErr: true},
		{name: "moving, pinned", f: frame{url: site + "/moving/progress.html", masked: 3}, h: hop(3, ""), pg: progress},
		{name: "moving, masked whole", f: frame{url: site + "/moving/progress.html", masked: 3, hidden: wire.HiddenMotion}, h: hop(3, wire.HiddenMotion), pg: progress},
		{name: "moving, nothing masked", f: frame{url: site + "/moving/progress.html"}, h: hop(0, ""), pg: progress, wantErr: true},
		{name: "not the broker's reason", f: frame{url: site + "/moving/progress.html", masked: 3, hidden: wire.HiddenMotion}, h: hop(3, wire.HiddenChanged), pg: progress, wantErr: true},
		{name: "masked whole, no reason from the broker", f: frame{url: site + "/moving/progress.html", masked: 3, hidden: wire.HiddenMotion}, h: hop(3, ""), pg: progress, wantErr: true},
		{name: "a reason the contract does not name", f: frame{url: site + "/moving/progress.html", masked: 3, hidden: "glare"}, h: hop(3, "glare"), pg: progress, wantErr: true},
		{name: "dialog out of the frame", f: frame{url: site + "/moving/dialog.html"}, h: hop(0, ""), pg: dialog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkMasked(tt.f, tt.h, tt.pg); (err != nil) != tt.wantErr {
				t.Errorf("checkMasked: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestCheckNoSecret checks the test of a frame that says masked 0 on a page whose
// secrets leave it: the secrets' green in the control is no leak, anywhere else it is.
func TestCheckNoSecret(t *testing.T) {
	green := color.RGBA{0, 200, 0, 255}
	tests := []struct {
		name    string
		width   int
		paint   image.Rectangle // in CSS pixels of a 1280-px-wide viewport
		wantErr bool
	}{
		{name: "white", width: 1280},
		{name: "the control", width: 1280, paint: image.Rect(900, 20, 1200, 80)},
		{name: "the control, frame scaled", width: 640, paint: image.Rect(900, 20, 1200, 80)},
		{name: "a secret", width: 1280, paint: image.Rect(40, 150, 400, 194), wantErr: true},
		{name: "a secret, frame scaled", width: 640, paint: image.Rect(40, 150, 400, 194), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := float64(tt.width) / 1280
			img := image.NewRGBA(image.Rect(0, 0, tt.width, int(800*k)))
			draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
			r := image.Rect(int(float64(tt.paint.Min.X)*k), int(float64(tt.paint.Min.Y)*k), int(float64(tt.paint.Max.X)*k), int(float64(tt.paint.Max.Y)*k))
			draw.Draw(img, r, image.NewUniform(green), image.Point{}, draw.Src)
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 60}); err != nil {
				t.Fatal(err)
			}
			if err := checkNoSecret(frame{jpeg: buf.Bytes()}); (err != nil) != tt.wantErr {
				t.Errorf("checkNoSecret: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestMasksPagesMoving checks that the suite views every moving page of the demo site
// but agent-types (its fields are empty), each once, and nothing of moving/ that is
// not there.
func TestMasksPagesMoving(t *testing.T) {
	root, err := stack.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "testdata", "site", "moving", "*.html"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "agent-types.html" {
			want = append(want, "/moving/"+base)
		}
	}
	var got []string
	for _, pg := range masksPages {
		if pg.moving != strings.HasPrefix(pg.path, "/moving/") || (pg.moving && !pg.secrets) {
			t.Errorf("%s: moving %v, secrets %v", pg.path, pg.moving, pg.secrets)
		}
		if pg.moving {
			got = append(got, pg.path)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("moving pages %v, want %v", got, want)
	}
	if movingPages() != len(want) {
		t.Errorf("movingPages() = %d, want %d", movingPages(), len(want))
	}
}
