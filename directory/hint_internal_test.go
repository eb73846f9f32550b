package directory

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var hintT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func hintAgent(i int) Agent {
	return Agent{ID: fmt.Sprintf("agent-%05d", i), Name: "A", TeamID: "t", OrgID: "o", Environment: "p"}
}

func (h *hints) size() int { return h.Len() }

func TestHintsGetPutExpiry(t *testing.T) {
	var h hints
	a := hintAgent(1)

	// The zero value is empty and usable.
	if got, ok := h.get(a.ID, hintT0); ok {
		t.Fatalf("empty hints gave %+v", got)
	}
	h.drop(a.ID)

	h.put(a, hintT0)
	for _, d := range []time.Duration{0, time.Second, HintTTL} {
		if got, ok := h.get(a.ID, hintT0.Add(d)); !ok || got != a {
			t.Fatalf("get at +%v = %+v, %v; want %+v", d, got, ok, a)
		}
	}
	if got, ok := h.get(a.ID, hintT0.Add(HintTTL+time.Nanosecond)); ok {
		t.Fatalf("get past HintTTL = %+v", got)
	}
	if got, ok := h.get("agent-other", hintT0); ok {
		t.Fatalf("get of another id = %+v", got)
	}

	// A later put refreshes both the record and the deadline.
	moved := a
	moved.TeamID = "t2"
	h.put(moved, hintT0.Add(HintTTL/2))
	if got, ok := h.get(a.ID, hintT0.Add(HintTTL+time.Second)); !ok || got != moved {
		t.Fatalf("get after a refresh = %+v, %v; want %+v", got, ok, moved)
	}
	if got, ok := h.get(a.ID, hintT0.Add(HintTTL/2+HintTTL+time.Nanosecond)); ok {
		t.Fatalf("get past the refreshed deadline = %+v", got)
	}

	// drop removes one hint only.
	b := hintAgent(2)
	h.put(b, hintT0)
	h.drop(a.ID)
	if got, ok := h.get(a.ID, hintT0); ok {
		t.Fatalf("get after drop = %+v", got)
	}
	if got, ok := h.get(b.ID, hintT0); !ok || got != b {
		t.Fatalf("drop removed another hint: %+v, %v", got, ok)
	}
	if n := h.size(); n != 1 {
		t.Fatalf("size = %d; want 1", n)
	}
}

func TestHintsBound(t *testing.T) {
	t.Run("full of live hints", func(t *testing.T) {
		var h hints
		for i := range MaxHints {
			h.put(hintAgent(i), hintT0)
		}
		if n := h.size(); n != MaxHints {
			t.Fatalf("size after MaxHints puts = %d", n)
		}
		// Refreshing a hint already held evicts nothing.
		h.put(hintAgent(0), hintT0.Add(time.Second))
		if n := h.size(); n != MaxHints {
			t.Fatalf("size after a refresh when full = %d; want %d", n, MaxHints)
		}
		// A new one, with nothing expired: the bound holds and the new one is kept.
		fresh := hintAgent(MaxHints)
		h.put(fresh, hintT0.Add(time.Second))
		if n := h.size(); n > MaxHints || n == 0 {
			t.Fatalf("size after one more = %d; want 1..%d", n, MaxHints)
		}
		if got, ok := h.get(fresh.ID, hintT0.Add(time.Second)); !ok || got != fresh {
			t.Fatalf("the newest hint = %+v, %v", got, ok)
		}
	})

	t.Run("full with expired hints", func(t *testing.T) {
		var h hints
		half := MaxHints / 2
		for i := range half {
			h.put(hintAgent(i), hintT0) // expire after hintT0+HintTTL
		}
		later := hintT0.Add(HintTTL / 2)
		for i := half; i < MaxHints; i++ {
			h.put(hintAgent(i), later)
		}
		now := hintT0.Add(HintTTL + time.Nanosecond)
		fresh := hintAgent(MaxHints)
		h.put(fresh, now)
		// The expired ones went; the live ones and the new one stay.
		if n, want := h.size(), MaxHints-half+1; n != want {
			t.Fatalf("size = %d; want %d", n, want)
		}
		for i := half; i < MaxHints; i++ {
			if _, ok := h.get(hintAgent(i).ID, now); !ok {
				t.Fatalf("live hint %d evicted", i)
			}
		}
		if got, ok := h.get(fresh.ID, now); !ok || got != fresh {
			t.Fatalf("the newest hint = %+v, %v", got, ok)
		}
	})

	t.Run("never above MaxHints", func(t *testing.T) {
		var h hints
		now := hintT0
		for i := range 3*MaxHints + 7 {
			// Time moves so that some hints expire along the way.
			now = now.Add(HintTTL / 1000)
			h.put(hintAgent(i), now)
			if n := h.size(); n > MaxHints {
				t.Fatalf("size = %d after %d puts", n, i+1)
			}
		}
	})
}

func agentRecord(a Agent) map[string]string {
	return map[string]string{"name": a.Name, "team": a.TeamID, "org": a.OrgID, "env": a.Environment}
}

func TestAgentFromKeepsHints(t *testing.T) {
	s := &Store{}
	a := hintAgent(1)
	got, err := s.agentFrom(a.ID, redis.NewMapStringStringResult(agentRecord(a), nil))
	if err != nil || got != a {
		t.Fatalf("agentFrom = %+v, %v; want %+v", got, err, a)
	}
	if h, ok := s.AgentHint(a.ID); !ok || h != a {
		t.Fatalf("hint after a read = %+v, %v", h, ok)
	}
	// A failed read neither answers nor touches the hint.
	if _, err := s.agentFrom(a.ID, redis.NewMapStringStringResult(nil, errors.New("boom"))); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("agentFrom with a Redis error = %v", err)
	}
	if h, ok := s.AgentHint(a.ID); !ok || h != a {
		t.Fatalf("hint after a failed read = %+v, %v", h, ok)
	}
	// A read that finds nothing drops it.
	if _, err := s.agentFrom(a.ID, redis.NewMapStringStringResult(map[string]string{}, nil)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("agentFrom of an empty record = %v", err)
	}
	if h, ok := s.AgentHint(a.ID); ok {
		t.Fatalf("hint after a read found nothing = %+v", h)
	}
}

func TestAgentFromHintsBounded(t *testing.T) {
	s := &Store{}
	for i := range MaxHints + 10 {
		a := hintAgent(i)
		if _, err := s.agentFrom(a.ID, redis.NewMapStringStringResult(agentRecord(a), nil)); err != nil {
			t.Fatal(err)
		}
		if got, ok := s.AgentHint(a.ID); !ok || got != a {
			t.Fatalf("AgentHint(%q) = %+v, %v", a.ID, got, ok)
		}
		if n := s.hints.size(); n > MaxHints {
			t.Fatalf("%d hints after %d reads", n, i+1)
		}
	}
}

func TestHintsConcurrent(t *testing.T) {
	var h hints
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				a := hintAgent(g*2000 + i)
				h.put(a, hintT0)
				if got, ok := h.get(a.ID, hintT0); ok && got.ID != a.ID {
					t.Errorf("get(%q) = %+v", a.ID, got)
				}
				if i%3 == 0 {
					h.drop(a.ID)
				}
			}
		})
	}
	wg.Wait()
	if n := h.size(); n > MaxHints {
		t.Fatalf("size = %d", n)
	}
}
