// Package figures turns what a queue partition counts into the numbers it
// shows: its statistics (the dashboard, /metrics, the admin API), its
// tenants, and Sluice's read-only queue attributes about tenants and age.
//
// It is pure: the owner reads its state under its lock and hands it
// over. Nothing here takes a lock, reads a clock or changes a queue; the
// only state it keeps is the Counters, which are updated without the
// owner's lock.
package figures

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Counters are a queue's running totals since the server started.
type Counters struct {
	Sent, Throttled, Received, EmptyReceives, Deleted, DeadLettered atomic.Int64
	Redriven, DroppedExhausted, DroppedRejected                     atomic.Int64
	// SendsHeld counts the sends flow control held back, SendsHeldOut
	// those that went ahead when their hold ran out, HeldMillis their
	// time held.
	SendsHeld, SendsHeldOut, HeldMillis atomic.Int64
	// Unreadable counts messages dropped because their body could not be
	// read back (found at recovery, or at a read).
	Unreadable atomic.Int64

	firstAttempt, firstAttemptOld             [18]atomic.Int64 // by st.FirstAttemptBounds, then above
	firstAttemptMillis, firstAttemptOldMillis atomic.Int64
}

// ObserveFirstAttempt counts a message's first delivery, d after it was
// sent; old says it was served from the old side of a backlog (its
// backlog lane).
func (c *Counters) ObserveFirstAttempt(d time.Duration, old bool) {
	s := d.Seconds()
	i := 0
	for i < len(st.FirstAttemptBounds) && s > st.FirstAttemptBounds[i] {
		i++
	}
	c.firstAttempt[i].Add(1)
	c.firstAttemptMillis.Add(d.Milliseconds())
	if old {
		c.firstAttemptOld[i].Add(1)
		c.firstAttemptOldMillis.Add(d.Milliseconds())
	}
}

// State is what a queue's owner reads under its lock for its statistics.
type State struct {
	Now     time.Time
	Name    string
	FIFO    bool
	Counts  queue.Counts
	Queue   queue.Stats
	Tenants []sched.TenantStats            // largest backlog first
	Limits  map[string]record.TenantLimits // per-tenant overrides
	Waiting int                            // long polls waiting
	Order   string                         // QueueStats.Order
	// A FIFO queue's backlog mode (queue.FIFOMode): since when (unix ms;
	// 0: not engaged), and the messages of the groups set aside.
	FIFOEngaged int64
	FIFOOld     int
}

// Queue returns a queue's statistics: s with the totals in c. The
// dead-letter queue's name is the caller's to fill in.
func Queue(s State, c *Counters) st.QueueStats {
	now, qst := s.Now, s.Queue
	out := st.QueueStats{Name: s.Name, FIFO: s.FIFO, Order: s.Order, Visible: s.Counts.Visible, InFlight: s.Counts.InFlight, Delayed: s.Counts.Delayed,
		Sidelined: qst.Sidelined, Spilled: qst.Spilled, HeldBack: qst.HeldBack, WaitingReceives: s.Waiting, Lanes: map[string]int{},
		Retried: qst.Retried, Deferred: qst.Deferred, Rejected: qst.Rejected, Redriven: c.Redriven.Load(), Unreadable: c.Unreadable.Load(),
		Dropped: map[string]uint64{"retention": qst.DroppedRetention, "max_age": qst.DroppedMaxAge, "watermark": qst.DroppedWatermark,
			"exhausted": uint64(c.DroppedExhausted.Load()), "rejected": uint64(c.DroppedRejected.Load())}}
	if s.Counts.OldestSent > 0 {
		out.OldestAge = max(0, now.Sub(time.UnixMilli(s.Counts.OldestSent)))
	}
	out.Sent, out.Throttled, out.Received = c.Sent.Load(), c.Throttled.Load(), c.Received.Load()
	out.SendsHeld, out.SendsHeldOut = c.SendsHeld.Load(), c.SendsHeldOut.Load()
	out.SendsHeldTime = time.Duration(c.HeldMillis.Load()) * time.Millisecond
	out.EmptyReceives, out.Deleted, out.DeadLettered = c.EmptyReceives.Load(), c.Deleted.Load(), c.DeadLettered.Load()
	out.FirstAttempt = make([]int64, len(c.firstAttempt))
	for i := range c.firstAttempt {
		out.FirstAttempt[i] = c.firstAttempt[i].Load()
	}
	out.FirstAttemptSum = time.Duration(c.firstAttemptMillis.Load()) * time.Millisecond
	out.FirstAttemptOld = make([]int64, len(c.firstAttemptOld))
	for i := range c.firstAttemptOld {
		out.FirstAttemptOld[i] = c.firstAttemptOld[i].Load()
	}
	out.FirstAttemptOldSum = time.Duration(c.firstAttemptOldMillis.Load()) * time.Millisecond
	total := 0
	for _, t := range s.Tenants {
		total += t.Ready
	}
	out.Others = st.TenantInfo{Name: "", Lanes: map[string]int{}}
	var quietOldest, noisyOldest int64
	for i, t := range s.Tenants {
		info := Tenant(t, now, s.Limits)
		for l, n := range info.Lanes {
			out.Lanes[l] += n
		}
		if info.FreshFirst {
			out.FreshFirstTenants++
			if out.FreshFirstSince.IsZero() || info.FreshFirstSince.Before(out.FreshFirstSince) {
				out.FreshFirstSince = info.FreshFirstSince
			}
		}
		out.OldMessages += info.Lanes["backlog"]
		out.OldOldestAge = max(out.OldOldestAge, info.OldOldestAge)
		if isNoisy(t, total, len(s.Tenants)) {
			out.NoisyTenants++
			if t.Oldest > 0 && (noisyOldest == 0 || t.Oldest < noisyOldest) {
				noisyOldest = t.Oldest
			}
		} else if t.Oldest > 0 && (quietOldest == 0 || t.Oldest < quietOldest) {
			quietOldest = t.Oldest
		}
		if i < st.StatsTenants {
			out.Tenants = append(out.Tenants, info)
			continue
		}
		out.Others.Ready += info.Ready
		out.Others.InFlight += info.InFlight
		out.Others.OldestAge = max(out.Others.OldestAge, info.OldestAge)
		for l, n := range info.Lanes {
			out.Others.Lanes[l] += n
		}
	}
	if s.FIFOEngaged > 0 {
		out.FreshFirstTenants, out.FreshFirstSince = 1, time.UnixMilli(s.FIFOEngaged).UTC()
		out.OldMessages = s.FIFOOld
	}
	if quietOldest > 0 {
		out.QuietOldestAge = max(0, now.Sub(time.UnixMilli(quietOldest)))
	}
	if noisyOldest > 0 {
		out.NoisyOldestAge = max(0, now.Sub(time.UnixMilli(noisyOldest)))
	}
	return out
}

// Tenant describes one tenant at now, with its limits if they are
// overridden.
func Tenant(t sched.TenantStats, now time.Time, over map[string]record.TenantLimits) st.TenantInfo {
	info := st.TenantInfo{Name: t.Name, Ready: t.Ready, InFlight: t.InFlight, Spilled: t.Spilled, Capped: t.Capped,
		Shards: t.Shards, Lanes: map[string]int{}}
	for i, n := range t.Lanes {
		if n == 0 {
			continue
		}
		info.Lanes[LaneName(i, len(t.Lanes))] = n
	}
	if t.Oldest > 0 {
		info.OldestAge = now.Sub(time.UnixMilli(t.Oldest))
	}
	if t.Engaged > 0 {
		info.FreshFirst, info.FreshFirstSince = true, time.UnixMilli(t.Engaged).UTC()
	}
	if t.OldestOld > 0 {
		info.OldOldestAge = max(0, now.Sub(time.UnixMilli(t.OldestOld)))
	}
	if l, ok := over[t.Name]; ok {
		tl := st.TenantLimits(l)
		info.Limits = &tl
	}
	return info
}

// Tenants describes the first max tenants (0: all) at now.
func Tenants(stats []sched.TenantStats, now time.Time, over map[string]record.TenantLimits, max int) []st.TenantInfo {
	if max > 0 && len(stats) > max {
		stats = stats[:max]
	}
	out := make([]st.TenantInfo, 0, len(stats))
	for _, t := range stats {
		out = append(out, Tenant(t, now, over))
	}
	return out
}

// LaneName names lane i of n: live, retry-N, backlog (the last).
func LaneName(i, n int) string {
	switch {
	case i == 0:
		return "live"
	case i == n-1:
		return "backlog"
	}
	return "retry-" + strconv.Itoa(i)
}

// Attributes are Sluice's read-only queue attributes about tenants and
// age (attr.SluiceReadOnly), from a queue's counts, queue and tenant
// statistics at now.
func Attributes(now time.Time, c queue.Counts, qst queue.Stats, tenants []sched.TenantStats) map[string]string {
	out := map[string]string{}
	age := int64(0)
	if c.OldestSent > 0 {
		age = max(0, now.UnixMilli()-c.OldestSent) / 1000
	}
	out["ApproximateAgeOfOldestMessage"] = strconv.FormatInt(age, 10)
	total := 0
	for _, t := range tenants {
		total += t.Ready
	}
	noisy, quietOldest := 0, int64(0)
	for _, t := range tenants {
		if isNoisy(t, total, len(tenants)) {
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
	out["ApproximateNumberOfTenants"] = strconv.Itoa(len(tenants))
	out["ApproximateNumberOfNoisyGroups"] = strconv.Itoa(noisy)
	out["ApproximateAgeOfOldestMessageInQuietGroups"] = strconv.FormatInt(qa, 10)
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

// Order says how a queue with config c serves a standing backlog
// (QueueStats.Order).
func Order(c queue.Config) string {
	switch {
	case c.FIFO && c.Sched.Adaptive:
		return "fresh groups first"
	case c.FIFO:
		return "oldest first"
	case c.Sched.SidelineAge > 0:
		return fmt.Sprintf("sideline after %ds", c.Sched.SidelineAge/1000)
	case c.Sched.Adaptive:
		return "fresh first"
	}
	return "oldest first"
}
