package cluster

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/store"
)

// loopState is what the reconcile loop remembers between ticks. Its
// goroutine and the takeovers it starts use it, under mu.
type loopState struct {
	mu        sync.Mutex
	acquiring map[store.PartitionID]bool          // a takeover runs (acquire)
	unleased  map[store.PartitionID]time.Time     // first seen without a lease
	retryAt   map[store.PartitionID]time.Time     // not taken here before (its Acquire failed)
	failures  map[store.PartitionID]int           // Acquire failures in a row here
	missing   map[store.PartitionID]time.Time     // held but not listed by the Host since
	handedAt  map[store.PartitionID]time.Time     // last handed over from here
	holdFor   map[store.PartitionID]time.Duration // owned this long before it is handed over
}

func newLoopState() *loopState {
	return &loopState{
		acquiring: map[store.PartitionID]bool{},
		unleased:  map[store.PartitionID]time.Time{},
		retryAt:   map[store.PartitionID]time.Time{},
		failures:  map[store.PartitionID]int{},
		missing:   map[store.PartitionID]time.Time{},
		handedAt:  map[store.PartitionID]time.Time{},
		holdFor:   map[store.PartitionID]time.Duration{},
	}
}

// reconcileLoop reconciles every Tick, and when woken.
func (m *Manager) reconcileLoop() {
	ls := newLoopState()
	m.every(m.cfg.Tick, m.kick, func() { m.reconcile(ls) })
}

// every calls f every d, and whenever kick delivers (a nil kick never
// does), until the manager closes; it is one of m.loops.
func (m *Manager) every(d time.Duration, kick <-chan struct{}, f func()) {
	defer m.loops.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		f()
	}
}

// snapshot is what a reconcile needs of the manager's state.
type snapshot struct {
	members []string
	since   map[string]time.Time // by node name: member since
	leased  map[store.PartitionID]bool
	expired map[store.PartitionID]bool
	owned   []ownedLease
}

type ownedLease struct {
	p     store.PartitionID
	since time.Time
}

func (m *Manager) snapshot() snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := snapshot{
		members: m.membersLocked(),
		since:   map[string]time.Time{},
		leased:  make(map[store.PartitionID]bool, len(m.view.owners)+len(m.leases)),
		expired: map[store.PartitionID]bool{},
	}
	for _, mem := range m.view.members {
		if t, ok := s.since[mem.Node]; !ok || mem.since.Before(t) {
			s.since[mem.Node] = mem.since
		}
	}
	for p := range m.view.owners {
		s.leased[p] = true
	}
	for p, g := range m.view.gone {
		s.expired[p] = g == goneExpired
	}
	for p := range m.claiming {
		s.leased[p] = true
	}
	for p, l := range m.leases {
		s.leased[p] = true
		if l.state == owned && !l.lost {
			s.owned = append(s.owned, ownedLease{p: p, since: l.since})
		}
	}
	slices.SortFunc(s.owned, func(a, b ownedLease) int { return cmp.Compare(a.p, b.p) })
	return s
}

// reconcile gives up what was lost, what the Host no longer lists and
// what another node should have, then takes what has no lease: each
// takeover (acquire) on a goroutine of its own, up to acquireParallel at
// once, so that the time a lost node's partitions take to be served again
// does not grow with how many it owned (each waits mostly for its
// stream's new leader, and the streams elect theirs side by side).
func (m *Manager) reconcile(ls *loopState) {
	m.releaseLost()
	parts := m.host.Partitions()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	listed := make(map[store.PartitionID]bool, len(parts))
	for _, p := range parts {
		listed[p] = true
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	s := m.snapshot()
	now := time.Now()
	// Placement ranks the members that answer: a partition is neither
	// handed over to a silent node nor left waiting for one.
	ranked := s.members
	if m.cfg.Silent != nil {
		ranked = slices.DeleteFunc(slices.Clone(ranked), func(n string) bool { return n != m.cfg.Node && m.cfg.Silent(n) })
	}

	// Partitions held here that the Host no longer lists (a deleted queue):
	// given up once missing for Settle, in case the Host's list lags a
	// partition Claim just took.
	maps.DeleteFunc(ls.missing, func(p store.PartitionID, _ time.Time) bool {
		return !slices.ContainsFunc(s.owned, func(o ownedLease) bool { return o.p == p })
	})
	for _, o := range s.owned {
		if listed[o.p] {
			delete(ls.missing, o.p)
			continue
		}
		first, ok := ls.missing[o.p]
		if !ok {
			ls.missing[o.p] = now
			continue
		}
		if now.Sub(first) >= m.cfg.Settle {
			delete(ls.missing, o.p)
			m.giveUp(o.p, "", "the host no longer lists it")
		}
	}

	// Hand over to the preferred node what it should have.
	handed := 0
	for _, o := range s.owned {
		if handed == handoversPerTick || m.ctx.Err() != nil {
			break
		}
		if !listed[o.p] {
			continue
		}
		to := preferred(ranked, o.p)
		since, member := s.since[to]
		hold, ok := ls.holdFor[o.p]
		if !ok {
			hold = m.cfg.Settle
		}
		if to == m.cfg.Node || !member || now.Sub(since) < m.cfg.Settle || now.Sub(o.since) < hold {
			continue
		}
		if m.giveUp(o.p, to, "its preferred node is a member") {
			ls.handedAt[o.p] = now
			handed++
		}
	}

	// Take what has no lease, by rank among the members that answer.
	for _, p := range parts {
		if m.ctx.Err() != nil {
			return
		}
		if s.leased[p] || ls.acquiring[p] {
			delete(ls.unleased, p)
			continue
		}
		now := time.Now()
		first, ok := ls.unleased[p]
		if !ok {
			first = now
			ls.unleased[p] = now
		}
		if now.Before(m.acquireAt) || now.Before(ls.retryAt[p]) {
			continue
		}
		// Ranks wait from the end of the start's grace too, or every node
		// started with the cluster would try at once when it ends.
		if first.Before(m.acquireAt) {
			first = m.acquireAt
		}
		r := rank(ranked, p, m.cfg.Node)
		if now.Sub(first) < time.Duration(r)*m.cfg.RankStep {
			continue
		}
		if len(ls.acquiring) >= acquireParallel {
			break // the next ones when these end (each wakes the loop)
		}
		ls.acquiring[p] = true
		delete(ls.unleased, p)
		expired := s.expired[p]
		m.loops.Add(1) // this goroutine is counted: Close waits for the takeover
		go func() {
			defer m.loops.Done()
			m.acquire(p, expired, ls)
			ls.mu.Lock()
			delete(ls.acquiring, p)
			ls.mu.Unlock()
			m.wake()
		}()
	}

	ls.forget(listed)
}

// staleLoop runs checkStale every Tick, apart from the reconcile loop: a
// read of the bucket can take a second (readKey), and the takeovers of
// the keys a round finds free must not wait for its slowest read (each
// such key wakes the reconcile at once).
func (m *Manager) staleLoop() { m.every(m.cfg.Tick, nil, m.checkStale) }

// staleParallel bounds the bucket reads of one checkStale; each read is
// tried for at most staleRead (readKey).
const (
	staleParallel = 64
	staleRead     = time.Second
)

// readAttempt is how long one attempt of readKey waits for an answer, and
// the least time between two of its attempts.
const readAttempt = 200 * time.Millisecond

// checkStale asks the bucket about the keys of other nodes that the
// watcher has not seen renewed for longer than a lease lasts, and, at
// every tick, about the keys held by nodes known to be silent
// (Config.Silent): a watcher whose consumer lived on a node that died or
// went silent delivers nothing until nats.go rebuilds it (10-20 s later),
// and meanwhile a dead node's leases would look held and the dead node a
// member. A key the bucket no longer has is taken out of the view, as its
// expiry marker would have. The keys are read side by side, so that the
// time a lost node's partitions take to be seen free does not grow with
// how many it held.
func (m *Manager) checkStale() {
	limit := m.cfg.LeaseTTL + time.Second
	now := time.Now()
	mine := nodeKey(m.cfg.Node)
	silent := func(node string) bool { return m.cfg.Silent != nil && node != m.cfg.Node && m.cfg.Silent(node) }
	m.mu.Lock()
	var keys []string
	for k, t := range m.view.seen {
		if k == mine {
			continue
		}
		var holder string
		if p, ok := parsePartKey(k); ok {
			if _, held := m.leases[p]; held {
				continue // this node's own lease
			}
			holder = m.view.owners[p].Node
		} else if mb, ok := m.view.members[k]; ok {
			holder = mb.Node
		}
		if now.Sub(t) > limit || silent(holder) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	sem := make(chan struct{}, staleParallel)
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e, err := m.readKey(k, staleRead)
			m.mu.Lock()
			defer m.mu.Unlock()
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
				if _, ok := m.view.seen[k]; ok {
					m.view.expire(k)
					m.log.Info("a key expired while the bucket's watcher lagged", "node", m.cfg.Node, "key", k)
					m.wake() // its takeover need not wait for this round's other reads
				}
			case err == nil:
				h, ok := decodeHolder(e.Value())
				if !ok || !silent(h.Node) {
					m.view.seen[k] = now // held after all; asked again after another lease
					break
				}
				// Held by a silent node, and not written for longer than a
				// lease lasts (by the bucket's own clock, with a margin for
				// this machine's): overdue, whether or not the bucket has
				// expired it yet.
				if p, isPart := parsePartKey(k); isPart && time.Since(e.Created()) > limit {
					if _, held := m.view.owners[p]; held {
						m.view.overdueLease(p, e.Revision())
						m.log.Info("a silent node's lease is overdue; taking it over", "node", m.cfg.Node, "key", k,
							"revision", e.Revision(), "written", e.Created())
						m.wake()
					}
				}
			}
		})
	}
	wg.Wait()
}

// readKey reads key k from the bucket in attempts of readAttempt, for
// at most d. A key is read from any of the bucket's replicas (a direct
// get, which NATS sends to one of them at random), and one on a silent
// node takes the request and never answers (its route looks alive for
// minutes): a short attempt asked again most likely reaches another
// replica. With one attempt as long as d, a third of checkStale's reads
// in a 100-queue silent cut waited a second, and each round, with every
// takeover behind it, waited for the slowest; a forwarding node's read of
// a queue's new owner (Holder) waited seconds likewise. An attempt that
// fails at once (no responders while the bucket elects a leader, a
// connection being re-established) is asked again only when its
// readAttempt is up, not in a busy loop.
func (m *Manager) readKey(k string, d time.Duration) (jetstream.KeyValueEntry, error) {
	deadline := time.Now().Add(d)
	for {
		next := time.Now().Add(readAttempt)
		if next.After(deadline) {
			next = deadline
		}
		ctx, cancel := context.WithDeadline(m.ctx, next)
		e, err := m.kv.Get(ctx, k)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) ||
			m.ctx.Err() != nil || !time.Now().Before(deadline) {
			return e, err
		}
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-m.ctx.Done():
				t.Stop()
				return e, err
			case <-t.C:
			}
		}
	}
}

// forget drops what is remembered of partitions the Host no longer lists
// (but not when they went missing while held here).
func (ls *loopState) forget(listed map[store.PartitionID]bool) {
	drop := func(p store.PartitionID) bool { return !listed[p] }
	maps.DeleteFunc(ls.unleased, func(p store.PartitionID, _ time.Time) bool { return drop(p) })
	maps.DeleteFunc(ls.retryAt, func(p store.PartitionID, _ time.Time) bool { return drop(p) })
	maps.DeleteFunc(ls.failures, func(p store.PartitionID, _ int) bool { return drop(p) })
	maps.DeleteFunc(ls.handedAt, func(p store.PartitionID, _ time.Time) bool { return drop(p) })
	maps.DeleteFunc(ls.holdFor, func(p store.PartitionID, _ time.Duration) bool { return drop(p) })
}

// releaseLost tells the Host to stop serving the partitions whose renewal
// was refused.
func (m *Manager) releaseLost() {
	var lost []*lease
	m.mu.Lock()
	for p, l := range m.leases {
		if l.lost && l.state == owned {
			delete(m.leases, p)
			lost = append(lost, l)
		}
	}
	m.mu.Unlock()
	for _, l := range lost {
		m.host.Release(l.p)
	}
}

// giveUp releases an owned partition and deletes its lease, so that
// another node takes it at once; to, if not "", is the node it is meant
// for. It reports whether p was owned.
func (m *Manager) giveUp(p store.PartitionID, to, why string) bool {
	l := m.beginRelease(p)
	if l == nil {
		return false
	}
	m.log.Info("giving a partition up", "partition", p, "term", l.term, "to", to, "why", why)
	m.host.Release(p)
	m.dropLease(l)
	if to != "" {
		m.mu.Lock()
		m.counts.handovers++
		m.mu.Unlock()
	}
	return true
}

// acquire tries to take p's lease and, if it did, makes the Host its
// owner; a failed Acquire gives the lease up and backs off. It runs on a
// goroutine of its own, and takes ls.mu only to note its outcome.
func (m *Manager) acquire(p store.PartitionID, expired bool, ls *loopState) {
	key := partKey(p)
	sent := time.Now()
	// Attempts of at most a second, tried again at the next tick: while
	// the bucket elects a leader (its leader died with the owner, 4-9 s)
	// a create is unanswered, and the first one sent after the election
	// should not wait out an older attempt's timeout.
	ctx, cancel := context.WithTimeout(m.ctx, min(m.opTimeout, time.Second))
	m.mu.Lock()
	overdue, isOverdue := m.view.overdue[p]
	m.mu.Unlock()
	var rev uint64
	var err error
	if isOverdue {
		rev, err = m.publishRenewal(ctx, key, overdue) // a write fenced on the overdue revision
	} else {
		rev, err = m.create(ctx, key)
	}
	cancel()
	if err != nil && !conflict(err) && m.ctx.Err() == nil {
		if r, ok := m.ours(key); ok {
			rev, err = r, nil // the create landed; its reply was lost
		}
	}
	switch {
	case err == nil:
	case conflict(err):
		if isOverdue {
			m.mu.Lock()
			if m.view.overdue[p] == overdue {
				delete(m.view.overdue, p) // written since (another node took it, or its holder renewed it)
			}
			m.mu.Unlock()
		}
		return // the view lagged: another node holds it
	default:
		if m.ctx.Err() == nil {
			m.log.Warn("taking a partition's lease failed", "partition", p, "err", err)
			ls.mu.Lock()
			ls.retryAt[p] = time.Now().Add(min(m.cfg.RankStep, m.cfg.Tick))
			ls.mu.Unlock()
		}
		return
	}

	l := m.newLease(p, key, rev, sent)
	m.mu.Lock()
	m.leases[p] = l
	if expired {
		m.counts.failovers++
	}
	m.mu.Unlock()
	m.log.Info("took a partition's lease", "partition", p, "term", rev, "failover", expired)

	err = m.host.Acquire(p, rev)

	m.mu.Lock()
	forgotten := m.leases[p] != l // the Host called Lost
	lost := l.lost
	if err == nil && !forgotten && !lost {
		l.state, l.since = owned, time.Now()
	}
	if err != nil {
		m.counts.acquireFailures++
	}
	m.mu.Unlock()

	switch {
	case forgotten:
		m.log.Warn("the host gave a partition up while acquiring it", "partition", p, "term", rev, "err", err)
	case err != nil:
		ls.mu.Lock()
		ls.failures[p]++
		failures := ls.failures[p]
		wait := min(m.cfg.RankStep<<min(failures-1, 16), maxBackoff)
		ls.retryAt[p] = time.Now().Add(wait)
		ls.mu.Unlock()
		m.log.Warn("the host could not acquire a partition; giving its lease up", "partition", p, "term", rev,
			"failures", failures, "retry_in", wait, "err", err)
		m.mu.Lock()
		l.state = releasing
		m.mu.Unlock()
		m.dropLease(l)
	case lost:
		m.mu.Lock()
		if m.leases[p] == l {
			delete(m.leases, p)
		}
		m.mu.Unlock()
		m.log.Warn("lost a partition's lease while acquiring it", "partition", p, "term", rev)
		m.host.Release(p)
	default:
		ls.mu.Lock()
		defer ls.mu.Unlock()
		delete(ls.failures, p)
		delete(ls.retryAt, p)
		// Taken back soon after it was handed over: its preferred node did
		// not take it. Keep it longer before trying again.
		hold := m.cfg.Settle
		if t, ok := ls.handedAt[p]; ok && time.Since(t) < 2*m.cfg.Settle+m.cfg.RankStep {
			hold = min(2*max(ls.holdFor[p], m.cfg.Settle), maxHold)
		}
		if hold > m.cfg.Settle {
			ls.holdFor[p] = hold
		} else {
			delete(ls.holdFor, p)
		}
	}
}
