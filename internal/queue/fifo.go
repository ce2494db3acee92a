package queue

import "github.com/sluicemq/sluice/internal/sched"

// A FIFO queue's backlog mode: the standard queue's (package sched) by
// group instead of by message, so that no group's message is ever
// delivered before an older one of its group. Once a backlog stands (the
// head of a group ready for delivery, never received, has waited
// sched.StandingTarget + StandingInterval), the mode's split is set
// StandingTarget before now: a group whose head was sent at or before it
// is old, set aside, and groups whose head is fresh are served first. The
// split moves up to StandingTarget before now when a fresh group's head
// stands too. The old groups get every pick no fresh group wants, and,
// while fresh groups are not kept up with (the head served waited longer
// than StandingTarget), the lower lanes' share of the picks (sched's
// LowerLaneShare), in the order they were set aside; the mode ends when
// none is left. Within a group nothing changes: it is served from its
// head, in order.

// nextGroup takes the next group to serve from, or nil when none may have
// a deliverable head.
func (q *Queue) nextGroup(now int64) *group {
	adaptive := q.cfg.Sched.Adaptive
	for {
		if len(q.gold) > 0 && (len(q.gready) == 0 || q.goldCred >= 1-1e-9) {
			if len(q.gready) > 0 {
				q.goldCred--
			}
			g := q.gold[0]
			q.gold[0] = nil
			q.gold = q.gold[1:]
			if len(q.gold) == 0 {
				q.engaged, q.split, q.goldCred = 0, 0, 0 // the old side is served: oldest first again
			}
			return g
		}
		if len(q.gready) == 0 {
			return nil
		}
		g := q.gready[0]
		q.gready[0] = nil
		q.gready = q.gready[1:]
		if !adaptive || g.inFlight > 0 {
			return g
		}
		sent, fresh, ok := q.head(g)
		if !ok {
			return g
		}
		if fresh && now-sent > sched.StandingTarget+sched.StandingInterval && (q.engaged == 0 || sent > q.split) {
			if q.engaged == 0 {
				q.engaged = sent + sched.StandingTarget + sched.StandingInterval
			}
			q.split = now - sched.StandingTarget // a backlog stands, or the fresh side's does too
		}
		if q.engaged == 0 || sent > q.split {
			if len(q.gold) > 0 && now-sent > sched.StandingTarget {
				q.goldCred = min(q.goldCred+q.share(), 2) // fresh groups are not kept up with
			}
			return g
		}
		q.gold = append(q.gold, g) // still queued: set aside
		q.stats.Sidelined++
	}
}

// head is when a group's first ready message was sent, and whether it was
// never received.
func (q *Queue) head(g *group) (sent int64, fresh, ok bool) {
	for _, m := range g.msgs {
		switch m.State {
		case InFlight, Leaving:
			continue
		case Ready:
			return m.Sent, m.RecvCount() == 0, true
		}
		break
	}
	return 0, false, false
}

func (q *Queue) share() float64 {
	if s := q.cfg.Sched.LowerLaneShare; s > 0 {
		return s
	}
	return 0.1
}

// FIFOMode is a FIFO queue's backlog mode: since when it is engaged (unix
// ms; 0: it is not), and how many messages the groups set aside hold.
func (q *Queue) FIFOMode() (since int64, old int) {
	for _, g := range q.gold {
		old += len(g.msgs)
	}
	return q.engaged, old
}
