package api

import (
	"testing"
	"time"
)

func TestRefusalsExpireAndStayBounded(t *testing.T) {
	var r refusals
	t0 := time.Unix(1_700_000_000, 0)
	k := refusal{"agent-a", "u1"}
	if r.has(k, t0) {
		t.Fatal("a refusal before any was added")
	}
	r.add(k, t0)
	if !r.has(k, t0.Add(RefusalTTL)) || r.has(k, t0.Add(RefusalTTL+time.Nanosecond)) {
		t.Fatal("a refusal must hold for RefusalTTL exactly")
	}
	if r.has(refusal{"agent-a", "u2"}, t0) || r.has(refusal{"agent-b", "u1"}, t0) {
		t.Fatal("a refusal is for one agent and one user")
	}
	// Never above the bound, whatever the flood, and the newest is always kept.
	for i := range 3*MaxRefusals + 5 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		nk := refusal{"agent", string(rune('a'+i%26)) + time.Duration(i).String()}
		r.add(nk, now)
		if r.Len() > MaxRefusals || !r.has(nk, now) {
			t.Fatalf("after %d refusals: %d held, newest held %v", i+1, r.Len(), r.has(nk, now))
		}
	}
}
