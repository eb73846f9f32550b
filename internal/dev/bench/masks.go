package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/wire"
)

// masksTarget is the bar for the privacy masks: on a page with nothing to mask,
// the broker's capture p50 within 1.10× of the bare capture p50 measured beside it.
const masksTarget = 1.10

// maskedPage is the demo site's page of secrets: 13 of them, 11 in the first
// 1280×800 viewport, each beside a control that looks alike.
const maskedPage = "/checkout.html"

// masksPages are the pages of the privacy masks suite, in the order it views them; the
// report names its rows after them.
var masksPages = []struct {
	name, path string
	secrets    bool // every view must show at least one region masked, or none
}{
	{"view of a page with nothing to mask", benchPage, false},
	{"view of a page with masked fields", maskedPage, true},
}

// masksResult is the privacy masks suite: one row per page of masksPages.
type masksResult struct {
	Pages []maskPageResult `json:"pages"`
}

// maskPageResult is one page's views against the bare capture of the same tab.
type maskPageResult struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Warm  int    `json:"warm"` // pairs after the navigation not counted
	Pairs int    `json:"pairs"`
	View  dist   `json:"view"`  // HTTP request at replica A → decoded frame
	InCap dist   `json:"inCap"` // the broker's own (masked) capture inside each view
	Bare  dist   `json:"bare"`  // the bare CDP capture sequence
	// ViewRatio is view p50 / bare p50; CaptureRatio is the broker's capture p50 / bare
	// p50, the cost of masking.
	ViewRatio    float64 `json:"viewRatio"`
	CaptureRatio float64 `json:"captureRatio"`
	// JPEGBytes is the median frame of the views; MaskedMin and MaskedMax bound the
	// masked counts they returned.
	JPEGBytes int `json:"jpegBytes"`
	MaskedMin int `json:"maskedMin"`
	MaskedMax int `json:"maskedMax"`
}

// benchMasks measures the privacy masks on the session's tab, the one the broker views
// and the bare capture reads: for each page of masksPages it navigates the tab there
// (browser_play, as the demo agent does) and measures it (measureMaskPage). It leaves
// the tab on benchPage.
func benchMasks(ctx context.Context, st *stack.Stack, bs *benchSession, v *viewer, a *stack.Replica, agentID string, warm, pairs int) (masksResult, error) {
	var r masksResult
	for _, pg := range masksPages {
		if err := navigate(ctx, st, bs, pg.path); err != nil {
			return masksResult{}, err
		}
		res, err := measureMaskPage(ctx, bs, v, a, agentID, pg.path, pg.secrets, warm, pairs)
		if err != nil {
			return masksResult{}, fmt.Errorf("%s: %w", pg.path, err)
		}
		res.Name = pg.name
		r.Pages = append(r.Pages, res)
	}
	// The suites after this one view the bench's page, as section 1 did.
	if err := navigate(ctx, st, bs, benchPage); err != nil {
		return masksResult{}, err
	}
	return r, nil
}

// measureMaskPage runs warm+pairs pairs of one view of agentID through replica a and
// one bare capture of the session's tab, which shows path, each after an idle gap, the
// order flipping every pair; the first warm pairs are not counted. Every view, warm
// ones included, must show path and say masked ≥ 1 when the page has secrets and
// nothing otherwise, with the count the broker reported (checkMasked); otherwise it
// fails, so that a bench that measured the wrong thing prints no table.
func measureMaskPage(ctx context.Context, bs *benchSession, v *viewer, a *stack.Replica, agentID, path string, secrets bool, warm, pairs int) (maskPageResult, error) {
	var views, inCaptures, bares []time.Duration
	var jpegs []int
	res := maskPageResult{Path: path, Warm: warm, Pairs: pairs, MaskedMin: -1}
	doView := func(count bool) error {
		if err := v.openGate(ctx, agentID); err != nil {
			return err
		}
		bs.takeHop()
		if err := idleGap(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		f, err := v.view(ctx, a.URL, agentID)
		d := time.Since(t0)
		if err != nil {
			return err
		}
		h := bs.takeHop()
		if err := checkMasked(f, h, path, secrets); err != nil {
			return err
		}
		if !count {
			return nil
		}
		views, inCaptures, jpegs = append(views, d), append(inCaptures, h.capture), append(jpegs, len(f.jpeg))
		if res.MaskedMin < 0 || f.masked < res.MaskedMin {
			res.MaskedMin = f.masked
		}
		res.MaskedMax = max(res.MaskedMax, f.masked)
		return nil
	}
	doBare := func(count bool) error {
		d, err := bs.bare.timed(ctx)
		if err == nil && count {
			bares = append(bares, d)
		}
		return err
	}
	for i := range warm + pairs {
		count := i >= warm
		if err := alternate(i, func() error { return doView(count) }, func() error { return doBare(count) }); err != nil {
			return maskPageResult{}, err
		}
	}
	res.View, res.InCap, res.Bare, res.JPEGBytes = summarize(views), summarize(inCaptures), summarize(bares), medianInt(jpegs)
	res.ViewRatio, res.CaptureRatio = ratio(res.View.P50, res.Bare.P50), ratio(res.InCap.P50, res.Bare.P50)
	return res, nil
}

// checkMasked checks one view of path: the frame is of that page, the broker timed its
// capture, the view's masked count is the broker's, and it is at least one on a page
// of secrets and none on another.
func checkMasked(f frame, h hopSample, path string, secrets bool) error {
	u, err := url.Parse(f.url)
	if err != nil || u.Path != path {
		return fmt.Errorf("view: a frame of %q, not of %s", f.url, path)
	}
	switch {
	case h.capture <= 0:
		return fmt.Errorf("view of %s: the broker's capture hook did not run", path)
	case f.masked != h.masked:
		return fmt.Errorf("view of %s: masked %d, but the broker masked %d", path, f.masked, h.masked)
	case secrets && f.masked < 1:
		return fmt.Errorf("view of %s: masked %d, want at least 1", path, f.masked)
	case !secrets && f.masked != 0:
		return fmt.Errorf("view of %s: masked %d, want none", path, f.masked)
	}
	return nil
}

// navigate loads path of the demo site in the session's tab with a browser_play
// navigate step, which also makes the tab the one the broker views.
func navigate(ctx context.Context, st *stack.Stack, bs *benchSession, path string) error {
	res, err := bs.ss.Tool(ctx, wire.ToolPlay, map[string]any{
		"tabId": bs.tabID,
		"steps": []map[string]any{{"action": "navigate", "url": st.Site + path}},
	})
	if err != nil {
		return fmt.Errorf("navigate to %s: %w", path, err)
	}
	var tab struct {
		TabID string `json:"tabId"`
		URL   string `json:"url"`
	}
	if err := json.Unmarshal(res, &tab); err != nil {
		return fmt.Errorf("navigate to %s: %w", path, err)
	}
	if u, err := url.Parse(tab.URL); err != nil || tab.TabID != bs.tabID || u.Path != path {
		return fmt.Errorf("navigate to %s: the tool answered %s", path, res)
	}
	return nil
}
