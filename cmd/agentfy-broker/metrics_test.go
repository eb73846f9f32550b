package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/wire"
)

// TestMaskedWholeByReason: a frame masked whole counts under its reason, every reason
// is there from the start at 0, and a frame masked in part counts as masked alone.
func TestMaskedWholeByReason(t *testing.T) {
	m := newCaptureMetrics(true)
	for _, why := range wire.HiddenReasons {
		if got := testutil.ToFloat64(m.whole.WithLabelValues(why)); got != 0 {
			t.Fatalf("%s starts at %v, want 0", why, got)
		}
	}
	m.record(broker.CaptureStats{Masked: 3})
	m.record(broker.CaptureStats{Masked: 3, Hidden: wire.HiddenMotion})
	m.record(broker.CaptureStats{Masked: 1, Hidden: wire.HiddenChanged})
	m.record(broker.CaptureStats{Masked: 1, Hidden: wire.HiddenChanged})
	want := map[string]float64{wire.HiddenMotion: 1, wire.HiddenChanged: 2, wire.HiddenViewTransition: 0, wire.HiddenInk: 0}
	for why, n := range want {
		if got := testutil.ToFloat64(m.whole.WithLabelValues(why)); got != n {
			t.Errorf("masked whole for %s: %v, want %v", why, got, n)
		}
	}
	if got := testutil.ToFloat64(m.masked); got != 4 {
		t.Errorf("masked frames: %v, want 4", got)
	}
}
