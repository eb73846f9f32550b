package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"net/url"
	"slices"
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

// movingForm is the selector of the form of secrets every moving page holds, the one
// secret-appears inserts 700 ms after its load: the suite waits for it after navigating
// to a moving page (waitForForm).
const movingForm = "#signin"

// formWait bounds the wait for a moving page's form after the navigation.
const formWait = 5 * time.Second

// masksPage is one page of the privacy masks suite.
type masksPage struct {
	name, path string
	secrets    bool // every view must show at least one region masked, or none
	// moving marks a page of the demo site's testdata/site/moving: a filled sign-in
	// and payment form (three secrets) beside one kind of motion. It is viewed in fewer
	// pairs (benchOptions.masksMovingPairs), once its form is there.
	moving bool
	// leaves says the page's secrets leave the frame for a while (the dialog rests
	// outside the viewport): a view may then say masked 0, if its frame shows none of
	// the secrets' ink (checkNoSecret).
	leaves bool
}

// masksPages are the pages of the privacy masks suite, in the order it views them; the
// report names its rows after them. The moving pages are every page of
// testdata/site/moving but agent-types, whose fields are empty until a test types into
// them; they are named by their kind of motion.
var masksPages = []masksPage{
	{name: "view of a page with nothing to mask", path: benchPage},
	{name: "view of a page with masked fields", path: maskedPage, secrets: true},
	{name: "nothing moving", path: "/moving/still.html", secrets: true, moving: true},
	{name: "a clock updated by setInterval", path: "/moving/clock.html", secrets: true, moving: true},
	{name: "a search field typed into by script", path: "/moving/typing.html", secrets: true, moving: true},
	{name: "a CSS spinner", path: "/moving/spinner.html", secrets: true, moving: true},
	{name: "a carousel sliding every 1.5 s", path: "/moving/carousel.html", secrets: true, moving: true},
	{name: "a progress bar driven by requestAnimationFrame", path: "/moving/progress.html", secrets: true, moving: true},
	{name: "a chart drawn on a canvas every animation frame", path: "/moving/canvas.html", secrets: true, moving: true},
	{name: "a banner moved by script every animation frame", path: "/moving/banner.html", secrets: true, moving: true},
	{name: "the form itself floating by a CSS transform animation", path: "/moving/floating.html", secrets: true, moving: true},
	{name: "the form in a dialog sliding in and out", path: "/moving/dialog.html", secrets: true, moving: true, leaves: true},
	{name: "the page scrolling itself every animation frame", path: "/moving/scrolling.html", secrets: true, moving: true},
	{name: "the form moved by script every animation frame", path: "/moving/secret-moves.html", secrets: true, moving: true},
	{name: "the form appearing mid-animation", path: "/moving/secret-appears.html", secrets: true, moving: true},
}

// movingPages is how many of masksPages are moving pages.
func movingPages() int {
	n := 0
	for _, pg := range masksPages {
		if pg.moving {
			n++
		}
	}
	return n
}

// masksResult is the privacy masks suite: one row per page of masksPages.
type masksResult struct {
	Pages []maskPageResult `json:"pages"`
}

// maskPageResult is one page's views against the bare capture of the same tab.
type maskPageResult struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Moving bool   `json:"moving,omitempty"`
	Warm   int    `json:"warm"` // pairs after the navigation not counted
	Pairs  int    `json:"pairs"`
	View   dist   `json:"view"`  // HTTP request at replica A → decoded frame
	InCap  dist   `json:"inCap"` // the broker's own (masked) capture inside each view
	Bare   dist   `json:"bare"`  // the bare CDP capture sequence
	// ViewRatio is view p50 / bare p50; CaptureRatio is the broker's capture p50 / bare
	// p50, the cost of masking.
	ViewRatio    float64 `json:"viewRatio"`
	CaptureRatio float64 `json:"captureRatio"`
	// JPEGBytes is the median frame of the views; MaskedMin and MaskedMax bound the
	// masked counts they returned.
	JPEGBytes int `json:"jpegBytes"`
	MaskedMin int `json:"maskedMin"`
	MaskedMax int `json:"maskedMax"`
	// Whole counts the views whose frame the broker masked whole, by the reason the
	// page gave (its hidden, a wire.Hidden* value); Outside the views that said masked
	// 0 on a page whose secrets leave the frame (masksPage.leaves), none of their ink
	// in the frame.
	Whole   map[string]int `json:"whole,omitempty"`
	Outside int            `json:"outside,omitempty"`
}

// wholeViews is how many of the counted views were masked whole, for any reason.
func (r *maskPageResult) wholeViews() int {
	n := 0
	for _, c := range r.Whole {
		n += c
	}
	return n
}

// benchMasks measures the privacy masks on the session's tab, the one the broker views
// and the bare capture reads: for each page of masksPages it navigates the tab there
// (browser_play, as the demo agent does), waits for a moving page's form (waitForForm)
// and measures the page (measureMaskPage): warm and pairs pairs on `/` and the
// checkout, movingWarm and movingPairs on each moving page. It leaves the tab on
// benchPage.
func benchMasks(ctx context.Context, st *stack.Stack, bs *benchSession, v *viewer, a *stack.Replica, agentID string, warm, pairs, movingWarm, movingPairs int) (masksResult, error) {
	var r masksResult
	for _, pg := range masksPages {
		if err := navigate(ctx, st, bs, pg.path); err != nil {
			return masksResult{}, err
		}
		w, n := warm, pairs
		if pg.moving {
			w, n = movingWarm, movingPairs
			if err := waitForForm(ctx, bs); err != nil {
				return masksResult{}, fmt.Errorf("%s: %w", pg.path, err)
			}
		}
		res, err := measureMaskPage(ctx, bs, v, a, agentID, pg, w, n)
		if err != nil {
			return masksResult{}, fmt.Errorf("%s: %w", pg.path, err)
		}
		r.Pages = append(r.Pages, res)
	}
	// The suites after this one view the bench's page, as section 1 did.
	if err := navigate(ctx, st, bs, benchPage); err != nil {
		return masksResult{}, err
	}
	return r, nil
}

// measureMaskPage runs warm+pairs pairs of one view of agentID through replica a and
// one bare capture of the session's tab, which shows pg, each after an idle gap, the
// order flipping every pair; the first warm pairs are not counted. Every view, warm
// ones included, must pass checkMasked; otherwise it fails, so that a bench that
// measured the wrong thing prints no table. A view that says masked 0 on a page whose
// secrets leave the frame is also decoded, after its timing, and must show none of
// their ink (checkNoSecret).
func measureMaskPage(ctx context.Context, bs *benchSession, v *viewer, a *stack.Replica, agentID string, pg masksPage, warm, pairs int) (maskPageResult, error) {
	var views, inCaptures, bares []time.Duration
	var jpegs []int
	res := maskPageResult{Name: pg.name, Path: pg.path, Moving: pg.moving, Warm: warm, Pairs: pairs, MaskedMin: -1}
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
		if err := checkMasked(f, h, pg); err != nil {
			return err
		}
		outside := pg.leaves && f.masked == 0
		if outside {
			if err := checkNoSecret(f); err != nil {
				return fmt.Errorf("view of %s: masked 0: %w", pg.path, err)
			}
		}
		if !count {
			return nil
		}
		views, inCaptures, jpegs = append(views, d), append(inCaptures, h.capture), append(jpegs, len(f.jpeg))
		if res.MaskedMin < 0 || f.masked < res.MaskedMin {
			res.MaskedMin = f.masked
		}
		res.MaskedMax = max(res.MaskedMax, f.masked)
		if f.hidden != "" {
			if res.Whole == nil {
				res.Whole = map[string]int{}
			}
			res.Whole[f.hidden]++
		}
		if outside {
			res.Outside++
		}
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

// checkMasked checks one view of pg: the frame is of that page, the broker timed its
// capture, the view's masked count and hidden reason are the broker's, and the count is
// at least one on a page of secrets (a frame masked whole counts at least one too) and
// none on another. On a page whose secrets leave the frame, a view may say masked 0
// (measureMaskPage then checks its frame).
func checkMasked(f frame, h hopSample, pg masksPage) error {
	u, err := url.Parse(f.url)
	if err != nil || u.Path != pg.path {
		return fmt.Errorf("view: a frame of %q, not of %s", f.url, pg.path)
	}
	switch {
	case h.capture <= 0:
		return fmt.Errorf("view of %s: the broker's capture hook did not run", pg.path)
	case f.masked != h.masked:
		return fmt.Errorf("view of %s: masked %d, but the broker masked %d", pg.path, f.masked, h.masked)
	case f.hidden != h.hidden:
		return fmt.Errorf("view of %s: hidden %q, but the broker said %q", pg.path, f.hidden, h.hidden)
	case f.hidden != "" && !slices.Contains(wire.HiddenReasons, f.hidden):
		return fmt.Errorf("view of %s: hidden %q, not a reason of the contract", pg.path, f.hidden)
	case pg.secrets && f.masked < 1 && !pg.leaves:
		return fmt.Errorf("view of %s: masked %d, want at least 1", pg.path, f.masked)
	case !pg.secrets && (f.masked != 0 || f.hidden != ""):
		return fmt.Errorf("view of %s: masked %d (hidden %q), want none", pg.path, f.masked, f.hidden)
	}
	return nil
}

// inkControl is the moving pages' control in CSS pixels of the 1280-px-wide viewport
// (900,20 300×60), padded by 4 px for the JPEG's ringing. The pages draw their secrets,
// and nothing else but this control, which is never masked, in rgb(0, 200, 0).
var inkControl = image.Rect(896, 16, 1204, 84)

// isSecretInk reports whether a frame's pixel (16-bit channels, as image.Color gives
// them) is of the secrets' green once JPEG-coded: green above 140, red and blue below
// 110 of 255 (the bounds of reliability's leak check).
func isSecretInk(r, g, b uint32) bool { return g>>8 > 140 && r>>8 < 110 && b>>8 < 110 }

// checkNoSecret decodes a moving page's frame and fails when it shows a pixel of the
// secrets' green outside the control: a view that says masked 0 must be of a frame
// that holds no secret.
func checkNoSecret(f frame) error {
	img, err := jpeg.Decode(bytes.NewReader(f.jpeg))
	if err != nil {
		return err
	}
	b := img.Bounds()
	k := float64(b.Dx()) / 1280
	control := image.Rect(int(float64(inkControl.Min.X)*k), int(float64(inkControl.Min.Y)*k), int(float64(inkControl.Max.X)*k), int(float64(inkControl.Max.Y)*k))
	leaked := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if isSecretInk(r, g, bl) && !image.Pt(x, y).In(control) {
				leaked++
			}
		}
	}
	if leaked > 0 {
		return fmt.Errorf("%d pixels of a secret's green outside the control", leaked)
	}
	return nil
}

// waitForForm waits, at most formWait, until the session's tab holds the moving pages'
// form of secrets (movingForm): secret-appears inserts it 700 ms after its load, and a
// view before would have nothing to mask. It asks through the bench's own CDP session
// (bareCapture.holds), outside any timed part.
func waitForForm(ctx context.Context, bs *benchSession) error {
	ctx, cancel := context.WithTimeout(ctx, formWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := bs.bare.holds(ctx, movingForm)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", movingForm, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", movingForm, ctx.Err())
		case <-tick.C:
		}
	}
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
