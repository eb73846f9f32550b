package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/wire"
)

// Page is the plaintext of an observation of a tab: exactly the fields the
// API validates, in this order.
type Page struct {
	// URL is the tab's URL, as Target.getTargetInfo reports it.
	URL string `json:"url"`
	// Title is the tab's title, as Target.getTargetInfo reports it.
	Title string `json:"title"`
	// CapturedAt is when the capture started (wire.FormatCapturedAt).
	CapturedAt string `json:"capturedAt"`
	// ContentType is always CaptureContentType.
	ContentType string `json:"contentType"`
	// Data is the JPEG; encoding/json writes it as standard base64.
	Data []byte `json:"data"`
	// text is Data as the capture delivered it, in canonical standard base64, when it
	// did (pageJSON copies it instead of encoding Data again).
	text []byte
}

// pageJSON is the plaintext of an observation: what json.Marshal(p) writes, with the
// frame's base64 copied from the capture when it has it.
func pageJSON(p *Page) ([]byte, error) {
	if p.text == nil {
		return json.Marshal(p)
	}
	head, err := json.Marshal(struct {
		URL         string `json:"url"`
		Title       string `json:"title"`
		CapturedAt  string `json:"capturedAt"`
		ContentType string `json:"contentType"`
	}{p.URL, p.Title, p.CapturedAt, p.ContentType})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(head)+len(p.text)+16)
	b = append(b, head[:len(head)-1]...)
	b = append(b, `,"data":"`...)
	b = append(b, p.text...)
	return append(b, `"}`...), nil
}

// screenshotData reads Page.captureScreenshot's result, {"data":"<base64>"}, in one
// pass: the JPEG, and its base64 text when that is canonical standard base64 (text is
// nil otherwise, and the JPEG comes from the strict decoder).
func screenshotData(raw []byte) (data, text []byte, err error) {
	i := wire.SkipSpace(raw, 0)
	if i < len(raw) && raw[i] == '{' {
		if key, j, ok := wire.PlainString(raw, wire.SkipSpace(raw, i+1)); ok && string(key) == "data" {
			if j = wire.SkipSpace(raw, j); j < len(raw) && raw[j] == ':' {
				if val, k, ok := wire.PlainString(raw, wire.SkipSpace(raw, j+1)); ok {
					if k = wire.SkipSpace(raw, k); k < len(raw) && raw[k] == '}' && wire.SkipSpace(raw, k+1) == len(raw) {
						data = make([]byte, base64.StdEncoding.DecodedLen(len(val)))
						if n, err := base64.StdEncoding.Strict().Decode(data, val); err == nil && n > 0 {
							return data[:n], val, nil
						}
					}
				}
			}
		}
	}
	var res proto.PageCaptureScreenshotResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, nil, err
	}
	return res.Data, nil, nil
}

// errNotJPEG is Chromium answering a capture with something that is not a
// complete JPEG.
var errNotJPEG = errors.New("capture is not a jpeg")

// errFrameTooLarge is a capture larger than MaxFrameBytes.
var errFrameTooLarge = errors.New("capture is larger than the frame limit")

// cdpSession sends CDP commands to one attached target session under one
// context. It implements proto.Client, proto.Sessionable and
// proto.Contextable, so typed proto calls can use it without a rod Page,
// whose construction would enable domains and may emulate a device.
type cdpSession struct {
	ctx     context.Context
	browser *rod.Browser
	id      proto.TargetSessionID
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
// device pixel ratio: the visible part of the page, at most MaxCaptureHeight
// CSS pixels tall, scaled so the image is at most MaxCaptureWidth pixels
// wide. The image never has more than one pixel per CSS pixel, whatever the
// device pixel ratio: so a frame is at most MaxCaptureHeight image pixels
// tall exactly when its clip is at most MaxCaptureHeight CSS pixels, which is
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
		Height: min(vv.ClientHeight, MaxCaptureHeight),
		Scale:  1,
	}
	// The image has ClientWidth × Scale × dpr pixels across: Scale × dpr is the
	// image pixels per CSS pixel, at most 1, and less when the viewport is wider
	// than MaxCaptureWidth.
	clip.Scale = min(1, MaxCaptureWidth/vv.ClientWidth) / dpr
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

// capture takes the read-only snapshot of a tab through an attached session:
// exactly Target.getTargetInfo, Page.getLayoutMetrics and
// Page.captureScreenshot, each under ctx. at stamps the page.
func capture(ctx context.Context, s cdpSession, target proto.TargetTargetID, at time.Time) (*Page, error) {
	s.ctx = ctx
	info, err := proto.TargetGetTargetInfo{TargetID: target}.Call(s.browser.Context(ctx))
	if err != nil {
		return nil, fmt.Errorf("get target info: %w", err)
	}
	metrics, err := proto.PageGetLayoutMetrics{}.Call(s)
	if err != nil {
		return nil, fmt.Errorf("get layout metrics: %w", err)
	}
	clip, err := captureClip(metrics.CSSVisualViewport, devicePixelRatio(metrics))
	if err != nil {
		return nil, err
	}
	quality := CaptureQuality
	req := proto.PageCaptureScreenshot{
		Format:  proto.PageCaptureScreenshotFormatJpeg,
		Quality: &quality,
		Clip:    clip,
	}
	// The result read as it comes (screenshotData), not through req.Call, which decodes
	// the whole message into a struct with encoding/json.
	raw, err := s.Call(ctx, string(s.id), req.ProtoReq(), req)
	if err != nil {
		return nil, fmt.Errorf("capture screenshot: %w", err)
	}
	data, text, err := screenshotData(raw)
	if err != nil {
		return nil, fmt.Errorf("capture screenshot: %w", err)
	}
	if len(data) > MaxFrameBytes {
		// The API would refuse it; do not seal and carry it that far.
		return nil, errFrameTooLarge
	}
	if wire.CheckFrame(data) != nil {
		// The same checks as the requesting replica's: markers, header, size.
		return nil, errNotJPEG
	}
	return &Page{
		URL:         info.TargetInfo.URL,
		Title:       info.TargetInfo.Title,
		CapturedAt:  wire.FormatCapturedAt(at),
		ContentType: CaptureContentType,
		Data:        data,
		text:        text,
	}, nil
}
