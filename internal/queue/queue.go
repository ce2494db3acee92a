// Package queue is the per-queue state machine: messages, visibility,
// delays, FIFO groups, deduplication, receive counts and the dead-letter
// hand-off. It is deterministic: no goroutines, no clock calls, no I/O.
// Every operation takes the current time; the caller (the broker) owns the
// lock, the durability of the records it persists, and the clock.
package queue

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"time"

	"github.com/sluicemq/sluice/internal/sched"
)

// State is where a message is in its lifecycle.
type State uint8

const (
	// Pending: sent, waiting for its record to be durable; never delivered.
	Pending State = iota
	// Delayed or invisible: waits in the timer heap until VisibleAt.
	Waiting
	// Ready: may be delivered.
	Ready
	// InFlight: delivered, invisible until VisibleAt.
	InFlight
)

// Msg is the in-memory index entry of one live message: what scheduling
// needs, and where the rest (body, attributes, ids) lives on disk. A
// queue stores its entries by value (see table): 88 bytes each.
type Msg struct {
	sched.Entry // where the scheduler keeps it (standard queues)

	Seq       uint64
	Sent      int64 // unix ms
	VisibleAt int64 // unix ms
	Loc       Loc
	g         *gname    // MessageGroupId (FIFO order), nil when none
	dlv       *delivery // nil until the first receive
	// x holds what few messages have (a tenant other than the group, a
	// dead-letter source, failures): one pointer instead of 40 bytes in
	// every entry. Entries are copied (into records, into other queues,
	// to readers outside the lock), so x and dlv are never modified in
	// place: setters replace them.
	x       *extra
	heapIdx int32
	State   State
	// Level is the retry level (0: first attempts), the lane it waits in.
	Level uint8
	flags msgFlags
}

// gname is a message group id, shared by a queue's messages of that group
// (refs counts them).
type gname struct {
	s    string
	refs int32
}

// delivery is what a message's receives left: receive count, first and
// latest receive (unix ms) and the fence of the latest.
type delivery struct {
	first, last int64
	count       int32
	fence       uint32
}

// Group is the message group id ("" if none).
func (m *Msg) Group() string {
	if m.g == nil {
		return ""
	}
	return m.g.s
}

// SetGroup sets the message group id; a queue shares one copy of the
// name among its messages once the entry is stored.
func (m *Msg) SetGroup(g string) {
	if g == "" {
		m.g = nil
		return
	}
	m.g = &gname{s: g}
}

// deliveryOf is the message's delivery record; zero if never received.
func (m *Msg) deliveryOf() delivery {
	if m.dlv == nil {
		return delivery{}
	}
	return *m.dlv
}

// RecvCount is how many times the message was received.
func (m *Msg) RecvCount() int32 { return m.deliveryOf().count }

// FirstRecv is the unix ms of the first receive, 0 if none.
func (m *Msg) FirstRecv() int64 { return m.deliveryOf().first }

// Delivered is the unix ms of the latest receive, 0 if none.
func (m *Msg) Delivered() int64 { return m.deliveryOf().last }

// Fence counts deliveries: a receipt handle carries the fence of its
// delivery, so an older handle is recognisable.
func (m *Msg) Fence() uint32 { return m.deliveryOf().fence }

// SetDelivery sets the receive count, first and latest receive times and
// fence.
func (m *Msg) SetDelivery(count int32, first, last int64, fence uint32) {
	if count == 0 && first == 0 && last == 0 && fence == 0 {
		m.dlv = nil
		return
	}
	m.dlv = &delivery{first: first, last: last, count: count, fence: fence}
}

// msgFlags: fExpired: retention passed while in flight, dropped when it
// returns (fAged: to the dead-letter queue); fMoving: leaving for another
// queue with its storage; fPrepared: sent, its record not yet durable
// (never delivered); fGone: left the queue (see table).
type msgFlags uint8

const (
	fExpired msgFlags = 1 << iota
	fAged
	fMoving
	fPrepared
)

func (m *Msg) is(f msgFlags) bool { return m.flags&f != 0 }

func (m *Msg) set(f msgFlags, on bool) {
	if on {
		m.flags |= f
	} else {
		m.flags &^= f
	}
}

type extra struct {
	tenant    string
	hasTenant bool // tenant differs from the group
	dlqSource string
	fail      *FailInfo
}

func (m *Msg) withExtra(f func(x *extra)) {
	var x extra
	if m.x != nil {
		x = *m.x
	}
	f(&x)
	if x == (extra{}) {
		m.x = nil
		return
	}
	m.x = &x
}

// Tenant is the message's tenant key.
func (m *Msg) Tenant() string {
	if m.x != nil && m.x.hasTenant {
		return m.x.tenant
	}
	return m.Group()
}

// SetTenant sets the tenant key (free when it is the group).
func (m *Msg) SetTenant(t string) {
	if t == m.Group() && (m.x == nil || !m.x.hasTenant) {
		return
	}
	m.withExtra(func(x *extra) {
		x.tenant, x.hasTenant = t, true
		if t == m.Group() {
			x.tenant, x.hasTenant = "", false
		}
	})
}

// DLQSource is the ARN of the queue a dead-lettered message came from.
func (m *Msg) DLQSource() string {
	if m.x == nil {
		return ""
	}
	return m.x.dlqSource
}

// SetDLQSource sets the dead-letter source ("" clears it).
func (m *Msg) SetDLQSource(s string) {
	if s == m.DLQSource() {
		return
	}
	m.withExtra(func(x *extra) { x.dlqSource = s })
}

// Fail is the message's failure record, nil if it never failed. Do not
// modify it: SetFail replaces it.
func (m *Msg) Fail() *FailInfo {
	if m.x == nil {
		return nil
	}
	return m.x.fail
}

// SetFail replaces the failure record (nil clears it).
func (m *Msg) SetFail(f *FailInfo) {
	if f == m.Fail() {
		return
	}
	m.withExtra(func(x *extra) { x.fail = f })
}

// FailInfo is what a message's failures left behind.
type FailInfo struct {
	Reason    string // VisibilityTimeout, Retry, Reject, MaxReceiveCount, MaxMessageAge
	LastError string // the consumer's reason text, if it gave one
	First     int64  // unix ms of the first failure
	Failures  int32
}

// Failed records one failure of a message at now.
func (m *Msg) Failed(now int64, reason, lastError string) {
	f := FailInfo{First: now}
	if old := m.Fail(); old != nil {
		f = *old // entries are copied into records: never modify a shared one
	}
	f.Reason = reason
	if lastError != "" {
		f.LastError = lastError
	}
	f.Failures++
	m.SetFail(&f)
}

// Loc is where the message's full record is stored; opaque to the queue.
type Loc struct {
	Seg, Off, FLen, Idx uint32
}

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
	// level's delay in its own lane; past the last level it leaves for the
	// dead-letter queue (TakeExhausted). Empty: plain SQS behaviour.
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

// DedupWindow is how long a FIFO deduplication id is remembered.
const DedupWindow = 5 * time.Minute

// MaxInFlight is SQS's in-flight limit on standard queues.
const MaxInFlight = 120000

type dedupEntry struct {
	until  int64
	id     string
	seqnum string
}

type group struct {
	name     string
	msgs     []*Msg // in order; deleted ones removed
	inFlight int
	queued   bool
}

// Queue is one queue's state. Not safe for concurrent use.
type Queue struct {
	cfg   Config
	t     table             // the messages
	names map[string]*gname // their group ids
	s     *sched.Sched      // standard queues: the ready messages
	// oddScan is when expiry last looked at the messages that arrived out
	// of sequence order (unix ms).
	oddScan  int64
	expSeq   uint64 // expiry has looked at every entry below it
	timers   timerHeap
	groups   map[string]*group
	gready   []*group // FIFO: groups that may have a deliverable head
	dedup    map[string]dedupEntry
	dedupQ   []string
	dropped  []Loc
	aged     []*Msg // past MaxAge, leaving for the dead-letter queue
	failed   []*Msg // left the retry ladder (exhausted or rejected)
	updated  []*Msg // changed by the ladder: the owner persists them
	stats    Stats
	now      int64 // the latest time seen
	pending  int   // prepared messages
	inFlight int
	delayed  int
	nextSeq  uint64
	lastNum  uint64
}

// New returns an empty queue.
func New(cfg Config) *Queue {
	q := &Queue{cfg: cfg, names: map[string]*gname{}, groups: map[string]*group{}, dedup: map[string]dedupEntry{}, nextSeq: 1}
	q.s = sched.New(cfg.Sched, q.entry)
	return q
}

func (q *Queue) entry(seq uint64) (*sched.Entry, int64, string, bool) {
	m, ok := q.t.get(seq)
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

// Sched exposes the scheduler for its figures and send limits.
func (q *Queue) Sched() *sched.Sched { return q.s }

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	st := q.stats
	st.Sidelined, st.Spilled, st.HeldBack = q.s.Sidelined, q.s.Spilled, q.s.HeldBack
	return st
}

// AllowSend applies the tenant's send limits (see sched.AllowSend).
func (q *Queue) AllowSend(now time.Time, tenant string, n int) (bool, time.Duration) {
	return q.s.AllowSend(ms(now), tenant, n)
}

// Config returns the configuration.
func (q *Queue) Config() Config { return q.cfg }

// Counts are the approximate counts SQS reports.
type Counts struct {
	Visible, InFlight, Delayed int
	OldestSent                 int64 // unix ms of the oldest live message, 0 if none
}

// Counts returns the current counts after expiring timers at now.
func (q *Queue) Counts(now time.Time) Counts {
	q.Advance(now)
	c := Counts{InFlight: q.inFlight, Delayed: q.delayed}
	c.Visible = q.t.n - q.inFlight - q.delayed - q.pending
	if m := q.t.oldest(); m != nil {
		c.OldestSent = m.Sent
	}
	for _, m := range q.t.odd {
		if c.OldestSent == 0 || m.Sent < c.OldestSent {
			c.OldestSent = m.Sent
		}
	}
	return c
}

// InFlight is the number of messages in flight.
func (q *Queue) InFlight() int { return q.inFlight }

func ms(t time.Time) int64 { return t.UnixMilli() }

// Dedup checks FIFO deduplication. It returns the earlier message id and
// sequence number when the send is a duplicate.
func (q *Queue) Dedup(now time.Time, group, dedupID string) (id, seqnum string, dup bool) {
	q.expireDedup(now)
	e, ok := q.dedup[q.dedupKey(group, dedupID)]
	if ok && e.until > ms(now) {
		return e.id, e.seqnum, true
	}
	return "", "", false
}

func (q *Queue) dedupKey(group, id string) string {
	if q.cfg.DedupPerGroup {
		return group + "\x00" + id
	}
	return id
}

func (q *Queue) expireDedup(now time.Time) {
	for len(q.dedupQ) > 0 {
		k := q.dedupQ[0]
		e := q.dedup[k]
		if e.until > ms(now) {
			return
		}
		delete(q.dedup, k)
		q.dedupQ = q.dedupQ[1:]
	}
}

// ContentDedupID is the deduplication id SQS derives from a body.
func ContentDedupID(body string) string {
	h := sha256.Sum256([]byte(body))
	return hex.EncodeToString(h[:])
}

// Prepare fills a new message's sequence (unless the caller set one), sequence number and times. The
// message is Pending until Commit.
func (q *Queue) Prepare(now time.Time, m *Msg, delay time.Duration) (seqNum string) {
	if m.Seq == 0 {
		m.Seq = q.nextSeq
	}
	if m.Seq >= q.nextSeq {
		q.nextSeq = m.Seq + 1
	}
	m.Sent = ms(now)
	m.VisibleAt = ms(now.Add(delay))
	if q.cfg.FIFO {
		n := uint64(now.UnixNano())
		if n <= q.lastNum {
			n = q.lastNum + 1
		}
		q.lastNum = n
		seqNum = formatSeqNum(n)
	}
	m.State = Pending
	m.set(fPrepared, true)
	q.pending++
	p := q.insert(m)
	if q.cfg.FIFO {
		g := q.group(p.Group())
		g.msgs = append(g.msgs, p)
	}
	return seqNum
}

// insert stores a copy of m, sharing its group name with the queue's
// other messages of that group, and returns the stored entry.
func (q *Queue) insert(m *Msg) *Msg {
	if m.g != nil {
		n := q.names[m.g.s]
		if n == nil {
			n = &gname{s: m.g.s}
			q.names[n.s] = n
		}
		n.refs++
		m.g = n
	}
	return q.t.add(m)
}

// Remember records a FIFO deduplication id for the window after sent, with
// the message id and sequence number a duplicate send is answered with.
func (q *Queue) Remember(sent time.Time, group, dedupID, id, seqNum string) {
	until := ms(sent.Add(DedupWindow))
	k := q.dedupKey(group, dedupID)
	q.dedup[k] = dedupEntry{until: until, id: id, seqnum: seqNum}
	q.dedupQ = append(q.dedupQ, k)
}

// Forget drops a remembered deduplication id (its send failed).
func (q *Queue) Forget(group, dedupID string) { delete(q.dedup, q.dedupKey(group, dedupID)) }

// DedupEntry is one remembered deduplication id.
type DedupEntry struct {
	Key, ID, SeqNum string
	Until           int64 // unix ms
}

// DedupEntries lists the deduplication ids still in their window.
func (q *Queue) DedupEntries(now time.Time) []DedupEntry {
	q.expireDedup(now)
	out := make([]DedupEntry, 0, len(q.dedup))
	seen := make(map[string]bool, len(q.dedup))
	for _, k := range q.dedupQ {
		if e, ok := q.dedup[k]; ok && !seen[k] {
			seen[k] = true
			out = append(out, DedupEntry{Key: k, ID: e.id, SeqNum: e.seqnum, Until: e.until})
		}
	}
	return out
}

// RestoreDedup puts back a remembered deduplication id (recovery).
func (q *Queue) RestoreDedup(e DedupEntry) {
	q.dedup[e.Key] = dedupEntry{until: e.Until, id: e.ID, seqnum: e.SeqNum}
	q.dedupQ = append(q.dedupQ, e.Key)
}

func formatSeqNum(n uint64) string {
	// 20 digits, increasing, non-consecutive, like SQS.
	s := make([]byte, 20)
	for i := 19; i >= 0; i-- {
		s[i] = byte('0' + n%10)
		n /= 10
	}
	return string(s)
}

// Commit makes a prepared message deliverable: its record is durable at loc.
// It reports false when the message is gone (purged while it was written).
func (q *Queue) Commit(now time.Time, seq uint64, loc Loc) bool {
	m, ok := q.t.get(seq)
	if !ok || !m.is(fPrepared) {
		return false
	}
	m.set(fPrepared, false)
	q.pending--
	m.Loc = loc
	q.schedule(now, m)
	return true
}

// Abort forgets a prepared message whose record failed to persist.
func (q *Queue) Abort(seq uint64) {
	if m, ok := q.t.get(seq); ok && m.is(fPrepared) {
		q.remove(m)
	}
}

// Restore inserts a recovered (or moved-in) message in its recorded state.
// It stores a copy: in is not the queue's entry.
func (q *Queue) Restore(now time.Time, in *Msg) {
	if _, ok := q.t.get(in.Seq); ok {
		return
	}
	if in.Seq >= q.nextSeq {
		q.nextSeq = in.Seq + 1
	}
	// A restored message may be a copy of one held elsewhere: its links
	// into that queue's structures mean nothing here.
	c := *in
	c.Entry, c.heapIdx = sched.Entry{}, -1
	c.set(fExpired|fAged|fGone|fPrepared|fMoving, false)
	m := q.insert(&c)
	if q.cfg.FIFO {
		g := q.group(m.Group())
		// keep group order by sequence
		i := len(g.msgs)
		for i > 0 && g.msgs[i-1].Seq > m.Seq {
			i--
		}
		g.msgs = append(g.msgs, nil)
		copy(g.msgs[i+1:], g.msgs[i:])
		g.msgs[i] = m
	}
	wasInFlight := m.State == InFlight
	m.State = Pending
	if wasInFlight && m.VisibleAt > ms(now) {
		m.State = InFlight
		q.inFlight++
		if q.cfg.FIFO {
			q.group(m.Group()).inFlight++
		} else {
			q.s.Acquire(&m.Entry, m.Tenant())
		}
		heap.Push(&q.timers, m)
		return
	}
	q.schedule(now, m)
}

func (q *Queue) group(name string) *group {
	g := q.groups[name]
	if g == nil {
		g = &group{name: name}
		q.groups[name] = g
	}
	return g
}

// schedule puts a non-in-flight message where its VisibleAt says.
func (q *Queue) schedule(now time.Time, m *Msg) {
	if m.VisibleAt > ms(now) {
		m.State = Waiting
		q.delayed++
		heap.Push(&q.timers, m)
		return
	}
	q.makeReady(ms(now), m)
}

func (q *Queue) makeReady(now int64, m *Msg) {
	m.State = Ready
	if q.cfg.FIFO {
		q.queueGroup(q.group(m.Group()))
		return
	}
	q.s.Push(now, m.Seq, &m.Entry, m.Tenant(), int(m.Level))
}

func (q *Queue) queueGroup(g *group) {
	if !g.queued {
		g.queued = true
		q.gready = append(q.gready, g)
	}
}

// Advance moves every message whose time has come out of the timer heap.
func (q *Queue) Advance(now time.Time) {
	t := ms(now)
	q.now = max(q.now, t)
	for len(q.timers) > 0 && q.timers[0].VisibleAt <= t {
		m := heap.Pop(&q.timers).(*Msg)
		switch m.State {
		case Waiting:
			q.delayed--
		case InFlight:
			q.inFlight--
			if q.cfg.FIFO {
				q.group(m.Group()).inFlight--
			}
			if !m.is(fExpired) && len(q.cfg.RetryDelays) > 0 {
				// A visibility timeout is a failure: up the ladder.
				m.State = Pending
				q.climb(m, m.VisibleAt, "VisibilityTimeout", "", -1)
				continue
			}
		}
		if m.is(fExpired) {
			m.State = Pending // unlinked already
			if m.is(fAged) {
				q.ageOut(m, t)
			} else {
				q.remove(m)
			}
			continue
		}
		q.makeReady(t, m)
	}
	q.expire(t)
}

// expire applies retention and MaxAge: messages sent before the cut are
// dropped (or dead-lettered, by MaxAge with AgeToDLQ); one in flight is
// dealt with when its visibility ends.
func (q *Queue) expire(now int64) {
	retCut, ageCut := int64(-1<<62), int64(-1<<62)
	if q.cfg.Retention > 0 {
		retCut = now - q.cfg.Retention.Milliseconds()
	}
	if q.cfg.MaxAge > 0 {
		ageCut = now - q.cfg.MaxAge.Milliseconds()
	}
	cut := max(retCut, ageCut)
	if cut == -1<<62 {
		return
	}
	// Sends arrive in time order: walk from the oldest entry not looked
	// at yet (those in flight or being sent stay behind the cursor), and
	// look at the few that arrived out of order once a second.
	for {
		m := q.t.oldest()
		if m == nil || m.Seq < q.expSeq {
			m = q.t.from(q.expSeq)
		}
		if m == nil {
			break
		}
		q.expSeq = m.Seq
		if m.Sent > cut {
			break
		}
		q.expSeq = m.Seq + 1
		q.expireOne(m, now, retCut)
	}
	if len(q.t.odd) > 0 && now-q.oddScan >= 1000 {
		q.oddScan = now
		var old []*Msg
		for _, m := range q.t.odd {
			if m.Sent <= cut {
				old = append(old, m)
			}
		}
		for _, m := range old {
			q.expireOne(m, now, retCut)
		}
	}
}

// expireOne drops (or dead-letters) m, past its retention or MaxAge; one
// in flight is marked, and dealt with when its visibility ends.
func (q *Queue) expireOne(m *Msg, now, retCut int64) {
	byAge := m.Sent > retCut // past MaxAge, not retention
	switch m.State {
	case InFlight:
		m.set(fExpired, true)
		m.set(fAged, byAge && q.cfg.AgeToDLQ && m.DLQSource() == "")
		return
	case Pending:
		return // not committed yet: leave it (its send is in progress)
	}
	if byAge && q.cfg.AgeToDLQ && m.DLQSource() == "" {
		q.ageOut(m, now)
		return
	}
	if byAge {
		q.stats.DroppedMaxAge++
	} else {
		q.stats.DroppedRetention++
	}
	q.remove(m)
}

// takeOut removes a message that leaves with its storage (for another
// queue): its location is not released.
func (q *Queue) takeOut(m *Msg) {
	m.set(fMoving, true)
	q.remove(m)
	m.set(fMoving, false)
}

// ageOut takes a message past MaxAge out for the dead-letter queue.
func (q *Queue) ageOut(m *Msg, now int64) {
	m.Failed(now, "MaxMessageAge", "")
	q.takeOut(m)
	q.aged = append(q.aged, m)
}

// TakeAged returns the messages that passed MaxAge and must go to the
// dead-letter queue (their storage goes with them).
func (q *Queue) TakeAged() []*Msg {
	a := q.aged
	q.aged = nil
	return a
}

// climb moves a failed message (not in any structure) one level up the
// retry ladder at time at: it waits the level's delay (or delay, when not
// negative) in its retry lane, or leaves for the dead-letter queue past
// the last level.
func (q *Queue) climb(m *Msg, at int64, reason, text string, delay time.Duration) {
	m.Failed(at, reason, text)
	if int(m.Level) >= len(q.cfg.RetryDelays) {
		q.stats.Exhausted++
		q.takeFailed(m)
		return
	}
	m.Level++
	if delay < 0 {
		delay = q.cfg.RetryDelays[m.Level-1]
	}
	m.VisibleAt = at + delay.Milliseconds()
	q.stats.Retried++
	q.updated = append(q.updated, m)
	m.State = Waiting
	q.delayed++
	heap.Push(&q.timers, m)
}

func (q *Queue) takeFailed(m *Msg) {
	q.takeOut(m)
	q.failed = append(q.failed, m)
}

// TakeFailed returns the messages that left the retry ladder (exhausted
// or rejected): they go to the dead-letter queue with their storage.
func (q *Queue) TakeFailed() []*Msg {
	f := q.failed
	q.failed = nil
	return f
}

// TakeUpdated returns the messages the ladder changed since the last
// call, for the owner to persist (ApplyUpdate replays them).
func (q *Queue) TakeUpdated() []*Msg {
	u := q.updated
	q.updated = nil
	return u
}

// Retry fails an in-flight message on the consumer's word: it climbs
// the retry ladder (with delay instead of the level's when delay >= 0);
// without a ladder it becomes visible after delay (0 when negative). It
// reports false when the message is not in flight.
func (q *Queue) Retry(now time.Time, seq uint64, delay time.Duration, reason string) bool {
	q.Advance(now)
	m, ok := q.t.get(seq)
	if !ok || m.State != InFlight {
		return false
	}
	q.unlink(m)
	if len(q.cfg.RetryDelays) == 0 {
		m.Failed(ms(now), "Retry", reason)
		q.stats.Retried++
		m.VisibleAt = ms(now) + max(delay, 0).Milliseconds()
		q.updated = append(q.updated, m)
		q.schedule(now, m)
		return true
	}
	q.climb(m, ms(now), "Retry", reason, delay)
	q.Advance(now)
	return true
}

// Defer puts an in-flight message off for delay without counting it as a
// failure (its receive does not count toward maxReceiveCount).
func (q *Queue) Defer(now time.Time, seq uint64, delay time.Duration) bool {
	q.Advance(now)
	m, ok := q.t.get(seq)
	if !ok || m.State != InFlight {
		return false
	}
	q.unlink(m)
	if rc := m.RecvCount(); rc > 0 {
		m.SetDelivery(rc-1, m.FirstRecv(), m.Delivered(), m.Fence())
	}
	m.VisibleAt = ms(now) + max(delay, 0).Milliseconds()
	q.stats.Deferred++
	q.updated = append(q.updated, m)
	q.schedule(now, m)
	return true
}

// Reject fails an in-flight message for good: it leaves for the
// dead-letter queue (TakeFailed).
func (q *Queue) Reject(now time.Time, seq uint64, reason string) bool {
	q.Advance(now)
	m, ok := q.t.get(seq)
	if !ok || m.State != InFlight {
		return false
	}
	m.Failed(ms(now), "Reject", reason)
	q.stats.Rejected++
	q.takeFailed(m)
	return true
}

// ApplyUpdate replays a persisted ladder change: the message takes the
// recorded level, failure info, receive count and visibility time.
func (q *Queue) ApplyUpdate(now time.Time, u *Msg) {
	m, ok := q.t.get(u.Seq)
	if !ok || m.is(fPrepared) {
		return
	}
	q.unlink(m)
	m.Level, m.VisibleAt = u.Level, u.VisibleAt
	m.SetDelivery(u.RecvCount(), m.FirstRecv(), m.Delivered(), m.Fence())
	m.SetFail(u.Fail())
	q.schedule(now, m)
}

// NextWake is the earliest time a waiting message becomes visible, or zero.
func (q *Queue) NextWake() time.Time {
	if len(q.timers) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(q.timers[0].VisibleAt)
}

// Delivery is the result of a receive for one message.
type Delivery struct {
	Msg *Msg
	// Prev is the message as it was before this receive: Revert(Prev)
	// undoes the delivery when its record cannot be persisted.
	Prev Msg
	// DeadLetter is true when the message exceeded maxReceiveCount: it left
	// this queue and must go to the dead-letter queue.
	DeadLetter bool
}

// Receive delivers up to max ready messages, each invisible for vis.
// Messages over the receive limit come back with DeadLetter set and are
// already removed from this queue.
func (q *Queue) Receive(now time.Time, max int, vis time.Duration) []Delivery {
	return q.ReceivePartition(now, max, vis, -1, math.MaxInt)
}

// ReceivePartition is Receive from one partition of a standard queue
// (-1: any, served in turn). spare is the number of other receivers
// waiting on the queue, for the scheduler's headroom.
func (q *Queue) ReceivePartition(now time.Time, max int, vis time.Duration, part, spare int) []Delivery {
	q.Advance(now)
	var out []Delivery
	if q.cfg.FIFO {
		return q.receiveFIFO(now, max, vis)
	}
	for len(out) < max && q.inFlight < MaxInFlight {
		seq, ok := q.s.Pop(ms(now), part, spare)
		if !ok {
			break
		}
		m, ok := q.t.get(seq)
		if !ok {
			continue
		}
		if q.cfg.Retention > 0 && m.Sent <= ms(now)-q.cfg.Retention.Milliseconds() {
			q.stats.DroppedRetention++
			q.remove(m)
			continue
		}
		out = append(out, q.deliver(now, m, vis))
	}
	return out
}

func (q *Queue) receiveFIFO(now time.Time, max int, vis time.Duration) []Delivery {
	var out []Delivery
	for len(out) < max && len(q.gready) > 0 {
		g := q.gready[0]
		q.gready[0] = nil
		q.gready = q.gready[1:]
		g.queued = false
		if g.inFlight > 0 {
			continue // locked: requeued when its in-flight messages settle
		}
		// Deliver from the head of the group, in order. Messages delivered
		// in this receive are in flight; stop at the first that is not ready.
		for i := 0; i < len(g.msgs) && len(out) < max; {
			m := g.msgs[i]
			if m.State == InFlight {
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
			d := q.deliver(now, m, vis)
			out = append(out, d)
			if !d.DeadLetter {
				i++
			}
		}
	}
	return out
}

func (q *Queue) deliver(now time.Time, m *Msg, vis time.Duration) Delivery {
	prev := *m
	prev.State = Ready // the scheduler took it off its lane already
	if q.cfg.MaxReceiveCount > 0 && int(m.RecvCount()) >= q.cfg.MaxReceiveCount {
		m.Failed(ms(now), "MaxReceiveCount", "")
		q.takeOut(m) // its storage goes to the dead-letter queue with it
		return Delivery{Msg: m, Prev: prev, DeadLetter: true}
	}
	first := m.FirstRecv()
	if first == 0 {
		first = ms(now)
	}
	m.SetDelivery(m.RecvCount()+1, first, ms(now), m.Fence()+1)
	m.VisibleAt = ms(now.Add(vis))
	m.State = InFlight
	q.inFlight++
	if q.cfg.FIFO {
		q.group(m.Group()).inFlight++
	}
	heap.Push(&q.timers, m)
	return Delivery{Msg: m, Prev: prev}
}

// Revert puts a message back exactly as prev (a copy taken before a
// change) says: delivery, visibility, level, failures and state, whether
// the message is still in the queue or was taken out of it (its storage
// stays counted either way). It undoes a change whose record could not
// be persisted.
func (q *Queue) Revert(now time.Time, prev Msg) {
	if m, ok := q.t.get(prev.Seq); ok {
		if m.is(fPrepared) {
			return
		}
		q.takeOut(m)
	}
	c := prev
	c.Entry, c.heapIdx = sched.Entry{}, -1
	c.set(fExpired|fAged|fGone|fPrepared|fMoving, false)
	state := c.State
	m := q.insert(&c)
	if q.cfg.FIFO {
		g := q.group(m.Group())
		i := len(g.msgs)
		for i > 0 && g.msgs[i-1].Seq > m.Seq {
			i--
		}
		g.msgs = append(g.msgs, nil)
		copy(g.msgs[i+1:], g.msgs[i:])
		g.msgs[i] = m
	}
	m.State = Pending
	if state == InFlight {
		m.State = InFlight
		q.inFlight++
		if q.cfg.FIFO {
			q.group(m.Group()).inFlight++
		} else {
			q.s.Acquire(&m.Entry, m.Tenant())
		}
		heap.Push(&q.timers, m)
		return
	}
	q.schedule(now, m)
}

// Lookup returns a live message by sequence.
func (q *Queue) Lookup(seq uint64) (*Msg, bool) {
	m, ok := q.t.get(seq)
	if !ok || m.is(fPrepared) {
		return nil, false
	}
	return m, true
}

// Delete removes a message. It reports whether it was live.
func (q *Queue) Delete(seq uint64) bool {
	m, ok := q.t.get(seq)
	if !ok || m.is(fPrepared) {
		return false
	}
	q.remove(m)
	return true
}

// SetVisibility makes an in-flight message visible at now+d. It returns
// false when the message is not in flight.
func (q *Queue) SetVisibility(now time.Time, seq uint64, d time.Duration) bool {
	q.Advance(now)
	m, ok := q.t.get(seq)
	if !ok || m.State != InFlight {
		return false
	}
	m.VisibleAt = ms(now.Add(d))
	heap.Fix(&q.timers, int(m.heapIdx))
	q.Advance(now)
	return true
}

// ApplyReceive sets a message's delivery state as a replayed record says.
func (q *Queue) ApplyReceive(now time.Time, seq uint64, rc int32, first, delivered, visibleAt int64, fence uint32, level uint8) {
	m, ok := q.t.get(seq)
	if !ok {
		return
	}
	q.unlink(m)
	m.SetDelivery(rc, first, delivered, fence)
	m.VisibleAt, m.Level = visibleAt, level
	m.State = InFlight
	q.inFlight++
	if q.cfg.FIFO {
		q.group(m.Group()).inFlight++
	} else {
		q.s.Acquire(&m.Entry, m.Tenant())
	}
	heap.Push(&q.timers, m)
	q.Advance(now)
}

// ApplyVisibility sets VisibleAt of an in-flight message (replay).
func (q *Queue) ApplyVisibility(now time.Time, seq uint64, visibleAt int64) {
	m, ok := q.t.get(seq)
	if !ok || m.State != InFlight {
		return
	}
	m.VisibleAt = visibleAt
	heap.Fix(&q.timers, int(m.heapIdx))
	q.Advance(now)
}

// Purge removes every message with a sequence below upTo (0: all).
func (q *Queue) Purge(upTo uint64) []uint64 {
	if upTo == 0 || q.allBelow(upTo) {
		return q.purgeAll()
	}
	var seqs []uint64
	q.t.each(func(m *Msg) bool {
		if upTo == 0 || m.Seq < upTo {
			seqs = append(seqs, m.Seq)
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
	return seqs
}

// allBelow reports whether every message's sequence is below upTo.
func (q *Queue) allBelow(upTo uint64) bool {
	if q.t.top >= upTo {
		return false
	}
	for seq := range q.t.odd {
		if seq >= upTo {
			return false
		}
	}
	return true
}

// purgeAll removes every message by starting afresh, instead of taking
// each out of every structure it is in: a purge of millions of messages
// takes a pass over them. Per-tenant state goes too (send buckets
// included: a tenant may burst again after a purge).
func (q *Queue) purgeAll() []uint64 {
	seqs := make([]uint64, 0, q.t.n)
	q.t.each(func(m *Msg) bool {
		seqs = append(seqs, m.Seq)
		if m.Loc.Seg != 0 && !m.is(fPrepared) {
			q.dropped = append(q.dropped, m.Loc)
		}
		return true
	})
	s := q.s
	q.s = sched.New(q.cfg.Sched, q.entry)
	q.s.Sidelined, q.s.Spilled, q.s.HeldBack = s.Sidelined, s.Spilled, s.HeldBack
	q.t = table{}
	q.names, q.groups = map[string]*gname{}, map[string]*group{}
	q.gready, q.timers, q.updated = nil, nil, nil
	q.pending, q.inFlight, q.delayed = 0, 0, 0
	q.expSeq = 0
	return seqs
}

// SentBefore lists the messages sent before (unix ms), of one tenant
// unless anyTenant: what the watermark drops (DropWatermarked).
func (q *Queue) SentBefore(before int64, tenant string, anyTenant bool) []uint64 {
	var seqs []uint64
	q.t.each(func(m *Msg) bool {
		if !m.is(fPrepared) && m.Sent < before && (anyTenant || m.Tenant() == tenant) {
			seqs = append(seqs, m.Seq)
		}
		return true
	})
	return seqs
}

// DropWatermarked removes the listed messages, counted as dropped by the
// watermark, and returns how many were live.
func (q *Queue) DropWatermarked(seqs []uint64) int {
	n := 0
	for _, s := range seqs {
		if q.Delete(s) {
			n++
		}
	}
	q.stats.DroppedWatermark += uint64(n)
	return n
}

// Messages calls f for every live message, in sequence order (for
// snapshots and peeking).
func (q *Queue) Messages(f func(*Msg)) {
	q.t.each(func(m *Msg) bool { f(m); return true })
}

// unlink takes a message out of whatever structure holds its state,
// leaving it in msgs and its group.
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
	}
	if !q.cfg.FIFO {
		q.s.Remove(&m.Entry) // leaves its lane, or settles
	}
	m.State = Pending
}

func (q *Queue) remove(m *Msg) {
	if m.is(fPrepared) {
		m.set(fPrepared, false)
		q.pending--
	}
	q.unlink(m)
	q.t.del(m)
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
	if m.Loc.Seg != 0 && !m.is(fMoving) {
		q.dropped = append(q.dropped, m.Loc)
	}
}

// TakeReleased returns the locations of messages that left the queue
// (deleted, purged, expired) since the last call, so their owner can
// release the storage. Messages taken with TakeForMove are not listed:
// their storage goes with them.
func (q *Queue) TakeReleased() []Loc {
	d := q.dropped
	q.dropped = nil
	return d
}

// TakeForMove removes a live message that leaves for another queue along
// with its storage (a redrive), and returns it.
func (q *Queue) TakeForMove(seq uint64) (*Msg, bool) {
	m, ok := q.t.get(seq)
	if !ok || m.is(fPrepared) {
		return nil, false
	}
	q.takeOut(m)
	return m, true
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
