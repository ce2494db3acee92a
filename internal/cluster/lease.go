package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
)

type leaseState uint8

const (
	acquiring leaseState = iota // taken; Host.Acquire in progress
	owned                       // taken, and the Host serves it
	releasing                   // being given up: not renewed any more
)

// lease is a key this manager holds: a partition's lease, or its own
// membership (m.node). Its fields are guarded by Manager.mu.
type lease struct {
	p     store.PartitionID
	key   string
	term  uint64 // the revision that created it
	rev   uint64 // its latest revision; 0 for a membership to create again
	state leaseState
	since time.Time // when it became owned
	// lost is set when a renewal was refused (another node holds the key,
	// or it expired), or when the engine reported it fenced off (Lost).
	lost bool
	// validUntil is when the key expires at the earliest: TTL after the
	// write that produced rev was first sent (monotonic clock; the
	// server's clocks may run differently).
	validUntil time.Time
	nextRenew  time.Time
	// inflight is closed when the renewal in flight ends; nil when none.
	inflight chan struct{}
	// pendingRev and pendingSent: the revision a renewal started from, and
	// when it was first sent. Every retry from that revision carries the
	// same Msg-Id, so a retry of a renewal that landed comes back as a
	// duplicate with the landed revision.
	pendingRev  uint64
	pendingSent time.Time
	warned      bool      // a warning that it may have expired was logged
	failures    int       // renewals failed in a row
	loggedAt    time.Time // when a failure was last logged
}

func (m *Manager) newLease(p store.PartitionID, key string, rev uint64, sent time.Time) *lease {
	return &lease{p: p, key: key, term: rev, rev: rev, state: acquiring,
		validUntil: sent.Add(m.cfg.LeaseTTL), nextRenew: sent.Add(m.renewEvery)}
}

// create creates key with this manager's holder value and the lease TTL.
func (m *Manager) create(ctx context.Context, key string) (uint64, error) {
	return m.kv.Create(ctx, key, m.value, jetstream.KeyTTL(m.cfg.LeaseTTL))
}

// ours reads key and returns its revision if this manager holds it: a
// create whose reply was lost may have landed.
func (m *Manager) ours(key string) (uint64, bool) {
	e, err := m.readKey(key, m.opTimeout)
	if err != nil {
		return 0, false
	}
	h, ok := decodeHolder(e.Value())
	if !ok || h.Instance != m.instance {
		return 0, false
	}
	return e.Revision(), true
}

// deleteKey deletes key if its latest revision is still rev.
func (m *Manager) deleteKey(key string, rev uint64) {
	if rev == 0 {
		return // not held: a delete without a revision would delete anyone's
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), m.opTimeout)
		err = m.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		cancel()
		if err == nil || conflict(err) {
			return // deleted, or not ours any more
		}
	}
	m.log.Warn("deleting a lease failed; it expires instead", "key", key, "revision", rev, "err", err)
}

// beginRelease marks p's lease as being given up, if this node owns it,
// so that it is no longer renewed nor reported as owned.
func (m *Manager) beginRelease(p store.PartitionID) *lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[p]
	if l == nil || l.state != owned || l.lost {
		return nil
	}
	l.state = releasing
	return l
}

// dropLease forgets l and deletes its key, unless it was lost meanwhile
// (then the key is not this node's to delete). A renewal in flight is
// waited for, so that the delete names the latest revision.
func (m *Manager) dropLease(l *lease) {
	m.mu.Lock()
	ch := l.inflight
	m.mu.Unlock()
	if ch != nil {
		<-ch // bounded by the renewal's timeout
	}
	m.mu.Lock()
	forgotten := m.leases[l.p] != l
	if !forgotten {
		delete(m.leases, l.p)
	}
	rev, lost := l.rev, l.lost
	m.mu.Unlock()
	if !forgotten && !lost {
		m.deleteKey(l.key, rev)
	}
}

// renewLoop renews every lease when due, and the membership.
func (m *Manager) renewLoop() {
	defer m.loops.Done()
	t := time.NewTicker(m.renewTick)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			m.renews.Wait()
			return
		case <-t.C:
			m.renewDue()
		}
	}
}

// renewDue starts a renewal of every lease that is due and has none in
// flight; renewals of different keys run side by side.
func (m *Manager) renewDue() {
	now := time.Now()
	var due, expiring []*lease
	m.mu.Lock()
	consider := func(l *lease) {
		if l.state == releasing || l.lost || l.inflight != nil {
			return
		}
		if !l.warned && l.rev != 0 && now.After(l.validUntil) {
			l.warned = true
			expiring = append(expiring, l)
		}
		if !now.Before(l.nextRenew) {
			l.inflight = make(chan struct{})
			due = append(due, l)
		}
	}
	consider(m.node)
	for _, l := range m.leases {
		consider(l)
	}
	m.mu.Unlock()
	for _, l := range expiring {
		m.log.Warn("a lease may have expired: its renewals fail; serving on until fenced",
			"key", l.key, "revision", l.rev, "overdue", now.Sub(l.validUntil).Round(time.Millisecond))
	}
	for _, l := range due {
		m.renews.Add(1)
		go m.renew(l)
	}
}

// renew renews l once (or, for a membership that was lost, creates it
// again) and records the outcome.
func (m *Manager) renew(l *lease) {
	defer m.renews.Done()
	m.mu.Lock()
	rev := l.rev
	if l.pendingRev != rev || l.pendingSent.IsZero() {
		l.pendingRev, l.pendingSent = rev, time.Now()
	}
	sent := l.pendingSent
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(m.ctx, m.opTimeout)
	var next uint64
	var err error
	retaken := false
	if rev == 0 {
		next, err = m.create(ctx, l.key)
	} else {
		next, err = m.publishRenewal(ctx, l.key, rev)
		if conflict(err) && ctx.Err() == nil {
			if r, ok := m.renewedAnyway(l.key, rev); ok {
				next, err = r, nil
			}
		}
		if conflict(err) && l != m.node && ctx.Err() == nil {
			// Refused: another node holds the key, or it expired while
			// the bucket could not take renewals (its leader's server
			// died: an election takes 4-9 s, longer than a lease lasts
			// unrenewed). Expired and not taken, it is taken again here,
			// and the partition stays served: had another node owned it
			// in between, its epoch record fences this node's next write,
			// as for any renewal that stalled (Lost).
			if n, cerr := m.create(ctx, l.key); cerr == nil {
				next, err, retaken = n, nil, true
			}
		}
	}
	cancel()

	now := time.Now()
	var msg string
	var level slog.Level
	var lost bool
	m.mu.Lock()
	close(l.inflight)
	l.inflight = nil
	l.pendingSent = time.Time{}
	failures := l.failures
	// Failures are logged once per TTL and lease, not once per retry.
	throttled := failures > 0 && now.Sub(l.loggedAt) < m.cfg.LeaseTTL
	switch {
	case err == nil:
		switch {
		case rev == 0:
			l.term = next
			msg, level = "joined the cluster again", slog.LevelInfo
		case retaken:
			m.counts.retaken++
			msg, level = "a lease expired while the bucket could not renew it; took it again and serve on", slog.LevelWarn
		case failures > 0:
			msg, level = "renewed a lease again", slog.LevelInfo
		}
		l.rev, l.validUntil, l.nextRenew, l.warned = next, sent.Add(m.cfg.LeaseTTL), sent.Add(m.renewEvery), false
		l.failures = 0
	case m.ctx.Err() != nil:
		// Stopping.
	case conflict(err) && l == m.node:
		if rev == 0 {
			msg, level = "another node uses this node's name; retrying", slog.LevelError
			l.nextRenew = now.Add(m.renewEvery)
			l.failures++
		} else {
			msg, level = "this node's membership expired or was taken; joining again", slog.LevelWarn
			l.rev, l.nextRenew = 0, now
		}
	case conflict(err):
		l.lost, lost = true, true
		msg, level = "lost a lease: another node holds it, or it expired", slog.LevelWarn
	default:
		// Keep the lease: the bucket may be electing a leader. The store's
		// fence stops this node if another one took the partition.
		m.counts.renewFailures++
		l.failures++
		l.pendingSent = sent // a retry reuses the Msg-Id, and counts from the first send
		l.nextRenew = now.Add(m.renewTick)
		msg, level = "renewing a lease failed; retrying", slog.LevelWarn
	}
	if l.failures > failures && throttled {
		msg = ""
	} else if l.failures > failures {
		l.loggedAt = now
	}
	failures = max(failures, l.failures)
	m.mu.Unlock()
	if msg != "" {
		m.log.Log(context.Background(), level, msg, "key", l.key, "revision", rev, "failures", failures, "err", err)
	}
	if lost {
		m.wake()
	}
}

// publishRenewal writes key again with the lease TTL, if its latest
// revision is rev. kv.Update cannot: it drops the TTL.
func (m *Manager) publishRenewal(ctx context.Context, key string, rev uint64) (uint64, error) {
	msg := &nats.Msg{Subject: m.subjects + key, Data: m.value}
	ack, err := m.js.PublishMsg(ctx, msg,
		jetstream.WithExpectLastSequencePerSubject(rev),
		jetstream.WithMsgTTL(m.cfg.LeaseTTL),
		jetstream.WithMsgID(fmt.Sprintf("%s.%s.%d", m.instance, key, rev)))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// renewedAnyway reports whether a renewal of key from revision rev that
// was refused landed all the same, and at which revision. While a node
// rejoins after a cut, its server may still take itself for the bucket's
// leader, take the renewal too, and refuse it before the leader has
// stored it: the key's latest revision then holds this manager, written
// after rev. A replica that has not caught up yet may show rev still, so
// that is asked again a few times; another holder ends it at once.
func (m *Manager) renewedAnyway(key string, rev uint64) (uint64, bool) {
	for attempt := 1; ; attempt++ {
		r, ok := m.ours(key)
		switch {
		case !ok: // another holder, gone (expired), or no answer: refused, as before
			return 0, false
		case r > rev:
			return r, true
		case attempt == 3 || !clock.Sleep(m.ctx, clock.Real{}, readAttempt/2):
			return 0, false
		}
	}
}

// conflict reports whether err is a refused compare-and-set: the key's
// revision was not the expected one. Replicated streams report it as
// 10164 as well as 10071.
func conflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// transient reports whether an error of JetStream may go away by itself:
// no meta leader yet, a timeout, no responders, "temporarily unavailable"
// (503), "not the leader". Other API errors (an invalid config, replicas
// more than the servers) do not.
func transient(err error) bool {
	if errors.Is(err, jetstream.ErrInvalidBucketName) || errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, nats.ErrConnectionClosed) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || apiErr.ErrorCode == jsClusterNotLeader || apiErr.ErrorCode == jsNoPlacement
	}
	return true
}

// jsClusterNotLeader is JetStream's JSClusterNotLeaderErr (code 500):
// the meta group is changing leaders.
const jsClusterNotLeader jetstream.ErrorCode = 10009

// jsNoPlacement is JetStream's "no suitable peers for placement": right
// after a cluster forms, the meta leader has not heard every peer yet.
const jsNoPlacement jetstream.ErrorCode = 10005
