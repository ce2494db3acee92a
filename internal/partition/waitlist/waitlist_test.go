package waitlist

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func woken(w *Waiter) bool {
	select {
	case <-w.Woken():
		return true
	default:
		return false
	}
}

// Wake(n) wakes the n longest waiting and leaves the rest in place; a
// poll bound to a partition makes every wake wake all (any of them may be
// the one the message is for).
func TestWakeOrder(t *testing.T) {
	var l List
	ws := []*Waiter{l.Park(-1), l.Park(-1), l.Park(-1), l.Park(-1)}
	l.Wake(1)
	if !woken(ws[0]) || woken(ws[1]) || l.Len() != 3 {
		t.Fatalf("Wake(1): woke %v %v, %d left", woken(ws[0]), woken(ws[1]), l.Len())
	}
	if l.Unpark(ws[0]) {
		t.Fatal("a woken waiter was still on the list")
	}
	if !l.Unpark(ws[2]) || l.Len() != 2 {
		t.Fatal("Unpark of a waiting poll")
	}
	if got := l.Waiters(); got[0] != ws[1] || got[1] != ws[3] {
		t.Fatal("order changed")
	}
	b := l.Park(3)
	l.Wake(1)
	if !woken(ws[1]) || !woken(ws[3]) || !woken(b) || l.Len() != 0 {
		t.Fatal("with a bound poll waiting, a wake did not wake all")
	}
	w := l.Park(-1)
	l.Wake(5)
	if !woken(w) {
		t.Fatal("Wake(n) with fewer waiting than n")
	}
}

// A poll that gives up after it was woken passes its wake on; Changed is
// called on every change.
func TestLeave(t *testing.T) {
	changes := 0
	l := List{Changed: func() { changes++ }}
	a, b := l.Park(-1), l.Park(-1)
	l.Wake(1) // a is woken, and gives up before it looks
	l.Leave(a)
	select {
	case <-b.Woken():
	default:
		t.Fatal("the wake a gave up did not pass to b")
	}
	c := l.Park(-1)
	l.Leave(c) // not woken: just off the list
	select {
	case <-c.Woken():
		t.Fatal("a poll that left was woken")
	default:
	}
	if l.Len() != 0 || changes < 6 {
		t.Fatalf("Len %d, %d changes", l.Len(), changes)
	}
}
