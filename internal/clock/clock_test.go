package clock

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestFakeOrder: Set fires the timers due, earliest first and in the
// order they were made at equal times, also those a firing timer makes
// (timed from the time set); never a stopped one, nor one not yet due;
// and time never goes back.
func TestFakeOrder(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var fired []string
	at := func(d time.Duration, name string) Timer {
		return c.AfterFunc(d, func() { fired = append(fired, name) })
	}
	at(3*time.Second, "c")
	at(time.Second, "a1")
	stopped := at(time.Second, "stopped")
	at(time.Second, "a2")
	c.AfterFunc(2*time.Second, func() {
		fired = append(fired, "b")
		at(0, "b-now")             // at 3s, the time set: after c (made earlier)
		at(time.Second, "b+1s")    // at 4s: not due
		at(10*time.Second, "late") // at 13s
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true, then false")
	}
	c.Set(start.Add(3 * time.Second))
	want := []string{"a1", "a2", "b", "c", "b-now"}
	if !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	c.Set(start) // not backwards
	if got := c.Now(); !got.Equal(start.Add(3 * time.Second)) {
		t.Fatalf("Now after setting it back: %v", got)
	}
	c.Advance(10 * time.Second)
	if want = append(want, "b+1s", "late"); !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
}

// Sleep waits the whole duration on a clock that moves, and stops early,
// saying so, when its context ends.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewFake(time.Unix(0, 0))
		woke := make(chan bool, 1)
		go func() { woke <- Sleep(context.Background(), c, time.Second) }()
		synctest.Wait() // Sleep's timer is set and it waits
		c.Advance(time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case <-woke:
			t.Fatal("Sleep returned before d had passed on its clock")
		default:
		}
		c.Advance(time.Nanosecond)
		if !<-woke {
			t.Fatal("Sleep on a clock that reached d: false, want true")
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { woke <- Sleep(ctx, c, time.Hour) }()
		synctest.Wait()
		cancel()
		if <-woke {
			t.Fatal("Sleep whose context ended: true, want false")
		}
	})
}
