package broker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/input"
	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/egress"
)

// Tab is a tab as the browser tools report it.
type Tab struct {
	// TabID is the tab's CDP target id; it is never reused.
	TabID string `json:"tabId"`
	// URL is the tab's current URL.
	URL string `json:"url"`
	// Title is the tab's current title.
	Title string `json:"title"`
}

// resolveTimeout bounds the lookup of a tool URL's host name (checkEgress).
const resolveTimeout = 2 * time.Second

// Step actions of browser_play.
const (
	// ActionNavigate loads URL in the tab and waits for the load.
	ActionNavigate = "navigate"
	// ActionClick clicks the centre of the first element matching Selector.
	ActionClick = "click"
	// ActionType focuses the first element matching Selector and types Text.
	ActionType = "type"
	// ActionPress presses and releases Key.
	ActionPress = "press"
	// ActionScroll turns the mouse wheel by X and Y CSS pixels at the centre
	// of the viewport.
	ActionScroll = "scroll"
	// ActionWait waits MS milliseconds, at most MaxWaitStep.
	ActionWait = "wait"
)

// Step is one action of a browser_play call. Which fields an action uses is
// documented on its constant; other fields must be empty.
type Step struct {
	// Action is one of the Action constants.
	Action string `json:"action"`
	// URL is the page a navigate step loads: http, https or about:blank.
	URL string `json:"url,omitempty"`
	// Selector is the CSS selector of a click or type step's element.
	Selector string `json:"selector,omitempty"`
	// Text is what a type step types.
	Text string `json:"text,omitempty"`
	// Key is the key a press step presses, one of: Enter, Tab, Escape,
	// Backspace, Delete, Space, ArrowUp, ArrowDown, ArrowLeft, ArrowRight,
	// PageUp, PageDown, Home, End.
	Key string `json:"key,omitempty"`
	// X and Y are a scroll step's distances in CSS pixels, positive to the
	// right and down.
	X float64 `json:"x,omitempty"`
	Y float64 `json:"y,omitempty"`
	// MS is a wait step's duration in milliseconds.
	MS int64 `json:"ms,omitempty"`
}

// pressKeys are the key names a press step accepts.
var pressKeys = map[string]input.Key{
	"Enter":      input.Enter,
	"Tab":        input.Tab,
	"Escape":     input.Escape,
	"Backspace":  input.Backspace,
	"Delete":     input.Delete,
	"Space":      input.Space,
	"ArrowUp":    input.ArrowUp,
	"ArrowDown":  input.ArrowDown,
	"ArrowLeft":  input.ArrowLeft,
	"ArrowRight": input.ArrowRight,
	"PageUp":     input.PageUp,
	"PageDown":   input.PageDown,
	"Home":       input.Home,
	"End":        input.End,
}

// validateURL accepts http and https URLs with a host, and about:blank.
func validateURL(raw string) error {
	if len(raw) > MaxURLBytes {
		return fmt.Errorf("%w: longer than %d bytes", ErrBadURL, MaxURLBytes)
	}
	if raw == "about:blank" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ErrBadURL
	}
	return nil
}

// validateStep rejects an unknown action and fields out of their bounds or
// foreign to the action.
func validateStep(s Step) error {
	empty := func(fields ...bool) bool {
		for _, set := range fields {
			if set {
				return false
			}
		}
		return true
	}
	var ok bool
	switch s.Action {
	case ActionNavigate:
		if err := validateURL(s.URL); err != nil {
			return err
		}
		ok = empty(s.Selector != "", s.Text != "", s.Key != "", s.X != 0, s.Y != 0, s.MS != 0)
	case ActionClick:
		ok = s.Selector != "" && len(s.Selector) <= MaxSelectorBytes &&
			empty(s.URL != "", s.Text != "", s.Key != "", s.X != 0, s.Y != 0, s.MS != 0)
	case ActionType:
		ok = s.Selector != "" && len(s.Selector) <= MaxSelectorBytes && len(s.Text) <= MaxTextBytes &&
			empty(s.URL != "", s.Key != "", s.X != 0, s.Y != 0, s.MS != 0)
	case ActionPress:
		_, known := pressKeys[s.Key]
		ok = known && empty(s.URL != "", s.Selector != "", s.Text != "", s.X != 0, s.Y != 0, s.MS != 0)
	case ActionScroll:
		ok = (s.X != 0 || s.Y != 0) && abs(s.X) <= MaxScroll && abs(s.Y) <= MaxScroll &&
			empty(s.URL != "", s.Selector != "", s.Text != "", s.Key != "", s.MS != 0)
	case ActionWait:
		ok = s.MS > 0 && time.Duration(s.MS)*time.Millisecond <= MaxWaitStep &&
			empty(s.URL != "", s.Selector != "", s.Text != "", s.Key != "", s.X != 0, s.Y != 0)
	}
	if !ok {
		return ErrBadStep
	}
	return nil
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// toolOp is one tool operation in the queue.
type toolOp struct {
	ctx  context.Context // bounded by ToolTimeout from its arrival
	run  func(ctx context.Context) (any, error)
	done chan toolResult // buffered, receives exactly once
}

type toolResult struct {
	value any
	err   error
}

// runTool queues fn as a tool operation and waits for its result. The whole
// operation, its time in the queue included, runs under Config.ToolTimeout.
// A full queue is refused at once with ErrQueueFull.
func (b *Broker) runTool(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	select {
	case b.toolSlots <- struct{}{}:
	default:
		b.logger.Warn().Int("queue", cap(b.toolSlots)).Msg("tool queue full")
		return nil, ErrQueueFull
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ToolTimeout)
	defer cancel()
	op := &toolOp{ctx: ctx, run: fn, done: make(chan toolResult, 1)}
	// toolQueue has room for every slot, so this never blocks.
	b.toolQueue <- op
	select {
	case res := <-op.done:
		return res.value, res.err
	case <-b.done:
		return nil, ErrClosed
	}
}

// runTools runs queued tool operations one at a time until the broker closes.
func (b *Broker) runTools() {
	defer b.wg.Done()
	for {
		select {
		case <-b.done:
			return
		case op := <-b.toolQueue:
			var res toolResult
			if err := op.ctx.Err(); err != nil {
				res.err = toolError(op.ctx, err)
			} else {
				res.value, res.err = op.run(op.ctx)
				if res.err != nil {
					res.err = toolError(op.ctx, res.err)
				}
			}
			// Free the slot before answering, so that a caller who
			// sends its next call on the answer finds room.
			<-b.toolSlots
			op.done <- res
		}
	}
}

// toolError turns a failure under an expired operation deadline into
// ErrToolTimeout and keeps any other error.
func toolError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !isClientError(err) {
		return fmt.Errorf("%w: %w", ErrToolTimeout, err)
	}
	return err
}

// isClientError tells errors that are the caller's fault, whatever the time.
func isClientError(err error) bool {
	for _, e := range []error{ErrBadURL, ErrBadStep, ErrUnknownTab, ErrTooManyTabs} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// checkEgress refuses a URL whose host the agent's browser may not reach
// (Config.Egress), before Chromium sends a byte to it: an *egress.RefusedError, which
// is ErrRefusedAddress too. about:blank goes nowhere.
func (b *Broker) checkEgress(ctx context.Context, rawURL string) error {
	if rawURL == "about:blank" {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return ErrBadURL
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return ErrBadURL
		}
		port = uint16(n)
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	if err := b.cfg.Egress.Check(ctx, u.Hostname(), port); err != nil {
		if errors.Is(err, egress.ErrRefused) {
			return fmt.Errorf("%w: %w", ErrRefusedAddress, err)
		}
		return fmt.Errorf("%w: %w", ErrStepFailed, err)
	}
	return nil
}

// OpenTab opens url in a new tab in a new window and waits for it to load,
// at most Config.LoadTimeout; a page still loading then is returned as it
// is. It returns ErrBadURL, ErrRefusedAddress, ErrTooManyTabs, ErrQueueFull or
// ErrToolTimeout.
func (b *Broker) OpenTab(ctx context.Context, rawURL string) (Tab, error) {
	if err := validateURL(rawURL); err != nil {
		return Tab{}, err
	}
	if err := b.checkEgress(ctx, rawURL); err != nil {
		return Tab{}, fmt.Errorf("browser_open: %w", err)
	}
	v, err := b.runTool(ctx, func(ctx context.Context) (any, error) {
		if b.tabs.Len() >= b.cfg.MaxTabs {
			return nil, ErrTooManyTabs
		}
		// A window of its own: a background tab in headless Chromium does
		// not paint, so it could not be observed. The off-the-record context
		// keeps the page's traces off the disk.
		created, err := proto.TargetCreateTarget{URL: rawURL, NewWindow: true, BrowserContextID: b.browserContext}.Call(b.browser.Context(ctx))
		if err != nil {
			return nil, fmt.Errorf("create target: %w", err)
		}
		b.tabs.Opened(string(created.TargetID))
		// Attaching waits on the page (rod enables its Page domain, which the
		// renderer's main thread answers), so it has the load's time: a page whose
		// script never yields from its start answers nothing, and the tab is then
		// answered as the browser knows it, not at the tool's deadline.
		actx, cancel := context.WithTimeout(ctx, b.cfg.LoadTimeout)
		defer cancel()
		page, err := b.page(actx, created.TargetID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			b.logger.Debug().Msg("page did not answer its attach in time")
			return b.targetTab(ctx, created.TargetID)
		}
		b.waitLoad(ctx, page, rawURL)
		return b.tabInfo(ctx, page, created.TargetID)
	})
	if err != nil {
		return Tab{}, fmt.Errorf("browser_open: %w", err)
	}
	return v.(Tab), nil
}

// Play runs steps on a tab, one after the other, and records the tab as the
// one browser_play used most recently. It activates the tab first, as a
// person looks at the tab they work in. It returns ErrBadStep, ErrBadURL,
// ErrRefusedAddress, ErrUnknownTab, ErrStepFailed, ErrQueueFull or ErrToolTimeout.
func (b *Broker) Play(ctx context.Context, tabID string, steps []Step) (Tab, error) {
	if len(steps) > MaxSteps {
		return Tab{}, fmt.Errorf("browser_play: %w: more than %d steps", ErrBadStep, MaxSteps)
	}
	for i, s := range steps {
		if err := validateStep(s); err != nil {
			return Tab{}, fmt.Errorf("browser_play: step %d: %w", i, err)
		}
		if s.Action == ActionNavigate {
			if err := b.checkEgress(ctx, s.URL); err != nil {
				return Tab{}, fmt.Errorf("browser_play: step %d: %w", i, err)
			}
		}
	}
	v, err := b.runTool(ctx, func(ctx context.Context) (any, error) {
		id := proto.TargetTargetID(tabID)
		if !b.tabs.Played(tabID) {
			return nil, ErrUnknownTab
		}
		if err := (proto.TargetActivateTarget{TargetID: id}).Call(b.browser.Context(ctx)); err != nil {
			return nil, fmt.Errorf("activate target: %w", err)
		}
		page, err := b.page(ctx, id)
		if err != nil {
			return nil, err
		}
		for i, s := range steps {
			if err := b.step(ctx, page, s); err != nil {
				return nil, fmt.Errorf("step %d (%s): %w", i, s.Action, err)
			}
		}
		return b.tabInfo(ctx, page, id)
	})
	if err != nil {
		return Tab{}, fmt.Errorf("browser_play: %w", err)
	}
	return v.(Tab), nil
}

// Tabs lists the live tabs, oldest first. It returns ErrQueueFull or
// ErrToolTimeout.
func (b *Broker) Tabs(ctx context.Context) ([]Tab, error) {
	v, err := b.runTool(ctx, func(ctx context.Context) (any, error) {
		targets, err := proto.TargetGetTargets{}.Call(b.browser.Context(ctx))
		if err != nil {
			return nil, fmt.Errorf("get targets: %w", err)
		}
		byID := make(map[string]*proto.TargetTargetInfo, len(targets.TargetInfos))
		for _, t := range targets.TargetInfos {
			byID[string(t.TargetID)] = t
		}
		tabs := []Tab{}
		for _, id := range b.tabs.List() {
			if t, ok := byID[id]; ok {
				tabs = append(tabs, Tab{TabID: id, URL: t.URL, Title: t.Title})
			}
		}
		return tabs, nil
	})
	if err != nil {
		return nil, fmt.Errorf("browser_tabs: %w", err)
	}
	return v.([]Tab), nil
}

// CloseTab closes a tab and its window. It returns ErrUnknownTab, ErrQueueFull
// or ErrToolTimeout.
func (b *Broker) CloseTab(ctx context.Context, tabID string) error {
	_, err := b.runTool(ctx, func(ctx context.Context) (any, error) {
		if !b.tabs.Has(tabID) {
			return nil, ErrUnknownTab
		}
		res, err := proto.TargetCloseTarget{TargetID: proto.TargetTargetID(tabID)}.Call(b.browser.Context(ctx))
		if err != nil {
			return nil, fmt.Errorf("close target: %w", err)
		}
		if !res.Success {
			return nil, errors.New("close target: refused")
		}
		// Chromium reports the destruction too; forgetting it now makes the
		// next call see the close at once.
		b.tabs.Closed(tabID)
		b.forgetTab(proto.TargetTargetID(tabID))
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("browser_close: %w", err)
	}
	return nil
}

// tabInfo reads a tab's URL from Chromium and its title from the page: the
// browser learns a new title from the renderer a moment later, so right
// after a load or a step its target info may still show the old one. If the
// page cannot answer within titleWait (it is navigating, or its script never
// yields), the target info's title stands.
func (b *Broker) tabInfo(ctx context.Context, page *rod.Page, id proto.TargetTargetID) (Tab, error) {
	tab, err := b.targetTab(ctx, id)
	if err != nil {
		return Tab{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, titleWait)
	defer cancel()
	res, err := proto.RuntimeEvaluate{Expression: "document.title", ReturnByValue: true}.Call(page.Context(tctx))
	if err == nil && res.ExceptionDetails == nil && res.Result != nil && res.Result.Type == proto.RuntimeRemoteObjectTypeString {
		tab.Title = res.Result.Value.Str()
	}
	return tab, nil
}

// targetTab is a tab as the browser knows it (its target info), asking the page
// nothing.
func (b *Broker) targetTab(ctx context.Context, id proto.TargetTargetID) (Tab, error) {
	info, err := proto.TargetGetTargetInfo{TargetID: id}.Call(b.browser.Context(ctx))
	if err != nil {
		return Tab{}, fmt.Errorf("get target info: %w", err)
	}
	return Tab{TabID: string(id), URL: info.TargetInfo.URL, Title: info.TargetInfo.Title}, nil
}

// page returns rod's page for a tab of the tool path, under ctx. rod caches
// it; making it attaches a session and enables the Page domain, which
// changes nothing the agent or a viewer can see (the browser was connected
// without a default device, so nothing is emulated). rod makes that call
// without a deadline, so it runs aside and is abandoned when ctx ends.
func (b *Broker) page(ctx context.Context, id proto.TargetTargetID) (*rod.Page, error) {
	type result struct {
		page *rod.Page
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		p, err := b.browser.PageFromTarget(id)
		ch <- result{p, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("attach to tab: %w", r.err)
		}
		return r.page.Context(ctx), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("attach to tab: %w", ctx.Err())
	}
}

// loadPoll is the pause between two looks at a loading page.
const loadPoll = 25 * time.Millisecond

// titleWait bounds tabInfo's read of the page's title. A page whose script never
// yields answers nothing: without a bound, browser_open of a page that hangs right
// after its load waited for the tool's whole deadline, past the caller's (CI saw the
// reliability suite's hung page do it once).
const titleWait = time.Second

// waitLoad waits until the page's current document has loaded, at most
// Config.LoadTimeout; a page that is slow to load is not an error of the
// tool. A tab made with a URL starts on an initial about:blank document
// that is complete at once, so unless about:blank itself was asked for, that
// document does not count. It asks the page's main world directly rather
// than through rod's helpers, which would keep the initial document's
// context and fail as the navigation replaces it.
func (b *Broker) waitLoad(ctx context.Context, page *rod.Page, rawURL string) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.LoadTimeout)
	defer cancel()
	page = page.Context(ctx)
	expr := `document.readyState === "complete" && location.href !== "about:blank"`
	if rawURL == "about:blank" {
		expr = `document.readyState === "complete"`
	}
	for {
		res, err := proto.RuntimeEvaluate{Expression: expr, ReturnByValue: true}.Call(page)
		if err == nil && res.ExceptionDetails == nil && res.Result != nil && res.Result.Value.Bool() {
			return
		}
		select {
		case <-time.After(loadPoll):
		case <-ctx.Done():
			b.logger.Debug().Msg("page did not finish loading in time")
			return
		}
	}
}

// step performs one validated step on page.
func (b *Broker) step(ctx context.Context, page *rod.Page, s Step) error {
	page = page.Context(ctx)
	var err error
	switch s.Action {
	case ActionNavigate:
		if err = page.Navigate(s.URL); err == nil {
			b.waitLoad(ctx, page, s.URL)
		}
	case ActionClick:
		err = click(ctx, page, s.Selector, b.input)
	case ActionType:
		err = typeText(page, s.Selector, s.Text)
	case ActionPress:
		key := pressKeys[s.Key]
		if err = key.Encode(proto.InputDispatchKeyEventTypeKeyDown, 0).Call(page); err == nil {
			err = key.Encode(proto.InputDispatchKeyEventTypeKeyUp, 0).Call(page)
		}
	case ActionScroll:
		err = scroll(ctx, page, s.X, s.Y, b.input)
	case ActionWait:
		select {
		case <-b.clock.After(time.Duration(s.MS) * time.Millisecond):
		case <-ctx.Done():
			err = ctx.Err()
		}
	default:
		err = ErrBadStep
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrBadStep) {
		err = fmt.Errorf("%w: %w", ErrStepFailed, err)
	}
	return err
}

// Element helpers of rod (ScrollIntoView, Focus, Click, Input,
// WaitInteractable) wait for animation frames through a page that ignores
// the caller's context, so a page that does not paint would hold the tool
// queue forever. click and typeText use plain CDP calls under the page's
// context instead.

// interactionRetry is the pause between attempts to find where to click.
const interactionRetry = 100 * time.Millisecond

// click scrolls the first element matching selector into view and clicks
// the centre of its first box, once it has one, as a mouse would. It moves the mouse
// holding the input gate, so that no capture's pins are cleared by it (pins.go).
func click(ctx context.Context, page *rod.Page, selector string, gate inputGate) error {
	el, err := page.Element(selector)
	if err != nil {
		return err
	}
	var pt *proto.Point
	for {
		if err := (proto.DOMScrollIntoViewIfNeeded{ObjectID: el.Object.ObjectID}).Call(page); err != nil {
			return err
		}
		quads, err := proto.DOMGetContentQuads{ObjectID: el.Object.ObjectID}.Call(page)
		if err != nil {
			return err
		}
		if pt = quads.OnePointInside(); pt != nil {
			break
		}
		// Not laid out yet (or hidden): try again until the deadline.
		select {
		case <-time.After(interactionRetry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	release, err := gate.hold(ctx)
	if err != nil {
		return err
	}
	defer release()
	for _, ev := range []proto.InputDispatchMouseEvent{
		{Type: proto.InputDispatchMouseEventTypeMouseMoved, X: pt.X, Y: pt.Y},
		{Type: proto.InputDispatchMouseEventTypeMousePressed, X: pt.X, Y: pt.Y, Button: proto.InputMouseButtonLeft, ClickCount: 1},
		{Type: proto.InputDispatchMouseEventTypeMouseReleased, X: pt.X, Y: pt.Y, Button: proto.InputMouseButtonLeft, ClickCount: 1},
	} {
		if err := ev.Call(page); err != nil {
			return err
		}
	}
	return nil
}

// typeText focuses the first element matching selector and inserts text as
// a keyboard would, firing the page's input events.
func typeText(page *rod.Page, selector, text string) error {
	el, err := page.Element(selector)
	if err != nil {
		return err
	}
	if err := (proto.DOMScrollIntoViewIfNeeded{ObjectID: el.Object.ObjectID}).Call(page); err != nil {
		return err
	}
	if err := (proto.DOMFocus{ObjectID: el.Object.ObjectID}).Call(page); err != nil {
		return err
	}
	if text == "" {
		return nil
	}
	return proto.InputInsertText{Text: text}.Call(page)
}

// scroll turns the mouse wheel at the centre of the layout viewport, holding the input
// gate, and waits for two frames, so that the scroll is painted when the step ends.
func scroll(ctx context.Context, page *rod.Page, dx, dy float64, gate inputGate) error {
	m, err := proto.PageGetLayoutMetrics{}.Call(page)
	if err != nil {
		return err
	}
	x, y := 1.0, 1.0
	if lv := m.CSSLayoutViewport; lv != nil {
		x, y = float64(lv.ClientWidth)/2, float64(lv.ClientHeight)/2
	}
	release, err := gate.hold(ctx)
	if err != nil {
		return err
	}
	err = proto.InputDispatchMouseEvent{
		Type: proto.InputDispatchMouseEventTypeMouseWheel, X: x, Y: y, DeltaX: dx, DeltaY: dy,
	}.Call(page)
	release()
	if err != nil {
		return err
	}
	_, err = page.Eval(`() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`)
	return err
}
