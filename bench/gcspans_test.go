package bench

import (
	"testing"
	"time"
)

func TestGCSpansAndOverlap(t *testing.T) {
	started := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	trace := "{\"level\":\"warn\"}\n" +
		"gc 1 @1.000s 2%: 0.5+9+0.5 ms clock, 1.0+0.4/0.9/0.1+0.05 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 2 @2.000s 3%: 1+98+1 ms clock, 2+1/2/3+2 ms cpu, 8->9->4 MB, 9 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 3 @9.500s 3%: bad line\n"
	spans := gcSpans(trace, started)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2: %+v", len(spans), spans)
	}
	if got := spans[1].end.Sub(spans[1].start); got != 100*time.Millisecond {
		t.Fatalf("second cycle lasts %v, want 100ms", got)
	}
	if s := withoutGCTrace(trace); s != "{\"level\":\"warn\"}\n" {
		t.Fatalf("withoutGCTrace = %q", s)
	}
	at := func(ms int) time.Time { return started.Add(time.Duration(ms) * time.Millisecond) }
	frames := []frameSpan{
		{fired: at(995), latency: 10 * time.Millisecond},  // meets the first cycle
		{fired: at(1500), latency: 5 * time.Millisecond},  // clear
		{fired: at(2050), latency: 80 * time.Millisecond}, // meets the second, slowest
		{fired: at(3000), latency: 7 * time.Millisecond},  // clear
	}
	o := overlapGC(frames, spans, at(0), at(10000))
	if o.Cycles != 2 || o.Frames != 4 || o.Met != 2 || o.Slowest != 1 || o.SlowestMet != 1 {
		t.Fatalf("overlap = %+v", o)
	}
	if o.P99Met != 80*time.Millisecond || o.P99Clear != 7*time.Millisecond {
		t.Fatalf("p99 met %v, clear %v", o.P99Met, o.P99Clear)
	}
	if want := 0.011; o.Busy < want-1e-9 || o.Busy > want+1e-9 { // 110 ms of 10 s
		t.Fatalf("busy = %v, want %v", o.Busy, want)
	}
	// A window that cuts a cycle counts only its part.
	if o := overlapGC(nil, spans, at(2050), at(3050)); o.Busy < 0.05-1e-9 || o.Busy > 0.05+1e-9 || o.Cycles != 1 {
		t.Fatalf("cut window: %+v", o)
	}
}

func TestQuantileInterval(t *testing.T) {
	ds := make([]time.Duration, 600)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond // 600 … 1 ms, unsorted
	}
	low, high := quantileInterval(ds, 0.99)
	// n·q = 594, 1.96·√(594·0.01) ≈ 4.78: ranks 589 and 599.
	if low != 589*time.Millisecond || high != 599*time.Millisecond {
		t.Fatalf("p99 interval = [%v, %v], want [589ms, 599ms]", low, high)
	}
	// Few samples: the bounds are clamped to the largest.
	if low, high := quantileInterval(ds[:10], 0.99); low != 599*time.Millisecond || high != 600*time.Millisecond {
		t.Fatalf("10 samples (600 … 591 ms): [%v, %v], want [599ms, 600ms]", low, high)
	}
	if low, high := quantileInterval(nil, 0.99); low != 0 || high != 0 {
		t.Fatalf("no samples: [%v, %v]", low, high)
	}
}
