package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-rod/rod/lib/proto"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/wire"
)

// nullPage is the plaintext of a capture when no tab is open.
var nullPage = []byte("null")

// Capture answers one capture request with the wire body
// {"envelope":{...}}: it redeems requestID at the API, waits until at least
// Config.MinCaptureInterval has passed since the last capture, captures the
// selected tab (or seals null when there is none) and seals the page to the
// public key the API returned. The whole capture runs under
// Config.CaptureTimeout.
//
// It never waits for the tool queue and changes nothing in the browser: no
// activation, no DOM, no emulation, no tab order. The only script it runs is the
// read-only motion probe of motion.go, in the broker's own isolated worlds, which the
// page's scripts cannot see.
//
// It returns ErrBadRequestID, ErrBusy while another capture runs,
// ErrGrantRefused (and then captures nothing) and ErrCaptureFailed,
// which includes running out of time.
func (b *Broker) Capture(ctx context.Context, requestID string) ([]byte, error) {
	if !envelope.ValidRequestID(requestID) {
		return nil, ErrBadRequestID
	}
	select {
	case b.capturing <- struct{}{}:
		defer func() { <-b.capturing }()
	default:
		return nil, ErrBusy
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CaptureTimeout)
	defer cancel()

	consumeCtx, cancelConsume := context.WithTimeout(ctx, b.cfg.ConsumeTimeout)
	key, err := b.consume.Consume(consumeCtx, requestID)
	cancelConsume()
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}

	plaintext, err := b.capturePage(ctx)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	// {"envelope":{…}}
	body, err := envelope.SealJSON(b.rand, key, requestID, plaintext)
	if err != nil {
		return nil, fmt.Errorf("capture: seal: %w", err)
	}
	return body, nil
}

// log is the logger of ctx's request (its route and trace id), or the broker's own
// for a capture that comes from no request.
func (b *Broker) log(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &b.logger
}

// capturePage returns the plaintext of the capture: the selected tab's
// page as JSON, or null. The caller holds the capturing token.
func (b *Broker) capturePage(ctx context.Context) ([]byte, error) {
	if _, ok := b.tabs.Selected(); !ok {
		return nullPage, nil
	}
	if err := b.spaceCapture(ctx); err != nil {
		return nil, err
	}
	// Select again: a tab may have closed or opened during the wait.
	target, ok := b.tabs.Selected()
	if !ok {
		return nullPage, nil
	}
	id := proto.TargetTargetID(target)

	start := b.clock.Now()
	b.lastCapture = start
	captureCtx, cancel := context.WithTimeout(ctx, b.cfg.ScreenshotTimeout)
	defer cancel()
	page, err := b.captureTab(captureCtx, id, start)
	stats := CaptureStats{Duration: b.clock.Now().Sub(start), Failed: err != nil}
	if page != nil {
		stats.Bytes, stats.Masked, stats.Hidden = page.JPEGBytes(), page.Masked, page.Hidden
	}
	if b.cfg.OnCapture != nil {
		b.cfg.OnCapture(stats)
	}
	if err != nil {
		// A session that answered with an error may be gone; one that
		// timed out is fine and stays (a tab that does not paint would time
		// out again through a new one).
		if captureCtx.Err() == nil {
			b.forgetSession(ctx, id)
		}
		// CDP errors name methods and codes, never page content.
		b.log(ctx).Warn().Err(err).Dur("duration", stats.Duration).Msg("capture failed")
		return nil, fmt.Errorf("%w: %w", ErrCaptureFailed, err)
	}
	b.log(ctx).Debug().Dur("duration", stats.Duration).Int("bytes", stats.Bytes).Msg("captured")
	plaintext, err := json.Marshal(page)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCaptureFailed, err)
	}
	return plaintext, nil
}

// spaceCapture waits until Config.MinCaptureInterval has passed since the
// start of the last capture. A wait that cannot end before ctx's deadline
// fails at once with ErrCaptureFailed.
func (b *Broker) spaceCapture(ctx context.Context) error {
	if b.lastCapture.IsZero() || b.cfg.MinCaptureInterval <= 0 {
		return nil
	}
	wait := b.lastCapture.Add(b.cfg.MinCaptureInterval).Sub(b.clock.Now())
	if wait <= 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
		return fmt.Errorf("%w: the next capture is due after the deadline", ErrCaptureFailed)
	}
	select {
	case <-b.clock.After(wait):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrCaptureFailed, ctx.Err())
	}
}

// captureTab captures a tab through the capture's own session.
func (b *Broker) captureTab(ctx context.Context, id proto.TargetTargetID, at time.Time) (*wire.Page, error) {
	s, err := b.session(ctx, id)
	if err != nil {
		return nil, err
	}
	page, err := tabPage(ctx, s, id, at, b.mask)
	if err != nil {
		return nil, err
	}
	// A page controls its own URL (history.replaceState) and title: one longer than
	// the API accepts would make every view of the tab fail, so it hides nothing, it
	// is shortened. A URL Chromium does not report while the tab navigates is the
	// last one seen.
	page.URL = truncateUTF8(b.pageURL(id, page.URL), wire.MaxURLBytes)
	page.Title = truncateUTF8(page.Title, wire.MaxTitleBytes)
	return page, nil
}

// truncateUTF8 cuts s to at most n bytes on a character boundary, and replaces
// any invalid UTF-8 (which the API refuses).
func truncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
