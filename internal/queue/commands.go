package queue

import (
	"math"
	"time"

	"github.com/sluicemq/sluice/internal/queue/dedup"
	"github.com/sluicemq/sluice/internal/record"
)

// SendSpec is one message to send, already checked by the owner.
type SendSpec struct {
	Group, Tenant string
	// Dedup is the MessageDeduplicationId (FIFO; "" with content-based
	// deduplication: derived from the body).
	Dedup string
	Delay time.Duration
	// Payload is the message's payload without its FIFO sequence number
	// (set here). Raw, when set, is Payload encoded already (standard
	// queues encode it before taking the queue's lock).
	Payload *record.Payload
	Raw     record.RawPayload
	// Origin, when set, is the record of another partition this message
	// delivers (a topic's publish): it is sent at most once.
	Origin *Origin
}

// SendResult is the outcome of one send.
type SendResult struct {
	// Record is the Send to persist (nil for a duplicate or a throttle);
	// Apply makes the message deliverable once it is durable, Unwritten
	// forgets it when it is not.
	Record *record.Record
	SeqNum string // FIFO sequence number
	// Dup: a FIFO duplicate within the window: DupID and SeqNum are the
	// earlier message's; or a delivery from an origin position taken
	// already (DupID "").
	Dup   bool
	DupID string
	// Marked: a delivery from a new origin position (taken, or a FIFO
	// duplicate) moved its origin's mark; Marks makes the OriginMark
	// record to persist with the call's records.
	Marked bool
	// Gap: a delivery that does not follow its origin's mark (Mark, the
	// last position taken from it) is refused: taking it would pass over
	// the positions in between.
	Gap  bool
	Mark uint64
	// Throttled: over the tenant's send limit; try again after RetryAfter.
	Throttled  bool
	RetryAfter time.Duration
}

// Send checks a message against its origin's mark, the tenant's send
// limits and the FIFO deduplication window and returns its record. A FIFO
// deduplication id, and an origin position, is held for the message while
// its records are written, so that a duplicate sent meanwhile is answered
// as one.
func (q *Queue) Send(now time.Time, in *SendSpec) SendResult {
	t := ms(now)
	q.now = max(q.now, t)
	if o := in.Origin; o != nil {
		mk := q.origins[o.Partition]
		switch at := max(mk.durable, mk.pending); {
		case o.Pos <= at:
			return SendResult{Dup: true}
		case o.After != at:
			return SendResult{Gap: true, Mark: at}
		}
	}
	if in.Origin != nil {
		// A delivery over its tenant's limit is taken, later visible:
		// refused, it would hold back every later delivery of its origin,
		// of every tenant.
		in.Delay = max(in.Delay, q.s.ReserveSend(t, in.Tenant, 1))
	} else if ok, after := q.s.AllowSend(t, in.Tenant, 1); !ok {
		return SendResult{Throttled: true, RetryAfter: after}
	}
	res := q.send(t, now, in)
	if o := in.Origin; o != nil {
		mk := q.origins[o.Partition]
		mk.pending = o.Pos
		q.origins[o.Partition] = mk
		res.Marked = true
	}
	return res
}

// OriginMarks reports, by origin partition, the last position taken from
// it and durable: a sender starts after it (its next delivery's After).
func (q *Queue) OriginMarks() map[uint64]uint64 {
	out := make(map[uint64]uint64, len(q.origins))
	for p, mk := range q.origins {
		if mk.durable > 0 {
			out[p] = mk.durable
		}
	}
	return out
}

// ForgetRecord is the record that forgets origin p's mark (an OriginMark
// record at position 0 there), for an origin that is gone: its topic was
// deleted. Nil when the queue holds no mark of p.
func (q *Queue) ForgetRecord(p uint64) *record.Record {
	if _, ok := q.origins[p]; !ok {
		return nil
	}
	return &record.Record{Type: record.OriginMark, Pos: q.take(), Partition: p}
}

// Marks returns the OriginMark records of the origins whose marks moved
// (Marked) since their last ones: one an origin, however many deliveries
// of it one write holds.
func (q *Queue) Marks(origins []uint64) []*record.Record {
	var recs []*record.Record
	for _, p := range origins {
		recs = append(recs, &record.Record{Type: record.OriginMark, Pos: q.take(), Partition: p, OriginPos: q.origins[p].pending})
	}
	return recs
}

func (q *Queue) send(t int64, now time.Time, in *SendSpec) SendResult {
	var key string
	p := in.Payload
	if q.cfg.FIFO {
		q.dedup.Expire(t)
		if p.Dedup == "" {
			p.Dedup = in.Dedup
			if p.Dedup == "" {
				p.Dedup = dedup.ContentID(p.Body)
			}
		}
		key = q.dedupKey(in.Group, p.Dedup)
		if e, ok := q.dedup.Seen(key, t); ok {
			return SendResult{Dup: true, DupID: e.ID, SeqNum: e.SeqNum}
		}
		p.SeqNum = q.dedup.Next(uint64(now.UnixNano()))
	}
	// The record and its message, allocated together.
	rm := &struct {
		r record.Record
		m record.Msg
	}{}
	m := &rm.m
	*m = record.Msg{Sent: t, VisibleAt: t + in.Delay.Milliseconds(), Group: in.Group}
	if in.Tenant != in.Group {
		m.Tenant = in.Tenant
	}
	r := &rm.r
	*r = record.Record{Type: record.Send, Pos: q.take(), Msg: m, Payload: p}
	m.Seq = r.Pos
	if q.cfg.FIFO {
		q.dedup.Hold(key, dedup.Entry{ID: p.ID, SeqNum: p.SeqNum, Until: t + dedup.Window.Milliseconds(), Pending: r.Pos})
	} else {
		r.Raw = in.Raw
	}
	return SendResult{Record: r, SeqNum: p.SeqNum}
}

// Unwritten forgets what a record that could not be written held: a
// Send's FIFO deduplication id, a delivery's origin position.
func (q *Queue) Unwritten(r *record.Record) {
	switch {
	case r.Type == record.OriginMark:
		if mk, ok := q.origins[r.Partition]; ok && r.OriginPos <= mk.pending {
			mk.pending = 0 // the writes behind it failed too
			q.origins[r.Partition] = mk
		}
	case r.Type == record.Entered:
		q.dedup.Failed(enteredKey(r.Key), r.Pos)
	case r.Type == record.Send && q.cfg.FIFO && r.Payload != nil:
		q.dedup.Failed(q.dedupKey(r.Msg.Group, r.Payload.Dedup), r.Pos)
	}
}

// Delivery is one message a receive took.
type Delivery struct {
	// Record is the Receive to persist (applied already).
	Record *record.Record
	// Msg is the message as delivered (a copy); Prev as it was before, for
	// Revert when Record cannot be persisted.
	Msg, Prev Msg
	// Old says it was delivered from the backlog lane: the old side of a
	// backlog, served behind fresh traffic.
	Old bool
}

// Receive delivers up to max ready messages from partition part of a
// standard queue (-1: any, in turn), each invisible for vis. spare is the
// number of other receivers waiting (the scheduler's headroom). The
// deliveries are made at once. A message over maxReceiveCount leaves for
// the dead-letter queue instead (Effects.Handoffs).
func (q *Queue) Receive(now time.Time, max int, vis time.Duration, part, spare int) []Delivery {
	q.Advance(now)
	if q.cfg.FIFO {
		return q.receiveFIFO(now, max, vis)
	}
	// Room for a receive's usual batch at once: a Delivery is large, and
	// growing the slice by appends copied it up to four times.
	room := min(max, 10)
	if room < 0 {
		room = 0
	}
	out := make([]Delivery, 0, room)
	for len(out) < max && q.inFlight < MaxInFlight {
		seq, ok := q.s.Pop(ms(now), part, spare)
		if !ok {
			break
		}
		m, ok := q.t.Get(seq)
		if !ok {
			continue
		}
		if q.cfg.Retention > 0 && m.Sent <= ms(now)-q.cfg.Retention.Milliseconds() {
			q.stats.DroppedRetention++
			q.remove(m)
			continue
		}
		if d, ok := q.deliver(now, m, vis); ok {
			d.Old = q.s.FromBacklog(&m.Entry)
			out = append(out, d)
		}
	}
	return out
}

// ReceiveAll is Receive from any partition with no headroom (tests).
func (q *Queue) ReceiveAll(now time.Time, max int, vis time.Duration) []Delivery {
	return q.Receive(now, max, vis, -1, math.MaxInt)
}

func (q *Queue) receiveFIFO(now time.Time, max int, vis time.Duration) []Delivery {
	var out []Delivery
	for len(out) < max {
		g := q.nextGroup(ms(now))
		if g == nil {
			break
		}
		g.queued = false
		if g.inFlight > 0 {
			continue // locked: requeued when its in-flight messages settle
		}
		// Deliver from the head of the group, in order. Messages delivered
		// in this receive are in flight; stop at the first that is not
		// ready. A message that leaves is out of the group's way.
		for i := 0; i < len(g.msgs) && len(out) < max; {
			m := g.msgs[i]
			if m.State == InFlight || m.State == Leaving {
				i++
				continue
			}
			if m.State != Ready {
				break
			}
			if q.cfg.Retention > 0 && m.Sent <= ms(now)-q.cfg.Retention.Milliseconds() {
				q.stats.DroppedRetention++
				q.remove(m) // shifts g.msgs
				continue
			}
			if d, ok := q.deliver(now, m, vis); ok {
				out = append(out, d)
			}
			i++
		}
		if len(g.msgs) == 0 && g.inFlight == 0 && !g.queued {
			delete(q.groups, g.name) // all of it left while it was queued
		}
	}
	return out
}

// deliver makes one delivery through a Receive record, or sends a message
// over maxReceiveCount away.
func (q *Queue) deliver(now time.Time, m *Msg, vis time.Duration) (Delivery, bool) {
	prev := *m
	prev.State = Ready
	if q.cfg.MaxReceiveCount > 0 && int(m.RecvCount()) >= q.cfg.MaxReceiveCount {
		m.Failed(ms(now), "MaxReceiveCount", "")
		q.leave(m, prev)
		return Delivery{}, false
	}
	first := m.FirstRecv()
	if first == 0 {
		first = ms(now)
	}
	r := &record.Record{Type: record.Receive, Pos: q.take(), Seq: m.Seq, Count: m.RecvCount() + 1, First: first, Last: ms(now),
		VisibleAt: ms(now.Add(vis)), Fence: m.Fence() + 1, Level: m.Level, Fail: failOf(m)}
	q.applyReceive(now, m, r)
	return Delivery{Record: r, Msg: *m, Prev: prev}, true
}

// Retry fails an in-flight message on the consumer's word: it climbs the
// retry ladder (waiting delay instead of the level's when delay >= 0);
// without a ladder it becomes visible after delay (0 when negative). The
// change is made at once; rec, when not nil, is its Update to persist
// (nil: the message left the ladder: Effects.Handoffs). ok is false when the
// message is not in flight.
func (q *Queue) Retry(now time.Time, seq uint64, delay time.Duration, reason string) (rec *record.Record, prev Msg, ok bool) {
	q.Advance(now)
	m, live := q.t.Get(seq)
	if !live || m.State != InFlight {
		return nil, Msg{}, false
	}
	prev = *m
	q.stats.Retried++
	if len(q.cfg.RetryDelays) == 0 {
		u := *m
		u.Failed(ms(now), "Retry", reason)
		u.VisibleAt = ms(now) + max(delay, 0).Milliseconds()
		rec = &record.Record{Type: record.Update, Pos: q.take(), Seq: seq, Msg: ToRecord(&u)}
		q.applyUpdate(now, m, rec.Msg)
		return rec, prev, true
	}
	q.stats.Retried-- // climb counts it
	q.unlink(m)
	n := len(q.eff.Records)
	q.climb(now, m, prev, ms(now), "Retry", reason, delay)
	if len(q.eff.Records) > n {
		rec = q.eff.Records[n]
		q.eff.Records = q.eff.Records[:n] // the caller persists it
	}
	return rec, prev, true
}

// Defer puts an in-flight message off for delay without counting it as a
// failure (its receive does not count toward maxReceiveCount).
func (q *Queue) Defer(now time.Time, seq uint64, delay time.Duration) (rec *record.Record, prev Msg, ok bool) {
	q.Advance(now)
	m, live := q.t.Get(seq)
	if !live || m.State != InFlight {
		return nil, Msg{}, false
	}
	prev = *m
	u := *m
	if rc := u.RecvCount(); rc > 0 {
		u.SetDelivery(rc-1, u.FirstRecv(), u.LastReceive(), u.Fence())
	}
	u.VisibleAt = ms(now) + max(delay, 0).Milliseconds()
	q.stats.Deferred++
	rec = &record.Record{Type: record.Update, Pos: q.take(), Seq: seq, Msg: ToRecord(&u)}
	q.applyUpdate(now, m, rec.Msg)
	return rec, prev, true
}

// Reject fails an in-flight message for good: it leaves at once
// (Effects.Handoffs: to the dead-letter queue, or dropped by the owner when
// there is none).
func (q *Queue) Reject(now time.Time, seq uint64, reason string) (prev Msg, ok bool) {
	q.Advance(now)
	m, live := q.t.Get(seq)
	if !live || m.State != InFlight {
		return Msg{}, false
	}
	prev = *m
	m.Failed(ms(now), "Reject", reason)
	q.stats.Rejected++
	q.leave(m, prev)
	return prev, true
}

// Leave takes a ready message (that ok accepts) out for a move to another
// queue (a redrive): Effects.Handoffs gets it.
func (q *Queue) Leave(now time.Time, seq uint64, ok func(m *Msg) bool) bool {
	q.Advance(now)
	m, live := q.t.Get(seq)
	if !live || m.State == Leaving || (ok != nil && !ok(m)) {
		return false
	}
	q.leave(m, *m)
	return true
}

// Enter is the record of a message moved in from another queue: its
// index (receive count, failures, source) and payload as the move says,
// under a new sequence here. Applied once durable, like a Send.
func (q *Queue) Enter(m *record.Msg, p *record.Payload) *record.Record {
	r := &record.Record{Type: record.Send, Pos: q.take(), Msg: m, Payload: p}
	m.Seq = r.Pos
	return r
}

// enteredKey is the key a hand-over is remembered by in the deduplication
// window (apart from FIFO deduplication ids, which hold no \x01).
func enteredKey(key string) string { return "\x01entered\x00" + key }

// EnterOnce enters a message another queue hands over (a dead-letter
// move, a redrive) under key, the hand-over's identity, unless one under
// the same key was entered within the deduplication window: a retried
// hand-over (its answer was lost, or its source failed to delete its
// copy) enters nothing twice. It returns the records to persist together
// (the Send and the Entered mark, applied once durable); or dup, when the
// key was entered; or pending, when an entry under key is being written
// (ask again once it is done).
func (q *Queue) EnterOnce(now time.Time, key string, m *record.Msg, p *record.Payload) (recs []*record.Record, dup, pending bool) {
	t := ms(now)
	q.dedup.Expire(t)
	k := enteredKey(key)
	if e, ok := q.dedup.Seen(k, t); ok {
		return nil, e.Pending == 0, e.Pending != 0
	}
	send := q.Enter(m, p)
	mark := &record.Record{Type: record.Entered, Pos: q.take(), Key: key, Until: t + dedup.Window.Milliseconds()}
	q.dedup.Hold(k, dedup.Entry{Until: mark.Until, Pending: mark.Pos})
	return []*record.Record{send, mark}, false, false
}

// DeleteRecord is the record that deletes a message (applied once durable).
func (q *Queue) DeleteRecord(seq uint64, reason uint8) *record.Record {
	return &record.Record{Type: record.Delete, Pos: q.take(), Seq: seq, Reason: reason}
}

// VisibilityRecord is the record that makes an in-flight message visible
// at at (unix ms; applied once durable).
func (q *Queue) VisibilityRecord(seq uint64, at int64) *record.Record {
	return &record.Record{Type: record.Visibility, Pos: q.take(), Seq: seq, VisibleAt: at}
}

// PurgeInterval is how often a queue may be purged (PurgeQueue).
const PurgeInterval = 60 * time.Second

// PurgeRecord is the record that purges every message before it (applied
// once durable), at now: no other purge for PurgeInterval after it.
func (q *Queue) PurgeRecord(now time.Time) *record.Record {
	return &record.Record{Type: record.Purge, Pos: q.take(), Until: now.Add(PurgeInterval).UnixMilli()}
}

// PurgeAllowed reports whether a purge at now keeps the interval after
// the last durable one.
func (q *Queue) PurgeAllowed(now time.Time) bool {
	return now.UnixMilli() >= q.purgeUntil
}

// EpochRecord is the record a new owner writes before it serves: node is
// its name, term its lease's revision (0 without a lease).
func (q *Queue) EpochRecord(node string, term uint64) *record.Record {
	return &record.Record{Type: record.Epoch, Pos: q.take(), Node: node, Term: term}
}

// ClaimTerm is the term of the last epoch record replayed or written (0
// if none).
func (q *Queue) ClaimTerm() uint64 { return q.claimTerm }

// MetaRecord is the record of the queue's settings (the owner applies it).
func (q *Queue) MetaRecord(m *record.QueueMeta) *record.Record {
	return &record.Record{Type: record.Meta, Pos: q.take(), Meta: m}
}

// SentBefore lists the messages sent before (unix ms), of one tenant
// unless anyTenant: what the watermark drops.
func (q *Queue) SentBefore(before int64, tenant string, anyTenant bool) []uint64 {
	var seqs []uint64
	q.t.Each(func(m *Msg) bool {
		if m.State != Leaving && m.Sent < before && (anyTenant || m.Tenant() == tenant) {
			seqs = append(seqs, m.Seq)
		}
		return true
	})
	return seqs
}
