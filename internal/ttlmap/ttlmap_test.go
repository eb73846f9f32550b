package ttlmap

import (
	"testing"
	"time"
)

func TestMapExpiresAndStaysBounded(t *testing.T) {
	var m Map[int, string]
	t0 := time.Unix(1_700_000_000, 0)
	m.Put(1, "a", t0.Add(time.Second), t0, 4)
	if v, ok := m.Get(1, t0.Add(time.Second)); !ok || v != "a" {
		t.Fatalf("Get at the expiry = %q, %v", v, ok)
	}
	if _, ok := m.Get(1, t0.Add(time.Second+1)); ok {
		t.Fatal("Get after the expiry found the entry")
	}
	m.Delete(1)
	if m.Len() != 0 {
		t.Fatalf("Len after Delete = %d", m.Len())
	}
	// Full of live entries: a new key starts over, keeps itself, never exceeds max.
	for i := range 4 {
		m.Put(i, "live", t0.Add(time.Hour), t0, 4)
	}
	m.Put(9, "new", t0.Add(time.Hour), t0, 4)
	if v, ok := m.Get(9, t0); !ok || v != "new" || m.Len() > 4 {
		t.Fatalf("after a new key in a full map: %q %v, %d held", v, ok, m.Len())
	}
	// Half expired: only those go.
	var h Map[int, string]
	h.Put(0, "old", t0, t0, 4)
	h.Put(1, "old", t0, t0, 4)
	h.Put(2, "live", t0.Add(time.Hour), t0, 4)
	h.Put(3, "live", t0.Add(time.Hour), t0, 4)
	h.Put(4, "new", t0.Add(time.Hour), t0.Add(time.Minute), 4)
	if h.Len() != 3 {
		t.Fatalf("%d held, want the two live ones and the new one", h.Len())
	}
	for _, k := range []int{2, 3, 4} {
		if _, ok := h.Get(k, t0.Add(time.Minute)); !ok {
			t.Fatalf("key %d dropped", k)
		}
	}
}
