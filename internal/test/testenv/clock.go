package testenv

import (
	"sync"
	"time"
)

// Clock is a fake clock that moves only when the test advances it, for code that takes
// its time as a func() time.Time or a Now/After pair (the session and credential
// stores, the worker hub, the JWKS verifier, the broker). It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time // guarded by mu
	timers chan Timer
}

// Timer is one wait the code under test asked a Clock for (After): it lasts D, and the
// test ends it by sending a time on C.
type Timer struct {
	D time.Duration
	C chan<- time.Time
}

// maxTimers bounds the waits a Clock holds for the test before After blocks.
const maxTimers = 8

// NewClock returns a Clock that reads now until it is advanced.
func NewClock(now time.Time) *Clock {
	return &Clock{now: now, timers: make(chan Timer, maxTimers)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// After hands a Timer of d to the test, on Timers, and returns the channel the test
// fires it on: a wait ends when the test says so, never by itself. It blocks while
// eight waits are unread.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.timers <- Timer{D: d, C: ch}
	return ch
}

// Timers delivers every wait asked for with After, in order.
func (c *Clock) Timers() <-chan Timer { return c.timers }
