package sched

import (
	"hash/fnv"
	"math"
	"sort"
	"time"
)

// Config is the policy of one queue. Zero values mean "off" unless said.
type Config struct {
	// Fair serves tenants by deficit round robin. When false, each lane is
	// one FIFO for the whole shard and per-tenant receive limits do
	// not apply (plain SQS behaviour); send limits still do.
	Fair bool
	// Shards is the number of shards (default 1);
	// ShardsPerTenant how many of them a tenant hashes to (default
	// min(2, Shards)).
	Shards, ShardsPerTenant int
	// RetryLevels is the number of retry lanes.
	RetryLevels int
	// SidelineAge (ms): ready messages older than this wait in the backlog
	// lane. 0: off.
	SidelineAge int64
	// Adaptive turns the backlog mode on (with SidelineAge 0): once a
	// tenant's backlog stands (its oldest ready message, never received,
	// has waited StandingTarget + StandingInterval), its messages older
	// than StandingTarget wait in the backlog lane, so that what it sends
	// now is served first, until its backlog lane is empty again.
	Adaptive bool
	// LowerLaneShare is the minimum share of picks each passed-over lower
	// lane gets. Default 0.1.
	LowerLaneShare float64
	// Headroom is the number of waiting receivers kept back for tenants
	// below their fair share of the messages in flight: while fewer than
	// Headroom other receivers wait, a tenant above its share (more in
	// flight than the in-flight total divided by the busy tenants) is not
	// served, so a quiet tenant's next message finds a receiver waiting
	// instead of the next one to finish. It costs the heavy tenant that
	// many receivers' worth of throughput while other tenants are busy;
	// a tenant alone is always served. 0: off (fully work-conserving).
	Headroom int
	// Limits are the per-tenant defaults; Overrides replace them for named
	// tenants.
	Limits    Limits
	Overrides map[string]Limits
}

// Limits are one tenant's weight and limits. Zero means none (weight: 1).
type Limits struct {
	Weight       float64
	MaxInFlight  int
	ReceiveRate  float64 // messages/s
	ReceiveBurst float64
	SendRate     float64 // messages/s
	SendBurst    float64
	// SendRateGrowth is how much the send limit grows per minute of steady
	// use above 80% of it (0.5: +50%), up to SendRateCeiling (default ten
	// times SendRate).
	SendRateGrowth  float64
	SendRateCeiling float64
	// BacklogTarget: above this many ready messages, the tenant's send
	// limit shrinks in proportion (target/backlog).
	BacklogTarget int
}

// Lanes, by priority. Retry levels sit between Live and Spillover; their
// indexes are Live+level.
const Live = 0

// The backlog mode's constants (Config.Adaptive; docs/anti-backlog.md
// says how they were chosen). They are CoDel's target and interval, for a
// queue: a backlog stands when its oldest ready message, never received,
// has waited longer than StandingTarget for a whole StandingInterval (so
// for StandingTarget + StandingInterval in all: a burst that drains within
// that never engages the mode); once it stands, a message that has waited
// longer than StandingTarget is old.
const (
	StandingTarget   = 1_000  // ms
	StandingInterval = 10_000 // ms
)

// Entry is the scheduler's part of a message, embedded by the owner.
type Entry struct {
	pt    *ptenant
	gen   uint32
	lane  uint8
	state uint8
	// Again says the message was received before (set by the owner before
	// Push): its wait is no sign of a standing backlog.
	Again bool
}

const (
	stNone uint8 = iota
	stQueued
	stInFlight
)

// Lookup resolves a sequence to its entry, sent time (unix ms) and
// tenant; ok is false when the message is gone.
type Lookup func(seq uint64) (e *Entry, sent int64, tenant string, ok bool)

// Sched is one queue's scheduler. Not safe for concurrent use.
type Sched struct {
	cfg     Config
	lookup  Lookup
	parts   []*shard
	tenants map[string]*tenant
	idle    []*tenant // tenants with nothing queued, swept once refilled
	next    int       // shard round robin
	ready   int
	// busy counts tenants with messages ready or in flight (not idle),
	// inflight the messages in flight: a tenant's fair share of the
	// messages in flight is inflight/busy.
	busy, inflight int
	// Counters since New. HeldBack counts picks that passed over a tenant
	// above its share to keep Headroom receivers waiting; Engaged counts
	// the times a tenant's backlog mode engaged.
	Sidelined, Spilled, HeldBack, Engaged uint64
}

type shard struct {
	idx    int
	count  int
	rings  []ring    // by lane; the spillover ring is at spillLane
	credit []float64 // by lane
}

// ring is one lane's round of tenants. As in fq_codel, a tenant that
// joins (it had nothing waiting in the lane) is served ahead of the
// tenants already in the round, for one turn, and then goes to the back
// of the round: a tenant that sends little is served at once, while
// backlogged tenants share the rest by deficit round robin.
type ring struct {
	fresh, old tq
}

type tq struct {
	ts []*ptenant
	h  int
}

func (q *tq) len() int { return len(q.ts) - q.h }
func (q *tq) pop() *ptenant {
	pt := q.ts[q.h]
	q.ts[q.h] = nil
	q.h++
	if q.h >= len(q.ts) {
		q.ts, q.h = q.ts[:0], 0
	} else if q.h > 32 && q.h*2 > len(q.ts) {
		n := copy(q.ts, q.ts[q.h:])
		clear(q.ts[n:])
		q.ts = q.ts[:n]
		q.h = 0
	}
	return pt
}

func (r *ring) len() int { return r.fresh.len() + r.old.len() }
func (r *ring) head() *tq {
	if r.fresh.len() > 0 {
		return &r.fresh
	}
	return &r.old
}
func (r *ring) front() *ptenant     { q := r.head(); return q.ts[q.h] }
func (r *ring) popFront() *ptenant  { return r.head().pop() }
func (r *ring) push(pt *ptenant)    { r.old.ts = append(r.old.ts, pt) }
func (r *ring) pushNew(pt *ptenant) { r.fresh.ts = append(r.fresh.ts, pt) }

// slot is one entry of a lane's deque: a message's sequence (48 bits)
// and the generation of its entry when queued (16 bits, enough to tell a
// stale slot, which is skipped, from the live one).
type slot uint64

const seqBits = 48

func mkSlot(seq uint64, gen uint32) slot {
	return slot(seq&(1<<seqBits-1) | uint64(uint16(gen))<<seqBits)
}
func (s slot) seq() uint64        { return uint64(s) & (1<<seqBits - 1) }
func (s slot) live(e *Entry) bool { return uint16(e.gen) == uint16(uint64(s)>>seqBits) }

type deque struct {
	s []slot
	h int
}

func (d *deque) push(s slot) { d.s = append(d.s, s) }
func (d *deque) empty() bool { return d.h >= len(d.s) }
func (d *deque) front() slot { return d.s[d.h] }
func (d *deque) pop() {
	d.s[d.h] = 0
	d.h++
	if d.h >= len(d.s) {
		d.s, d.h = d.s[:0], 0
	} else if d.h > 32 && d.h*2 > len(d.s) {
		n := copy(d.s, d.s[d.h:])
		d.s = d.s[:n]
		d.h = 0
	}
}

// ptenant is a tenant's share of one shard.
type ptenant struct {
	t       *tenant
	p       *shard
	dq      []deque   // by deque lane: live, retries, backlog
	n       []int     // live entries per deque
	inRing  []bool    // by ring lane
	deficit []float64 // by ring lane
	total   int
	spill   bool
}

type tenant struct {
	name     string
	lim      Limits
	parts    []int
	pts      []*ptenant
	inflight int
	ready    int
	capped   bool
	recv     bucket
	send     bucket
	sendLim  float64 // current (grown) send limit
	winStart int64
	winCount float64
	drain    rate
	idle     bool
	// engaged is when its backlog mode engaged (unix ms; 0: it is not):
	// its oldest ready message, never received, had then waited
	// StandingTarget + StandingInterval. split is the mode's point: what
	// the tenant sent at or before it is old (it waits in the backlog
	// lane), what it sent after is fresh. It is set StandingTarget before
	// the moment the mode engaged, and moves to StandingTarget before
	// now whenever the fresh side's own oldest message has waited that
	// long again (consumers that cannot keep up with fresh traffic either).
	engaged, split int64
}

// New returns an empty scheduler.
func New(cfg Config, lookup Lookup) *Sched {
	s := &Sched{lookup: lookup, tenants: map[string]*tenant{}}
	s.cfg = normalize(cfg)
	s.parts = s.newParts()
	return s
}

func normalize(c Config) Config {
	if c.Shards < 1 {
		c.Shards = 1
	}
	if c.ShardsPerTenant < 1 {
		c.ShardsPerTenant = min(2, c.Shards)
	}
	c.ShardsPerTenant = min(c.ShardsPerTenant, c.Shards)
	if c.LowerLaneShare <= 0 {
		c.LowerLaneShare = 0.1
	}
	c.RetryLevels = min(max(c.RetryLevels, 0), 60) // lanes fit a 64-bit mask
	c.Headroom = max(c.Headroom, 0)
	return c
}

func (s *Sched) lanes() int     { return s.cfg.RetryLevels + 3 }
func (s *Sched) spillLane() int { return s.cfg.RetryLevels + 1 }
func (s *Sched) dqLanes() int   { return s.cfg.RetryLevels + 2 }

// ringOf maps a deque lane to its ring lane: the backlog deque (last) is
// served by the backlog ring, after the spillover ring.
func (s *Sched) ringOf(d int) int {
	if d == s.dqLanes()-1 {
		return s.lanes() - 1
	}
	return d
}

// BacklogLane is the deque lane of sidelined old messages.
func (s *Sched) BacklogLane() int { return s.dqLanes() - 1 }

func (s *Sched) newParts() []*shard {
	ps := make([]*shard, s.cfg.Shards)
	for i := range ps {
		ps[i] = &shard{idx: i, rings: make([]ring, s.lanes()), credit: make([]float64, s.lanes())}
	}
	return ps
}

// Config returns the configuration in effect.
func (s *Sched) Config() Config { return s.cfg }

// SetConfig changes the policy. When the shape changes (shards, retry
// levels, fairness) every queued message is placed again, in order.
func (s *Sched) SetConfig(now int64, cfg Config) {
	cfg = normalize(cfg)
	old := s.cfg
	s.cfg = cfg
	for _, t := range s.tenants {
		t.lim = s.limits(t.name)
		t.sendLim = 0
	}
	if old.Shards == cfg.Shards && old.ShardsPerTenant == cfg.ShardsPerTenant &&
		old.RetryLevels == cfg.RetryLevels && old.Fair == cfg.Fair {
		// In name order: uncapped tenants join the rounds in this order,
		// which must not depend on map order.
		for _, t := range s.sortedTenants() {
			s.uncap(t)
		}
		return
	}
	// Reshape: collect the queued messages, give every tenant new
	// shard shares, and queue them again in sequence order. Tenant
	// objects stay, so in-flight messages settle against the right counts.
	type q struct {
		seq    uint64
		tenant string
		lane   int
	}
	var all []q
	for _, t := range s.tenants {
		for _, pt := range t.pts {
			if pt == nil {
				continue
			}
			for d := range pt.dq {
				for _, sl := range pt.dq[d].s[pt.dq[d].h:] {
					e, _, tenant, ok := s.lookup(sl.seq())
					if ok && e.pt == pt && sl.live(e) && e.state == stQueued {
						e.state, e.pt = stNone, nil
						all = append(all, q{sl.seq(), tenant, d})
					}
				}
			}
		}
		t.parts = Shard(t.name, cfg.Shards, cfg.ShardsPerTenant)
		t.pts = make([]*ptenant, len(t.parts))
		t.ready, t.capped = 0, false
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	s.parts = s.newParts()
	s.ready = 0
	for _, x := range all {
		e, _, _, _ := s.lookup(x.seq)
		name := x.tenant
		if !cfg.Fair {
			name = ""
		}
		s.Push(now, x.seq, e, name, min(x.lane, s.dqLanes()-1))
	}
	for _, t := range s.sortedTenants() {
		s.maybeIdle(t)
	}
}

// sortedTenants lists the tenants in name order.
func (s *Sched) sortedTenants() []*tenant {
	out := make([]*tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (s *Sched) limits(name string) Limits {
	l := s.cfg.Limits
	if o, ok := s.cfg.Overrides[name]; ok {
		if o.Weight > 0 {
			l.Weight = o.Weight
		}
		if o.MaxInFlight > 0 {
			l.MaxInFlight = o.MaxInFlight
		}
		if o.ReceiveRate > 0 {
			l.ReceiveRate, l.ReceiveBurst = o.ReceiveRate, o.ReceiveBurst
		}
		if o.SendRate > 0 {
			l.SendRate, l.SendBurst = o.SendRate, o.SendBurst
		}
		if o.BacklogTarget > 0 {
			l.BacklogTarget = o.BacklogTarget
		}
	}
	if l.Weight <= 0 {
		l.Weight = 1
	}
	l.Weight = max(l.Weight, 0.01)
	if l.ReceiveRate > 0 && l.ReceiveBurst < 1 {
		l.ReceiveBurst = max(1, l.ReceiveRate)
	}
	if l.SendRate > 0 && l.SendBurst < 1 {
		l.SendBurst = max(1, l.SendRate)
	}
	if l.SendRate > 0 && l.SendRateCeiling < l.SendRate {
		l.SendRateCeiling = 10 * l.SendRate
	}
	return l
}

func (s *Sched) tenant(name string) *tenant {
	if t := s.tenants[name]; t != nil {
		return t
	}
	t := &tenant{name: name, lim: s.limits(name)}
	s.busy++ // a new tenant is not idle until maybeIdle says so
	t.parts = Shard(name, s.cfg.Shards, s.cfg.ShardsPerTenant)
	t.pts = make([]*ptenant, len(t.parts))
	s.tenants[name] = t
	return t
}

// Shard picks the k distinct shards of n a tenant hashes to (its
// shuffle shard), deterministically: the same for a name everywhere.
func Shard(name string, n, k int) []int {
	if n == 1 {
		return []int{0}
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	x := h.Sum64()
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	out := make([]int, k)
	for i := 0; i < k; i++ {
		x = splitmix(x)
		j := i + int(x%uint64(n-i))
		perm[i], perm[j] = perm[j], perm[i]
		out[i] = perm[i]
	}
	return out
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	z := x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// TenantShards returns the shards a tenant hashes to.
func (s *Sched) TenantShards(name string) []int {
	if !s.cfg.Fair {
		name = ""
	}
	return Shard(name, s.cfg.Shards, s.cfg.ShardsPerTenant)
}

func (s *Sched) ptenant(t *tenant, i int) *ptenant {
	if pt := t.pts[i]; pt != nil {
		return pt
	}
	L := s.lanes()
	pt := &ptenant{t: t, p: s.parts[t.parts[i]], dq: make([]deque, s.dqLanes()), n: make([]int, s.dqLanes()),
		inRing: make([]bool, L), deficit: make([]float64, L)}
	t.pts[i] = pt
	return pt
}

// Push queues a ready message of tenant in deque lane (Live, Live+level
// for retries, or BacklogLane).
func (s *Sched) Push(now int64, seq uint64, e *Entry, tenant string, lane int) {
	if e.state != stNone {
		s.Remove(e)
	}
	if !s.cfg.Fair {
		tenant = ""
	}
	lane = min(max(lane, 0), s.dqLanes()-1)
	t := s.tenant(tenant)
	s.wake(t)
	// The least loaded of the tenant's shards.
	best := 0
	for i := 1; i < len(t.parts); i++ {
		if s.parts[t.parts[i]].count < s.parts[t.parts[best]].count {
			best = i
		}
	}
	pt := s.ptenant(t, best)
	e.pt, e.lane, e.state = pt, uint8(lane), stQueued
	e.gen++
	pt.dq[lane].push(mkSlot(seq, e.gen))
	pt.n[lane]++
	pt.total++
	pt.p.count++
	t.ready++
	s.ready++
	s.enlist(pt)
	s.sweep(now)
}

// enlist puts a tenant's shard share in the rings it belongs to.
func (s *Sched) enlist(pt *ptenant) {
	if pt.t.capped {
		return
	}
	if pt.spill {
		s.ringAdd(pt, s.spillLane())
		return
	}
	for d, n := range pt.n {
		if n > 0 {
			s.ringAdd(pt, s.ringOf(d))
		}
	}
}

func (s *Sched) ringAdd(pt *ptenant, l int) {
	if !pt.inRing[l] {
		pt.inRing[l] = true
		pt.p.rings[l].pushNew(pt)
	}
}

// Acquire counts a message as in flight for tenant without a pick: a
// delivery recovered from the log.
func (s *Sched) Acquire(e *Entry, tenant string) {
	if e.state != stNone {
		s.Remove(e)
	}
	if !s.cfg.Fair {
		tenant = ""
	}
	t := s.tenant(tenant)
	s.wake(t)
	t.inflight++
	s.inflight++
	e.pt, e.state = s.ptenant(t, 0), stInFlight
	e.gen++
	if s.cfg.Fair && t.lim.MaxInFlight > 0 && t.inflight >= t.lim.MaxInFlight {
		t.capped = true
	}
}

// Remove takes a message out of the scheduler: a queued one leaves its
// lane (deleted, purged, expired, moved), an in-flight one settles.
func (s *Sched) Remove(e *Entry) {
	switch e.state {
	case stQueued:
		pt := e.pt
		pt.n[e.lane]--
		pt.total--
		pt.p.count--
		pt.t.ready--
		s.ready--
		e.gen++
		if int(e.lane) == s.BacklogLane() {
			s.settleMode(pt.t)
		}
		s.maybeIdle(pt.t)
	case stInFlight:
		s.settle(e.pt.t)
	}
	e.state, e.pt = stNone, nil
}

// Settle is Remove for an in-flight message that will be pushed again.
func (s *Sched) settle(t *tenant) {
	t.inflight--
	s.inflight--
	s.uncap(t)
	s.maybeIdle(t)
}

func (s *Sched) uncap(t *tenant) {
	if t.capped && (t.lim.MaxInFlight == 0 || t.inflight < t.lim.MaxInFlight) {
		t.capped = false
		for _, pt := range t.pts {
			if pt != nil {
				s.enlist(pt)
			}
		}
	}
}

func (s *Sched) maybeIdle(t *tenant) {
	if t.ready == 0 && t.inflight == 0 && !t.idle {
		t.idle = true
		s.busy--
		s.idle = append(s.idle, t)
	}
}

// wake marks a tenant busy: it is about to have a message ready or in
// flight.
func (s *Sched) wake(t *tenant) {
	if t.idle {
		t.idle = false
		s.busy++
	}
}

// overShare reports whether one more message in flight would put t above
// its fair share of the messages in flight.
func (s *Sched) overShare(t *tenant) bool {
	return s.busy > 1 && (t.inflight+1)*s.busy > s.inflight+1
}

// sweep forgets a few idle tenants whose buckets have refilled.
func (s *Sched) sweep(now int64) { s.Sweep(now, 4) }

// Sweep looks at up to budget idle tenants and forgets those whose token
// buckets have refilled (the owner calls it periodically with a larger
// budget, so that idle tenants go even when nothing is sent).
func (s *Sched) Sweep(now int64, budget int) {
	for i := 0; i < budget && len(s.idle) > 0; i++ {
		t := s.idle[0]
		s.idle[0] = nil
		s.idle = s.idle[1:]
		if !t.idle || s.tenants[t.name] != t {
			continue
		}
		if t.recv.full(now, t.lim.ReceiveRate, t.lim.ReceiveBurst) && t.send.full(now, t.sendLimit(), t.lim.SendBurst) {
			delete(s.tenants, t.name)
			continue
		}
		s.idle = append(s.idle, t)
	}
}

// Forget lets go of the state of tenants left with nothing ready or in
// flight (after a purge, say): they leave the rounds at once, their lanes'
// storage goes, and those whose limits remember nothing (full token
// buckets) are forgotten. Otherwise that state stays until a receive
// passes each tenant in its round: hundreds of megabytes after purging a
// million tenants.
func (s *Sched) Forget(now int64) {
	for _, p := range s.parts {
		for l := range p.rings {
			r := &p.rings[l]
			for _, q := range []*tq{&r.fresh, &r.old} {
				var kept []*ptenant // a fresh array: the old one may be huge
				for _, pt := range q.ts[q.h:] {
					if pt.total > 0 {
						kept = append(kept, pt)
					} else {
						pt.inRing[l] = false
						pt.deficit[l] = 0
					}
				}
				q.ts, q.h = kept, 0
			}
		}
	}
	for _, t := range s.tenants {
		for _, pt := range t.pts {
			if pt != nil && pt.total == 0 {
				for d := range pt.dq {
					pt.dq[d] = deque{}
				}
			}
		}
	}
	s.Sweep(now, len(s.idle))
	// Go maps keep their size: copy what is left into fresh ones.
	tenants := make(map[string]*tenant, len(s.tenants))
	for k, t := range s.tenants {
		tenants[k] = t
	}
	s.tenants = tenants
	s.idle = append([]*tenant(nil), s.idle...)
}

// Pop picks the next message to deliver from shard part (-1: any)
// and marks it in flight. spare is the number of other receivers waiting
// (for Headroom; pass a large number when unknown). ok is false when
// nothing is eligible.
func (s *Sched) Pop(now int64, part, spare int) (seq uint64, ok bool) {
	hold := s.cfg.Fair && spare < s.cfg.Headroom && s.busy > 1
	if part >= 0 {
		if part >= len(s.parts) {
			return 0, false
		}
		return s.popPart(now, s.parts[part], hold)
	}
	for range s.parts {
		p := s.parts[s.next]
		s.next = (s.next + 1) % len(s.parts)
		if p.count == 0 {
			continue
		}
		if seq, ok := s.popPart(now, p, hold); ok {
			return seq, true
		}
	}
	return 0, false
}

func (s *Sched) popPart(now int64, p *shard, hold bool) (uint64, bool) {
	L := s.lanes()
	// failed marks the lanes whose pick failed in this call with tenants
	// still in them (all held back for headroom); popLane clears it when
	// it moves a tenant between lanes.
	var failed uint64
	for {
		// The highest lane with work, unless a passed-over lower lane has
		// earned its share. A lane whose pick fails is empty afterwards
		// (its tenants moved to other lanes or are capped) or holds only
		// tenants held back for headroom; it is not tried again, so this
		// ends.
		top := -1
		for l := 0; l < L; l++ {
			if p.rings[l].len() > 0 && failed&(1<<l) == 0 {
				top = l
				break
			}
		}
		if top < 0 {
			return 0, false
		}
		lane := top
		for l := top + 1; l < L; l++ {
			if p.rings[l].len() == 0 || failed&(1<<l) != 0 {
				continue
			}
			if l == L-1 && s.cfg.Adaptive && top == Live && !s.liveBehind(now, p) {
				continue // the backlog mode's old side: idle capacity only while fresh traffic keeps up
			}
			p.credit[l] = min(p.credit[l]+s.cfg.LowerLaneShare, 2)
			if p.credit[l] >= 1-1e-9 && lane == top {
				lane = l
			}
		}
		if seq, ok := s.popLane(now, p, lane, hold, &failed); ok {
			if lane != top {
				p.credit[lane]--
			}
			return seq, true
		}
		if p.rings[lane].len() > 0 {
			failed |= 1 << lane
		}
	}
}

// popLane serves one lane of a shard by deficit round robin.
func (s *Sched) popLane(now int64, p *shard, l int, hold bool, failed *uint64) (uint64, bool) {
	r := &p.rings[l]
	spill := l == s.spillLane()
	held := 0 // tenants at the front passed over for headroom, sent to the back
	for r.len() > held {
		pt := r.front()
		t := pt.t
		if s.cfg.Fair && (t.capped || (t.lim.MaxInFlight > 0 && t.inflight >= t.lim.MaxInFlight)) {
			t.capped = true
			r.popFront()
			pt.inRing[l] = false
			continue
		}
		if spill != pt.spill {
			r.popFront() // moved between spillover and its own lanes
			pt.inRing[l] = false
			continue
		}
		if s.cfg.Fair && t.lim.ReceiveRate > 0 {
			throttled := t.recv.tokens(now, t.lim.ReceiveRate, t.lim.ReceiveBurst) < 1
			if throttled && !spill {
				pt.spill = true
				s.Spilled++
				r.popFront()
				pt.inRing[l] = false
				s.enlist(pt)
				*failed = 0
				continue
			}
			if !throttled && spill {
				pt.spill = false
				r.popFront()
				pt.inRing[l] = false
				s.enlist(pt)
				*failed = 0
				continue
			}
		}
		d := -1
		if spill {
			for i, n := range pt.n {
				if n > 0 {
					d = i
					break
				}
			}
		} else {
			d = s.dqOf(l)
			switch {
			case d == Live && s.cfg.SidelineAge > 0:
				s.sideline(now-s.cfg.SidelineAge, pt)
			case d == Live && s.cfg.Adaptive:
				s.adapt(now, pt)
			}
			if pt.n[d] == 0 {
				d = -1
			}
		}
		if d < 0 {
			r.popFront()
			pt.inRing[l] = false
			pt.deficit[l] = 0
			continue
		}
		if hold && s.overShare(t) {
			// Keep the waiting receivers for tenants below their share;
			// this tenant keeps its credit and its place in the round.
			r.popFront()
			r.push(pt)
			held++
			s.HeldBack++
			continue
		}
		// Deficit round robin: a tenant's turn starts with its weight in
		// credit; it is served while the credit lasts, then goes to the back.
		if pt.deficit[l] < 1 {
			pt.deficit[l] += t.lim.Weight
			if pt.deficit[l] < 1 {
				r.popFront()
				r.push(pt)
				held = 0 // the held ones behind it come round again; its credit grows, so this ends
				continue
			}
		}
		seq, e, ok := s.take(pt, d)
		if !ok {
			continue // counts repaired; look again
		}
		pt.deficit[l]--
		if (!spill && pt.n[d] == 0) || (spill && pt.total == 0) {
			r.popFront()
			pt.inRing[l] = false
			pt.deficit[l] = 0
		} else if pt.deficit[l] < 1 {
			r.popFront()
			r.push(pt)
		}
		e.state = stInFlight
		t.inflight++
		s.inflight++
		t.recv.take(now, t.lim.ReceiveRate, t.lim.ReceiveBurst)
		t.drain.add(now)
		if s.cfg.Fair && t.lim.MaxInFlight > 0 && t.inflight >= t.lim.MaxInFlight {
			t.capped = true
		}
		return seq, true
	}
	return 0, false
}

func (s *Sched) dqOf(ringLane int) int {
	if ringLane == s.lanes()-1 {
		return s.dqLanes() - 1
	}
	return ringLane
}

// FromBacklog reports whether a message was delivered from (or waits
// in) the backlog lane: the old side of a backlog.
func (s *Sched) FromBacklog(e *Entry) bool { return int(e.lane) == s.BacklogLane() }

// take pops the first live entry of a deque (stale ones are skipped).
// When the deque holds none although its count says otherwise (a bug),
// the count is repaired and ok is false: a wrong count must not take the
// queue down.
func (s *Sched) take(pt *ptenant, d int) (uint64, *Entry, bool) {
	q := &pt.dq[d]
	for !q.empty() {
		sl := q.front()
		q.pop()
		e, _, _, ok := s.lookup(sl.seq())
		if !ok || e.pt != pt || !sl.live(e) || e.state != stQueued {
			continue
		}
		pt.n[d]--
		pt.total--
		pt.p.count--
		pt.t.ready--
		s.ready--
		if d == s.BacklogLane() {
			s.settleMode(pt.t)
		}
		return sl.seq(), e, true
	}
	lost := pt.n[d]
	pt.n[d] = 0
	pt.total -= lost
	pt.p.count -= lost
	pt.t.ready -= lost
	s.ready -= lost
	return 0, nil, false
}

// sideline moves the head of a tenant's live lane sent at cut or before
// to its backlog lane.
func (s *Sched) sideline(cut int64, pt *ptenant) {
	q := &pt.dq[Live]
	b := s.dqLanes() - 1
	for !q.empty() {
		sl := q.front()
		e, sent, _, ok := s.lookup(sl.seq())
		if !ok || e.pt != pt || !sl.live(e) || e.state != stQueued {
			q.pop()
			continue
		}
		if sent > cut {
			return
		}
		q.pop()
		pt.n[Live]--
		pt.n[b]++
		e.lane = uint8(b)
		pt.dq[b].push(sl)
		s.Sidelined++
		if !pt.spill && !pt.t.capped {
			s.ringAdd(pt, s.lanes()-1)
		}
	}
}

// adapt is the backlog mode at a tenant's turn in the live lane: a
// backlog stands once the oldest ready message of the live lane, never
// received, has waited StandingTarget + StandingInterval; then what was
// sent before the mode's split (StandingTarget before now) goes to the
// backlog lane, and what is sent after it is served first. The split
// stays where it is while fresh traffic is served within
// StandingTarget + StandingInterval (a fresh message that waited a little
// longer than StandingTarget is still fresh), and moves up to
// StandingTarget before now when the fresh side stands too.
func (s *Sched) adapt(now int64, pt *ptenant) {
	t := pt.t
	if sent, ok := s.oldestFresh(pt); ok && now-sent > StandingTarget+StandingInterval {
		if t.engaged == 0 {
			t.engaged = sent + StandingTarget + StandingInterval
			s.Engaged++
		}
		t.split = now - StandingTarget
	}
	if t.engaged != 0 {
		s.sideline(t.split, pt)
	}
}

// oldestFresh is the sent time of the first message of a tenant's live
// lane that was never received, among its first freshLook (stale slots at
// the front go).
func (s *Sched) oldestFresh(pt *ptenant) (int64, bool) {
	q := &pt.dq[Live]
	for !q.empty() {
		e, _, _, ok := s.lookup(q.front().seq())
		if ok && e.pt == pt && q.front().live(e) && e.state == stQueued {
			break
		}
		q.pop()
	}
	for i := q.h; i < len(q.s) && i < q.h+freshLook; i++ {
		e, sent, _, ok := s.lookup(q.s[i].seq())
		if ok && e.pt == pt && q.s[i].live(e) && e.state == stQueued && !e.Again {
			return sent, true
		}
	}
	return 0, false
}

// freshLook bounds how far past messages received before oldestFresh
// looks: a live lane headed by more than that many is looked at again at
// the tenant's next turn, when they are gone.
const freshLook = 64

// backlogged reports how many of a tenant's ready messages wait in the
// backlog lane.
func (s *Sched) backlogged(t *tenant) int {
	n := 0
	for _, pt := range t.pts {
		if pt != nil {
			n += pt.n[s.BacklogLane()]
		}
	}
	return n
}

// settleMode ends a tenant's backlog mode once its backlog lane is empty:
// it is served oldest first again.
func (s *Sched) settleMode(t *tenant) {
	if t.engaged != 0 && s.backlogged(t) == 0 {
		t.engaged, t.split = 0, 0
	}
}

// liveBehind reports whether the live lane of shard p is not kept up
// with: the message at the head of its first tenant has waited longer than
// StandingTarget. In the backlog mode the backlog lane earns its share of
// the picks only then: while fresh traffic is served within the target,
// the old side gets every pick fresh traffic leaves, and no more (a share
// larger than the consumers' spare capacity would take it from fresh
// traffic, which would fall behind for good); once the consumers cannot
// keep up with fresh traffic either, the share keeps the old side from
// starving.
func (s *Sched) liveBehind(now int64, p *shard) bool {
	r := &p.rings[Live]
	if r.len() == 0 {
		return false
	}
	pt := r.front()
	q := &pt.dq[Live]
	for i := q.h; i < len(q.s) && i < q.h+freshLook; i++ {
		e, sent, _, ok := s.lookup(q.s[i].seq())
		if ok && e.pt == pt && q.s[i].live(e) && e.state == stQueued {
			return now-sent > StandingTarget
		}
	}
	return false
}

// AllowSend asks whether a tenant may send n messages now. When not, it
// returns how long to wait before trying again.
func (s *Sched) AllowSend(now int64, name string, n int) (bool, time.Duration) {
	return s.send(now, name, n, false)
}

// ReserveSend takes n sends of tenant name within its send limit even when
// it has no room now, and returns how long until they are within it: a
// message that must not be refused (a topic's delivery, whose origin would
// wait behind it) is taken now and becomes visible that much later. Each
// reservation goes after the ones before it, so the tenant's messages come
// out at its rate and nobody else's wait.
func (s *Sched) ReserveSend(now int64, name string, n int) time.Duration {
	_, wait := s.send(now, name, n, true)
	return wait
}

func (s *Sched) send(now int64, name string, n int, reserve bool) (bool, time.Duration) {
	t := s.tenants[name]
	if t == nil {
		if s.limits(name).SendRate == 0 {
			return true, 0 // no rate and, with no state, no backlog
		}
		t = s.tenant(name)
		s.maybeIdle(t)
	}
	limit := t.growLimit(now)
	if t.lim.BacklogTarget > 0 && t.ready > t.lim.BacklogTarget {
		base := limit
		if base == 0 {
			base = max(t.drain.at(now), 1)
		}
		limit = base * float64(t.lim.BacklogTarget) / float64(t.ready)
	}
	if limit == 0 {
		return true, 0
	}
	burst := max(t.lim.SendBurst, 1)
	if t.lim.SendRate == 0 {
		burst = max(limit, 1)
	}
	var wait time.Duration
	if have := t.send.tokens(now, limit, burst); have < float64(n) {
		wait = time.Duration(math.Ceil((float64(n)-have)/limit*1000)) * time.Millisecond
		if !reserve {
			return false, wait
		}
	}
	t.send.take(now, limit, burst)
	t.send.v -= float64(n - 1)
	t.winCount += float64(n)
	return wait == 0, wait
}

func (t *tenant) sendLimit() float64 {
	if t.sendLim > 0 {
		return t.sendLim
	}
	return t.lim.SendRate
}

// growLimit applies SendRateGrowth once per minute of use.
func (t *tenant) growLimit(now int64) float64 {
	if t.lim.SendRate == 0 {
		return 0
	}
	if t.sendLim == 0 {
		t.sendLim = t.lim.SendRate
		t.winStart = now
	}
	if t.lim.SendRateGrowth > 0 && now-t.winStart >= 60_000 {
		used := t.winCount / (float64(now-t.winStart) / 1000)
		switch {
		case used >= 0.8*t.sendLim:
			t.sendLim = min(t.sendLim*(1+t.lim.SendRateGrowth), t.lim.SendRateCeiling)
		case used < 0.4*t.sendLim:
			t.sendLim = max(t.sendLim/(1+t.lim.SendRateGrowth), t.lim.SendRate)
		}
		t.winStart, t.winCount = now, 0
	}
	return t.sendLim
}

// HasCaps reports whether any tenant may be held back by an in-flight cap
// (so that settling a message may make another deliverable).
func (s *Sched) HasCaps() bool {
	if !s.cfg.Fair {
		return false
	}
	if s.cfg.Limits.MaxInFlight > 0 {
		return true
	}
	for _, o := range s.cfg.Overrides {
		if o.MaxInFlight > 0 {
			return true
		}
	}
	return false
}

// Ready is the number of queued messages.
func (s *Sched) Ready() int { return s.ready }

// Tenants is the number of tenants the scheduler holds state for.
func (s *Sched) Tenants() int { return len(s.tenants) }

// TenantStats is one tenant's figures.
type TenantStats struct {
	Name     string
	Ready    int
	InFlight int
	Lanes    []int // ready per deque lane
	Oldest   int64 // sent time (unix ms) of the oldest lane head, 0 if none
	Spilled  bool
	Capped   bool
	Shards   []int
	// Engaged is when the tenant's backlog mode engaged (unix ms; 0: it is
	// not): what it sends is served before its older messages, which
	// wait in its backlog lane. OldestOld is the sent time of the oldest
	// of those (0: none).
	Engaged, OldestOld int64
}

// Stats lists the tenants that hold messages, largest backlog first, at
// now (unix ms): a tenant whose backlog stands is shown engaged from the
// moment it stood, though no receive has come to engage it (an outage).
func (s *Sched) Stats(now int64) []TenantStats {
	out := make([]TenantStats, 0, len(s.tenants))
	for _, t := range s.tenants {
		if t.ready == 0 && t.inflight == 0 {
			continue
		}
		ts := TenantStats{Name: t.name, Ready: t.ready, InFlight: t.inflight, Lanes: make([]int, s.dqLanes()), Capped: t.capped, Shards: t.parts,
			Engaged: t.engaged}
		for _, pt := range t.pts {
			if pt == nil {
				continue
			}
			ts.Spilled = ts.Spilled || pt.spill
			for d := range pt.dq {
				ts.Lanes[d] += pt.n[d]
				q := &pt.dq[d]
				for i := q.h; i < len(q.s); i++ {
					e, sent, _, ok := s.lookup(q.s[i].seq())
					if ok && e.pt == pt && q.s[i].live(e) && e.state == stQueued {
						if ts.Oldest == 0 || sent < ts.Oldest {
							ts.Oldest = sent
						}
						if d == s.BacklogLane() && (ts.OldestOld == 0 || sent < ts.OldestOld) {
							ts.OldestOld = sent
						}
						break
					}
				}
			}
			if s.cfg.Adaptive && t.engaged == 0 {
				if sent, ok := s.oldestFresh(pt); ok && now-sent > StandingTarget+StandingInterval {
					at := sent + StandingTarget + StandingInterval
					if ts.Engaged == 0 || at < ts.Engaged {
						ts.Engaged = at
					}
				}
			}
		}
		out = append(out, ts)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ready != out[j].Ready {
			return out[i].Ready > out[j].Ready
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// bucket is a token bucket. v is the token count at last (unix ms); a
// bucket that was never used is full.
type bucket struct {
	v    float64
	last int64
	used bool
}

func (b *bucket) tokens(now int64, rate, burst float64) float64 {
	if !b.used {
		return burst
	}
	return min(burst, b.v+float64(now-b.last)/1000*rate)
}

func (b *bucket) take(now int64, rate, burst float64) {
	if rate <= 0 {
		return
	}
	b.v = b.tokens(now, rate, burst) - 1
	b.last = now
	b.used = true
}

func (b *bucket) full(now int64, rate, burst float64) bool {
	return rate <= 0 || b.tokens(now, rate, burst) >= burst
}

// rate is an exponentially decaying event rate (events/s, 10 s horizon).
type rate struct {
	v    float64
	last int64
}

const rateTau = 10_000.0 // ms

func (r *rate) at(now int64) float64 {
	return r.v * math.Exp(-float64(now-r.last)/rateTau)
}

func (r *rate) add(now int64) {
	r.v = r.at(now) + 1000/rateTau
	r.last = now
}
