// Package ttlmap is a small map whose entries expire, bounded in size: what a replica
// remembers for a moment to save a Redis round trip (directory hints, api refusals).
package ttlmap

import (
	"sync"
	"time"
)

// Map is safe for concurrent use; its zero value is empty and ready.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]entry[V] // guarded by mu
}

type entry[V any] struct {
	v     V
	until time.Time
}

// Get returns k's value while now is not after its expiry.
func (m *Map[K, V]) Get(k K, now time.Time) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[k]
	if !ok || now.After(e.until) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put stores v for k until until. A new key in a map of max entries first drops what
// expired, and unless that freed a quarter, everything (an entry forgotten costs its
// user one round trip), so that a full scan happens at most once per max/4 new keys.
func (m *Map[K, V]) Put(k K, v V, until, now time.Time, max int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[K]entry[V]{}
	}
	if _, ok := m.m[k]; !ok && len(m.m) >= max {
		for key, e := range m.m {
			if now.After(e.until) {
				delete(m.m, key)
			}
		}
		if len(m.m) > max*3/4 {
			clear(m.m)
		}
	}
	m.m[k] = entry[V]{v, until}
}

// Delete forgets k.
func (m *Map[K, V]) Delete(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

// Len is the number of entries held, expired or not.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
