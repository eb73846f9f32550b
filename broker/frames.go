package broker

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/go-rod/rod/lib/proto"
)

// Frames of another process. Chromium runs a cross-site iframe, and a sandboxed one, in
// a renderer process of its own: the top document's snapshot holds the frame element
// but not its document. The broker reads into each such frame as it reads the page: it
// attaches a session of its own to the frame's target (Target.attachToTarget,
// flattened; the frame's target id is its frame id, DOM.describeNode of the element),
// reads the frame's layout and a snapshot there — and its own frames of another process
// in turn — and places the frame's secrets where the frame draws them: its document's
// rectangles moved onto the frame element's content box (DOM.getBoxModel) and clipped
// to it, as a frame paints nothing outside it.
//
// Fail closed:
//   - a frame it cannot read into (no target: an object, an embed, a frame that has
//     not loaded; a read that fails; more than maxFrames in one read, deeper than
//     maxFrameDepth) is masked whole, unless the deployment shows them
//     (rules.opaqueFrames);
//   - a frame that holds a secret is masked whole when its secrets cannot be placed by
//     moving them: the frame element or an ancestor is transformed, scaled, filtered
//     or reflected, its content box is not an upright rectangle the size of its
//     document's viewport, a secret in it cannot be placed, or the page has an SVG
//     filter;
//   - around the screenshot, each frame with a secret placed is read as the page is
//     (motion.go): one that animates is masked whole, and one that ran script or
//     layout between the reads, or went away, masks the page's frame whole.
//
// The sessions are kept with the tab's (tabState.frames) while their frames hold
// secrets, so a frame's isolated world and counters are made once; a capture detaches
// those it did not use.

const (
	// maxFrameDepth bounds how deep frames of another process are read into: a frame
	// inside a frame inside a frame.
	maxFrameDepth = 3
	// maxFrames bounds the frames read into by one read of a page.
	maxFrames = 16
	// maxScrollbar is how much narrower (or shorter) than the frame element's content
	// box its document's viewport may be: a scrollbar.
	maxScrollbar = 32
	// detachTimeout bounds the detach of a session a capture no longer needs.
	detachTimeout = time.Second
)

// opaqueFrame is a frame element of the top document whose document the snapshot does
// not hold.
type opaqueFrame struct {
	backend int  // its backend node id; 0 when the snapshot has none
	box     rect // its border box, in CSS pixels of the top document
	// rects are what it draws, grown by its ink: its mask when it is masked whole.
	rects []rect
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
	frame    opaqueFrame
	// watch are the sessions that read it and the frames in it, for what moves in them
	// and their work counters.
	watch []watched
}

// clearFrame is a frame of another process read into that holds no secret.
type clearFrame struct {
	frame opaqueFrame
	watch []watched
}

// watched is a session on a frame of another process, with the frames of its process
// whose view transitions are read around the screenshot: its own, first, and those of
// its snapshot's other documents.
type watched struct {
	s      cdpSession
	frames []proto.PageFrameID
}

// frameView is what was read of a frame's document.
type frameView struct {
	ok bool
	// sec are its secrets, in its own document's CSS pixels, its own frames placed.
	sec secrets
	// border and content are the frame element's boxes, in CSS pixels of the viewport
	// of the document that holds it; upright is false when either is not an upright
	// rectangle.
	border, content rect
	upright         bool
	// viewport is the frame's document's layout viewport.
	viewport *proto.PageLayoutViewport
	watch    []watched
}

// opaqueFrames returns the frame elements among nodes of the top document that draw
// something, with their ink. ok is false for a layout index out of range.
func opaqueFrames(doc snapshotDocument, nodes []int, inks []ink, own []outset) (frames []opaqueFrame, ok bool) {
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
		b := doc.Layout.Bounds[j] // findSecrets checked every bound
		if !(b[2] > 0 && b[3] > 0) {
			continue
		}
		in := inks[n]
		box := rect{b[0], b[1], b[2], b[3]}
		f := opaqueFrame{
			box:   box,
			rects: []rect{box.grow(in.reach.add(own[n]))},
			plain: in.reach == (outset{}) && len(in.mirrors) == 0 && !in.whole && in.scale == 1,
			whole: in.whole,
		}
		for _, m := range in.mirrors {
			f.rects = append(f.rects, m.r.mirror(m.box))
		}
		if len(doc.Nodes.BackendNodeID) == len(doc.Nodes.ParentIndex) {
			f.backend = doc.Nodes.BackendNodeID[n]
		}
		frames = append(frames, f)
	}
	return frames, true
}

// placeFrames decides what each of sec's frames masks, given what was read of its
// document (views, by frame; a frame without a view was not read): nothing when it
// holds no secret, its secrets where it draws them when they can be placed, the whole
// frame when they cannot or when it was not read (unless rules show such frames).
func placeFrames(sec secrets, views []frameView, rules maskRules) secrets {
	frames := sec.frames
	sec.frames = nil
	for k, f := range frames {
		var v frameView
		if k < len(views) {
			v = views[k]
		}
		switch {
		case !v.ok:
			if rules.opaqueFrames {
				sec.maskFrame(f)
			}
		case len(v.sec.regions) == 0 && !v.sec.whole:
			// It holds no secret; unless a view transition paints one it held.
			sec.clear = append(sec.clear, clearFrame{frame: f, watch: v.watch})
		default:
			regions, ok := v.place(f)
			if !ok || sec.svgFilter {
				sec.maskFrame(f)
				continue
			}
			from := len(sec.regions)
			sec.regions = append(sec.regions, regions...)
			if f.backend != 0 {
				sec.roots = append(sec.roots, f.backend)
			}
			sec.placed = append(sec.placed, placedFrame{from: from, to: len(sec.regions), frame: f, watch: v.watch})
		}
	}
	return sec
}

// maskFrame masks frame f whole: one more region.
func (s *secrets) maskFrame(f opaqueFrame) {
	s.regions = append(s.regions, f.rects)
	if f.backend != 0 {
		s.roots = append(s.roots, f.backend)
	}
	s.whole = s.whole || f.whole
}

// maskPlacedWhole masks whole the frame of s.placed[i], whose secrets were placed from
// its document: its regions become one, the frame's.
func (s *secrets) maskPlacedWhole(i int) {
	p := s.placed[i]
	s.regions = append(s.regions[:p.from:p.from], append([][]rect{p.frame.rects}, s.regions[p.to:]...)...)
	shift := p.to - p.from - 1
	s.placed = append(s.placed[:i:i], s.placed[i+1:]...)
	for k := i; k < len(s.placed); k++ {
		s.placed[k].from -= shift
		s.placed[k].to -= shift
	}
}

// place moves the frame's secret regions onto frame element f of the top document,
// clipped to its content box. ok is false when they cannot be placed by moving them.
func (v frameView) place(f opaqueFrame) (regions [][]rect, ok bool) {
	if !f.plain || v.sec.whole || !v.upright || v.viewport == nil {
		return nil, false
	}
	// The border box read now is the one the snapshot read; the content box holds the
	// frame's viewport, but for a scrollbar.
	if math.Abs(v.border.W-f.box.W) > 1 || math.Abs(v.border.H-f.box.H) > 1 {
		return nil, false
	}
	vw, vh := float64(v.viewport.ClientWidth), float64(v.viewport.ClientHeight)
	if vw > v.content.W+1 || vh > v.content.H+1 || v.content.W-vw > maxScrollbar || v.content.H-vh > maxScrollbar {
		return nil, false
	}
	clip := rect{f.box.X + v.content.X - v.border.X, f.box.Y + v.content.Y - v.border.Y, v.content.W, v.content.H}
	dx, dy := clip.X-v.sec.scrollX, clip.Y-v.sec.scrollY
	for _, region := range v.sec.regions {
		var placed []rect
		for _, r := range region {
			if c, ok := (rect{r.X + dx, r.Y + dy, r.W, r.H}).intersect(clip); ok {
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
func (r rect) intersect(c rect) (rect, bool) {
	x0, y0 := max(r.X, c.X), max(r.Y, c.Y)
	x1, y1 := min(r.X+r.W, c.X+c.W), min(r.Y+r.H, c.Y+c.H)
	if x1 <= x0 || y1 <= y0 {
		return rect{}, false
	}
	return rect{x0, y0, x1 - x0, y1 - y0}, true
}

// uprightQuad reads a DOM.getBoxModel quad as a rectangle: ok is false when it is not
// an upright one (a transform turned or skewed it).
func uprightQuad(q proto.DOMQuad) (rect, bool) {
	if len(q) != 8 {
		return rect{}, false
	}
	for _, v := range q {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return rect{}, false
		}
	}
	const eps = 0.01
	x0, y0, x1, y1 := q[0], q[1], q[4], q[5]
	if math.Abs(q[2]-x1) > eps || math.Abs(q[3]-y0) > eps || math.Abs(q[6]-x0) > eps || math.Abs(q[7]-y1) > eps || x1 < x0 || y1 < y0 {
		return rect{}, false
	}
	return rect{x0, y0, x1 - x0, y1 - y0}, true
}

// frameReader reads into the frames of another process of one capture's reads.
type frameReader struct {
	top   cdpSession // the tab's session; its tabState keeps the frames' sessions
	rules maskRules
	read  int // frames read into by the current read of the page
	used  map[proto.TargetTargetID]bool
}

// errTooManyFrames is a page with more frames of another process than one capture reads.
var errTooManyFrames = errors.New("too many frames of another process")

// newFrameReader reads the frames of one capture of the tab top.
func newFrameReader(top cdpSession, rules maskRules) *frameReader {
	if top.tab.frames == nil {
		top.tab.frames = map[proto.TargetTargetID]cdpSession{}
	}
	return &frameReader{top: top, rules: rules, used: map[proto.TargetTargetID]bool{}}
}

// see reads into sec's frames, read through s at depth (0: the tab), and places them.
func (r *frameReader) see(ctx context.Context, s cdpSession, sec secrets, depth int) secrets {
	if len(sec.frames) == 0 {
		return sec
	}
	views := make([]frameView, len(sec.frames))
	for k, f := range sec.frames {
		views[k] = r.view(ctx, s, f, depth)
	}
	return placeFrames(sec, views, r.rules)
}

// view reads the document of frame f, an element of the document s reads.
func (r *frameReader) view(ctx context.Context, s cdpSession, f opaqueFrame, depth int) frameView {
	if f.backend == 0 || depth >= maxFrameDepth || r.read >= maxFrames {
		return frameView{}
	}
	r.read++
	desc, err := proto.DOMDescribeNode{BackendNodeID: proto.DOMBackendNodeID(f.backend)}.Call(s)
	if err != nil || desc.Node == nil || desc.Node.FrameID == "" {
		return frameView{}
	}
	child, err := r.session(ctx, proto.TargetTargetID(desc.Node.FrameID))
	if err != nil {
		return frameView{}
	}
	box, err := proto.DOMGetBoxModel{BackendNodeID: proto.DOMBackendNodeID(f.backend)}.Call(s)
	if err != nil || box.Model == nil {
		return frameView{}
	}
	metrics, sec, err := readLayout(ctx, child, r, depth+1)
	if err != nil {
		// A target that is gone is attached again next time.
		r.forget(ctx, proto.TargetTargetID(desc.Node.FrameID))
		return frameView{}
	}
	border, ok1 := uprightQuad(box.Model.Border)
	content, ok2 := uprightQuad(box.Model.Content)
	v := frameView{
		ok: true, sec: sec, border: border, content: content, upright: ok1 && ok2,
		viewport: metrics.CSSLayoutViewport,
		watch:    []watched{{s: child, frames: append([]proto.PageFrameID{proto.PageFrameID(child.target)}, sec.docFrames...)}},
	}
	for _, p := range sec.placed {
		v.watch = append(v.watch, p.watch...)
	}
	for _, c := range sec.clear {
		v.watch = append(v.watch, c.watch...)
	}
	return v
}

// session returns the broker's session on the frame of target id, attaching one.
func (r *frameReader) session(ctx context.Context, target proto.TargetTargetID) (cdpSession, error) {
	frames := r.top.tab.frames
	r.used[target] = true
	if s, ok := frames[target]; ok {
		s.ctx = ctx
		return s, nil
	}
	if len(frames) >= 2*maxFrames {
		return cdpSession{}, errTooManyFrames
	}
	res, err := proto.TargetAttachToTarget{TargetID: target, Flatten: true}.Call(r.top.browser.Context(ctx))
	if err != nil {
		return cdpSession{}, maskError("attach to a frame", err)
	}
	s := cdpSession{ctx: ctx, browser: r.top.browser, id: res.SessionID, tab: &tabState{}, target: target}
	frames[target] = s
	return s, nil
}

// forget detaches the session on a frame that failed a read.
func (r *frameReader) forget(ctx context.Context, target proto.TargetTargetID) {
	if s, ok := r.top.tab.frames[target]; ok {
		delete(r.top.tab.frames, target)
		r.detach(ctx, s)
	}
}

// close detaches the sessions on frames this capture did not read.
func (r *frameReader) close(ctx context.Context) {
	for target, s := range r.top.tab.frames {
		if !r.used[target] {
			delete(r.top.tab.frames, target)
			r.detach(ctx, s)
		}
	}
}

// detach detaches a session on a frame, under a deadline of its own: a capture that ran
// out of time still leaves nothing attached.
func (r *frameReader) detach(ctx context.Context, s cdpSession) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachTimeout)
	defer cancel()
	_ = proto.TargetDetachFromTarget{SessionID: s.id}.Call(r.top.browser.Context(ctx))
}

// framesMotion reads what moves in the frames of sec, read through the tab's session
// s: whether a view transition runs in any (the frames of the page's process, those of
// another process read into, and theirs) — one that could not be read counts as one —
// and the frames whose secrets were placed from their documents (indices into
// sec.placed) to mask whole: one where an animation runs.
func framesMotion(s cdpSession, sec secrets) (whole []int, transition bool) {
	for _, f := range sec.docFrames {
		if t, err := transitionIn(s, f); err != nil || t {
			return nil, true
		}
	}
	for i, p := range sec.placed {
		for _, w := range p.watch {
			// Its own frame first: what moves there, a view transition included.
			m, err := readMotion(w.s, w.s.target, nil)
			if err != nil || m.ViewTransition || watchTransition(w.frames[1:], w.s) {
				return nil, true
			}
			if (m.Moving > 0 || m.Layout) && !slices.Contains(whole, i) {
				whole = append(whole, i)
			}
		}
	}
	for _, c := range sec.clear {
		for _, w := range c.watch {
			if watchTransition(w.frames, w.s) {
				return nil, true
			}
		}
	}
	return whole, false
}

// watchTransition reports whether a view transition runs in any of frames of session
// s (or one could not be read).
func watchTransition(frames []proto.PageFrameID, s cdpSession) bool {
	for _, f := range frames {
		var t bool
		var err error
		if proto.TargetTargetID(f) == s.target {
			var m motion
			m, err = readMotion(s, s.target, nil)
			t = m.ViewTransition
		} else {
			t, err = transitionIn(s, f)
		}
		if err != nil || t {
			return true
		}
	}
	return false
}

// addFramesWork adds to w the work counters of the frames of another process whose
// secrets sec placed (and of the frames read into inside them).
func addFramesWork(w work, sec secrets) (work, error) {
	for _, p := range sec.placed {
		for _, f := range p.watch {
			fw, err := readWork(f.s)
			if err != nil {
				return work{}, err
			}
			w = work{w.script + fw.script, w.layout + fw.layout, w.style + fw.style}
		}
	}
	return w, nil
}
