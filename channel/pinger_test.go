package channel

import (
	"context"
	"testing"
	"time"
)

// The ping queue gives each connection's ping once, at its time, earliest first; a
// connection that ended, or whose time moved since it was queued, is not pinged.
func TestDuePingsPopsWhatIsDue(t *testing.T) {
	h := &Hub{}
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixNano() }
	conn := func() (*Conn, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		return &Conn{ctx: ctx}, cancel
	}
	a, _ := conn()
	b, _ := conn()
	c, _ := conn()
	ended, end := conn()
	moved, _ := conn()
	h.schedulePing(c, at(3))
	h.schedulePing(a, at(1))
	h.schedulePing(b, at(2))
	h.schedulePing(ended, at(1))
	h.schedulePing(moved, at(1))
	end()
	moved.pingAt.Store(at(9)) // as if scheduled again elsewhere: the queued time is stale

	if due := h.duePings(t0); len(due) != 0 {
		t.Fatalf("nothing is due at t0, got %d", len(due))
	}
	due := h.duePings(t0.Add(2 * time.Second))
	if len(due) != 2 || due[0] != a || due[1] != b {
		t.Fatalf("due at +2s: %v, want a then b", due)
	}
	if a.pingAt.Load() != pingNever || b.pingAt.Load() != pingNever {
		t.Fatal("a ping given out is not marked as waiting for its pong")
	}
	if due := h.duePings(t0.Add(2 * time.Second)); len(due) != 0 {
		t.Fatalf("a ping was given twice: %v", due)
	}
	// After the pong, the next one.
	h.schedulePing(a, at(4))
	due = h.duePings(t0.Add(10 * time.Second))
	if len(due) != 2 || due[0] != c || due[1] != a {
		t.Fatalf("due at +10s: %v, want c then a", due)
	}
	if len(h.pings) != 0 {
		t.Fatalf("%d entries left, want none", len(h.pings))
	}
}
