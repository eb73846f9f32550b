package masks

import (
	"math"
)

// Frames of another process. Chromium runs a cross-site iframe, and a sandboxed one, in
// a renderer process of its own: the top document's snapshot holds the frame element
// but not its document (Secrets.Frames). The broker reads into each such frame as it
// reads the page and hands what it read to PlaceFrames, which places the frame's
// secrets where the frame draws them: its document's rectangles moved onto the frame
// element's content box and clipped to it, as a frame paints nothing outside it.
//
// Fail closed:
//   - a frame it could not read into is masked whole, unless the deployment shows
//     them (NewRules);
//   - a frame that holds a secret is masked whole when its secrets cannot be placed by
//     moving them: the frame element or an ancestor is transformed, scaled, filtered
//     or reflected, its content box is not an upright rectangle the size of its
//     document's viewport, a secret in it cannot be placed, or the page has an SVG
//     filter.

// maxScrollbar is how much narrower (or shorter) than the frame element's content box
// its document's viewport may be: a scrollbar.
const maxScrollbar = 32

// Frame is a frame element of the top document whose document the snapshot does
// not hold.
type Frame struct {
	// Backend is its backend node id, by which the broker finds its document; 0 when
	// the snapshot has none.
	Backend int
	box     Rect // its border box, in CSS pixels of the top document
	// rects are what it draws, grown by its ink: its mask when it is masked whole.
	rects []Rect
	// plain says nothing moves what it draws off its box: no transform, scale or zoom,
	// filter or reflection of it or an ancestor.
	plain bool
	// whole says its ink cannot be placed at all (inkOf): masked, it masks the frame whole.
	whole bool
}

// placedFrame is a frame whose secrets were placed from its own document: regions
// [from, to) of the top document's secrets.
type placedFrame struct {
	from, to int
	frame    Frame
	// view is the index of what was read of it in PlaceFrames's views.
	view int
}

// FrameView is what the broker read of the document of one of Secrets.Frames: the
// zero FrameView is a frame it could not read into.
type FrameView struct {
	// Read says the frame's document was read; the rest is unset otherwise.
	Read bool
	// Secrets are its secrets, in its own document's CSS pixels, its own frames placed.
	Secrets Secrets
	// Border and Content are the frame element's boxes, in CSS pixels of the viewport
	// of the document that holds it; Upright is false when either is not an upright
	// rectangle (UprightQuad).
	Border, Content Rect
	Upright         bool
	// Viewport is the frame's document's layout viewport (only its size counts); nil
	// when it could not be read.
	Viewport *Rect
}

// opaqueFrames returns the frame elements among nodes of the top document that draw
// something, with their ink. ok is false for a layout index out of range.
func opaqueFrames(doc snapshotDocument, nodes []int, inks []ink, own []outset) (frames []Frame, ok bool) {
	if len(nodes) == 0 {
		return nil, true
	}
	layout := make(map[int]int, len(nodes)) // node → its first layout index
	for _, n := range nodes {
		layout[n] = -1
	}
	for j, n := range doc.Layout.NodeIndex {
		if l, ok := layout[n]; ok && l < 0 {
			layout[n] = j
		}
	}
	for _, n := range nodes {
		j := layout[n]
		if j < 0 {
			continue // no layout: it draws nothing
		}
		b := doc.Layout.Bounds[j] // Parse checked every bound
		if !(b[2] > 0 && b[3] > 0) {
			continue
		}
		in := inks[n]
		box := Rect{b[0], b[1], b[2], b[3]}
		f := Frame{
			box:   box,
			rects: []Rect{box.grow(in.reach.add(own[n]))},
			plain: in.reach == (outset{}) && len(in.mirrors) == 0 && !in.whole && in.scale == 1,
			whole: in.whole,
		}
		for _, m := range in.mirrors {
			f.rects = append(f.rects, m.r.mirror(m.box))
		}
		if len(doc.Nodes.BackendNodeID) == len(doc.Nodes.ParentIndex) {
			f.Backend = doc.Nodes.BackendNodeID[n]
		}
		frames = append(frames, f)
	}
	return frames, true
}

// PlaceFrames decides what each of sec.Frames masks, given what was read of its
// document (views, by frame; a frame without a view was not read): nothing when it
// holds no secret, its secrets where it draws them when they can be placed, the whole
// frame when they cannot or when it was not read (unless rules show such frames). The
// result has no Frames left; PlacedViews and ClearViews tell which views it placed
// secrets from and which hold none.
func PlaceFrames(sec Secrets, views []FrameView, rules Rules) Secrets {
	frames := sec.Frames
	sec.Frames = nil
	for k, f := range frames {
		var v FrameView
		if k < len(views) {
			v = views[k]
		}
		switch {
		case !v.Read:
			if rules.opaqueFrames {
				sec.maskFrame(f)
			}
		case len(v.Secrets.Regions) == 0 && !v.Secrets.Whole:
			// It holds no secret; unless a view transition paints one it held.
			sec.clear = append(sec.clear, k)
		default:
			regions, ok := v.place(f)
			if !ok || sec.svgFilter {
				sec.maskFrame(f)
				continue
			}
			from := len(sec.Regions)
			sec.Regions = append(sec.Regions, regions...)
			if f.Backend != 0 {
				sec.Roots = append(sec.Roots, f.Backend)
			}
			sec.placed = append(sec.placed, placedFrame{from: from, to: len(sec.Regions), frame: f, view: k})
		}
	}
	return sec
}

// PlacedViews returns, for each frame whose secrets PlaceFrames placed from its own
// document (in the order MaskPlacedWhole counts them), the index of its view in
// PlaceFrames's views: the frames the broker watches around the screenshot for what
// moves in them and the work they do.
func (s Secrets) PlacedViews() []int {
	views := make([]int, len(s.placed))
	for i, p := range s.placed {
		views[i] = p.view
	}
	return views
}

// ClearViews returns the indices, in PlaceFrames's views, of the frames read that hold
// no secret: one that runs a view transition may paint an image of one it held.
func (s Secrets) ClearViews() []int { return s.clear }

// maskFrame masks frame f whole: one more region.
func (s *Secrets) maskFrame(f Frame) {
	s.Regions = append(s.Regions, f.rects)
	if f.Backend != 0 {
		s.Roots = append(s.Roots, f.Backend)
	}
	s.Whole = s.Whole || f.whole
}

// MaskPlacedWhole masks whole the i-th frame whose secrets were placed from its
// document (PlacedViews): its regions become one, the frame's.
func (s *Secrets) MaskPlacedWhole(i int) {
	p := s.placed[i]
	s.Regions = append(s.Regions[:p.from:p.from], append([][]Rect{p.frame.rects}, s.Regions[p.to:]...)...)
	shift := p.to - p.from - 1
	s.placed = append(s.placed[:i:i], s.placed[i+1:]...)
	for k := i; k < len(s.placed); k++ {
		s.placed[k].from -= shift
		s.placed[k].to -= shift
	}
}

// place moves the frame's secret regions onto frame element f of the top document,
// clipped to its content box. ok is false when they cannot be placed by moving them.
func (v FrameView) place(f Frame) (regions [][]Rect, ok bool) {
	if !f.plain || v.Secrets.Whole || !v.Upright || v.Viewport == nil {
		return nil, false
	}
	// The border box read now is the one the snapshot read; the content box holds the
	// frame's viewport, but for a scrollbar.
	if math.Abs(v.Border.W-f.box.W) > 1 || math.Abs(v.Border.H-f.box.H) > 1 {
		return nil, false
	}
	vw, vh := v.Viewport.W, v.Viewport.H
	if vw > v.Content.W+1 || vh > v.Content.H+1 || v.Content.W-vw > maxScrollbar || v.Content.H-vh > maxScrollbar {
		return nil, false
	}
	clip := Rect{f.box.X + v.Content.X - v.Border.X, f.box.Y + v.Content.Y - v.Border.Y, v.Content.W, v.Content.H}
	dx, dy := clip.X-v.Secrets.ScrollX, clip.Y-v.Secrets.ScrollY
	for _, region := range v.Secrets.Regions {
		var placed []Rect
		for _, r := range region {
			if c, ok := (Rect{r.X + dx, r.Y + dy, r.W, r.H}).intersect(clip); ok {
				placed = append(placed, c)
			}
		}
		if len(placed) > 0 {
			regions = append(regions, placed)
		}
	}
	return regions, true
}

// intersect returns the part of r inside c; ok is false when there is none.
func (r Rect) intersect(c Rect) (Rect, bool) {
	x0, y0 := max(r.X, c.X), max(r.Y, c.Y)
	x1, y1 := min(r.X+r.W, c.X+c.W), min(r.Y+r.H, c.Y+c.H)
	if x1 <= x0 || y1 <= y0 {
		return Rect{}, false
	}
	return Rect{x0, y0, x1 - x0, y1 - y0}, true
}

// UprightQuad reads a quad (DOM.getBoxModel's: four corners, x y each, clockwise from
// the top left) as a rectangle: ok is false when it is not an upright one (a transform
// turned or skewed it) or holds a number that is not finite.
func UprightQuad(q []float64) (Rect, bool) {
	if len(q) != 8 {
		return Rect{}, false
	}
	for _, v := range q {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Rect{}, false
		}
	}
	const eps = 0.01
	x0, y0, x1, y1 := q[0], q[1], q[4], q[5]
	if math.Abs(q[2]-x1) > eps || math.Abs(q[3]-y0) > eps || math.Abs(q[6]-x0) > eps || math.Abs(q[7]-y1) > eps || x1 < x0 || y1 < y0 {
		return Rect{}, false
	}
	return Rect{x0, y0, x1 - x0, y1 - y0}, true
}
