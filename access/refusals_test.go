package access

import (
	"testing"
	"time"
)

func TestRefusalsExpireAndStayBounded(t *testing.T) {
	var r refusals
	has := func(k refusal, now time.Time) bool { _, ok := r.get(k, now); return ok }
	t0 := time.Unix(1_700_000_000, 0)
	k := refusal{"agent-a", "u1"}
	if has(k, t0) {
		t.Fatal("a refusal before any was added")
	}
	r.add(k, refused{generation: 3, known: true}, t0)
	if !has(k, t0.Add(RefusalTTL)) || has(k, t0.Add(RefusalTTL+time.Nanosecond)) {
		t.Fatal("a refusal must hold for RefusalTTL exactly")
	}
	if v, _ := r.get(k, t0); v != (refused{generation: 3, known: true}) {
		t.Fatalf("a refusal keeps the generation it was based on: %+v", v)
	}
	if has(refusal{"agent-a", "u2"}, t0) || has(refusal{"agent-b", "u1"}, t0) {
		t.Fatal("a refusal is for one agent and one user")
	}
	// Never above the bound, whatever the flood, and the newest is always kept.
	for i := range 3*MaxRefusals + 5 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		nk := refusal{"agent", string(rune('a'+i%26)) + time.Duration(i).String()}
		r.add(nk, refused{}, now)
		if r.Len() > MaxRefusals || !has(nk, now) {
			t.Fatalf("after %d refusals: %d held, newest held %v", i+1, r.Len(), has(nk, now))
		}
	}
}
