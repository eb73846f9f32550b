package broker

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/masks"
)

// Pins: masks Chromium paints in the very frame it captures. A page that runs a script
// or an animation every frame moves its secrets between any read and the screenshot,
// so no read tells where the screenshot painted them. DevTools' overlay does: a node
// highlighted through Overlay.highlightNode is painted by the renderer over the
// node's border box, in the paint of the frame being drawn, from that frame's own
// layout. The broker highlights each secret's root element in opaque grey while it takes
// the screenshot, so the frame carries its masks wherever the page moved its secrets
// (docs/privacy-masks.md, "Masks that follow motion").
//
// The overlay is drawn outside the page's DOM: no element, style or event of the page
// changes, its scripts cannot see it, and it is gone as soon as the screenshot is taken.
// The agent's own input cannot clear it mid-capture (a mouse move hides a highlight):
// the click and scroll tools wait for the input gate the capture holds meanwhile.
// Animations and scrolling run on the renderer's main thread (chromiumFlags), where the
// overlay is painted, so a compositor-thread animation cannot draw a secret where its
// highlight was not.
//
// One DevTools session highlights one node, and with it every match of a selector in
// its document: the broker pins every secret it can name by a unique id through one
// session, and each other through a session of its own; it keeps up to maxPins sessions
// on each tab. A page that would need more is masked from its reads alone.

// maxPins bounds the broker's pin sessions on a tab.
const maxPins = 16

// highlight is one node to highlight, by backend node id, with every element matching
// selector ("" for none) in its document.
type highlight struct {
	backend  int
	selector string
}

// planPins plans the highlights that pin every one of roots: the first root with a
// selector, with the others' selectors, and each root without one on its own.
func planPins(roots []masks.Pin) []highlight {
	var plan []highlight
	var selectors []string
	for _, r := range roots {
		switch {
		case r.Selector == "":
			plan = append(plan, highlight{backend: r.Backend})
		case selectors == nil:
			selectors = []string{}
			plan = append([]highlight{{backend: r.Backend}}, plan...)
		default:
			selectors = append(selectors, r.Selector)
		}
	}
	if len(selectors) > 0 {
		plan[0].selector = strings.Join(selectors, ", ")
	}
	return plan
}

// pinAlpha is the pins' opacity: opaque.
var pinAlpha = 1.0

// pinGrey is the pins' colour, the mask's darker grey (jpegmask).
var pinGrey = &proto.DOMRGBA{R: 0x3a, G: 0x3a, B: 0x3a, A: &pinAlpha}

// pinConfig paints a node's content, padding and border boxes in pinGrey, and nothing
// else: no tooltip, no rulers, no accessibility information.
var pinConfig = &proto.OverlayHighlightConfig{
	ContentColor: pinGrey, PaddingColor: pinGrey, BorderColor: pinGrey,
	ShowInfo: false, ShowRulers: false, ShowExtensionLines: false, ShowAccessibilityInfo: false,
}

// errPinGone is a pinned node the page no longer has.
var errPinGone = errors.New("a pinned secret left the page")

// inputGate keeps the agent's mouse out of a pinned screenshot: a masked capture holds
// it from its pins to their removal, and the click and scroll tools hold it while they
// dispatch mouse events. The zero (nil) gate holds nothing.
type inputGate chan struct{}

// hold waits for the gate until ctx ends, and returns its release.
func (g inputGate) hold(ctx context.Context) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	select {
	case g <- struct{}{}:
		return func() { <-g }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pinSessions returns n of the broker's sessions on the tab of s, for pins, attaching
// those it lacks (each with the DOM domain enabled, which the overlay needs).
func pinSessions(ctx context.Context, s cdpSession, target proto.TargetTargetID, n int) ([]cdpSession, error) {
	for len(s.tab.pins) < n {
		res, err := proto.TargetAttachToTarget{TargetID: target, Flatten: true}.Call(s.browser.Context(ctx))
		if err != nil {
			return nil, maskError("attach a pin", err)
		}
		p := cdpSession{ctx: ctx, browser: s.browser, id: res.SessionID, tab: s.tab}
		if err := (proto.DOMEnable{}).Call(p); err != nil {
			detachSession(ctx, s, res.SessionID)
			return nil, maskError("enable a pin", err)
		}
		if err := (proto.OverlayEnable{}).Call(p); err != nil {
			detachSession(ctx, s, res.SessionID)
			return nil, maskError("enable a pin", err)
		}
		s.tab.pins = append(s.tab.pins, res.SessionID)
	}
	out := make([]cdpSession, n)
	for i, id := range s.tab.pins[:n] {
		out[i] = cdpSession{ctx: ctx, browser: s.browser, id: id, tab: s.tab}
	}
	return out, nil
}

// pin makes the highlights of plan, each through a session of its own, all at once, and
// returns the function that removes them. ok is false when one could not be
// highlighted (it left the page): whatever was pinned is removed, and the capture is
// masked from its reads alone. An error is a session that failed.
func pin(ctx context.Context, s cdpSession, target proto.TargetTargetID, plan []highlight) (unpin func(), ok bool, err error) {
	sessions, err := pinSessions(ctx, s, target, len(plan))
	if err != nil {
		return nil, false, err
	}
	unpin = func() {
		// Under a deadline of its own: a capture that ran out of time still leaves no
		// highlight.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range sessions {
			wg.Go(func() {
				p.ctx = ctx
				_ = proto.OverlayHideHighlight{}.Call(p)
			})
		}
		wg.Wait()
	}
	errs := make([]error, len(plan))
	var wg sync.WaitGroup
	for i, p := range sessions {
		wg.Go(func() {
			err := proto.OverlayHighlightNode{
				HighlightConfig: pinConfig, BackendNodeID: proto.DOMBackendNodeID(plan[i].backend), Selector: plan[i].selector,
			}.Call(p)
			if err != nil {
				errs[i] = errPinGone
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e == nil {
			continue
		}
		unpin()
		if errors.Is(e, errPinGone) {
			return nil, false, nil
		}
		return nil, false, e
	}
	return unpin, true, nil
}

// detachSession detaches a session of the broker's under a deadline of its own.
func detachSession(ctx context.Context, s cdpSession, id proto.TargetSessionID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachTimeout)
	defer cancel()
	_ = proto.TargetDetachFromTarget{SessionID: id}.Call(s.browser.Context(ctx))
}
