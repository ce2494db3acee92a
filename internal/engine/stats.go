package engine

import (
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
	"github.com/sluicemq/sluice/internal/store/disk"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Stats returns every queue's figures (for metrics and the dashboard).
func (e *Engine) Stats() []st.QueueStats {
	var out []st.QueueStats
	for _, o := range e.all() {
		out = append(out, e.queueStats(o))
	}
	return out
}

// StoreStats returns the store's figures.
func (e *Engine) StoreStats() st.StoreStats {
	s := e.st.Stats()
	d := e.st.Disk()
	out := st.StoreStats{LiveMessages: s.KeptRecords, Segments: s.Segments, Partitions: s.PartitionsAlive, LogBytes: s.LogBytes,
		SnapshotBytes: s.SnapshotBytes, Snapshots: s.Snapshots, Fsyncs: s.Fsyncs, FsyncBuckets: s.FsyncBuckets,
		FsyncSeconds: s.FsyncSeconds, BytesWritten: s.BytesWritten, FailedWrites: s.FailedWrites, DeadRecords: s.DeadRecords,
		Relocated: s.Relocated, DiskBytes: s.DiskBytes, LiveBytes: s.LiveBytes, DeadBytes: s.DeadBytes,
		DiskFree: d.Free, DiskReserve: d.Reserve, DiskAlarm: d.Alarm}
	out.FsyncBounds = append([]time.Duration(nil), disk.FsyncBounds[:]...)
	return out
}

func (e *Engine) queueStats(o *owner) st.QueueStats {
	now := e.clock.Now()
	o.lock()
	c := o.q.Counts(now)
	ts := o.q.Sched().Stats()
	qst := o.q.Stats()
	meta := o.meta
	dlq := o.cfg.DeadLetterTarget
	waiting := len(o.pollers)
	o.unlock()
	s := st.QueueStats{Name: meta.Name, FIFO: meta.FIFO, Visible: c.Visible, InFlight: c.InFlight, Delayed: c.Delayed,
		Sidelined: qst.Sidelined, Spilled: qst.Spilled, HeldBack: qst.HeldBack, WaitingReceives: waiting, Lanes: map[string]int{},
		Retried: qst.Retried, Deferred: qst.Deferred, Rejected: qst.Rejected, Redriven: o.ctr.redriven.Load(),
		Dropped: map[string]uint64{"retention": qst.DroppedRetention, "max_age": qst.DroppedMaxAge, "watermark": qst.DroppedWatermark,
			"exhausted": uint64(o.ctr.droppedExhausted.Load()), "rejected": uint64(o.ctr.droppedRejected.Load())}}
	if dlq != "" {
		s.DLQ, _ = e.QueueNameFromARN(dlq)
	}
	if c.OldestSent > 0 {
		s.OldestAge = max(0, now.Sub(time.UnixMilli(c.OldestSent)))
	}
	k := &o.ctr
	s.Sent, s.Throttled, s.Received = k.sent.Load(), k.throttled.Load(), k.received.Load()
	s.EmptyReceives, s.Deleted, s.DeadLettered = k.emptyReceives.Load(), k.deleted.Load(), k.deadLettered.Load()
	s.FirstAttempt = make([]int64, len(k.firstAttempt))
	for i := range k.firstAttempt {
		s.FirstAttempt[i] = k.firstAttempt[i].Load()
	}
	s.FirstAttemptSum = time.Duration(k.firstAttemptMillis.Load()) * time.Millisecond
	total := 0
	for _, t := range ts {
		total += t.Ready
	}
	s.Others = st.TenantInfo{Name: "", Lanes: map[string]int{}}
	var quietOldest, noisyOldest int64
	for i, t := range ts {
		info := tenantInfo(t, now, meta.Tenants)
		for l, n := range info.Lanes {
			s.Lanes[l] += n
		}
		if isNoisy(t, total, len(ts)) {
			s.NoisyTenants++
			if t.Oldest > 0 && (noisyOldest == 0 || t.Oldest < noisyOldest) {
				noisyOldest = t.Oldest
			}
		} else if t.Oldest > 0 && (quietOldest == 0 || t.Oldest < quietOldest) {
			quietOldest = t.Oldest
		}
		if i < st.StatsTenants {
			s.Tenants = append(s.Tenants, info)
			continue
		}
		s.Others.Ready += info.Ready
		s.Others.InFlight += info.InFlight
		s.Others.OldestAge = max(s.Others.OldestAge, info.OldestAge)
		for l, n := range info.Lanes {
			s.Others.Lanes[l] += n
		}
	}
	if quietOldest > 0 {
		s.QuietOldestAge = max(0, now.Sub(time.UnixMilli(quietOldest)))
	}
	if noisyOldest > 0 {
		s.NoisyOldestAge = max(0, now.Sub(time.UnixMilli(noisyOldest)))
	}
	return s
}

// Tenants lists the tenants of a queue that hold messages, largest backlog
// first, at most max (0: all).
func (e *Engine) Tenants(name string, max int) ([]st.TenantInfo, error) {
	o, err := e.lookup(name)
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	o.lock()
	o.q.Advance(now)
	stats := o.q.Sched().Stats()
	over := o.meta.Tenants
	o.unlock()
	if max > 0 && len(stats) > max {
		stats = stats[:max]
	}
	out := make([]st.TenantInfo, 0, len(stats))
	for _, t := range stats {
		out = append(out, tenantInfo(t, now, over))
	}
	return out, nil
}

// Tenant describes one tenant of a queue, including the partitions it
// hashes to, whether or not it holds messages.
func (e *Engine) Tenant(name, tenant string) (st.TenantInfo, error) {
	o, err := e.lookup(name)
	if err != nil {
		return st.TenantInfo{}, err
	}
	now := e.clock.Now()
	o.lock()
	defer o.unlock()
	o.q.Advance(now)
	for _, t := range o.q.Sched().Stats() {
		if t.Name == tenant {
			return tenantInfo(t, now, o.meta.Tenants), nil
		}
	}
	info := tenantInfo(sched.TenantStats{Name: tenant, Partitions: o.q.Sched().TenantPartitions(tenant)}, now, o.meta.Tenants)
	info.Lanes = map[string]int{}
	return info, nil
}

func tenantInfo(t sched.TenantStats, now time.Time, over map[string]record.TenantLimits) st.TenantInfo {
	info := st.TenantInfo{Name: t.Name, Ready: t.Ready, InFlight: t.InFlight, Spilled: t.Spilled, Capped: t.Capped,
		Partitions: t.Partitions, Lanes: map[string]int{}}
	for i, n := range t.Lanes {
		if n == 0 {
			continue
		}
		info.Lanes[laneName(i, len(t.Lanes))] = n
	}
	if t.Oldest > 0 {
		info.OldestAge = now.Sub(time.UnixMilli(t.Oldest))
	}
	if l, ok := over[t.Name]; ok {
		tl := st.TenantLimits(l)
		info.Limits = &tl
	}
	return info
}

// laneName names a deque lane: live, retry-N, backlog (the last).
func laneName(i, n int) string {
	switch {
	case i == 0:
		return "live"
	case i == n-1:
		return "backlog"
	}
	return "retry-" + strconv.Itoa(i)
}

// tenantFigures are Sluice's read-only queue attributes about tenants and
// age (the caller holds the lock).
func tenantFigures(o *owner, now time.Time) map[string]string {
	q := o.q
	c := q.Counts(now)
	out := map[string]string{}
	age := int64(0)
	if c.OldestSent > 0 {
		age = max(0, now.UnixMilli()-c.OldestSent) / 1000
	}
	out["ApproximateAgeOfOldestMessage"] = strconv.FormatInt(age, 10)
	stats := q.Sched().Stats()
	total := 0
	for _, t := range stats {
		total += t.Ready
	}
	noisy, quietOldest := 0, int64(0)
	for _, t := range stats {
		if isNoisy(t, total, len(stats)) {
			noisy++
			continue
		}
		if t.Oldest > 0 && (quietOldest == 0 || t.Oldest < quietOldest) {
			quietOldest = t.Oldest
		}
	}
	qa := int64(0)
	if quietOldest > 0 {
		qa = max(0, now.UnixMilli()-quietOldest) / 1000
	}
	out["ApproximateNumberOfTenants"] = strconv.Itoa(len(stats))
	out["ApproximateNumberOfNoisyGroups"] = strconv.Itoa(noisy)
	out["ApproximateAgeOfOldestMessageInQuietGroups"] = strconv.FormatInt(qa, 10)
	qst := q.Stats()
	out["ApproximateNumberOfMessagesSidelined"] = strconv.FormatUint(qst.Sidelined, 10)
	out["ApproximateNumberOfMessagesDropped"] = strconv.FormatUint(qst.DroppedMaxAge+qst.DroppedRetention+qst.DroppedWatermark, 10)
	return out
}

// isNoisy: a tenant over its receive rate or at its cap, or holding more
// than twice its even share of the backlog (and at least 10 messages).
func isNoisy(t sched.TenantStats, total, tenants int) bool {
	if t.Spilled || t.Capped {
		return true
	}
	return tenants > 1 && t.Ready >= 10 && t.Ready*tenants > 2*total
}

// Messages lists copies of a queue's messages that match (all when match
// is nil), in send order, after sequence after, at most max (0: all),
// with the time it looked (for peeks). Messages leaving are left out.
func (e *Engine) Messages(name string, after uint64, max int, match func(m *queue.Msg) bool) ([]queue.Msg, time.Time, error) {
	o, now, err := e.locked(name)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []queue.Msg
	o.q.Messages(func(m *queue.Msg) {
		if m.Seq > after && m.State != queue.Leaving && (max == 0 || len(out) < max) && (match == nil || match(m)) {
			out = append(out, *m)
		}
	})
	o.unlock()
	return out, now, nil
}

// Body reads a message's payload back (for peeks).
func (e *Engine) Body(name string, m *queue.Msg) (*record.Payload, error) {
	o, err := e.lookup(name)
	if err != nil {
		return nil, err
	}
	return e.readPayload(o, m)
}

// SourcesOf lists the queues whose dead-letter queue is name.
func (e *Engine) SourcesOf(name string) []string { return e.sourcesOf(e.ARN(name)) }
