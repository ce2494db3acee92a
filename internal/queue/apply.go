package queue

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/queue/dedup"
	"github.com/sluicemq/sluice/internal/queue/seqtab"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
)

// Apply applies a record of the queue's partition: once it is durable on
// the live path, or as recovery reads it. loc is where the record is (a
// Send's body). Every record states a result, so applying one twice, or
// one that a snapshot already holds, changes nothing. A Meta record is the
// owner's (SetConfig): Apply ignores it.
func (q *Queue) Apply(now time.Time, r *record.Record, loc Loc) error {
	if err := q.apply(now, r, loc); err != nil {
		return err
	}
	q.Advance(now)
	return nil
}

// Replay applies a record as recovery reads it: as Apply does, but without
// moving time on after it. The records of a log happened over time, and
// recovery applies them all at one later moment: advanced after each, a
// delivery would time out before a later record of the same log (a
// visibility change, a retry) extended it. Recovery advances once, at the
// end (Advance).
func (q *Queue) Replay(now time.Time, r *record.Record, loc Loc) error {
	return q.apply(now, r, loc)
}

func (q *Queue) apply(now time.Time, r *record.Record, loc Loc) error {
	q.last = max(q.last, r.Pos)
	q.now = max(q.now, ms(now))
	switch r.Type {
	case record.Meta:
	case record.Send:
		if r.Msg == nil {
			return fmt.Errorf("queue: a send record without a message")
		}
		if _, dup := q.t.Get(r.Msg.Seq); dup {
			return nil
		}
		m := q.fromRecord(r.Msg)
		m.Loc = loc
		q.applySendDedup(r)
		q.place(now, q.insert(&m), Pending)
	case record.Index:
		for i := range r.Msgs {
			if _, dup := q.t.Get(r.Msgs[i].Seq); dup {
				continue
			}
			m := q.fromRecord(&r.Msgs[i])
			q.place(now, q.insert(&m), m.State)
		}
	case record.Receive:
		if m, ok := q.t.Get(r.Seq); ok {
			q.applyReceive(now, m, r)
		}
	case record.Visibility:
		q.applyVisibility(now, r.Seq, r.VisibleAt)
	case record.Update:
		if m, ok := q.t.Get(r.Seq); ok && r.Msg != nil {
			q.applyUpdate(now, m, r.Msg)
		}
	case record.Delete:
		if m, ok := q.t.Get(r.Seq); ok {
			if r.Reason == record.ByWatermark {
				q.stats.DroppedWatermark++
			}
			q.remove(m)
		}
	case record.Purge:
		q.purge(r.Pos)
		q.purgeUntil = max(q.purgeUntil, r.Until)
	case record.Dedup:
		if r.Until > ms(now) {
			q.dedup.Hold(r.Key, dedup.Entry{ID: r.ID, SeqNum: r.SeqNum, Until: r.Until})
		}
	case record.State:
		q.dedup.SetLast(r.NextSeqNum)
		q.purgeUntil = max(q.purgeUntil, r.Until)
	case record.OriginMark:
		if r.OriginPos == 0 { // ForgetRecord
			delete(q.origins, r.Partition)
			break
		}
		mk := q.origins[r.Partition]
		mk.durable = max(mk.durable, r.OriginPos)
		if mk.pending <= mk.durable {
			mk.pending = 0
		}
		q.origins[r.Partition] = mk
	case record.Epoch:
		// Its position fences off a former owner's appends.
		q.claimTerm = r.Term
	case record.Entered:
		if r.Until > q.now {
			q.dedup.Confirm(enteredKey(r.Key), dedup.Entry{Until: r.Until}, r.Pos)
		}
	case record.Task:
		if r.Task == nil {
			return fmt.Errorf("queue: a task record without its task")
		}
		q.applyTask(*r.Task)
	default:
		return fmt.Errorf("queue: a %s record is not a queue's", r.Type)
	}
	return nil
}

// applySendDedup confirms (live) or restores (recovery) a FIFO
// deduplication id held for a Send's window.
func (q *Queue) applySendDedup(r *record.Record) {
	p := r.Payload
	if !q.cfg.FIFO || p == nil || p.Dedup == "" {
		return
	}
	until := r.Msg.Sent + dedup.Window.Milliseconds()
	if until > q.now {
		q.dedup.Confirm(q.dedupKey(r.Msg.Group, p.Dedup), dedup.Entry{ID: p.ID, SeqNum: p.SeqNum, Until: until}, r.Pos)
	}
}

// applyReceive makes a delivery: the message is in flight until the
// record's VisibleAt, with its receive count, times, fence, level and
// (when the record states them) failures.
func (q *Queue) applyReceive(now time.Time, m *Msg, r *record.Record) {
	if m.State == Leaving {
		return
	}
	q.unlink(m)
	m.SetDelivery(r.Count, r.First, r.Last, r.Fence)
	m.VisibleAt, m.Level = r.VisibleAt, r.Level
	if f := r.Fail; f != nil && !sameFail(m.Fail(), f) {
		m.SetFail(&FailInfo{Reason: f.Reason, LastError: f.LastError, First: f.First, Failures: f.Failures})
	}
	q.place(now, m, InFlight)
}

// applyUpdate gives a message the level, failure, receive count and
// visibility a record states, and places it by them.
func (q *Queue) applyUpdate(now time.Time, m *Msg, u *record.Msg) {
	if m.State == Leaving {
		return
	}
	q.unlink(m)
	m.Level, m.VisibleAt = u.Level, u.VisibleAt
	m.SetDelivery(u.Count, m.FirstRecv(), m.LastReceive(), m.Fence())
	if u.Fail != nil {
		m.SetFail(&FailInfo{Reason: u.Fail.Reason, LastError: u.Fail.LastError, First: u.Fail.First, Failures: u.Fail.Failures})
	} else {
		m.SetFail(nil)
	}
	m.set(fExpired|fAged, false)
	q.schedule(now, m)
}

// applyVisibility sets VisibleAt of an in-flight message.
func (q *Queue) applyVisibility(now time.Time, seq uint64, at int64) {
	m, ok := q.t.Get(seq)
	if !ok || m.State != InFlight {
		return
	}
	m.VisibleAt = at
	heap.Fix(&q.timers, int(m.heapIdx))
	q.eff.WakeAll = true
	// No Advance here: Apply advances after every record, and Replay must
	// not (an advance now would time out a delivery that a later record
	// of the log extends, and that record would then find it visible).
}

// purge removes every message with a sequence below upTo.
func (q *Queue) purge(upTo uint64) {
	if q.allBelow(upTo) {
		q.purgeAll()
		return
	}
	q.t.Each(func(m *Msg) bool {
		if m.Seq < upTo {
			q.remove(m)
		}
		return true
	})
	q.s.Forget(q.now)
	// Go maps keep their size: copy what is left into fresh ones.
	names := make(map[string]*gname, len(q.names))
	for k, v := range q.names {
		names[k] = v
	}
	groups := make(map[string]*group, len(q.groups))
	for k, v := range q.groups {
		groups[k] = v
	}
	q.names, q.groups = names, groups
	q.eff.WakeAll = true
}

// allBelow reports whether every message's sequence is below upTo.
func (q *Queue) allBelow(upTo uint64) bool {
	if q.t.Top() >= upTo {
		return false
	}
	for _, m := range q.t.Odd() {
		if m.Seq >= upTo {
			return false
		}
	}
	return true
}

// purgeAll removes every message by starting afresh, instead of taking
// each out of every structure it is in: a purge of millions of messages
// takes one pass over them. Per-tenant state goes too (send buckets
// included: a tenant may burst again after a purge).
func (q *Queue) purgeAll() {
	q.t.Each(func(m *Msg) bool {
		q.letGo(m)
		return true
	})
	s := q.s
	q.s = sched.New(q.cfg.Sched, q.entry)
	q.s.Sidelined, q.s.Spilled, q.s.HeldBack = s.Sidelined, s.Spilled, s.HeldBack
	q.t = seqtab.Table[Msg, *Msg]{}
	q.names, q.groups = map[string]*gname{}, map[string]*group{}
	q.gready, q.gold, q.engaged, q.timers = nil, nil, 0, nil
	q.inFlight, q.delayed, q.leaving = 0, 0, 0
	q.expSeq = 0
	q.eff.WakeAll = true
}

// Revert puts a message back exactly as prev (a copy taken before a
// change) says: delivery, visibility, level, failures and state. It undoes
// a change whose record could not be persisted, or a move that could not
// be made. The body stays where it is now (compaction may have moved it
// since the copy) and as held as it is. A message no longer in the queue
// left for good (deleted, purged: its body went with it) and is not put
// back.
func (q *Queue) Revert(now time.Time, prev Msg) {
	m, ok := q.t.Get(prev.Seq)
	if !ok {
		return
	}
	prev.Loc = m.Loc
	held := m.is(fHeld)
	m.set(fKeep, true)
	q.remove(m)
	state := prev.State
	if state == Leaving || state == Pending || state > Leaving {
		state = Ready
	}
	n := q.insert(&prev)
	n.set(fHeld, held)
	q.place(now, n, state)
	q.eff.WakeAll = true
}

// Hold notes that the store keeps message seq's body at loc for the
// queue (its Send was written; or, after recovery, Keep named it): it is
// released when the message leaves. It reports false when no message of
// the queue has its body there (the Send was a duplicate): then nothing
// holds that record.
func (q *Queue) Hold(seq uint64, loc Loc) bool {
	m, ok := q.t.Get(seq)
	if !ok || m.Loc != loc || m.is(fHeld) {
		return false
	}
	m.set(fHeld, true)
	return true
}

// Held reports whether the queue holds message seq's body at loc (for
// compaction: only a held body may move).
func (q *Queue) Held(seq uint64, loc Loc) bool {
	m, ok := q.t.Get(seq)
	return ok && m.Loc == loc && m.is(fHeld)
}

// HoldAll asks keep to keep every message's body (after recovery) and
// marks those it kept as held; it returns the sequences of the messages
// whose body the store no longer has.
func (q *Queue) HoldAll(keep func(m *Msg) error) (lost []uint64) {
	q.t.Each(func(m *Msg) bool {
		if m.is(fHeld) {
			return true
		}
		if keep(m) != nil {
			lost = append(lost, m.Seq)
		} else {
			m.set(fHeld, true)
		}
		return true
	})
	return lost
}

// LetGoAll reports every held body as no longer needed (the queue was
// deleted) and returns them.
func (q *Queue) LetGoAll() []Gone {
	q.t.Each(func(m *Msg) bool {
		q.letGo(m)
		return true
	})
	g := q.eff.Gone
	q.eff.Gone = nil
	return g
}

// SnapshotEach hands emit, one at a time, the records that rebuild the
// queue's state (its settings aside: the owner's Meta comes first): the
// FIFO sequence counter, the deduplication ids in their window, how far
// each origin's deliveries went, its move tasks, and every
// message's index entry in sequence order, IndexChunk to an Index record
// (a message leaving is written as it was: its move is not recorded yet).
// An Index record's Msgs are reused once
// emit returns: encode it there. Streaming keeps a snapshot of millions of
// messages from holding them all as structs at once (1.4 GB at 10 M).
// When emit returns false, no more are emitted.
func (q *Queue) SnapshotEach(now time.Time, emit func(*record.Record) bool) {
	t := ms(now)
	q.dedup.Expire(t)
	state := &record.Record{Type: record.State, NextSeqNum: q.dedup.Last()}
	if q.purgeUntil > t {
		state.Until = q.purgeUntil
	}
	if !emit(state) {
		return
	}
	more := true
	q.dedup.Each(t, func(k string, e dedup.Entry) bool {
		more = emit(&record.Record{Type: record.Dedup, Key: k, ID: e.ID, SeqNum: e.SeqNum, Until: e.Until})
		return more
	})
	for _, p := range slices.Sorted(maps.Keys(q.origins)) {
		if more && q.origins[p].durable > 0 {
			more = emit(&record.Record{Type: record.OriginMark, Partition: p, OriginPos: q.origins[p].durable})
		}
	}
	q.forgetTasks(t)
	for i := range q.tasks {
		if more {
			tk := q.tasks[i]
			more = emit(&record.Record{Type: record.Task, Task: &tk})
		}
	}
	if !more {
		return
	}
	chunk := &record.Record{Type: record.Index, Msgs: make([]record.Msg, 0, min(record.IndexChunk, q.t.Len()))}
	q.t.Each(func(m *Msg) bool {
		chunk.Msgs = append(chunk.Msgs, indexOf(m))
		if m.State == Leaving {
			chunk.Msgs[len(chunk.Msgs)-1].State = uint8(Ready)
		}
		if len(chunk.Msgs) == record.IndexChunk {
			more = emit(chunk)
			chunk.Msgs = chunk.Msgs[:0]
		}
		return more
	})
	if more && len(chunk.Msgs) > 0 {
		emit(chunk)
	}
}

// Snapshot collects SnapshotEach's records.
func (q *Queue) Snapshot(now time.Time) []*record.Record {
	var out []*record.Record
	q.SnapshotEach(now, func(r *record.Record) bool {
		c := *r
		c.Msgs = append([]record.Msg(nil), r.Msgs...)
		out = append(out, &c)
		return true
	})
	return out
}
