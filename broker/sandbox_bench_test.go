package broker

import (
	"context"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"
)

// BenchmarkSandbox measures the broker's capture (tabPage: the capture sequence of
// section 1 of BENCHMARKS.md with the masks' reads) on Chromium in its sandbox (the
// shared Chromium) against the same Chromium started with --no-sandbox
// (AGENTFY_CHROMIUM_SANDBOX=off), both over the pipe, both as the same user, each with
// the demo site's home page open in a window by a broker of its own, the two
// alternating within one run (alternate). It reports the p50 and p99 of each and their
// ratios sandboxed/unsandboxed.
func BenchmarkSandbox(b *testing.B) {
	ctx, cancel := context.WithTimeout(b.Context(), DefaultLaunchTimeout)
	defer cancel()
	open, err := LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(b), Leakless: true, NoSandbox: true, Egress: testLoopback}, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = open.Close(context.Background()) })
	page := demoSite(b).URL + "/"
	type side struct {
		broker  *testBroker
		target  proto.TargetTargetID
		session cdpSession
	}
	sides := []*side{
		{broker: newTestBroker(b, nil, func(c *Config) { c.MinCaptureInterval = 0 })},
		{broker: newTestBrokerOn(b, open.Browser, nil, func(c *Config) { c.MinCaptureInterval = 0 })},
	}
	for _, s := range sides {
		s.target = proto.TargetTargetID(s.broker.open(b, page).TabID)
		if s.session, err = s.broker.session(b.Context(), s.target); err != nil {
			b.Fatal(err)
		}
	}
	run := func(s *side) func() {
		return func() {
			if _, err := tabPage(b.Context(), s.session, s.target, time.Now(), s.broker.mask); err != nil {
				b.Fatal(err)
			}
		}
	}
	sandboxed, unsandboxed := run(sides[0]), run(sides[1])
	sandboxed() // warm both
	unsandboxed()
	in, out := alternate(b, sandboxed, unsandboxed)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		p, n := quantile(in, q.q), quantile(out, q.q)
		b.ReportMetric(float64(p)/float64(time.Millisecond), "sandboxed-"+q.name+"-ms")
		b.ReportMetric(float64(n)/float64(time.Millisecond), "unsandboxed-"+q.name+"-ms")
		if n > 0 {
			b.ReportMetric(float64(p)/float64(n), "sandboxed/unsandboxed-"+q.name)
		}
	}
}
