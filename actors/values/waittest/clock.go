package waittest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when the test says so. Code that waits for
// time (a lease, a pause, an expiry) takes a `Now func() time.Time` that defaults
// to time.Now; a test passes Clock.Now and calls Advance where it would otherwise
// sleep until the time came. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
