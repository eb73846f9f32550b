package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/broker/egress"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/wire"
)

// benchSession is a worker session whose broker is real (its own Chromium, the
// production broker.Broker, handler and consume client) but started by the bench rather
// than by stack.StartSession, so that the bench can time three hops from outside
// without touching the code it measures: the broker's /observe handler (wrapped), the
// consume call (a timing transport under the broker's own ConsumeClient) and the CDP
// capture (broker.Config.OnCapture). Capture spacing is off (MinCaptureInterval 0), as
// the benchmark needs back-to-back captures. On a stack with traces on, the broker
// traces as a session's broker would.
type benchSession struct {
	ss       *stack.Session
	chromium *broker.Chromium
	broker   *broker.Broker
	tabID    string
	bare     *bareCapture

	inner atomic.Pointer[http.Handler] // the broker's handler, once it exists

	mu  sync.Mutex
	hop hopSample // guarded by mu; one capture at a time
}

// hopSample is what the hooks saw of the last capture.
type hopSample struct {
	captureStart, captureEnd time.Time
	consume                  time.Duration
	capture                  time.Duration
	frameBytes               int
	masked                   int    // regions the broker's frame shows masked
	hidden                   string // why the broker masked its frame whole, if it did
	captureBody              int
}

// startBenchSession starts a session for agentID with its worker attached to replica
// number replica, launches Chromium and the broker, and opens one tab of path on the
// demo site.
func startBenchSession(ctx context.Context, st *stack.Stack, agentID string, replica int, chromium, path string, log zerolog.Logger) (_ *benchSession, err error) {
	bs := &benchSession{}
	defer func() {
		if err != nil {
			bs.Close(context.WithoutCancel(ctx))
		}
	}()
	// The socket exists before the worker says hello (so it advertises browserView);
	// until the broker runs, the handler answers 503.
	bs.ss, err = st.StartSession(ctx, agentID, stack.SessionOptions{
		Replica: replica, ImageTag: "browser-worker:bench", BrokerHandler: http.HandlerFunc(bs.serve),
	})
	if err != nil {
		return nil, fmt.Errorf("start session: %w", err)
	}
	// The demo site is on loopback, which the agent's browser may not reach unless
	// allowed.
	policy, err := egress.Policy{}.Allow(strings.TrimPrefix(st.Site, "http://"))
	if err != nil {
		return nil, err
	}
	bs.chromium, err = broker.LaunchChromium(ctx, broker.LaunchConfig{Bin: chromium, Leakless: true, Egress: policy}, log)
	if err != nil {
		return nil, err
	}
	// On a traced stack the broker traces as a session's broker does: a span for each
	// capture and for its consume call (nil, and no wrapper, when tracing is off).
	tp := st.BrokerTracerProvider()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	consume, err := broker.NewConsumeClient(&http.Client{Transport: broker.ConsumeTransport(tp, consumeTimer{bs: bs, next: tr})}, st.LB, bs.ss.Passes.Broker)
	if err != nil {
		return nil, err
	}
	cfg := broker.DefaultConfig()
	cfg.MinCaptureInterval = 0
	cfg.Egress = policy
	cfg.OnCapture = bs.onCapture
	cfg.Tracer = tp
	if bs.broker, err = broker.New(ctx, bs.chromium.Browser, consume, cfg, log, broker.SystemClock{}); err != nil {
		return nil, err
	}
	h := bs.broker.Handler()
	bs.inner.Store(&h)

	res, err := bs.ss.Tool(ctx, wire.ToolOpen, map[string]string{"url": st.Site + path})
	if err != nil {
		return nil, fmt.Errorf("open a tab: %w", err)
	}
	var tab struct {
		TabID string `json:"tabId"`
	}
	if err := json.Unmarshal(res, &tab); err != nil || tab.TabID == "" {
		return nil, fmt.Errorf("open a tab: no tab id in %s", res)
	}
	bs.tabID = tab.TabID
	if bs.bare, err = newBareCapture(ctx, bs.chromium.Browser, tab.TabID); err != nil {
		return nil, err
	}
	return bs, nil
}

// serve is the broker socket's handler: the broker's own, with /observe timed.
func (bs *benchSession) serve(w http.ResponseWriter, r *http.Request) {
	h := bs.inner.Load()
	if h == nil {
		http.Error(w, `{"error":{"code":"unavailable","message":"starting"}}`, http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path != wire.CapturePath {
		(*h).ServeHTTP(w, r)
		return
	}
	start := time.Now()
	cw := &countingWriter{ResponseWriter: w}
	(*h).ServeHTTP(cw, r)
	end := time.Now()
	bs.mu.Lock()
	bs.hop.captureStart, bs.hop.captureEnd, bs.hop.captureBody = start, end, cw.n
	bs.mu.Unlock()
}

func (bs *benchSession) onCapture(s broker.CaptureStats) {
	bs.mu.Lock()
	bs.hop.capture, bs.hop.frameBytes, bs.hop.masked, bs.hop.hidden = s.Duration, s.Bytes, s.Masked, s.Hidden
	bs.mu.Unlock()
}

// takeHop returns and clears what the hooks recorded since the last call.
func (bs *benchSession) takeHop() hopSample {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	h := bs.hop
	bs.hop = hopSample{}
	return h
}

// chromiumVersion is the product string Chromium reports over CDP.
func (bs *benchSession) chromiumVersion(ctx context.Context) string {
	v, err := proto.BrowserGetVersion{}.Call(bs.chromium.Browser.Context(ctx))
	if err != nil {
		return "unknown"
	}
	return v.Product
}

// Close stops the worker, the broker and Chromium.
func (bs *benchSession) Close(ctx context.Context) {
	if bs.bare != nil {
		bs.bare.Close(ctx)
	}
	if bs.ss != nil {
		bs.ss.Close()
	}
	if bs.broker != nil {
		bs.broker.Shutdown()
	}
	if bs.chromium != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = bs.chromium.Close(cctx)
	}
}

// consumeTimer times the broker's consume round trip (request written, response
// headers read; the body is a few dozen bytes already in the buffer).
type consumeTimer struct {
	bs   *benchSession
	next http.RoundTripper
}

func (t consumeTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	d := time.Since(start)
	t.bs.mu.Lock()
	t.bs.hop.consume = d
	t.bs.mu.Unlock()
	return resp, err
}

type countingWriter struct {
	http.ResponseWriter
	n int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += n
	return n, err
}

// bareCapture runs the broker's capture sequence on a tab directly over CDP, through a
// session of its own: Target.getTargetInfo, Page.getLayoutMetrics and
// Page.captureScreenshot (JPEG, quality 60, the visual viewport at most 2000 CSS px
// tall, scaled to at most 1280 px wide). Like the broker's, the sequence changes
// nothing: no activation, no emulation, no script. This is the physical limit of a
// view. (The session also answers holds, between a navigation and the first view.)
type bareCapture struct {
	browser *rod.Browser
	target  proto.TargetTargetID
	session proto.TargetSessionID
}

func newBareCapture(ctx context.Context, browser *rod.Browser, tabID string) (*bareCapture, error) {
	res, err := proto.TargetAttachToTarget{TargetID: proto.TargetTargetID(tabID), Flatten: true}.Call(browser.Context(ctx))
	if err != nil {
		return nil, fmt.Errorf("attach to the tab: %w", err)
	}
	return &bareCapture{browser: browser, target: proto.TargetTargetID(tabID), session: res.SessionID}, nil
}

// Capture runs the sequence once and returns the JPEG.
func (c *bareCapture) Capture(ctx context.Context) ([]byte, error) {
	s := cdpClient{ctx: ctx, browser: c.browser, id: c.session}
	if _, err := (proto.TargetGetTargetInfo{TargetID: c.target}).Call(c.browser.Context(ctx)); err != nil {
		return nil, err
	}
	m, err := proto.PageGetLayoutMetrics{}.Call(s)
	if err != nil {
		return nil, err
	}
	vv := m.CSSVisualViewport
	if vv == nil || vv.ClientWidth < 1 || vv.ClientHeight < 1 {
		return nil, errors.New("empty visual viewport")
	}
	dpr := 1.0
	if m.LayoutViewport != nil && m.CSSLayoutViewport != nil && m.CSSLayoutViewport.ClientWidth > 0 {
		dpr = float64(m.LayoutViewport.ClientWidth) / float64(m.CSSLayoutViewport.ClientWidth)
	}
	clip := &proto.PageViewport{X: vv.PageX, Y: vv.PageY, Width: vv.ClientWidth, Height: min(vv.ClientHeight, wire.MaxFrameHeight), Scale: 1}
	if w := vv.ClientWidth * dpr; w > wire.MaxFrameWidth {
		clip.Scale = wire.MaxFrameWidth / w
	}
	quality := broker.CaptureQuality
	shot, err := proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatJpeg, Quality: &quality, Clip: clip}.Call(s)
	if err != nil {
		return nil, err
	}
	if !isJPEG(shot.Data) {
		return nil, errors.New("bare capture is not a JPEG")
	}
	return shot.Data, nil
}

// bareCaptureTimeout bounds one bare capture.
const bareCaptureTimeout = 5 * time.Second

// timed waits an idle gap, then runs the sequence once and returns how long it took.
func (c *bareCapture) timed(ctx context.Context) (time.Duration, error) {
	if err := idleGap(ctx); err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, bareCaptureTimeout)
	defer cancel()
	t0 := time.Now()
	_, err := c.Capture(cctx)
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("bare capture: %w", err)
	}
	return d, nil
}

// holds reports whether the tab's document holds an element matching selector, by one
// Runtime.evaluate in the page's main world through the bench's own session. It is the
// only script the bench runs in a page; it reads and changes nothing, and it runs outside
// any timed part.
func (c *bareCapture) holds(ctx context.Context, selector string) (bool, error) {
	sel, err := json.Marshal(selector)
	if err != nil {
		return false, err
	}
	res, err := proto.RuntimeEvaluate{Expression: "document.querySelector(" + string(sel) + ") !== null", ReturnByValue: true}.Call(cdpClient{ctx: ctx, browser: c.browser, id: c.session})
	if err != nil {
		return false, err
	}
	if res.ExceptionDetails != nil {
		return false, fmt.Errorf("evaluate: %s", res.ExceptionDetails.Text)
	}
	return res.Result.Value.Bool(), nil
}

// Close detaches the bench's own session.
func (c *bareCapture) Close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = proto.TargetDetachFromTarget{SessionID: c.session}.Call(c.browser.Context(ctx))
}

// cdpClient sends typed proto calls to one attached session under one context, like the
// broker's own: no rod Page, whose construction would enable domains.
type cdpClient struct {
	ctx     context.Context
	browser *rod.Browser
	id      proto.TargetSessionID
}

func (c cdpClient) Call(ctx context.Context, sessionID, method string, params any) ([]byte, error) {
	return c.browser.Call(ctx, sessionID, method, params)
}
func (c cdpClient) GetSessionID() proto.TargetSessionID { return c.id }
func (c cdpClient) GetContext() context.Context         { return c.ctx }

func isJPEG(b []byte) bool {
	return len(b) >= 5 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF && b[len(b)-2] == 0xFF && b[len(b)-1] == 0xD9
}
