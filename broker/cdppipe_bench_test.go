package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/launcher"
	"github.com/go-rod/rod/lib/launcher/flags"
	"github.com/go-rod/rod/lib/proto"
)

// launchOverPort starts Chromium as the broker did before its DevTools pipe: rod's
// launcher, the same switches and a private profile, DevTools on a port of loopback
// and a WebSocket to it. Any process of the machine could connect to that port; it
// is kept here only to measure the pipe against.
func launchOverPort(tb testing.TB) *rod.Browser {
	tb.Helper()
	profile := tb.TempDir()
	ctx, cancel := context.WithTimeout(tb.Context(), DefaultLaunchTimeout)
	defer cancel()
	l := launcher.New().Context(ctx)
	l.Flags = map[flags.Flag][]string{}
	l.Bin(chromiumBin(tb)).UserDataDir(profile).RemoteDebuggingPort(0)
	for _, f := range chromiumFlags {
		name, value, hasValue := strings.Cut(f, "=")
		if hasValue {
			l.Set(flags.Flag(name), value)
		} else {
			l.Set(flags.Flag(name))
		}
	}
	// rod's launcher cannot switch users: a root run goes without the sandbox, which
	// BenchmarkSandbox measures apart (within noise of the sandbox).
	if os.Geteuid() == 0 {
		l.Set("no-sandbox")
	}
	l.Env("HOME="+profile, "XDG_CONFIG_HOME="+filepath.Join(profile, ".config"), "XDG_CACHE_HOME="+filepath.Join(profile, ".cache"), "PATH="+os.Getenv("PATH"))
	u, err := l.Launch()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Kill(); l.Cleanup() })
	b := rod.New().ControlURL(u).NoDefaultDevice().Context(context.WithoutCancel(tb.Context()))
	if err := b.Connect(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = b.Context(ctx).Close()
	})
	return b
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// quantile is the nearest-rank q-quantile of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// BenchmarkCDPPipeVsSocket measures CDP over Chromium's pipe (LaunchChromium, the
// shared Chromium) against CDP over a WebSocket on a loopback port (launchOverPort,
// the broker's launch before the pipe): two Chromiums with the same switches, each
// with the demo site's home page (section 1 of BENCHMARKS.md) open in a window by a
// broker of its own, the two alternating within one run (see alternate). It
// measures a round trip alone (Browser.getVersion), the bare capture sequence of
// section 1 (getTargetInfo, getLayoutMetrics, captureScreenshot JPEG q60), and the
// broker's own capture with its masks' reads (capture), and reports the p50 and p99
// of each transport, the ratios pipe/socket, and the Go process's CPU per call.
func BenchmarkCDPPipeVsSocket(b *testing.B) {
	socket := launchOverPort(b)
	page := demoSite(b).URL + "/"
	onSocket := newTestBrokerOn(b, socket, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	onPipe := newTestBroker(b, nil, func(c *Config) { c.MinCaptureInterval = 0 })
	type side struct {
		broker  *testBroker
		browser *rod.Browser
		target  proto.TargetTargetID
		session cdpSession
	}
	sides := []*side{{broker: onPipe, browser: sharedChromium(b).Browser}, {broker: onSocket, browser: socket}}
	for _, s := range sides {
		s.target = proto.TargetTargetID(s.broker.open(b, page).TabID)
		var err error
		if s.session, err = s.broker.session(b.Context(), s.target); err != nil {
			b.Fatal(err)
		}
	}
	quality := CaptureQuality
	ops := []struct {
		name string
		unit time.Duration
		run  func(*side) error
	}{
		{"round-trip", time.Microsecond, func(s *side) error {
			_, err := proto.BrowserGetVersion{}.Call(s.browser.Context(b.Context()))
			return err
		}},
		{"bare-capture", time.Millisecond, func(s *side) error {
			if _, err := (proto.TargetGetTargetInfo{TargetID: s.target}).Call(s.browser.Context(b.Context())); err != nil {
				return err
			}
			m, err := proto.PageGetLayoutMetrics{}.Call(s.session)
			if err != nil {
				return err
			}
			clip, err := captureClip(m.CSSVisualViewport, devicePixelRatio(m))
			if err != nil {
				return err
			}
			_, err = proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatJpeg, Quality: &quality, Clip: clip}.Call(s.session)
			return err
		}},
		{"broker-capture", time.Millisecond, func(s *side) error {
			_, err := tabPage(b.Context(), s.session, s.target, time.Now(), s.broker.mask)
			return err
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			// The Go process's CPU during each side's calls: the transport's
			// own cost (rod's decoding is the same on both).
			var cpu [2]time.Duration
			run := func(i int) func() {
				return func() {
					before := processCPU(b)
					if err := op.run(sides[i]); err != nil {
						b.Fatal(err)
					}
					cpu[i] += processCPU(b) - before
				}
			}
			pipe, sock := run(0), run(1)
			pipe() // warm both
			sock()
			cpu = [2]time.Duration{}
			pipeTimes, sockTimes := alternate(b, pipe, sock)
			if n := len(pipeTimes); n > 0 {
				b.ReportMetric(float64(cpu[0].Microseconds())/float64(n), "pipe-cpu-us/op")
				b.ReportMetric(float64(cpu[1].Microseconds())/float64(n), "socket-cpu-us/op")
			}
			unit, suffix := float64(op.unit), map[time.Duration]string{time.Microsecond: "us", time.Millisecond: "ms"}[op.unit]
			for _, q := range []struct {
				name string
				q    float64
			}{{"p50", 0.5}, {"p99", 0.99}} {
				p, s := quantile(pipeTimes, q.q), quantile(sockTimes, q.q)
				b.ReportMetric(float64(p)/unit, "pipe-"+q.name+"-"+suffix)
				b.ReportMetric(float64(s)/unit, "socket-"+q.name+"-"+suffix)
				if s > 0 {
					b.ReportMetric(float64(p)/float64(s), "pipe/socket-"+q.name)
				}
			}
		})
	}
}
