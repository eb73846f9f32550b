package broker

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/masks"
)

// BenchmarkCaptureVsBareCapture measures a whole capture through the
// unix socket (HTTP, consumption at a local endpoint, capture, JSON, seal),
// with no capture spacing, against the bare CDP capture sequence
// (getTargetInfo, getLayoutMetrics, captureScreenshot) on the same tab
// through a session of the benchmark's own. The two alternate within one
// run, so that both see the same machine; it reports both medians and their
// ratio.
func BenchmarkCaptureVsBareCapture(b *testing.B) {
	s := newSite(b)
	tb := newTestBroker(b, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	tab := tb.open(b, s.URL+"/text")
	sess := testSession(b, tab.TabID)
	target := proto.TargetTargetID(tab.TabID)
	quality := CaptureQuality

	bare := func() {
		if _, err := (proto.TargetGetTargetInfo{TargetID: target}).Call(sharedChromium(b).Browser.Context(b.Context())); err != nil {
			b.Fatal(err)
		}
		m, err := proto.PageGetLayoutMetrics{}.Call(sess)
		if err != nil {
			b.Fatal(err)
		}
		clip, err := captureClip(m.CSSVisualViewport, devicePixelRatio(m))
		if err != nil {
			b.Fatal(err)
		}
		shot, err := proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatJpeg, Quality: &quality, Clip: clip}.Call(sess)
		if err != nil || !isJPEG(shot.Data) {
			b.Fatalf("bare capture: %v", err)
		}
	}
	capture := func() {
		status, body, _, _ := tb.capture(b)
		if status != http.StatusOK {
			b.Fatalf("capture: %d %s", status, body)
		}
	}
	// Warm both paths: the broker's session attach, connections, JIT.
	capture()
	bare()

	captureTimes, bareTimes := alternate(b, capture, bare)
	obs, bar := median(captureTimes), median(bareTimes)
	b.ReportMetric(float64(obs.Microseconds())/1000, "capture-p50-ms")
	b.ReportMetric(float64(bar.Microseconds())/1000, "bare-p50-ms")
	if bar > 0 {
		b.ReportMetric(float64(obs)/float64(bar), "capture/bare")
	}
}

// alternate runs x and y once per benchmark iteration, flipping which goes first so
// that neither always follows the other, and returns the durations of each.
func alternate(b *testing.B, x, y func()) (xs, ys []time.Duration) {
	i := 0
	for b.Loop() {
		first, second := x, y
		firstTimes, secondTimes := &xs, &ys
		if i%2 == 1 {
			first, second = y, x
			firstTimes, secondTimes = &ys, &xs
		}
		i++
		start := time.Now()
		first()
		mid := time.Now()
		second()
		*firstTimes = append(*firstTimes, mid.Sub(start))
		*secondTimes = append(*secondTimes, time.Since(mid))
	}
	return xs, ys
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkMask measures the capture with masking against the capture without it, on
// the same tab, alternating within one run: a page of text with nothing to mask, and
// the demo site's checkout page with twelve secrets (ten in view). It reports both
// medians and their ratio.
func BenchmarkMask(b *testing.B) {
	for _, page := range []struct{ name, path string }{
		{"nothing-to-mask", "/text"},
		{"checkout", "/checkout.html"},
	} {
		b.Run(page.name, func(b *testing.B) {
			var url string
			if page.path == "/text" {
				url = newSite(b).URL + page.path
			} else {
				url = demoSite(b).URL + page.path
			}
			tb := newTestBroker(b, nil, func(c *Config) { c.MinCaptureInterval = 0 })
			tab := tb.open(b, url)
			target := proto.TargetTargetID(tab.TabID)
			s, err := tb.session(b.Context(), target)
			if err != nil {
				b.Fatal(err)
			}
			run := func(mask *masks.Rules) func() {
				return func() {
					if _, err := tabPage(b.Context(), s, target, time.Now(), mask); err != nil {
						b.Fatal(err)
					}
				}
			}
			masked, bare := run(tb.mask), run(nil)
			masked()
			bare()
			maskedTimes, bareTimes := alternate(b, masked, bare)
			m, bar := median(maskedTimes), median(bareTimes)
			b.ReportMetric(float64(m.Microseconds())/1000, "masked-p50-ms")
			b.ReportMetric(float64(bar.Microseconds())/1000, "bare-p50-ms")
			if bar > 0 {
				b.ReportMetric(float64(m)/float64(bar), "masked/bare")
			}
		})
	}
}
