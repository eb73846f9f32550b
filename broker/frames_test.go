package broker

import (
	"slices"
	"testing"

	"github.com/go-rod/rod/lib/proto"
)

// TestPlaceFrames: the secrets read in a frame of another process are placed where the
// frame draws them — moved onto its content box, less the frame's scroll, clipped to
// the box — and the frame is masked whole whenever that cannot be trusted.
func TestPlaceFrames(t *testing.T) {
	box := rect{40, 120, 480, 160}
	plain := opaqueFrame{backend: 7, box: box, rects: []rect{box}, plain: true}
	// The frame element as DOM.getBoxModel reads it in a viewport scrolled by 100 px: a
	// 4-px border and 6 px of padding.
	border, content := rect{40, 20, 480, 160}, rect{50, 30, 460, 140}
	viewport := &proto.PageLayoutViewport{ClientWidth: 460, ClientHeight: 140}
	// Its document is scrolled by 30 px; a card field at 8,38 shows at 8,8 of it, and
	// a password field runs past its bottom edge.
	inner := secrets{
		regions: [][]rect{{{8, 38, 424, 52}}, {{8, 150, 100, 40}}},
		scrollY: 30,
	}
	view := frameView{ok: true, sec: inner, border: border, content: content, upright: true, viewport: viewport}
	placedRegions := [][]rect{{{58, 138, 424, 52}}, {{58, 250, 100, 20}}}

	tests := []struct {
		name   string
		frame  opaqueFrame
		view   *frameView
		shown  bool // the deployment shows the frames it cannot read
		svg    bool // the top document has an SVG filter
		want   [][]rect
		placed bool
		whole  bool
	}{
		{"placed where drawn", plain, &view, false, false, placedRegions, true, false},
		{"placed, frames shown", plain, &view, true, false, placedRegions, true, false},
		{"nothing secret in it", plain, &frameView{ok: true, border: border, content: content, upright: true, viewport: viewport}, false, false, nil, false, false},
		{"not read: masked whole", plain, nil, false, false, [][]rect{{box}}, false, false},
		{"not read, frames shown", plain, nil, true, false, nil, false, false},
		{"transformed", opaqueFrame{backend: 7, box: box, rects: []rect{{30, 110, 500, 180}}}, &view, true, false, [][]rect{{{30, 110, 500, 180}}}, false, false},
		{"ink that cannot be placed", opaqueFrame{backend: 7, box: box, rects: []rect{box}, whole: true}, &view, false, false, [][]rect{{box}}, false, true},
		{"turned", plain, &frameView{ok: true, sec: inner, border: border, content: content, viewport: viewport}, false, false, [][]rect{{box}}, false, false},
		{"zoomed: its viewport is not its box", plain, &frameView{ok: true, sec: inner, border: border, content: content, upright: true, viewport: &proto.PageLayoutViewport{ClientWidth: 230, ClientHeight: 70}}, false, false, [][]rect{{box}}, false, false},
		{"moved since the snapshot", plain, &frameView{ok: true, sec: inner, border: rect{40, 20, 300, 160}, content: content, upright: true, viewport: viewport}, false, false, [][]rect{{box}}, false, false},
		{"a secret in it cannot be placed", plain, &frameView{ok: true, sec: secrets{whole: true}, border: border, content: content, upright: true, viewport: viewport}, false, false, [][]rect{{box}}, false, false},
		{"an SVG filter on the page", plain, &view, false, true, [][]rect{{box}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := newMaskRules(nil, nil)
			rules.opaqueFrames = !tt.shown
			sec := secrets{frames: []opaqueFrame{tt.frame}, svgFilter: tt.svg}
			var views []frameView
			if tt.view != nil {
				views = []frameView{*tt.view}
			}
			got := placeFrames(sec, views, rules)
			if !slices.EqualFunc(got.regions, tt.want, slices.Equal) {
				t.Fatalf("regions %v, want %v", got.regions, tt.want)
			}
			if (len(got.placed) > 0) != tt.placed || got.whole != tt.whole || got.frames != nil {
				t.Fatalf("placed %v, whole %v, frames %v", got.placed, got.whole, got.frames)
			}
			if len(tt.want) > 0 && !slices.Equal(got.roots, []int{7}) {
				t.Fatalf("roots %v: the frame element is what moves with its secrets", got.roots)
			}
		})
	}
}

// TestMaskPlacedWhole: a frame whose secrets were placed is masked whole (it animates)
// without disturbing the regions and frames after it.
func TestMaskPlacedWhole(t *testing.T) {
	a := opaqueFrame{backend: 1, rects: []rect{{0, 0, 100, 100}}}
	b := opaqueFrame{backend: 2, rects: []rect{{0, 200, 100, 100}}}
	sec := secrets{
		regions: [][]rect{{{500, 0, 10, 10}}, {{1, 1, 5, 5}}, {{2, 2, 5, 5}}, {{3, 203, 5, 5}}},
		placed:  []placedFrame{{from: 1, to: 3, frame: a}, {from: 3, to: 4, frame: b}},
	}
	sec.maskPlacedWhole(0)
	want := [][]rect{{{500, 0, 10, 10}}, {{0, 0, 100, 100}}, {{3, 203, 5, 5}}}
	if !slices.EqualFunc(sec.regions, want, slices.Equal) {
		t.Fatalf("regions %v, want %v", sec.regions, want)
	}
	if len(sec.placed) != 1 || sec.placed[0].from != 2 || sec.placed[0].to != 3 {
		t.Fatalf("placed %+v", sec.placed)
	}
	sec.maskPlacedWhole(0)
	want = [][]rect{{{500, 0, 10, 10}}, {{0, 0, 100, 100}}, {{0, 200, 100, 100}}}
	if !slices.EqualFunc(sec.regions, want, slices.Equal) || len(sec.placed) != 0 {
		t.Fatalf("regions %v, placed %v", sec.regions, sec.placed)
	}
}

// TestOpaqueFramesRead: findSecrets leaves the top document's frames it holds no
// document of to be read into (parseSecrets), with their ink: one under a transform or
// a filter is not plain, and masked whole it covers that ink.
func TestOpaqueFramesRead(t *testing.T) {
	s := page(
		node{parent: 2, name: "IFRAME", bounds: []float64{0, 0, 300, 150}},                                                                      // 3
		node{parent: 2, name: "DIV", bounds: []float64{0, 200, 300, 150}, style: map[string]string{"filter": "blur(2px)"}},                      // 4
		node{parent: 4, name: "IFRAME", bounds: []float64{0, 200, 300, 150}},                                                                    // 5
		node{parent: 2, name: "IFRAME", bounds: []float64{0, 400, 300, 150}, style: map[string]string{"transform": "matrix(2, 0, 0, 2, 0, 0)"}}, // 6
		node{parent: 2, name: "IFRAME"}, // 7: no layout, draws nothing
	)
	sec, err := parseSecrets(s.json(t), newMaskRules(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.regions) != 0 || len(sec.frames) != 3 {
		t.Fatalf("regions %v, frames %+v", sec.regions, sec.frames)
	}
	want := []opaqueFrame{
		{box: rect{0, 0, 300, 150}, rects: []rect{{0, 0, 300, 150}}, plain: true},
		{box: rect{0, 200, 300, 150}, rects: []rect{{-6, 194, 312, 162}}},
		{box: rect{0, 400, 300, 150}, rects: []rect{{0, 400, 300, 150}}},
	}
	for k, f := range sec.frames {
		if f.box != want[k].box || f.plain != want[k].plain || !slices.Equal(f.rects, want[k].rects) {
			t.Errorf("frame %d: %+v, want %+v", k, f, want[k])
		}
	}
}

// TestUprightQuad reads DOM.getBoxModel quads: an upright rectangle, or not one.
func TestUprightQuad(t *testing.T) {
	if r, ok := uprightQuad(proto.DOMQuad{10, 20, 110, 20, 110, 70, 10, 70}); !ok || r != (rect{10, 20, 100, 50}) {
		t.Fatalf("upright: %v %v", r, ok)
	}
	for _, q := range []proto.DOMQuad{
		{60, 0, 120, 60, 60, 120, 0, 60}, // turned 45°
		{10, 20, 110, 25, 110, 70, 10, 70},
		{10, 20, 110, 20},
		{110, 70, 10, 70, 10, 20, 110, 20}, // upside down
	} {
		if _, ok := uprightQuad(q); ok {
			t.Errorf("%v read as upright", q)
		}
	}
}
