package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/masks"
)

// Frames of another process. Chromium runs a cross-site iframe, and a sandboxed one, in
// a renderer process of its own: the top document's snapshot holds the frame element
// but not its document. The broker reads into each such frame as it reads the page: it
// attaches a session of its own to the frame's target (Target.attachToTarget,
// flattened; the frame's target id is its frame id, DOM.describeNode of the element),
// reads the frame's layout and a snapshot there — and its own frames of another process
// in turn — and the frame element's boxes (DOM.getBoxModel), and masks.PlaceFrames
// places the frame's secrets where the frame draws them: its document's rectangles
// moved onto the frame element's content box and clipped to it, as a frame paints
// nothing outside it.
//
// Fail closed:
//   - a frame it cannot read into (no target: an object, an embed, a frame that has
//     not loaded; a read that fails; more than maxFrames in one read, deeper than
//     maxFrameDepth) is masked whole, unless the deployment shows them
//     (Config.ShowOpaqueFrames);
//   - a frame that holds a secret is masked whole when its secrets cannot be placed by
//     moving them (masks.PlaceFrames);
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
	// detachTimeout bounds the detach of a session a capture no longer needs.
	detachTimeout = time.Second
)

// watched is a session on a frame of another process, with the frames of its process
// whose view transitions are read around the screenshot: its own, first, and those of
// its snapshot's other documents.
type watched struct {
	s      cdpSession
	frames []proto.PageFrameID
}

// frameWatch is what one read of a page watches around the screenshot in the frames
// of another process it read into.
type frameWatch struct {
	// placed are, for each frame whose secrets were placed from its own document (in
	// the order of masks.Secrets.PlacedViews), the sessions that read it and the
	// frames in it, for what moves in them and their work counters.
	placed [][]watched
	// clear are the sessions on the frames read into that hold no secret, and the
	// frames in them: one that runs a view transition may paint an image of one it
	// held.
	clear []watched
}

// frameReader reads into the frames of another process of one capture's reads.
type frameReader struct {
	top   cdpSession // the tab's session; its tabState keeps the frames' sessions
	rules masks.Rules
	read  int // frames read into by the current read of the page
	used  map[proto.TargetTargetID]bool
}

// errTooManyFrames is a page with more frames of another process than one capture reads.
var errTooManyFrames = errors.New("too many frames of another process")

// newFrameReader reads the frames of one capture of the tab top.
func newFrameReader(top cdpSession, rules masks.Rules) *frameReader {
	if top.tab.frames == nil {
		top.tab.frames = map[proto.TargetTargetID]cdpSession{}
	}
	return &frameReader{top: top, rules: rules, used: map[proto.TargetTargetID]bool{}}
}

// see reads into sec's frames, read through s at depth (0: the tab), and places them;
// it returns what to watch in the frames it read into.
func (r *frameReader) see(ctx context.Context, s cdpSession, sec masks.Secrets, depth int) (masks.Secrets, frameWatch) {
	if len(sec.Frames) == 0 {
		return sec, frameWatch{}
	}
	views := make([]masks.FrameView, len(sec.Frames))
	watches := make([][]watched, len(sec.Frames))
	for k, f := range sec.Frames {
		views[k], watches[k] = r.view(ctx, s, f, depth)
	}
	sec = masks.PlaceFrames(sec, views, r.rules)
	var w frameWatch
	for _, k := range sec.PlacedViews() {
		w.placed = append(w.placed, watches[k])
	}
	for _, k := range sec.ClearViews() {
		w.clear = append(w.clear, watches[k]...)
	}
	return sec, w
}

// view reads the document of frame f, an element of the document s reads, and returns
// it with the sessions that read it and the frames in it.
func (r *frameReader) view(ctx context.Context, s cdpSession, f masks.Frame, depth int) (masks.FrameView, []watched) {
	if f.Backend == 0 || depth >= maxFrameDepth || r.read >= maxFrames {
		return masks.FrameView{}, nil
	}
	r.read++
	desc, err := proto.DOMDescribeNode{BackendNodeID: proto.DOMBackendNodeID(f.Backend)}.Call(s)
	if err != nil || desc.Node == nil || desc.Node.FrameID == "" {
		return masks.FrameView{}, nil
	}
	child, err := r.session(ctx, proto.TargetTargetID(desc.Node.FrameID))
	if err != nil {
		return masks.FrameView{}, nil
	}
	box, err := proto.DOMGetBoxModel{BackendNodeID: proto.DOMBackendNodeID(f.Backend)}.Call(s)
	if err != nil || box.Model == nil {
		return masks.FrameView{}, nil
	}
	metrics, sec, inner, err := readLayout(ctx, child, r, depth+1)
	if err != nil {
		// A target that is gone is attached again next time.
		r.forget(ctx, proto.TargetTargetID(desc.Node.FrameID))
		return masks.FrameView{}, nil
	}
	border, ok1 := masks.UprightQuad(box.Model.Border)
	content, ok2 := masks.UprightQuad(box.Model.Content)
	v := masks.FrameView{Read: true, Secrets: sec, Border: border, Content: content, Upright: ok1 && ok2}
	if vp := metrics.CSSLayoutViewport; vp != nil {
		v.Viewport = &masks.Rect{X: float64(vp.PageX), Y: float64(vp.PageY), W: float64(vp.ClientWidth), H: float64(vp.ClientHeight)}
	}
	frames := []proto.PageFrameID{proto.PageFrameID(child.target)}
	for _, id := range sec.DocFrames {
		frames = append(frames, proto.PageFrameID(id))
	}
	watch := []watched{{s: child, frames: frames}}
	for _, p := range inner.placed {
		watch = append(watch, p...)
	}
	return v, append(watch, inner.clear...)
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
// s, with w watched in its frames of another process: whether a view transition runs
// in any (the frames of the page's process, those of another process read into, and
// theirs) — one that could not be read counts as one — and the frames whose secrets
// were placed from their documents (indices of masks.Secrets.PlacedViews) to mask
// whole: one where an animation runs.
func framesMotion(s cdpSession, sec masks.Secrets, w frameWatch) (whole []int, transition bool) {
	for _, f := range sec.DocFrames {
		if t, err := transitionIn(s, proto.PageFrameID(f)); err != nil || t {
			return nil, true
		}
	}
	for i, watch := range w.placed {
		for _, ws := range watch {
			// Its own frame first: what moves there, a view transition included.
			m, err := readMotion(ws.s, ws.s.target, nil)
			if err != nil || m.ViewTransition || watchTransition(ws.frames[1:], ws.s) {
				return nil, true
			}
			if (m.Moving > 0 || m.Layout) && !slices.Contains(whole, i) {
				whole = append(whole, i)
			}
		}
	}
	for _, ws := range w.clear {
		if watchTransition(ws.frames, ws.s) {
			return nil, true
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
// secrets a read placed (fw.placed, and the frames read into inside them).
func addFramesWork(w work, fw frameWatch) (work, error) {
	for _, watch := range fw.placed {
		for _, f := range watch {
			cw, err := readWork(f.s)
			if err != nil {
				return work{}, err
			}
			w = work{w.script + cw.script, w.layout + cw.layout, w.style + cw.style}
		}
	}
	return w, nil
}
