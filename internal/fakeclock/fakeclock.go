// Package fakeclock is a clock.Clock for tests: it advances only when something sleeps (or a
// test advances it), so tests never wait.
package fakeclock

import (
	"context"
	"sync"
	"time"
)

// Clock advances only when something sleeps or a test advances it.
// It records every sleep, and fires AfterFunc timers as it passes their deadlines.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool
}

// New returns a clock at a fixed instant.
func New() *Clock {
	return &Clock{now: time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)}
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	now := c.now.Add(time.Millisecond) // time moves a little at every look
	c.mu.Unlock()
	c.advanceTo(now)
	return now
}

func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	now := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(now)
	return nil
}

// Advance moves the clock forward by d, firing the timers it passes.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	now := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(now)
}

func (c *Clock) advanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []func()
	for _, tm := range c.timers {
		if !tm.done && !tm.at.After(c.now) {
			tm.done = true
			due = append(due, tm.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	tm := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, tm)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := !tm.done
		tm.done = true
		return stopped
	}
}

// Sleeps returns the durations slept so far, and forgets them.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sleeps
	c.sleeps = nil
	return s
}

// PendingTimers counts the AfterFunc timers neither fired nor stopped.
func (c *Clock) PendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}
