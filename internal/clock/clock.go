// Package clock provides the broker's time sources: the real clock and a
// fake one that tests advance by hand.
package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a time source.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f after d, like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable timer.
type Timer interface{ Stop() bool }

// Real is the system clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

// AfterFunc runs f after d.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Sleep waits d on c, or until ctx ends: it reports whether it waited the
// whole of d.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	woke := make(chan struct{})
	t := c.AfterFunc(d, func() { close(woke) })
	defer t.Stop()
	select {
	case <-woke:
		return true
	case <-ctx.Done():
		return false
	}
}

// Fake is a manual clock: time moves only when Advance or Set is called,
// which runs every AfterFunc that has come due, in time order.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    int
}

type fakeTimer struct {
	c    *Fake
	at   time.Time
	f    func()
	seq  int
	done bool
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// AfterFunc schedules f at now+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f, seq: c.seq}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock forward by d, firing due timers.
func (c *Fake) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing due timers.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		if t.After(c.now) {
			c.now = t
		}
		due := c.takeDueLocked()
		c.mu.Unlock()
		if due == nil {
			return
		}
		due.f()
	}
}

// takeDueLocked removes and returns the timer to fire next: the earliest
// due, the first scheduled among equal times (nil: none is due). It drops
// stopped timers on the way. A scan, not a sort: a fake clock holds a few
// timers, and the simulator sets it before each of millions of events,
// most of which fire none.
func (c *Fake) takeDueLocked() *fakeTimer {
	due := -1
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if tm.done {
			continue
		}
		if !tm.at.After(c.now) && (due < 0 || tm.at.Before(keep[due].at) || tm.at.Equal(keep[due].at) && tm.seq < keep[due].seq) {
			due = len(keep)
		}
		keep = append(keep, tm)
	}
	clear(c.timers[len(keep):])
	c.timers = keep
	if due < 0 {
		return nil
	}
	tm := c.timers[due]
	tm.done = true
	c.timers = slices.Delete(c.timers, due, due+1)
	return tm
}
