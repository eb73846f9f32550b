package broker

import "time"

// Clock tells the time and makes timers. The broker takes one through its
// constructor so that tests can control the spacing of captures and the
// capturedAt stamp without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the [Clock] of the real world.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
