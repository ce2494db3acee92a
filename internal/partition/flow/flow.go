// Package flow is a queue's flow control: while consumers are taking
// messages off a backlog, new sends are admitted only as fast as the
// consumers take messages, so that producers who outrun them give the
// consumers' calls their share of the server (its CPU, its write stream)
// instead of crowding them out and growing the backlog without end.
//
// It holds sends back, it never refuses one: a send waits for credit (one
// message taken earns one message sent) for a bounded time (the caller's
// to time), then goes ahead anyway. With no backlog, or no consumer taking anything, nothing waits:
// a queue still absorbs a burst, or a consumer outage, as a queue should.
// Sends are admitted in the order they came.
//
// It does no locking: the queue owner's lock guards a Gate.
package flow

import "time"

// Gate is one queue's flow control. The zero Gate is ready and never
// holds anything back (Floor 0 turns it off).
type Gate struct {
	// Floor is the backlog (ready messages) under which no send waits;
	// also the most credit kept, so a burst of that size goes at once.
	Floor int
	// Active is how long after consumers last took a message they count
	// as taking: with none for longer, sends go at once.
	Active time.Duration

	credit   int
	lastTake time.Time
	waiters  []*Waiter
}

// Waiter is a send waiting for credit.
type Waiter struct {
	n     int
	ready chan struct{} // closed when admitted
}

// Admitted is closed once the send may go.
func (w *Waiter) Admitted() <-chan struct{} { return w.ready }

// Waiting returns the number of sends waiting.
func (g *Gate) Waiting() int { return len(g.waiters) }

// taking reports whether consumers took a message in the last Active.
func (g *Gate) taking(now time.Time) bool {
	return !g.lastTake.IsZero() && now.Sub(g.lastTake) < g.Active
}

// Enter is a send of n messages arriving at now, with backlog messages
// ready in the queue: nil when it may go at once, else a Waiter whose
// Admitted channel closes when credit comes; the caller waits a bounded
// time for it and then calls Leave.
func (g *Gate) Enter(now time.Time, n, backlog int) *Waiter {
	if g.Floor <= 0 || backlog < g.Floor || !g.taking(now) {
		// Not holding: whoever waits goes, and the next hold starts with
		// a full budget.
		g.Drop()
		g.credit = g.Floor
		return nil
	}
	if len(g.waiters) == 0 && g.credit > 0 {
		g.credit -= n
		return nil
	}
	w := &Waiter{n: n, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	return w
}

// Took is consumers taking n messages at now: it earns credit, which
// admits the waiting sends in order.
func (g *Gate) Took(now time.Time, n int) {
	if !g.taking(now) {
		// Consumers start (again): a hold starts with a full budget.
		g.credit = g.Floor
	}
	g.lastTake = now
	g.credit = min(g.credit+n, g.Floor)
	g.admit()
}

// admit lets waiting sends go, first come first, while there is credit.
func (g *Gate) admit() {
	i := 0
	for ; i < len(g.waiters) && g.credit > 0; i++ {
		g.credit -= g.waiters[i].n
		close(g.waiters[i].ready)
	}
	if i > 0 {
		clear(g.waiters[:i])
		g.waiters = g.waiters[i:]
	}
}

// Leave takes w off the list when its hold ran out (or its caller gave
// up) before it was admitted; it then goes ahead without credit. It
// reports whether w was still waiting.
func (g *Gate) Leave(w *Waiter) bool {
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// Drop admits every waiting send (the queue stops serving, or its flow
// control was turned off).
func (g *Gate) Drop() {
	for _, w := range g.waiters {
		close(w.ready)
	}
	g.waiters = nil
}
