package wire_test

import (
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// Each hop's deadline, plus the margin its answer needs to travel back, fits inside the
// deadline of the hop that waits for it: the innermost failure's reason reaches the
// viewer instead of an outer timeout.
func TestBudgetNests(t *testing.T) {
	hops := wire.Budget()
	if len(hops) != 4 {
		t.Fatalf("budget has %d hops, want 4 (view, owner, worker, broker)", len(hops))
	}
	for i := 1; i < len(hops); i++ {
		outer, inner := hops[i-1], hops[i]
		if inner.Timeout <= 0 {
			t.Errorf("%s: deadline %s, want positive", inner.Name, inner.Timeout)
		}
		if inner.Timeout+wire.HopMargin > outer.Timeout {
			t.Errorf("%s (%s) + margin %s does not fit inside %s (%s)", inner.Name, inner.Timeout, wire.HopMargin, outer.Name, outer.Timeout)
		}
	}
}

// The broker's steps fit inside its capture.
func TestBudgetInsideHops(t *testing.T) {
	for _, step := range []struct {
		name         string
		inner, outer wire.Hop
	}{
		{"consume", wire.Hop{Name: "broker consume", Timeout: wire.BrokerConsumeTimeout}, wire.Hop{Name: "broker", Timeout: wire.BrokerCaptureTimeout}},
		{"capture", wire.Hop{Name: "broker capture", Timeout: wire.BrokerScreenshotTimeout}, wire.Hop{Name: "broker", Timeout: wire.BrokerCaptureTimeout}},
	} {
		if step.inner.Timeout >= step.outer.Timeout {
			t.Errorf("%s: %s (%s) does not fit inside %s (%s)", step.name, step.inner.Name, step.inner.Timeout, step.outer.Name, step.outer.Timeout)
		}
	}
}

// The SPEC's figures: 9 s for the requester, 8 s for the owner's waiter.
func TestBudgetKeepsTheSpec(t *testing.T) {
	if wire.ViewTimeout.Seconds() != 9 || wire.RelayTimeout.Seconds() != 8 {
		t.Fatalf("view %s, owner %s: the SPEC says 9 s and 8 s", wire.ViewTimeout, wire.RelayTimeout)
	}
}

// A frame's wait for the audit stream follows the view's: the whole request stays under
// ten seconds.
func TestBudgetHoldsTheAudit(t *testing.T) {
	if total := wire.ViewTimeout + wire.AuditTimeout + wire.HopMargin; wire.AuditTimeout <= 0 || total.Seconds() > 10 {
		t.Fatalf("view %s + audit %s + margin %s = %s, want at most 10 s", wire.ViewTimeout, wire.AuditTimeout, wire.HopMargin, total)
	}
}
