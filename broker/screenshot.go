package broker

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/jpegmask"
	"github.com/agentfy/agentfy/broker/masks"
	"github.com/agentfy/agentfy/wire"
)

// screenshotData reads Page.captureScreenshot's result, {"data":"<base64>"}: the JPEG.
// It is read as it comes, with encoding/json/v2's decoder, rather than through
// req.Call, which decodes it with encoding/json's, six times slower on a frame's
// base64 (BENCHMARKS.md section 6). Members Chromium may add are ignored, as req.Call
// ignores them.
func screenshotData(raw []byte) ([]byte, error) {
	var res proto.PageCaptureScreenshotResult
	if err := jsonv2.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return res.Data, nil
}

// errNotJPEG is Chromium answering a capture with something that is not a
// complete JPEG.
var errNotJPEG = errors.New("capture is not a jpeg")

// errFrameTooLarge is a capture larger than wire.MaxFrameBytes.
var errFrameTooLarge = errors.New("capture is larger than the frame limit")

// cdpSession sends CDP commands to one attached target session under one
// context. It implements proto.Client, proto.Sessionable and
// proto.Contextable, so typed proto calls can use it without a rod Page,
// whose construction would enable domains and may emulate a device.
type cdpSession struct {
	ctx     context.Context
	browser *rod.Browser
	id      proto.TargetSessionID
	// tab is what the broker keeps of this session (motion.go); a session of a
	// test's own gets a fresh one.
	tab *tabState
	// target is the frame's target of a session on a frame of another process
	// (frames.go).
	target proto.TargetTargetID
	// input is the broker's input gate (pins.go); nil in a test's own session.
	input inputGate
}

// Call implements proto.Client.
func (s cdpSession) Call(ctx context.Context, sessionID, method string, params any) ([]byte, error) {
	return s.browser.Call(ctx, sessionID, method, params)
}

// GetSessionID implements proto.Sessionable.
func (s cdpSession) GetSessionID() proto.TargetSessionID { return s.id }

// GetContext implements proto.Contextable.
func (s cdpSession) GetContext() context.Context { return s.ctx }

// captureClip returns the screenshot clip for a CSS visual viewport and a
// device pixel ratio: the visible part of the page, at most wire.MaxFrameHeight
// CSS pixels tall, scaled so the image is at most wire.MaxFrameWidth pixels
// wide. The image never has more than one pixel per CSS pixel, whatever the
// device pixel ratio: so a frame is at most wire.MaxFrameHeight image pixels
// tall exactly when its clip is at most wire.MaxFrameHeight CSS pixels, which is
// what the API checks. It fails for an empty viewport.
func captureClip(vv *proto.PageVisualViewport, dpr float64) (*proto.PageViewport, error) {
	if vv == nil || !(vv.ClientWidth >= 1 && vv.ClientHeight >= 1) {
		return nil, errors.New("empty visual viewport")
	}
	if !(dpr > 0) || math.IsInf(dpr, 0) {
		dpr = 1
	}
	clip := &proto.PageViewport{
		X:      vv.PageX,
		Y:      vv.PageY,
		Width:  vv.ClientWidth,
		Height: min(vv.ClientHeight, wire.MaxFrameHeight),
		Scale:  1,
	}
	// The image has ClientWidth × Scale × dpr pixels across: Scale × dpr is the
	// image pixels per CSS pixel, at most 1, and less when the viewport is wider
	// than wire.MaxFrameWidth.
	clip.Scale = min(1, wire.MaxFrameWidth/vv.ClientWidth) / dpr
	return clip, nil
}

// devicePixelRatio derives the ratio of device to CSS pixels from the layout
// viewport, which pinch zoom does not change; 1 when it cannot.
func devicePixelRatio(m *proto.PageGetLayoutMetricsResult) float64 {
	if m.LayoutViewport == nil || m.CSSLayoutViewport == nil || m.CSSLayoutViewport.ClientWidth == 0 {
		return 1
	}
	return float64(m.LayoutViewport.ClientWidth) / float64(m.CSSLayoutViewport.ClientWidth)
}

// maskAttempts is how many times a masked capture reads the page before its
// screenshot when those reads disagree (beforeShot.unsteady); they take no screenshot.
// After the last, the capture goes on and masks its frame whole.
const maskAttempts = 3

// capture takes the read-only snapshot of a tab through an attached session, each CDP
// call under ctx; at stamps the page. Without mask it is exactly Target.getTargetInfo,
// Page.getLayoutMetrics and Page.captureScreenshot. With mask, the layout metrics and a
// DOM snapshot are read before the screenshot and again after it, and the secret
// regions are painted over (see captureMasked); the target's URL and title are read
// meanwhile.
func tabPage(ctx context.Context, s cdpSession, target proto.TargetTargetID, at time.Time, mask *masks.Rules) (*wire.Page, error) {
	s.ctx = ctx
	var (
		info *proto.TargetGetTargetInfoResult
		shot frame
		err  error
	)
	if mask == nil {
		info, err = (proto.TargetGetTargetInfo{TargetID: target}).Call(s.browser.Context(ctx))
		if err != nil {
			return nil, fmt.Errorf("get target info: %w", err)
		}
		metrics, err := proto.PageGetLayoutMetrics{}.Call(s)
		if err != nil {
			return nil, fmt.Errorf("get layout metrics: %w", err)
		}
		if shot, err = screenshot(ctx, s, metrics); err != nil {
			return nil, err
		}
	} else {
		// The browser answers getTargetInfo while the page answers the masks' reads.
		type infoResult struct {
			info *proto.TargetGetTargetInfoResult
			err  error
		}
		infoDone := make(chan infoResult, 1)
		go func() {
			info, err := proto.TargetGetTargetInfo{TargetID: target}.Call(s.browser.Context(ctx))
			infoDone <- infoResult{info, err}
		}()
		shot, err = captureMasked(ctx, s, target, *mask)
		got := <-infoDone
		if got.err != nil {
			return nil, fmt.Errorf("get target info: %w", got.err)
		}
		if err != nil {
			return nil, err
		}
		info = got.info
	}
	return &wire.Page{
		URL:         info.TargetInfo.URL,
		Title:       info.TargetInfo.Title,
		CapturedAt:  wire.FormatCapturedAt(at),
		ContentType: wire.ContentTypeJPEG,
		Data:        base64.StdEncoding.EncodeToString(shot.data),
		Masked:      shot.masked,
		Hidden:      shot.hidden,
	}, nil
}

// frame is a checked capture: the JPEG, how many regions it shows masked, and why it
// is masked whole when it is (a wire.Hidden* value).
type frame struct {
	data   []byte
	masked int
	hidden string
}

// screenshot captures the visual viewport the metrics describe and checks the JPEG.
func screenshot(ctx context.Context, s cdpSession, metrics *proto.PageGetLayoutMetricsResult) (frame, error) {
	return screenshotOf(ctx, s, metrics, false)
}

// screenshotOf is screenshot; pinned says the frame carries pins (pins.go), whose
// places are those of the viewport as Chromium paints it. A clip would paint the page
// where the metrics last saw it scrolled, which a page that scrolls by itself has since
// left, and the pins would not be over its secrets: so a pinned frame is the viewport
// itself, unclipped, trimmed of its scrollbars to what the clip would have been
// (pinViewport says when it can be).
func screenshotOf(ctx context.Context, s cdpSession, metrics *proto.PageGetLayoutMetricsResult, pinned bool) (frame, error) {
	clip, err := captureClip(metrics.CSSVisualViewport, devicePixelRatio(metrics))
	if err != nil {
		return frame{}, err
	}
	quality := CaptureQuality
	req := proto.PageCaptureScreenshot{
		Format:  proto.PageCaptureScreenshotFormatJpeg,
		Quality: &quality,
		Clip:    clip,
	}
	if pinned {
		req.Clip = nil
	}
	raw, err := s.Call(ctx, string(s.id), req.ProtoReq(), req)
	if err != nil {
		return frame{}, fmt.Errorf("capture screenshot: %w", err)
	}
	data, err := screenshotData(raw)
	if err != nil {
		return frame{}, fmt.Errorf("capture screenshot: %w", err)
	}
	if pinned {
		if data, err = jpegmask.Crop(data, int(clip.Width), int(clip.Height), CaptureQuality); err != nil {
			return frame{}, errNotJPEG
		}
	}
	return checkFrame(frame{data: data})
}

// pinViewport reports whether a frame of the viewport the metrics describe can be taken
// unclipped and trimmed to its clip (screenshotOf): one CSS pixel to an image pixel, no
// pinch zoom, a viewport of whole pixels that fits a frame.
func pinViewport(m *proto.PageGetLayoutMetricsResult) bool {
	vv := m.CSSVisualViewport
	if vv == nil || devicePixelRatio(m) != 1 {
		return false
	}
	whole := func(v float64) bool { return v == math.Trunc(v) }
	return vv.OffsetX == 0 && vv.OffsetY == 0 && vv.Scale == 1 && (vv.Zoom == nil || *vv.Zoom == 1) &&
		whole(vv.ClientWidth) && whole(vv.ClientHeight) &&
		vv.ClientWidth <= wire.MaxFrameWidth && vv.ClientHeight <= wire.MaxFrameHeight
}

// checkFrame refuses a frame the API would refuse, so it is never sealed and carried
// that far: larger than wire.MaxFrameBytes, or not the markers, header and size of a JPEG
// the requesting replica accepts (wire.CheckFrame).
func checkFrame(f frame) (frame, error) {
	if len(f.data) > wire.MaxFrameBytes {
		return frame{}, errFrameTooLarge
	}
	if wire.CheckFrame(f.data) != nil {
		return frame{}, errNotJPEG
	}
	return f, nil
}

// captureMasked captures the visual viewport with its secret regions painted over. It
// takes one screenshot, never more (SPEC §10).
//
// It reads the page before the screenshot (readBefore: the layout metrics and a DOM
// snapshot, M0 and S1, what moves, the work counters); those reads may be taken again,
// at most maskAttempts times, while they disagree with each other. While the screenshot
// is taken, Chromium paints a mask on each secret's element in the frame it captures
// (pins.go), when every secret of S1 can be so pinned. After the screenshot it reads the
// layout metrics and a snapshot again (M1, S2). When neither snapshot holds a secret
// anywhere in the document, the screenshot is sent as Chromium made it, not re-encoded.
// Otherwise:
//   - when the page did not move between the reads, the broker's masks cover every place
//     a secret could have been painted between them (placeAfter): where S1 was read when
//     the reads agree, the box spanning a secret's two places when it moved;
//   - when it moved, the pins are the masks, where the frame painted the secrets, if
//     they held every secret the frame could show (pinsHeld);
//   - otherwise the frame is masked whole, and says why (wire.Hidden*).
//
// No frame leaves with a secret unmasked. A failed or unreadable read fails the capture.
func captureMasked(ctx context.Context, s cdpSession, target proto.TargetTargetID, rules masks.Rules) (frame, error) {
	if s.tab == nil {
		s.tab = &tabState{}
	}
	frames := newFrameReader(s, rules)
	defer frames.close(ctx)
	var (
		b   beforeShot
		err error
	)
	for range maskAttempts {
		if b, err = readBefore(ctx, s, target, frames); err != nil {
			return frame{}, err
		}
		if !b.unsteady {
			break
		}
	}
	pinned, err := b.pin(ctx, s, target)
	if err != nil {
		return frame{}, err
	}
	shot, err := screenshotOf(ctx, s, b.metrics, pinned.unpin != nil)
	pinned.remove()
	if err != nil {
		return frame{}, err
	}
	m1, s2, _, err := readLayout(ctx, s, frames, 0)
	if err != nil {
		return frame{}, err
	}
	regions := max(len(b.sec.Regions), len(s2.Regions), 1)
	if b.gone {
		return maskWhole(shot, regions, wire.HiddenChanged)
	}
	changed, err := takeWatch(s)
	if err != nil {
		return frame{}, err
	}
	if changed {
		// What may be a secret entered or left the page: it may be in the frame and in
		// neither snapshot.
		return maskWhole(shot, regions, wire.HiddenChanged)
	}
	if b.moving.ViewTransition || b.transition {
		// A view transition paints images of the page as it was, which no snapshot
		// holds: a secret the page no longer has may be in them.
		return maskWhole(shot, regions, wire.HiddenViewTransition)
	}
	if len(b.sec.Regions) == 0 && len(s2.Regions) == 0 {
		return shot, nil
	}
	clip, err := captureClip(b.metrics.CSSVisualViewport, devicePixelRatio(b.metrics))
	if err != nil {
		return frame{}, err
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(shot.data))
	if err != nil {
		return frame{}, errNotJPEG
	}
	view := masks.Rect{X: clip.X, Y: clip.Y, W: clip.Width, H: clip.Height}
	if pinned.held(b, s2) {
		// The frame carries its masks where it painted the secrets, whether the page
		// moved or not: one look for a page's masks, frame after frame.
		_, shown1 := b.sec.Boxes(view, cfg.Width, cfg.Height)
		_, shown2 := s2.Boxes(view, cfg.Width, cfg.Height)
		shot.masked = max(shown1, shown2, 1)
		return shot, nil
	}
	sec, ok := masks.Secrets{}, false
	if !b.unsteady {
		if sec, ok, err = b.placeAfter(s, m1, s2); err != nil {
			return frame{}, err
		}
	}
	if !ok {
		return maskWhole(shot, regions, hiddenWhy(b, s2))
	}
	boxes, shown := sec.Boxes(view, cfg.Width, cfg.Height)
	if len(boxes) == 0 {
		return shot, nil
	}
	if sec.Whole {
		return maskWhole(shot, shown, wire.HiddenInk)
	}
	data, err := jpegmask.Paint(shot.data, boxes, CaptureQuality)
	if err != nil {
		return frame{}, maskError("paint", err)
	}
	return checkFrame(frame{data: data, masked: shown})
}

// hiddenWhy says why a frame whose masks could not be placed is masked whole: a secret
// appeared (S2 holds one S1 did not), a secret's ink cannot be placed, or the page
// moved in a way no mask followed.
func hiddenWhy(b beforeShot, s2 masks.Secrets) string {
	switch {
	case len(s2.Roots) > 0 && !b.sec.HoldsRoots(s2):
		return wire.HiddenChanged
	case b.sec.Whole || s2.Whole:
		return wire.HiddenInk
	default:
		return wire.HiddenMotion
	}
}

// pins are the masks Chromium painted in a capture's frame (pins.go), if any.
type pins struct {
	roots  []masks.Pin
	unpin  func()
	unhold func()
}

// pin pins every secret of b on the tab while its screenshot is taken, when b's
// secrets can all be pinned (masks.Secrets.Pins) and are few enough; none otherwise.
// The agent's mouse waits meanwhile.
func (b beforeShot) pin(ctx context.Context, s cdpSession, target proto.TargetTargetID) (pins, error) {
	roots, ok := b.sec.Pins()
	if !ok || len(roots) == 0 || len(roots) > maxWatchedRoots || b.gone || !pinViewport(b.metrics) {
		return pins{}, nil
	}
	plan := planPins(roots)
	if len(plan) > maxPins {
		return pins{}, nil
	}
	release, err := s.input.hold(ctx)
	if err != nil {
		return pins{}, maskError("hold the input", err)
	}
	unpin, ok, err := pin(ctx, s, target, plan)
	if err != nil || !ok {
		release()
		return pins{}, err
	}
	return pins{roots: roots, unpin: unpin, unhold: release}, nil
}

// remove takes the pins off the page and lets the agent's mouse go.
func (p pins) remove() {
	if p.unpin != nil {
		p.unpin()
		p.unhold()
	}
}

// held reports whether the pins masked every secret the frame could show: they were
// painted, what runs on the page changes no secret's ink (a shadow, a filter, a size
// that overflows), and every secret of S2 can be pinned and was (none appeared).
func (p pins) held(b beforeShot, s2 masks.Secrets) bool {
	if p.unpin == nil || b.moving.Ink {
		return false
	}
	roots2, ok := s2.Pins()
	if !ok {
		return false
	}
	for _, r := range roots2 {
		if !slices.ContainsFunc(p.roots, func(q masks.Pin) bool { return q.Backend == r.Backend }) {
			return false
		}
	}
	return true
}

// beforeShot is what a masked capture reads of the page before its screenshot.
type beforeShot struct {
	metrics *proto.PageGetLayoutMetricsResult // M0: the screenshot's clip is placed from it
	sec     masks.Secrets                     // S1
	// watch is what is watched in the frames of another process S1 read into.
	watch frameWatch
	// moving is what runs on the page (motion.go), with the secrets' elements when
	// something moves.
	moving motion
	// framesWhole are the frames whose secrets sec placed from their documents
	// (indices of its PlacedViews) to mask whole, and transition whether a view
	// transition runs in any frame (framesMotion).
	framesWhole []int
	transition  bool
	// work are the work counters of the page and of those frames (watch.placed), read
	// when sec holds a secret.
	work work
	// unsteady says the reads disagree: the page scrolled between the metrics and the
	// snapshot, or gone. The broker's own masks cannot be placed from them.
	unsteady bool
	// gone says a secret left the page, or a frame went away, between the reads: the
	// rest was not read.
	gone bool
}

// readBefore reads the page before a masked capture's screenshot: the layout metrics
// and a snapshot, what runs on the page (and, with a secret on it, whether that moves
// a secret), what moves in its frames, and the work counters. Reads that disagree are
// not an error: they come back unsteady, to be read again.
func readBefore(ctx context.Context, s cdpSession, target proto.TargetTargetID, frames *frameReader) (beforeShot, error) {
	m0, s1, w1, err := readLayout(ctx, s, frames, 0)
	if err != nil {
		return beforeShot{}, err
	}
	b := beforeShot{metrics: m0, sec: s1, watch: w1}
	secret := len(s1.Regions) > 0
	if secret && !scrolledAs(s1, m0) {
		// The page scrolls: the reads cannot place the broker's masks, but pins may.
		b.unsteady = true
	}
	if b.moving, err = readMotion(s, target, nil); err != nil {
		return beforeShot{}, err
	}
	// From here to the last snapshot, what enters or leaves the page is watched.
	err = startWatch(s, frames.rules, s1.Roots)
	if errors.Is(err, errSecretGone) {
		b.unsteady, b.gone = true, true
		return b, nil
	}
	if err != nil {
		return beforeShot{}, err
	}
	if (b.moving.Moving > 0 || b.moving.Layout) && secret {
		// Something moves or changes its subtree: does it hold a secret, or a secret it?
		b.moving, err = readMotion(s, target, s1.Roots)
		if errors.Is(err, errSecretGone) {
			b.unsteady, b.gone = true, true
			return b, nil
		}
		if err != nil {
			return beforeShot{}, err
		}
	}
	// What moves in the page's other frames and in those of another process.
	b.framesWhole, b.transition = framesMotion(s, s1, w1)
	if secret {
		if b.work, err = readWork(s); err != nil {
			return beforeShot{}, err
		}
		if b.work, err = addFramesWork(b.work, w1); err != nil {
			b.unsteady, b.gone = true, true // a frame went away
		}
	}
	return b, nil
}

// placeAfter decides where to mask a screenshot taken after the reads b and before the
// reads of the layout metrics m1 and the snapshot s2, reading the work counters again:
// ok is false when the secrets' places in it cannot be told, and the frame is masked
// whole. That is so when a secret appeared (b holds none: nothing placed it, or watched
// it move, before the screenshot); when a script or a layout ran while the screenshot
// was taken (it may have moved a secret and back), or a frame went away; when the page
// scrolled or resized between the reads; and when the two snapshots' secrets cannot be
// related (masks.Span). Otherwise the masks span the places of each secret in both
// snapshots, and motion decides what else is masked whole.
func (b beforeShot) placeAfter(s cdpSession, m1 *proto.PageGetLayoutMetricsResult, s2 masks.Secrets) (sec masks.Secrets, ok bool, err error) {
	if len(b.sec.Regions) == 0 {
		return masks.Secrets{}, false, nil
	}
	after, err := readWork(s)
	if err != nil {
		return masks.Secrets{}, false, err
	}
	if after, err = addFramesWork(after, b.watch); err != nil {
		return masks.Secrets{}, false, nil // a frame went away
	}
	if !b.work.quiet(after) || !sameViewport(b.metrics, m1) || !scrolledAs(s2, m1) {
		return masks.Secrets{}, false, nil
	}
	if sec, ok = masks.Span(b.sec, s2); !ok {
		return masks.Secrets{}, false, nil
	}
	if b.moving.whole() {
		// Something moves a secret, or may (a layout): the reads do not tell where.
		return masks.Secrets{}, false, nil
	}
	for _, i := range slices.Backward(b.framesWhole) {
		sec.MaskPlacedWhole(i)
	}
	return sec, true, nil
}

// maskWhole paints one mask over the whole of shot, counting n regions masked, for the
// reason why (a wire.Hidden* value).
func maskWhole(shot frame, n int, why string) (frame, error) {
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(shot.data))
	if err != nil {
		return frame{}, errNotJPEG
	}
	data, err := jpegmask.Paint(shot.data, []image.Rectangle{image.Rect(0, 0, cfg.Width, cfg.Height)}, CaptureQuality)
	if err != nil {
		return frame{}, maskError("paint", err)
	}
	return checkFrame(frame{data: data, masked: min(max(n, 1), wire.MaxMasked), hidden: why})
}

// snapshotRequest reads the DOM, its layout and the computed styles that paint ink
// outside a box (masks.ComputedStyles), and nothing else: no paint order, no
// rectangles beyond the layout's bounds. Chromium runs no script of the page for it and
// changes nothing in it (it brings the layout up to date, as a paint would).
// DOMSnapshot.enable is never called: no events follow.
var snapshotRequest = proto.DOMSnapshotCaptureSnapshot{ComputedStyles: masks.ComputedStyles()}

// readLayout reads the layout metrics and a DOM snapshot at once (two commands in
// flight on the session, answered in order by the page) and finds the snapshot's
// secrets, reading into its frames of another process (frames.go) at depth (0: the
// tab's document); it returns what to watch in those frames too.
func readLayout(ctx context.Context, s cdpSession, frames *frameReader, depth int) (*proto.PageGetLayoutMetricsResult, masks.Secrets, frameWatch, error) {
	if depth == 0 {
		frames.read = 0
	}
	type snap struct {
		raw []byte
		err error
	}
	done := make(chan snap, 1)
	go func() {
		raw, err := s.Call(ctx, string(s.id), snapshotRequest.ProtoReq(), snapshotRequest)
		done <- snap{raw, err}
	}()
	metrics, err := proto.PageGetLayoutMetrics{}.Call(s)
	got := <-done
	if err != nil {
		return nil, masks.Secrets{}, frameWatch{}, fmt.Errorf("get layout metrics: %w", err)
	}
	if got.err != nil {
		return nil, masks.Secrets{}, frameWatch{}, maskError("capture snapshot", got.err)
	}
	sec, err := masks.Parse(got.raw, frames.rules)
	if err != nil {
		return nil, masks.Secrets{}, frameWatch{}, maskError("read snapshot", err)
	}
	sec, w := frames.see(ctx, s, sec, depth)
	return metrics, sec, w, nil
}

// sameViewport reports whether two reads of the layout metrics saw the same viewport
// at the same scroll position.
func sameViewport(a, b *proto.PageGetLayoutMetricsResult) bool {
	if a == nil || b == nil || a.CSSVisualViewport == nil || b.CSSVisualViewport == nil ||
		a.CSSLayoutViewport == nil || b.CSSLayoutViewport == nil {
		return false
	}
	va, vb := *a.CSSVisualViewport, *b.CSSVisualViewport
	va.Zoom, vb.Zoom = nil, nil
	return va == vb && *a.CSSLayoutViewport == *b.CSSLayoutViewport
}

// scrolledAs reports whether a snapshot's top document is scrolled where the layout
// metrics' visual viewport is (within a pixel: one reports the layout viewport in
// whole pixels).
func scrolledAs(s masks.Secrets, m *proto.PageGetLayoutMetricsResult) bool {
	vv := m.CSSVisualViewport
	if vv == nil {
		return false
	}
	return math.Abs(s.ScrollX-(vv.PageX-vv.OffsetX)) <= 1 && math.Abs(s.ScrollY-(vv.PageY-vv.OffsetY)) <= 1
}

// maskError wraps a failure of the masking reads.
func maskError(step string, err error) error {
	return fmt.Errorf("mask: %s: %w", step, err)
}
