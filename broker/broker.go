package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/broker/masks"
)

// startTimeout bounds the CDP calls New makes.
const startTimeout = 10 * time.Second

// Broker runs the browser tools and captures of one worker session on
// one Chromium. Make it with New and stop it with Shutdown; Chromium itself
// belongs to the caller.
type Broker struct {
	browser *rod.Browser
	consume *ConsumeClient
	cfg     Config
	// mask is what the captures mask; nil when Config.NoMask.
	mask   *masks.Rules
	logger zerolog.Logger
	clock  Clock
	rand   io.Reader // source of the envelope's randomness

	// browserContext is the off-the-record context every tab is made in: Chromium
	// keeps its history, cache and session state in memory, so no page URL, title or
	// content reaches the profile directory on disk.
	browserContext proto.BrowserBrowserContextID

	// tabs is the tab order; only tool operations and Chromium's events
	// change it, capture only reads it.
	tabs *tabOrder

	// toolSlots counts the accepted tool operations, waiting or running;
	// toolQueue carries them to runTools and has room for every slot.
	toolSlots chan struct{}
	toolQueue chan *toolOp

	// capturing holds a token while a capture runs.
	capturing chan struct{}
	// input is held by a capture while Chromium paints its pins, and by the tools
	// while they move the mouse (pins.go).
	input inputGate
	// lastCapture is when the last real capture started; guarded by the
	// capturing token.
	lastCapture time.Time

	mu sync.Mutex
	// sessions are the CDP sessions capture attached to tabs; guarded
	// by mu (the event loop forgets closed tabs).
	sessions map[proto.TargetTargetID]tabSession
	// lastURLs is the last non-empty URL a capture of each tab saw, for the
	// moment of a navigation when Chromium reports none; guarded by mu,
	// forgotten with the tab.
	lastURLs map[proto.TargetTargetID]string

	done       chan struct{} // closed by Shutdown
	stopEvents context.CancelFunc
	closeOnce  sync.Once
	wg         sync.WaitGroup
}

// New starts a broker on a connected browser, which should have been
// connected without a default device (see LaunchChromium). It adopts the
// page targets that already exist and follows the ones Chromium creates and
// destroys, including tabs that sites open themselves. consume redeems
// capture request ids. ctx bounds the start only.
func New(ctx context.Context, browser *rod.Browser, consume *ConsumeClient, cfg Config, logger zerolog.Logger, clock Clock) (*Broker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if browser == nil || consume == nil || clock == nil {
		return nil, fmt.Errorf("broker: nil browser, consume client or clock")
	}
	b := &Broker{
		browser:   browser,
		consume:   consume,
		cfg:       cfg,
		logger:    logger,
		clock:     clock,
		rand:      rand.Reader,
		tabs:      newTabOrder(),
		toolSlots: make(chan struct{}, cfg.ToolQueueSize),
		toolQueue: make(chan *toolOp, cfg.ToolQueueSize),
		capturing: make(chan struct{}, 1),
		input:     make(inputGate, 1),
		sessions:  make(map[proto.TargetTargetID]tabSession),
		lastURLs:  make(map[proto.TargetTargetID]string),
		done:      make(chan struct{}),
	}
	if !cfg.NoMask {
		rules := masks.NewRules(cfg.MaskAttributes, cfg.MaskClasses, cfg.ShowOpaqueFrames)
		b.mask = &rules
	}

	// Subscribe before listing, so that no tab falls between the two.
	evCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stopEvents = stop
	events := browser.Context(evCtx).Event()
	b.wg.Add(1)
	go b.followTargets(events)

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	bc, err := proto.TargetCreateBrowserContext{}.Call(browser.Context(ctx))
	if err != nil {
		b.Shutdown()
		return nil, fmt.Errorf("broker: create browser context: %w", err)
	}
	b.browserContext = bc.BrowserContextID
	targets, err := proto.TargetGetTargets{}.Call(browser.Context(ctx))
	if err != nil {
		b.Shutdown()
		return nil, fmt.Errorf("broker: list targets: %w", err)
	}
	for _, t := range targets.TargetInfos {
		if t.Type == proto.TargetTargetInfoTypePage {
			b.tabs.Opened(string(t.TargetID))
		}
	}

	b.wg.Add(1)
	go b.runTools()
	return b, nil
}

// Shutdown stops the tool queue and the event loop and waits for them.
// Calls waiting for a tool operation get ErrClosed. It leaves Chromium
// running; its owner closes it.
func (b *Broker) Shutdown() {
	b.closeOnce.Do(func() {
		close(b.done)
		b.stopEvents()
	})
	b.wg.Wait()
}

// followTargets keeps the tab order in step with Chromium's page targets.
func (b *Broker) followTargets(events <-chan *rod.Message) {
	defer b.wg.Done()
	for msg := range events {
		switch msg.Method {
		case "Target.targetCreated":
			var e proto.TargetTargetCreated
			if msg.Load(&e) && e.TargetInfo.Type == proto.TargetTargetInfoTypePage {
				b.tabs.Opened(string(e.TargetInfo.TargetID))
			}
		case "Target.targetDestroyed":
			var e proto.TargetTargetDestroyed
			if msg.Load(&e) {
				b.tabs.Closed(string(e.TargetID))
				b.forgetTab(e.TargetID)
			}
		case "Target.detachedFromTarget":
			var e proto.TargetDetachedFromTarget
			if msg.Load(&e) {
				b.forgetSessionID(e.SessionID)
			}
		}
	}
}

// session returns the capture's CDP session on a tab, attaching one
// under ctx if needed. It is a session of its own, on which no domain is
// ever enabled but the Performance counters, and no script runs but the
// masks' read of what moves, in an isolated world of its own (motion.go).
func (b *Broker) session(ctx context.Context, target proto.TargetTargetID) (cdpSession, error) {
	b.mu.Lock()
	o, ok := b.sessions[target]
	b.mu.Unlock()
	if !ok {
		res, err := proto.TargetAttachToTarget{TargetID: target, Flatten: true}.Call(b.browser.Context(ctx))
		if err != nil {
			return cdpSession{}, fmt.Errorf("attach to target: %w", err)
		}
		o = tabSession{id: res.SessionID, tab: &tabState{}}
		b.mu.Lock()
		b.sessions[target] = o
		b.mu.Unlock()
	}
	return cdpSession{ctx: ctx, browser: b.browser, id: o.id, tab: o.tab, input: b.input}, nil
}

// tabSession is capture's session on a tab and what it keeps of it. Its
// tabState is touched only by the one capture that runs at a time.
type tabSession struct {
	id  proto.TargetSessionID
	tab *tabState
}

// forgetSession forgets the capture session of a tab, so that the next
// capture attaches a fresh one.
func (b *Broker) forgetSession(ctx context.Context, target proto.TargetTargetID) {
	b.mu.Lock()
	o, ok := b.sessions[target]
	delete(b.sessions, target)
	b.mu.Unlock()
	if ok && len(o.tab.pins) > 0 {
		// Its pin sessions go with it (pins.go), all at once, each under a deadline of
		// its own.
		s := cdpSession{browser: b.browser}
		var wg sync.WaitGroup
		for _, id := range o.tab.pins {
			wg.Go(func() { detachSession(ctx, s, id) })
		}
		wg.Wait()
	}
}

// forgetTab forgets everything capture kept of a closed tab.
func (b *Broker) forgetTab(target proto.TargetTargetID) {
	b.mu.Lock()
	delete(b.sessions, target)
	delete(b.lastURLs, target)
	b.mu.Unlock()
}

// pageURL is the URL to report for a tab: the one a capture saw, remembered;
// or, when it saw none (mid-navigation), the last one remembered.
func (b *Broker) pageURL(target proto.TargetTargetID, seen string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seen == "" {
		return b.lastURLs[target]
	}
	b.lastURLs[target] = seen
	return seen
}

// forgetSessionID forgets a capture session Chromium detached.
func (b *Broker) forgetSessionID(id proto.TargetSessionID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for t, s := range b.sessions {
		if s.id == id {
			delete(b.sessions, t)
		}
	}
}
