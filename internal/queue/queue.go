// Package queue is the per-queue state machine: messages, visibility,
// delays, FIFO groups, deduplication, receive counts, the retry ladder and
// the dead-letter hand-off. It is deterministic: no goroutines, no clock
// calls, no I/O, no dependence on map order; every operation takes the
// current time.
//
// It works the way etcd raft's RawNode does. A command (Send, Receive, a
// verdict, DeleteRecord …) returns the records to persist, each with its
// position in the queue's partition; what else happened (messages made
// ready, messages leaving for another queue, storage to release, records
// the retry ladder wrote on the way) accumulates until the owner takes it
// with TakeEffects. A change that gives something up (a delete, a
// visibility change, a purge) is made by Apply once its record is durable;
// a change that takes something (a delivery, a verdict on a delivery) is
// made at once, so that nobody else takes the same message, through the
// same Apply, and undone with Revert if its record cannot be persisted.
// Recovery applies the records it reads through that same Apply.
package queue

import (
	"container/heap"
	"time"

	"github.com/sluicemq/sluice/internal/queue/dedup"
	"github.com/sluicemq/sluice/internal/queue/seqtab"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
)

// Config is the part of a queue's attributes the state machine needs.
type Config struct {
	FIFO              bool
	VisibilityTimeout time.Duration
	Delay             time.Duration
	Retention         time.Duration
	ContentDedup      bool
	DedupPerGroup     bool
	MaxReceiveCount   int // 0: no dead-letter queue
	// MaxAge drops (or, with AgeToDLQ, dead-letters) messages older than
	// it. 0: off.
	MaxAge   time.Duration
	AgeToDLQ bool
	// RetryDelays is the retry ladder: a message that fails (its
	// visibility expires, or Retry) moves up one level and waits that
	// level's delay in its own lane; past the last level it leaves (for
	// the dead-letter queue). Empty: plain SQS behaviour.
	RetryDelays []time.Duration
	// Sched is the delivery policy of standard queues (fairness, limits,
	// lanes, partitions); FIFO queues use its send limits only.
	Sched sched.Config
}

// Stats are counters since the queue was loaded.
type Stats struct {
	DroppedRetention, DroppedMaxAge, DroppedWatermark uint64
	Sidelined, Spilled, HeldBack                      uint64
	Retried, Deferred, Rejected, Exhausted            uint64
}

// MaxInFlight is SQS's in-flight limit on standard queues.
const MaxInFlight = 120000

type group struct {
	name     string
	msgs     []*Msg // in order; deleted ones removed
	inFlight int
	queued   bool
}

// Gone is a message that left the queue: its storage can be released.
type Gone struct {
	Seq uint64
	Loc Loc
}

// Handoff is a message on its way to another queue. Msg is its index as
// it leaves (its failure recorded); Prev is how it was, for Revert when the
// move cannot be made.
type Handoff struct {
	Msg  Msg
	Prev Msg
}

// Effects is what happened besides a command's records, for the owner to
// act on (TakeEffects).
type Effects struct {
	// Ready is how many messages became deliverable (wake as many waiting
	// receivers); WakeAll says every waiting receiver may find something
	// or must look at its timer again.
	Ready   int
	WakeAll bool
	// Gone are messages that left: their storage goes.
	Gone []Gone
	// Handoffs are messages to move to another queue: the owner moves them
	// and then persists a Delete (ByMove) here, or reverts them.
	Handoffs []Handoff
	// Records are records the queue made and applied on its own (the retry
	// ladder): the owner persists them.
	Records []*record.Record
}

// Queue is one queue's state. Not safe for concurrent use.
type Queue struct {
	cfg Config
	// claimTerm is the term of the last epoch record applied: the lease
	// term of the owner that claimed the partition last.
	claimTerm uint64
	t         seqtab.Table[Msg, *Msg] // the messages
	names     map[string]*gname       // their group ids
	s         *sched.Sched            // standard queues: the ready messages
	// oddScan is when expiry last looked at the messages that arrived out
	// of sequence order (unix ms).
	oddScan int64
	expSeq  uint64 // expiry has looked at every entry below it
	timers  timerHeap
	groups  map[string]*group
	gready  []*group // FIFO: groups that may have a deliverable head
	// FIFO's backlog mode (fifo.go): the groups whose head is old, set
	// aside while a backlog stands (since engaged, unix ms; 0: none), and
	// the credit that gives them their share.
	gold     []*group
	engaged  int64
	split    int64 // what was sent at or before it is old
	goldCred float64
	dedup    dedup.Memory    // FIFO: ids in their window, sequence numbers
	origins  map[uint64]mark // by origin partition: how far deliveries from it went
	eff      Effects
	stats    Stats
	now      int64 // the latest time seen
	inFlight int
	delayed  int
	leaving  int
	last     uint64 // the last position taken in the queue's partition
	// purgeUntil is when the last durable PurgeQueue allows another (unix
	// ms): a purge's record carries it, and so do snapshots, so that the
	// 60-second rule holds across restarts and owners.
	purgeUntil int64
	// tasks are the message move tasks out of the queue, as their latest
	// durable Task records say, oldest first (tasks.go).
	tasks []record.MoveTask
}

// Origin is where a delivered message comes from: a record of another
// partition (a topic's publish). Deliveries from one origin partition
// come in position order, so one mark per origin partition tells which
// were taken. Each names the position of the delivery it follows (After:
// the last one its sender delivered to this queue, 0 for none); the queue
// takes it only when its mark is there, so a delivery refused (throttled,
// or its write failed) is never passed over by a later one. Positions in
// between (publishes a filter kept from this queue) need no delivery.
// At is when the origin record was written (unix ms; 0: unknown): it
// times the message's first receive from its publish (figures only,
// never written with the message).
type Origin struct {
	Partition, Pos, After uint64
	At                    int64
}

// mark is how far deliveries from one origin went: durable, and pending
// (written now; 0: none).
type mark struct{ durable, pending uint64 }

// New returns an empty queue.
func New(cfg Config) *Queue {
	q := &Queue{cfg: cfg, names: map[string]*gname{}, groups: map[string]*group{}, origins: map[uint64]mark{}}
	q.s = sched.New(cfg.Sched, q.entry)
	return q
}

func (q *Queue) entry(seq uint64) (*sched.Entry, int64, string, bool) {
	m, ok := q.t.Get(seq)
	if !ok {
		return nil, 0, "", false
	}
	return &m.Entry, m.Sent, m.Tenant(), true
}

// SetConfig changes the configuration; it applies to later operations.
func (q *Queue) SetConfig(cfg Config) {
	q.cfg = cfg
	q.s.SetConfig(q.now, cfg.Sched)
}

// Config returns the configuration.
func (q *Queue) Config() Config { return q.cfg }

// Sched exposes the scheduler for its figures.
func (q *Queue) Sched() *sched.Sched { return q.s }

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	st := q.stats
	st.Sidelined, st.Spilled, st.HeldBack = q.s.Sidelined, q.s.Spilled, q.s.HeldBack
	return st
}

// TakeEffects returns what happened since the last call.
func (q *Queue) TakeEffects() Effects {
	e := q.eff
	q.eff = Effects{}
	return e
}

// RecordsBefore takes, of the records the queue made on its own
// (Effects.Records, in position order), those before position pos: an
// owner about to write pos submits them first, since a partition's
// appends go in position order.
func (q *Queue) RecordsBefore(pos uint64) []*record.Record {
	n := 0
	for n < len(q.eff.Records) && q.eff.Records[n].Pos < pos {
		n++
	}
	if n == 0 {
		return nil
	}
	out := q.eff.Records[:n:n]
	q.eff.Records = q.eff.Records[n:]
	return out
}

// Requeue hands back effects taken with TakeEffects but not acted on.
func (q *Queue) Requeue(e Effects) {
	q.eff.Ready += e.Ready
	q.eff.WakeAll = q.eff.WakeAll || e.WakeAll
	q.eff.Gone = append(q.eff.Gone, e.Gone...)
	q.eff.Handoffs = append(q.eff.Handoffs, e.Handoffs...)
	q.eff.Records = append(q.eff.Records, e.Records...)
}

// Last is the last position taken in the queue's partition.
func (q *Queue) Last() uint64 { return q.last }

// SetLast sets the last position (after a failed write: the partition's
// durable end).
func (q *Queue) SetLast(pos uint64) { q.last = pos }

// take takes the next position.
func (q *Queue) take() uint64 {
	q.last++
	return q.last
}

// Counts are the approximate counts SQS reports.
type Counts struct {
	Visible, InFlight, Delayed int
	OldestSent                 int64 // unix ms of the oldest live message, 0 if none
}

// Ready returns the number of messages ready to receive as of the last
// operation (Counts also expires the timers due).
func (q *Queue) Ready() int { return q.t.Len() - q.inFlight - q.delayed - q.leaving }

// Counts returns the current counts after expiring timers at now.
func (q *Queue) Counts(now time.Time) Counts {
	q.Advance(now)
	c := Counts{InFlight: q.inFlight, Delayed: q.delayed}
	c.Visible = q.Ready()
	if m := q.t.Oldest(); m != nil {
		c.OldestSent = m.Sent
	}
	for _, m := range q.t.Odd() {
		if c.OldestSent == 0 || m.Sent < c.OldestSent {
			c.OldestSent = m.Sent
		}
	}
	return c
}

// InFlight is the number of messages in flight.
func (q *Queue) InFlight() int { return q.inFlight }

func ms(t time.Time) int64 { return t.UnixMilli() }

// Lookup returns a message by sequence (its Send's position), unless it is
// leaving.
func (q *Queue) Lookup(seq uint64) (*Msg, bool) {
	m, ok := q.t.Get(seq)
	if !ok || m.State == Leaving {
		return nil, false
	}
	return m, true
}

// Find returns a message by sequence, leaving ones included (compaction
// moves their bodies too).
func (q *Queue) Find(seq uint64) (*Msg, bool) { return q.t.Get(seq) }

// Messages calls f for every message, leaving ones included, in sequence
// order (for snapshots and peeking).
func (q *Queue) Messages(f func(*Msg)) {
	q.t.Each(func(m *Msg) bool { f(m); return true })
}

// NextWake is the earliest time a waiting message becomes visible, or zero.
func (q *Queue) NextWake() time.Time {
	if len(q.timers) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(q.timers[0].VisibleAt)
}

func (q *Queue) dedupKey(group, id string) string {
	return dedup.Key(q.cfg.DedupPerGroup, group, id)
}

// insert stores a copy of m, sharing its group name with the queue's
// other messages of that group (and its group's order for FIFO queues),
// and returns the stored entry, in no structure yet (Pending).
func (q *Queue) insert(m *Msg) *Msg {
	c := *m
	c.Entry, c.heapIdx = sched.Entry{}, -1
	c.flags = 0
	c.State = Pending
	if c.g != nil {
		n := q.groupName(c.g.s)
		n.refs++
		c.g = n
	}
	p := q.t.Add(&c)
	if q.cfg.FIFO {
		g := q.group(p.Group())
		i := len(g.msgs)
		for i > 0 && g.msgs[i-1].Seq > p.Seq { // keep group order by sequence
			i--
		}
		g.msgs = append(g.msgs, nil)
		copy(g.msgs[i+1:], g.msgs[i:])
		g.msgs[i] = p
	}
	return p
}

// place puts a message (in no structure) where its state says: in flight
// (an InFlight state), or by its VisibleAt.
func (q *Queue) place(now time.Time, m *Msg, state State) {
	switch state {
	case InFlight:
		m.State = InFlight
		q.inFlight++
		if q.cfg.FIFO {
			q.group(m.Group()).inFlight++
		} else {
			q.s.Acquire(&m.Entry, m.Tenant())
		}
		heap.Push(&q.timers, m)
	case Leaving:
		m.State = Leaving
		q.leaving++
	default:
		q.schedule(now, m)
	}
}

func (q *Queue) group(name string) *group {
	g := q.groups[name]
	if g == nil {
		g = &group{name: name}
		q.groups[name] = g
	}
	return g
}

// schedule puts a message that is not in flight where its VisibleAt says.
func (q *Queue) schedule(now time.Time, m *Msg) {
	if m.VisibleAt > ms(now) {
		m.State = Waiting
		q.delayed++
		heap.Push(&q.timers, m)
		q.eff.WakeAll = true // waiting receivers' timers may be too late now
		return
	}
	q.makeReady(ms(now), m)
}

func (q *Queue) makeReady(now int64, m *Msg) {
	m.State = Ready
	q.eff.Ready++
	if q.cfg.FIFO {
		q.queueGroup(q.group(m.Group()))
		return
	}
	m.Entry.Again = m.RecvCount() > 0
	q.s.Push(now, m.Seq, &m.Entry, m.Tenant(), int(m.Level))
}

func (q *Queue) queueGroup(g *group) {
	if !g.queued {
		g.queued = true
		q.gready = append(q.gready, g)
	}
}

// unlink takes a message out of whatever structure holds its state,
// leaving it in the table and its group (Pending).
func (q *Queue) unlink(m *Msg) {
	switch m.State {
	case Waiting:
		q.delayed--
		heap.Remove(&q.timers, int(m.heapIdx))
	case InFlight:
		q.inFlight--
		if q.cfg.FIFO {
			q.group(m.Group()).inFlight--
		}
		heap.Remove(&q.timers, int(m.heapIdx))
	case Leaving:
		q.leaving--
	}
	if !q.cfg.FIFO {
		q.s.Remove(&m.Entry) // leaves its lane, or settles
	}
	m.State = Pending
}

// remove takes a message out of the queue; its storage is released unless
// fKeep is set (it is put back elsewhere).
func (q *Queue) remove(m *Msg) {
	if q.cfg.FIFO && (m.State == InFlight || m.State == Leaving) {
		q.eff.WakeAll = true // its group may be deliverable again
	}
	q.unlink(m)
	q.t.Del(m)
	if m.g != nil {
		if n := q.names[m.g.s]; n == m.g {
			if n.refs--; n.refs <= 0 {
				delete(q.names, n.s)
			}
		}
	}
	if q.cfg.FIFO {
		g := q.groups[m.Group()]
		if g != nil {
			for i, x := range g.msgs {
				if x == m {
					g.msgs = append(g.msgs[:i], g.msgs[i+1:]...)
					break
				}
			}
			if len(g.msgs) == 0 && g.inFlight == 0 && !g.queued {
				delete(q.groups, m.Group())
			} else if len(g.msgs) > 0 && g.inFlight == 0 && g.msgs[0].State == Ready {
				q.queueGroup(g)
			}
		}
	}
	m.State = 255
	if !m.is(fKeep) {
		q.letGo(m)
	}
}

// letGo reports a message's body as no longer needed, if the queue holds
// it: each body kept is released once.
func (q *Queue) letGo(m *Msg) {
	if m.is(fHeld) {
		m.set(fHeld, false)
		q.eff.Gone = append(q.eff.Gone, Gone{Seq: m.Seq, Loc: m.Loc})
	}
}

// leave takes a message out of delivery for a move to another queue. prev
// is how it was before whatever made it leave.
func (q *Queue) leave(m *Msg, prev Msg) {
	q.unlink(m)
	m.State = Leaving
	q.leaving++
	if q.cfg.FIFO {
		q.eff.WakeAll = true
	}
	q.eff.Handoffs = append(q.eff.Handoffs, Handoff{Msg: *m, Prev: prev})
}

// Advance moves every message whose time has come out of the timer heap:
// delayed messages become ready, expired deliveries become visible again
// (or climb the retry ladder), and retention and MaxAge apply.
func (q *Queue) Advance(now time.Time) {
	t := ms(now)
	q.now = max(q.now, t)
	for len(q.timers) > 0 && q.timers[0].VisibleAt <= t {
		m := heap.Pop(&q.timers).(*Msg)
		prev := *m
		switch m.State {
		case Waiting:
			q.delayed--
		case InFlight:
			q.inFlight--
			if q.cfg.FIFO {
				q.group(m.Group()).inFlight--
				q.eff.WakeAll = true
			}
			if !m.is(fExpired) && len(q.cfg.RetryDelays) > 0 {
				// A visibility timeout is a failure: up the ladder.
				if !q.cfg.FIFO {
					q.s.Remove(&m.Entry)
				}
				m.State = Pending
				q.climb(now, m, prev, m.VisibleAt, "VisibilityTimeout", "", -1)
				continue
			}
		}
		if m.is(fExpired) {
			if !q.cfg.FIFO {
				q.s.Remove(&m.Entry)
			}
			m.State = Pending
			if m.is(fAged) {
				m.Failed(t, "MaxMessageAge", "")
				q.leave(m, prev)
			} else {
				q.remove(m)
			}
			continue
		}
		q.makeReady(t, m)
	}
	q.expire(now)
	q.dedup.Expire(t)
}

// expire applies retention and MaxAge: messages sent before the cut are
// dropped (or dead-lettered, by MaxAge with AgeToDLQ); one in flight is
// dealt with when its visibility ends. Drops need no record: recovery
// makes them again from the same times.
func (q *Queue) expire(now time.Time) {
	t := ms(now)
	retCut, ageCut := int64(-1<<62), int64(-1<<62)
	if q.cfg.Retention > 0 {
		retCut = t - q.cfg.Retention.Milliseconds()
	}
	if q.cfg.MaxAge > 0 {
		ageCut = t - q.cfg.MaxAge.Milliseconds()
	}
	cut := max(retCut, ageCut)
	if cut == -1<<62 {
		return
	}
	// Sends arrive in time order: walk from the oldest entry not looked
	// at yet, and look at the few that arrived out of order once a second.
	for {
		m := q.t.Oldest()
		if m == nil || m.Seq < q.expSeq {
			m = q.t.From(q.expSeq)
		}
		if m == nil {
			break
		}
		q.expSeq = m.Seq
		if m.Sent > cut {
			break
		}
		q.expSeq = m.Seq + 1
		q.expireOne(now, m, retCut)
	}
	if odd := q.oddDue(t); len(odd) > 0 {
		q.oddScan = t
		var old []*Msg
		for _, m := range odd {
			if m.Sent <= cut {
				old = append(old, m)
			}
		}
		for _, m := range old {
			q.expireOne(now, m, retCut)
		}
	}
}

// expireOne drops (or dead-letters) m, past its retention or MaxAge; one
// in flight is marked, and dealt with when its visibility ends.
func (q *Queue) expireOne(now time.Time, m *Msg, retCut int64) {
	byAge := m.Sent > retCut // past MaxAge, not retention
	switch m.State {
	case InFlight:
		m.set(fExpired, true)
		m.set(fAged, byAge && q.cfg.AgeToDLQ && m.DLQSource() == "")
		return
	case Leaving:
		return
	}
	if byAge && q.cfg.AgeToDLQ && m.DLQSource() == "" {
		prev := *m
		m.Failed(ms(now), "MaxMessageAge", "")
		q.leave(m, prev)
		return
	}
	if byAge {
		q.stats.DroppedMaxAge++
	} else {
		q.stats.DroppedRetention++
	}
	q.remove(m)
}

// climb moves a failed message (in no structure) one level up the retry
// ladder at time at: it waits the level's delay (or delay, when not
// negative) in its retry lane, or, past the last level, leaves for the
// dead-letter queue. The change is an Update record, applied here and
// handed to the owner to persist.
func (q *Queue) climb(now time.Time, m *Msg, prev Msg, at int64, reason, text string, delay time.Duration) {
	m.Failed(at, reason, text)
	if int(m.Level) >= len(q.cfg.RetryDelays) {
		q.stats.Exhausted++
		q.leave(m, prev)
		return
	}
	if delay < 0 {
		delay = q.cfg.RetryDelays[m.Level]
	}
	q.stats.Retried++
	u := *m
	u.Level++
	u.VisibleAt = at + delay.Milliseconds()
	r := &record.Record{Type: record.Update, Pos: q.take(), Seq: m.Seq, Msg: ToRecord(&u)}
	q.eff.Records = append(q.eff.Records, r)
	q.applyUpdate(now, m, r.Msg)
}

// timerHeap orders waiting and in-flight messages by VisibleAt.
type timerHeap []*Msg

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].VisibleAt != h[j].VisibleAt {
		return h[i].VisibleAt < h[j].VisibleAt
	}
	return h[i].Seq < h[j].Seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}
func (h *timerHeap) Push(x any) {
	m := x.(*Msg)
	m.heapIdx = int32(len(*h))
	*h = append(*h, m)
}
func (h *timerHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.heapIdx = -1
	return m
}

// ToRecord is a message's index as records carry it.
func ToRecord(m *Msg) *record.Msg {
	r := indexOf(m)
	return &r
}

// indexOf is ToRecord by value.
func indexOf(m *Msg) record.Msg {
	r := record.Msg{Seq: m.Seq, Sent: m.Sent, VisibleAt: m.VisibleAt, Group: m.Group(), DLQSource: m.DLQSource(),
		Count: m.RecvCount(), First: m.FirstRecv(), Last: m.LastReceive(), Fence: m.Fence(), State: uint8(m.State), Level: m.Level}
	if t := m.Tenant(); t != m.Group() {
		r.Tenant = t
	}
	r.Fail = failOf(m)
	r.Hint.A, r.Hint.B, r.Hint.C, r.Hint.D = m.Loc.Seg, m.Loc.Off, m.Loc.FLen, m.Loc.Idx
	return r
}

// failOf is a message's failure record as records carry it (nil: none).
func failOf(m *Msg) *record.Fail {
	f := m.Fail()
	if f == nil {
		return nil
	}
	return &record.Fail{Reason: f.Reason, LastError: f.LastError, First: f.First, Failures: f.Failures}
}

// sameFail reports whether a message's failure record says what a
// record's does.
func sameFail(f *FailInfo, r *record.Fail) bool {
	return f != nil && f.Reason == r.Reason && f.LastError == r.LastError && f.First == r.First && f.Failures == r.Failures
}

// groupName is the queue's shared copy of group id g, made if it has
// none yet (insert counts its references).
func (q *Queue) groupName(g string) *gname {
	n := q.names[g]
	if n == nil {
		n = &gname{s: g}
		q.names[g] = n
	}
	return n
}

// fromRecord makes an index entry (in no structure) from a record's, to
// insert. It is a value, and its group name is the queue's shared copy:
// what insert stores is a copy, so an entry or a name of its own would be
// garbage at once (two allocations for every message sent).
func (q *Queue) fromRecord(r *record.Msg) Msg {
	m := Msg{Seq: r.Seq, Sent: r.Sent, VisibleAt: r.VisibleAt, Level: r.Level, State: State(r.State), heapIdx: -1}
	if r.Group != "" {
		m.g = q.groupName(r.Group)
	}
	if r.Tenant != "" {
		m.SetTenant(r.Tenant)
	}
	m.SetDLQSource(r.DLQSource)
	m.SetDelivery(r.Count, r.First, r.Last, r.Fence)
	if r.Fail != nil {
		m.SetFail(&FailInfo{Reason: r.Fail.Reason, LastError: r.Fail.LastError, First: r.Fail.First, Failures: r.Fail.Failures})
	}
	m.Loc = Loc{Seg: r.Hint.A, Off: r.Hint.B, FLen: r.Hint.C, Idx: r.Hint.D}
	return m
}

// oddDue returns the entries stored out of order when a second has passed
// since they were last looked at (nil otherwise, without allocating).
func (q *Queue) oddDue(t int64) []*Msg {
	if t-q.oddScan < 1000 {
		return nil
	}
	return q.t.Odd()
}
