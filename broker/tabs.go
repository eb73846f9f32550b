package broker

import (
	"slices"
	"sync"
)

// maxForgottenTabs bounds the memory of closed tab ids, kept so that a late
// report of an opening cannot resurrect a tab whose closing was seen first.
const maxForgottenTabs = 256

// tabOrder records which tabs exist, in the order they were opened, and which
// of them browser_play used, most recent last. It decides which tab an
// capture captures. Tab ids are CDP target ids, which Chromium never
// reuses. The zero value is not ready; use newTabOrder.
//
// Only tool operations and Chromium's target events change the order;
// capture only reads it.
type tabOrder struct {
	mu sync.Mutex
	// guarded by mu
	opened []string            // every live tab, oldest first
	played []string            // live tabs browser_play used, least recent first
	gone   map[string]struct{} // closed ids, at most maxForgottenTabs
	goneQ  []string            // gone in the order of closing, to bound it
}

func newTabOrder() *tabOrder {
	return &tabOrder{gone: make(map[string]struct{})}
}

// Opened records a new tab. It is idempotent, so the tool that opened a tab
// and the targetCreated event may both report it, in either order; a tab
// already reported closed is ignored.
func (o *tabOrder) Opened(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, closed := o.gone[id]; closed || slices.Contains(o.opened, id) {
		return
	}
	o.opened = append(o.opened, id)
}

// Played records that browser_play used a live tab, making it the most
// recently used one. It reports false for an unknown tab.
func (o *tabOrder) Played(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Contains(o.opened, id) {
		return false
	}
	o.played = slices.DeleteFunc(o.played, func(p string) bool { return p == id })
	o.played = append(o.played, id)
	return true
}

// Closed forgets a tab. It is idempotent.
func (o *tabOrder) Closed(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.opened = slices.DeleteFunc(o.opened, func(p string) bool { return p == id })
	o.played = slices.DeleteFunc(o.played, func(p string) bool { return p == id })
	if _, ok := o.gone[id]; ok {
		return
	}
	o.gone[id] = struct{}{}
	o.goneQ = append(o.goneQ, id)
	if len(o.goneQ) > maxForgottenTabs {
		delete(o.gone, o.goneQ[0])
		o.goneQ = o.goneQ[1:]
	}
}

// Has reports whether a tab is live.
func (o *tabOrder) Has(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.opened, id)
}

// Len returns the number of live tabs.
func (o *tabOrder) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.opened)
}

// Selected returns the tab a capture shows: the most recently used
// live tab that browser_play used; if none, the last opened live tab; if no
// tab lives, ok is false.
func (o *tabOrder) Selected() (id string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.played); n > 0 {
		return o.played[n-1], true
	}
	if n := len(o.opened); n > 0 {
		return o.opened[n-1], true
	}
	return "", false
}

// List returns the live tabs, oldest first.
func (o *tabOrder) List() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.opened)
}
