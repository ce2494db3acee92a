package sluice

import (
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/store"
)

// FirstAttemptBounds are the upper bounds (seconds) of the age-at-first-
// attempt histogram: how long messages waited from send to first delivery.
var FirstAttemptBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600}

// counters are one queue's event counts since the broker opened.
type counters struct {
	sent, throttled, received, emptyReceives, deleted, deadLettered atomic.Int64
	redriven, droppedExhausted, droppedRejected                     atomic.Int64
	firstAttempt                                                    [18]atomic.Int64 // by FirstAttemptBounds, then above
	firstAttemptMillis                                              atomic.Int64
}

func (c *counters) observeFirstAttempt(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(FirstAttemptBounds) && s > FirstAttemptBounds[i] {
		i++
	}
	c.firstAttempt[i].Add(1)
	c.firstAttemptMillis.Add(d.Milliseconds())
}

// QueueStats is one queue's figures at one moment.
type QueueStats struct {
	Name     string
	FIFO     bool
	DLQ      string // the dead-letter queue's name, if any
	Visible  int
	InFlight int
	Delayed  int
	// OldestAge is the age of the oldest message (0 when empty).
	OldestAge time.Duration
	// Counters since the broker opened.
	Sent, Throttled, Received, EmptyReceives, Deleted, DeadLettered int64
	Sidelined, Spilled                                              uint64
	// HeldBack counts receives that passed over a tenant above its share
	// to keep TenantHeadroom receivers waiting.
	HeldBack uint64
	// WaitingReceives is the number of long polls waiting on the queue.
	WaitingReceives int
	// Redriven counts messages moved out of this queue by redrives and
	// move tasks; Retried, Deferred, Rejected the consumers' verdicts
	// (and visibility timeouts that climbed the retry ladder).
	Redriven                    int64
	Retried, Deferred, Rejected uint64
	// Dropped counts by reason: retention, max_age, watermark, and
	// exhausted / rejected (off the retry ladder with no dead-letter queue).
	Dropped map[string]uint64
	// FirstAttempt counts first deliveries by how long they waited since
	// their send, per FirstAttemptBounds (the last bucket: above them all).
	FirstAttempt    []int64
	FirstAttemptSum time.Duration
	// Tenants are the tenants with the largest backlogs (at most
	// StatsTenants), Others the rest summed.
	Tenants []TenantInfo
	Others  TenantInfo
	// Lanes sums ready messages by lane across tenants.
	Lanes map[string]int
	// QuietOldestAge is the age of the oldest message among tenants that
	// are not noisy (see ApproximateAgeOfOldestMessageInQuietGroups).
	QuietOldestAge time.Duration
	NoisyOldestAge time.Duration
	NoisyTenants   int
}

// StatsTenants is how many tenants Stats names per queue.
const StatsTenants = 20

// StoreStats are the storage engine's figures.
type StoreStats struct {
	LiveMessages    int64 // messages whose records the log still holds
	Segments        int
	LogBytes        int64
	CheckpointBytes int64
	Checkpoints     int64
	Fsyncs          int64
	FsyncBuckets    []int64 // by FsyncBounds, then above
	FsyncBounds     []time.Duration
	FsyncSeconds    float64
	BytesWritten    int64
	FailedWrites    int64
	// DeadRecords counts records in segments that no longer hold a live
	// message (what compaction and segment deletion reclaim); Relocated
	// the messages compaction copied forward.
	DeadRecords int64
	Relocated   int64
	// DiskBytes is the size of the log segments on disk; LiveBytes the
	// part of it estimated to hold live messages (each segment's size
	// times its share of live records), DeadBytes the rest.
	DiskBytes, LiveBytes, DeadBytes int64
	// DiskFree is the free space of the data directory's file system,
	// DiskReserve the reserve in effect, and DiskAlarm whether free space
	// is below it (new messages are refused then).
	DiskFree, DiskReserve int64
	DiskAlarm             bool
}

// Stats returns every queue's figures (for metrics and the dashboard).
func (b *Broker) Stats() []QueueStats {
	var out []QueueStats
	for _, qs := range b.impl.allQueues() {
		out = append(out, b.impl.queueStats(qs))
	}
	return out
}

// StoreStats returns the store's figures (zero for the memory store).
func (b *Broker) StoreStats() StoreStats {
	bi := b.impl
	var s StoreStats
	var sizes map[uint32]int64
	if bi.store != nil {
		sizes = bi.store.Stats().SegmentBytes
	}
	bi.segMu.Lock()
	for seg, n := range bi.live {
		s.LiveMessages += n
		s.DeadRecords += max(0, bi.written[seg]-n)
		if w := bi.written[seg]; w > 0 {
			s.LiveBytes += sizes[seg] * min(n, w) / w
		}
	}
	bi.segMu.Unlock()
	for _, n := range sizes {
		s.DiskBytes += n
	}
	s.DeadBytes = max(0, s.DiskBytes-s.LiveBytes)
	s.Relocated = bi.relocated.Load()
	if bi.store == nil {
		return s
	}
	d := bi.store.Alarm()
	s.DiskFree, s.DiskReserve, s.DiskAlarm = d.Free, d.Reserve, d.Alarm
	st := bi.store.Stats()
	s.Segments, s.LogBytes, s.CheckpointBytes, s.Checkpoints = st.Segments, st.LogBytes, st.CheckpointBytes, st.Checkpoints
	s.Fsyncs, s.FsyncSeconds, s.BytesWritten, s.FailedWrites = st.Fsyncs, st.FsyncSeconds, st.BytesWritten, st.FailedWrites
	s.FsyncBuckets = append([]int64(nil), st.FsyncBuckets[:]...)
	s.FsyncBounds = append([]time.Duration(nil), store.FsyncBounds[:]...)
	return s
}

func (b *broker) queueStats(qs *queueState) QueueStats {
	now := b.clock.Now()
	qs.mu.Lock()
	c := qs.q.Counts(now)
	ts := qs.q.Sched().Stats()
	qst := qs.q.Stats()
	meta := qs.meta
	waiting := len(qs.pollers)
	b.afterAdvanceLocked(qs)
	s := QueueStats{Name: meta.Name, FIFO: meta.FIFO, Visible: c.Visible, InFlight: c.InFlight, Delayed: c.Delayed,
		Sidelined: qst.Sidelined, Spilled: qst.Spilled, HeldBack: qst.HeldBack, WaitingReceives: waiting, Lanes: map[string]int{},
		Retried: qst.Retried, Deferred: qst.Deferred, Rejected: qst.Rejected, Redriven: qs.ctr.redriven.Load(),
		Dropped: map[string]uint64{"retention": qst.DroppedRetention, "max_age": qst.DroppedMaxAge, "watermark": qst.DroppedWatermark,
			"exhausted": uint64(qs.ctr.droppedExhausted.Load()), "rejected": uint64(qs.ctr.droppedRejected.Load())}}
	if dlq := dlqOf(meta); dlq != "" {
		s.DLQ, _ = b.queueNameFromARN(dlq)
	}
	if c.OldestSent > 0 {
		s.OldestAge = max(0, now.Sub(time.UnixMilli(c.OldestSent)))
	}
	k := &qs.ctr
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
	s.Others = TenantInfo{Name: "", Lanes: map[string]int{}}
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
		if i < StatsTenants {
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
