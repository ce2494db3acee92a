// Package waitlist is a queue's list of waiting long polls, longest
// waiting first, and whom a number of newly ready messages wakes.
//
// It does no locking: the queue owner's lock guards a List, and the owner
// decides when to park, wake and take polls off.
package waitlist

import "slices"

// Waiter is one long poll on a List.
type Waiter struct {
	woken chan struct{} // closed when it is woken (and taken off the list)
	part  int           // the partition it is bound to, or -1
}

// Woken is closed once the waiter is woken; it is then off the list.
func (w *Waiter) Woken() <-chan struct{} { return w.woken }

// List holds the waiting long polls, longest waiting first. The zero List
// is empty and ready.
type List struct {
	// Changed, if set, is called after each change of the list (the owner
	// signals its condition variable: tests wait on the list).
	Changed func()
	ws      []*Waiter
	bound   int // waiters bound to one partition
}

func (l *List) changed() {
	if l.Changed != nil {
		l.Changed()
	}
}

// Len returns the number of waiting polls.
func (l *List) Len() int { return len(l.ws) }

// Waiters returns the waiting polls, longest waiting first (a copy).
func (l *List) Waiters() []*Waiter { return slices.Clone(l.ws) }

// Park puts a long poll bound to partition part (-1: any) at the end of
// the list.
func (l *List) Park(part int) *Waiter {
	w := &Waiter{woken: make(chan struct{}), part: part}
	l.ws = append(l.ws, w)
	if part >= 0 {
		l.bound++
	}
	l.changed()
	return w
}

// Unpark takes w off the list. It reports false when w was not on it: it
// had been woken.
func (l *List) Unpark(w *Waiter) bool {
	defer l.changed()
	i := slices.Index(l.ws, w)
	if i < 0 {
		return false
	}
	l.ws = slices.Delete(l.ws, i, i+1)
	if w.part >= 0 {
		l.bound--
	}
	return true
}

// WakeAll wakes every waiting poll.
func (l *List) WakeAll() {
	for _, w := range l.ws {
		close(w.woken)
	}
	clear(l.ws)
	l.ws, l.bound = l.ws[:0], 0
	l.changed()
}

// Leave takes off a poll that gives up; if it had been woken meanwhile,
// the wake goes to the next one, so that the message it was woken for
// does not wait for a poll that is gone.
func (l *List) Leave(w *Waiter) {
	if !l.Unpark(w) {
		l.Wake(1)
	}
}

// Wake wakes the n longest-waiting polls: n messages became ready. Waking
// every poll for each send would have all of them take the queue's lock
// to find that one got the message. Any waiting poll can take any ready
// message, unless some are bound to a partition: then all are woken.
func (l *List) Wake(n int) {
	if n >= len(l.ws) || l.bound > 0 {
		l.WakeAll()
		return
	}
	for _, w := range l.ws[:n] {
		close(w.woken)
	}
	rest := copy(l.ws, l.ws[n:])
	clear(l.ws[rest:])
	l.ws = l.ws[:rest]
	l.changed()
}
