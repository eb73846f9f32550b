package masks

import (
	"slices"
	"testing"
)

// TestPlaceFrames: the secrets read in a frame of another process are placed where the
// frame draws them — moved onto its content box, less the frame's scroll, clipped to
// the box — and the frame is masked whole whenever that cannot be trusted.
func TestPlaceFrames(t *testing.T) {
	box := Rect{40, 120, 480, 160}
	plain := Frame{Backend: 7, box: box, rects: []Rect{box}, plain: true}
	// The frame element as DOM.getBoxModel reads it in a viewport scrolled by 100 px: a
	// 4-px border and 6 px of padding.
	border, content := Rect{40, 20, 480, 160}, Rect{50, 30, 460, 140}
	viewport := &Rect{W: 460, H: 140}
	// Its document is scrolled by 30 px; a card field at 8,38 shows at 8,8 of it, and
	// a password field runs past its bottom edge.
	inner := Secrets{
		Regions: [][]Rect{{{8, 38, 424, 52}}, {{8, 150, 100, 40}}},
		ScrollY: 30,
	}
	view := FrameView{Read: true, Secrets: inner, Border: border, Content: content, Upright: true, Viewport: viewport}
	placedRegions := [][]Rect{{{58, 138, 424, 52}}, {{58, 250, 100, 20}}}

	tests := []struct {
		name   string
		frame  Frame
		view   *FrameView
		shown  bool // the deployment shows the frames it cannot read
		svg    bool // the top document has an SVG filter
		want   [][]Rect
		placed bool
		whole  bool
	}{
		{"placed where drawn", plain, &view, false, false, placedRegions, true, false},
		{"placed, frames shown", plain, &view, true, false, placedRegions, true, false},
		{"nothing secret in it", plain, &FrameView{Read: true, Border: border, Content: content, Upright: true, Viewport: viewport}, false, false, nil, false, false},
		{"not read: masked whole", plain, nil, false, false, [][]Rect{{box}}, false, false},
		{"not read, frames shown", plain, nil, true, false, nil, false, false},
		{"transformed", Frame{Backend: 7, box: box, rects: []Rect{{30, 110, 500, 180}}}, &view, true, false, [][]Rect{{{30, 110, 500, 180}}}, false, false},
		{"ink that cannot be placed", Frame{Backend: 7, box: box, rects: []Rect{box}, whole: true}, &view, false, false, [][]Rect{{box}}, false, true},
		{"turned", plain, &FrameView{Read: true, Secrets: inner, Border: border, Content: content, Viewport: viewport}, false, false, [][]Rect{{box}}, false, false},
		{"zoomed: its viewport is not its box", plain, &FrameView{Read: true, Secrets: inner, Border: border, Content: content, Upright: true, Viewport: &Rect{W: 230, H: 70}}, false, false, [][]Rect{{box}}, false, false},
		{"moved since the snapshot", plain, &FrameView{Read: true, Secrets: inner, Border: Rect{40, 20, 300, 160}, Content: content, Upright: true, Viewport: viewport}, false, false, [][]Rect{{box}}, false, false},
		{"a secret in it cannot be placed", plain, &FrameView{Read: true, Secrets: Secrets{Whole: true}, Border: border, Content: content, Upright: true, Viewport: viewport}, false, false, [][]Rect{{box}}, false, false},
		{"an SVG filter on the page", plain, &view, false, true, [][]Rect{{box}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := NewRules(nil, nil, tt.shown)
			sec := Secrets{Frames: []Frame{tt.frame}, svgFilter: tt.svg}
			var views []FrameView
			if tt.view != nil {
				views = []FrameView{*tt.view}
			}
			got := PlaceFrames(sec, views, rules)
			if !slices.EqualFunc(got.Regions, tt.want, slices.Equal) {
				t.Fatalf("regions %v, want %v", got.Regions, tt.want)
			}
			if (len(got.placed) > 0) != tt.placed || got.Whole != tt.whole || got.Frames != nil {
				t.Fatalf("placed %v, whole %v, frames %v", got.placed, got.Whole, got.Frames)
			}
			if len(tt.want) > 0 && !slices.Equal(got.Roots, []int{7}) {
				t.Fatalf("roots %v: the frame element is what moves with its secrets", got.Roots)
			}
		})
	}
}

// TestMaskPlacedWhole: a frame whose secrets were placed is masked whole (it animates)
// without disturbing the regions and frames after it.
func TestMaskPlacedWhole(t *testing.T) {
	a := Frame{Backend: 1, rects: []Rect{{0, 0, 100, 100}}}
	b := Frame{Backend: 2, rects: []Rect{{0, 200, 100, 100}}}
	sec := Secrets{
		Regions: [][]Rect{{{500, 0, 10, 10}}, {{1, 1, 5, 5}}, {{2, 2, 5, 5}}, {{3, 203, 5, 5}}},
		placed:  []placedFrame{{from: 1, to: 3, frame: a}, {from: 3, to: 4, frame: b}},
	}
	sec.MaskPlacedWhole(0)
	want := [][]Rect{{{500, 0, 10, 10}}, {{0, 0, 100, 100}}, {{3, 203, 5, 5}}}
	if !slices.EqualFunc(sec.Regions, want, slices.Equal) {
		t.Fatalf("regions %v, want %v", sec.Regions, want)
	}
	if len(sec.placed) != 1 || sec.placed[0].from != 2 || sec.placed[0].to != 3 {
		t.Fatalf("placed %+v", sec.placed)
	}
	sec.MaskPlacedWhole(0)
	want = [][]Rect{{{500, 0, 10, 10}}, {{0, 0, 100, 100}}, {{0, 200, 100, 100}}}
	if !slices.EqualFunc(sec.Regions, want, slices.Equal) || len(sec.placed) != 0 {
		t.Fatalf("regions %v, placed %v", sec.Regions, sec.placed)
	}
}

// TestOpaqueFramesRead: findSecrets leaves the top document's frames it holds no
// document of to be read into (Parse), with their ink: one under a transform or
// a filter is not plain, and masked whole it covers that ink.
func TestOpaqueFramesRead(t *testing.T) {
	s := page(
		node{parent: 2, name: "IFRAME", bounds: []float64{0, 0, 300, 150}},                                                                      // 3
		node{parent: 2, name: "DIV", bounds: []float64{0, 200, 300, 150}, style: map[string]string{"filter": "blur(2px)"}},                      // 4
		node{parent: 4, name: "IFRAME", bounds: []float64{0, 200, 300, 150}},                                                                    // 5
		node{parent: 2, name: "IFRAME", bounds: []float64{0, 400, 300, 150}, style: map[string]string{"transform": "matrix(2, 0, 0, 2, 0, 0)"}}, // 6
		node{parent: 2, name: "IFRAME"}, // 7: no layout, draws nothing
	)
	sec, err := Parse(s.json(t), NewRules(nil, nil, false))
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.Regions) != 0 || len(sec.Frames) != 3 {
		t.Fatalf("regions %v, frames %+v", sec.Regions, sec.Frames)
	}
	want := []Frame{
		{box: Rect{0, 0, 300, 150}, rects: []Rect{{0, 0, 300, 150}}, plain: true},
		{box: Rect{0, 200, 300, 150}, rects: []Rect{{-6, 194, 312, 162}}},
		{box: Rect{0, 400, 300, 150}, rects: []Rect{{0, 400, 300, 150}}},
	}
	for k, f := range sec.Frames {
		if f.box != want[k].box || f.plain != want[k].plain || !slices.Equal(f.rects, want[k].rects) {
			t.Errorf("frame %d: %+v, want %+v", k, f, want[k])
		}
	}
}

// TestUprightQuad reads DOM.getBoxModel quads: an upright rectangle, or not one.
func TestUprightQuad(t *testing.T) {
	if r, ok := UprightQuad([]float64{10, 20, 110, 20, 110, 70, 10, 70}); !ok || r != (Rect{10, 20, 100, 50}) {
		t.Fatalf("upright: %v %v", r, ok)
	}
	for _, q := range [][]float64{
		{60, 0, 120, 60, 60, 120, 0, 60}, // turned 45°
		{10, 20, 110, 25, 110, 70, 10, 70},
		{10, 20, 110, 20},
		{110, 70, 10, 70, 10, 20, 110, 20}, // upside down
	} {
		if _, ok := UprightQuad(q); ok {
			t.Errorf("%v read as upright", q)
		}
	}
}
