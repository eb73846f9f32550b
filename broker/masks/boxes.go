package masks

import (
	"image"
	"math"
	"slices"

	"github.com/agentfy/agentfy/wire"
)

// padding widens every mask by this many image pixels on each side, beyond rounding
// outwards: antialiased edges, focus rings and a layout that moved by a fraction of a
// pixel between the read and the capture stay covered.
const padding = 2

// Boxes places the secret regions on an image of w × h pixels of clip (the part of the
// top document the image shows, in its CSS pixels): each region's rectangles, scaled,
// rounded outwards, padded and clamped to the image; the whole image when sec is
// masked whole. It returns the boxes to paint and how many regions show in the image,
// at most wire.MaxMasked; none for an empty clip.
func (sec Secrets) Boxes(clip Rect, w, h int) (boxes []image.Rectangle, shown int) {
	if !(clip.W > 0) || !(clip.H > 0) {
		return nil, 0
	}
	if sec.Whole {
		// A secret whose ink cannot be placed: the whole frame is one mask, and every
		// region counts as masked.
		return []image.Rectangle{image.Rect(0, 0, w, h)}, min(max(len(sec.Regions), 1), wire.MaxMasked)
	}
	kx, ky := float64(w)/clip.W, float64(h)/clip.H
	for _, region := range sec.Regions {
		seen := false
		for _, r := range region {
			// Rounded outwards and padded, then clamped to the image.
			b := image.Rectangle{
				Min: image.Pt(
					max(int(math.Floor((r.X-clip.X)*kx))-padding, 0),
					max(int(math.Floor((r.Y-clip.Y)*ky))-padding, 0)),
				Max: image.Pt(
					min(int(math.Ceil((r.X+r.W-clip.X)*kx))+padding, w),
					min(int(math.Ceil((r.Y+r.H-clip.Y)*ky))+padding, h)),
			}
			if b.Min.X >= b.Max.X || b.Min.Y >= b.Max.Y {
				continue
			}
			boxes = append(boxes, b)
			seen = true
		}
		if seen {
			shown++
		}
	}
	return boxes, min(shown, wire.MaxMasked)
}

// Span returns where to mask a screenshot taken between two reads a and b of a page
// at the same viewport and scroll position: a when they agree; otherwise every
// place a secret could have been painted between them, each rectangle of a region the
// box that spans it in a and in b (a secret that moved is masked along its way). ok is
// false when the reads cannot be related rectangle to rectangle: not the same secret
// elements (one appeared or left the page, or stopped drawing), not the same scroll
// position, or not the same frames' secrets placed from their own documents.
func Span(a, b Secrets) (sec Secrets, ok bool) {
	if a.equal(b) {
		return a, true
	}
	if len(a.Regions) != len(b.Regions) || !slices.Equal(a.Roots, b.Roots) ||
		a.ScrollX != b.ScrollX || a.ScrollY != b.ScrollY ||
		!slices.EqualFunc(a.placed, b.placed, func(p, q placedFrame) bool { return p.from == q.from && p.to == q.to }) {
		return Secrets{}, false
	}
	sec = a
	sec.Whole = a.Whole || b.Whole
	sec.Regions = make([][]Rect, len(a.Regions))
	for k := range a.Regions {
		sec.Regions[k] = spanRects(a.Regions[k], b.Regions[k])
	}
	// A frame masked whole later (its secrets move) is masked where it was in either.
	sec.placed = slices.Clone(a.placed)
	for i := range sec.placed {
		sec.placed[i].frame.rects = spanRects(a.placed[i].frame.rects, b.placed[i].frame.rects)
	}
	return sec, true
}

// spanRects returns rectangles that cover a, b and what lies between them: the box
// spanning a[i] and b[i] for each i when they have as many rectangles (a region's
// rectangles come in the order of its nodes), else one box spanning them all.
func spanRects(a, b []Rect) []Rect {
	if len(a) == len(b) {
		out := make([]Rect, len(a))
		for i := range a {
			out[i] = a[i].span(b[i])
		}
		return out
	}
	all := append(slices.Clone(a), b...)
	if len(all) == 0 {
		return nil
	}
	box := all[0]
	for _, r := range all[1:] {
		box = box.span(r)
	}
	return []Rect{box}
}

// span returns the smallest rectangle that holds r and o.
func (r Rect) span(o Rect) Rect {
	x0, y0 := min(r.X, o.X), min(r.Y, o.Y)
	x1, y1 := max(r.X+r.W, o.X+o.W), max(r.Y+r.H, o.Y+o.H)
	return Rect{x0, y0, x1 - x0, y1 - y0}
}

// pinSlack is how far, in CSS pixels, what a region draws may reach past its root's
// border box and still count as within it: the layout's fractions of a pixel.
const pinSlack = 0.5

// holds reports whether o lies within r, give or take pinSlack.
func (r Rect) holds(o Rect) bool {
	return o.X >= r.X-pinSlack && o.Y >= r.Y-pinSlack &&
		o.X+o.W <= r.X+r.W+pinSlack && o.Y+o.H <= r.Y+r.H+pinSlack
}

// Pin is an element to pin: its backend node id, and a selector that matches it alone
// in the top document's own tree, or "".
type Pin struct {
	Backend  int
	Selector string
}

// Pins returns the elements on whose border boxes a mask Chromium draws in the very
// frame it paints covers every secret of s, wherever the page moves them: each region's
// root. ok is false when some secret would show past such masks: s is masked whole (ink
// that cannot be placed); a region draws content beyond its root's box (a descendant
// overflowing it, a text shadow, a filter, a reflection); or a region is a frame's (read
// into a frame of another process, or masked with it), which the broker's own masks
// place.
func (s Secrets) Pins() (pins []Pin, ok bool) {
	if s.Whole || len(s.placed) > 0 || len(s.Frames) > 0 || len(s.Roots) != len(s.Regions) ||
		len(s.inBox) != len(s.Roots) || len(s.selectors) != len(s.Roots) || slices.Contains(s.inBox, false) {
		return nil, false
	}
	pins = make([]Pin, len(s.Roots))
	for i, r := range s.Roots {
		pins[i] = Pin{Backend: r, Selector: s.selectors[i]}
	}
	return pins, true
}

// HoldsRoots reports whether every root of o is one of s's: o found no secret element
// s did not.
func (s Secrets) HoldsRoots(o Secrets) bool {
	for _, r := range o.Roots {
		if !slices.Contains(s.Roots, r) {
			return false
		}
	}
	return true
}
