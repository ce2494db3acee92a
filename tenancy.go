package sluice

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/sched"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TenantLimits overrides a queue's per-tenant attributes for one tenant.
// Zero fields keep the queue's setting.
type TenantLimits struct {
	Weight        float64 `json:"weight,omitempty"`         // deficit round robin weight (default 1)
	MaxInFlight   int     `json:"max_in_flight,omitempty"`  // TenantMaxInFlight
	SendRate      float64 `json:"send_rate,omitempty"`      // TenantSendRate, messages/s
	SendBurst     float64 `json:"send_burst,omitempty"`     // TenantSendBurst
	ReceiveRate   float64 `json:"receive_rate,omitempty"`   // TenantReceiveRate, messages/s
	ReceiveBurst  float64 `json:"receive_burst,omitempty"`  // TenantReceiveBurst
	BacklogTarget int     `json:"backlog_target,omitempty"` // TenantBacklogTarget
}

// TenantInfo is one tenant of a queue as the scheduler sees it.
type TenantInfo struct {
	Name       string         `json:"name"`
	Ready      int            `json:"ready"`
	InFlight   int            `json:"in_flight"`
	Lanes      map[string]int `json:"lanes"` // ready messages by lane: live, retry-N, backlog
	OldestAge  time.Duration  `json:"oldest_age_ns"`
	Spilled    bool           `json:"spilled"` // over its receive rate: served from the spillover lane
	Capped     bool           `json:"capped"`  // at its in-flight cap
	Partitions []int          `json:"partitions"`
	Limits     *TenantLimits  `json:"limits,omitempty"` // its overrides, if any
}

// SetTenantLimits sets (or, with a zero value, clears) one tenant's
// overrides on a queue. They are stored with the queue.
func (b *Broker) SetTenantLimits(ctx context.Context, queue, tenant string, l TenantLimits) error {
	if l.Weight < 0 || l.Weight > 1000 || l.MaxInFlight < 0 || l.SendRate < 0 || l.SendBurst < 0 ||
		l.ReceiveRate < 0 || l.ReceiveBurst < 0 || l.BacklogTarget < 0 {
		return st.Errorf(st.CodeInvalidParameterValue, "Tenant limits must not be negative, and the weight must be at most 1000.")
	}
	qs, err := b.impl.lookup(queue)
	if err != nil {
		return err
	}
	return b.impl.updateMeta(qs, func(m *queueMeta) error {
		if l == (TenantLimits{}) {
			delete(m.Tenants, tenant)
			return nil
		}
		if m.Tenants == nil {
			m.Tenants = map[string]sched.Limits{}
		}
		if len(m.Tenants) >= 10000 {
			if _, ok := m.Tenants[tenant]; !ok {
				return st.Errorf(st.CodeOverLimit, "A queue holds at most 10000 tenant overrides.")
			}
		}
		m.Tenants[tenant] = sched.Limits{Weight: l.Weight, MaxInFlight: l.MaxInFlight, SendRate: l.SendRate, SendBurst: l.SendBurst,
			ReceiveRate: l.ReceiveRate, ReceiveBurst: l.ReceiveBurst, BacklogTarget: l.BacklogTarget}
		return nil
	})
}

// Tenants lists the tenants of a queue that hold messages, largest backlog
// first, at most max (0: all).
func (b *Broker) Tenants(queue string, max int) ([]TenantInfo, error) {
	qs, err := b.impl.lookup(queue)
	if err != nil {
		return nil, err
	}
	now := b.impl.clock.Now()
	qs.mu.Lock()
	qs.q.Advance(now)
	s := qs.q.Sched()
	stats := s.Stats()
	over := qs.meta.Tenants
	qs.mu.Unlock()
	if max > 0 && len(stats) > max {
		stats = stats[:max]
	}
	out := make([]TenantInfo, 0, len(stats))
	for _, t := range stats {
		out = append(out, tenantInfo(t, now, over))
	}
	return out, nil
}

// Tenant describes one tenant of a queue, including the partitions it
// hashes to, whether or not it holds messages.
func (b *Broker) Tenant(queue, tenant string) (TenantInfo, error) {
	qs, err := b.impl.lookup(queue)
	if err != nil {
		return TenantInfo{}, err
	}
	now := b.impl.clock.Now()
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.q.Advance(now)
	for _, t := range qs.q.Sched().Stats() {
		if t.Name == tenant {
			return tenantInfo(t, now, qs.meta.Tenants), nil
		}
	}
	info := tenantInfo(sched.TenantStats{Name: tenant, Partitions: qs.q.Sched().TenantPartitions(tenant)}, now, qs.meta.Tenants)
	info.Lanes = map[string]int{}
	return info, nil
}

func tenantInfo(t sched.TenantStats, now time.Time, over map[string]sched.Limits) TenantInfo {
	info := TenantInfo{Name: t.Name, Ready: t.Ready, InFlight: t.InFlight, Spilled: t.Spilled, Capped: t.Capped,
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
		info.Limits = &TenantLimits{Weight: l.Weight, MaxInFlight: l.MaxInFlight, SendRate: l.SendRate, SendBurst: l.SendBurst,
			ReceiveRate: l.ReceiveRate, ReceiveBurst: l.ReceiveBurst, BacklogTarget: l.BacklogTarget}
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

// DropBefore drops every message of a queue sent before t, of one tenant
// (all when allTenants): the watermark. The drops are durable and the
// storage is reclaimed. It returns how many were dropped.
func (b *Broker) DropBefore(ctx context.Context, queue string, before time.Time, tenant string, allTenants bool) (int, error) {
	qs, _, err := b.impl.locked(queue)
	if err != nil {
		return 0, err
	}
	seqs := qs.q.SentBefore(before.UnixMilli(), tenant, allTenants)
	if len(seqs) == 0 {
		qs.mu.Unlock()
		return 0, nil
	}
	recs := make([]*record, len(seqs))
	for i, s := range seqs {
		recs[i] = &record{T: recDelete, Q: qs.meta.ID, Seq: s}
	}
	n := 0
	err = b.impl.persistLocked(qs, recs, func(time.Time) { n = qs.q.DropWatermarked(seqs) })
	if err == nil {
		qs.wakeLocked()
	}
	b.impl.finishLocked(qs, nil)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// tenantFigures are Sluice's read-only queue attributes about tenants and
// age, computed under the queue lock.
func tenantFigures(q *queue.Queue, now time.Time) map[string]string {
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

// RetryMessage fails a received message on the consumer's word: it
// climbs the queue's retry ladder (RetryDelays), waiting delaySeconds
// instead of the level's delay when not nil; without a ladder it becomes
// visible again after delaySeconds (0 when nil). reason travels with the
// message (SluiceLastError).
func (b *Broker) RetryMessage(ctx context.Context, queueName, receiptHandle string, delaySeconds *int, reason string) error {
	if delaySeconds != nil && (*delaySeconds < 0 || *delaySeconds > 43200) {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: Must be >= 0 and <= 43200.", *delaySeconds)
	}
	d := time.Duration(-1)
	if delaySeconds != nil {
		d = time.Duration(*delaySeconds) * time.Second
	}
	return b.impl.outcome(queueName, receiptHandle, reason, func(q *queue.Queue, now time.Time, seq uint64) bool {
		return q.Retry(now, seq, d, reason)
	})
}

// RejectMessage fails a received message for good: it goes to the
// dead-letter queue at once (or is dropped when there is none), with its
// reason.
func (b *Broker) RejectMessage(ctx context.Context, queueName, receiptHandle, reason string) error {
	return b.impl.outcome(queueName, receiptHandle, reason, func(q *queue.Queue, now time.Time, seq uint64) bool {
		return q.Reject(now, seq, reason)
	})
}

// DeferMessage puts a received message off for delaySeconds without
// counting it as a failure or as a receive.
func (b *Broker) DeferMessage(ctx context.Context, queueName, receiptHandle string, delaySeconds int) error {
	if delaySeconds < 0 || delaySeconds > 43200 {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: Must be >= 0 and <= 43200.", delaySeconds)
	}
	return b.impl.outcome(queueName, receiptHandle, "", func(q *queue.Queue, now time.Time, seq uint64) bool {
		return q.Defer(now, seq, time.Duration(delaySeconds)*time.Second)
	})
}

// outcome applies a consumer's verdict to the message a receipt handle
// names, fenced like ChangeMessageVisibility: a handle of an earlier
// delivery gets ReceiptHandleIsInvalid, a message not in flight
// MessageNotInflight. When the verdict cannot be recorded the message is
// put back in flight as it was.
func (b *broker) outcome(name, h, reason string, f func(q *queue.Queue, now time.Time, seq uint64) bool) error {
	if len(reason) > 4096 {
		return st.Errorf(st.CodeInvalidParameterValue, "Value for parameter Reason is invalid. Reason: at most 4096 characters.")
	}
	qs, now, err := b.locked(name)
	if err != nil {
		return err
	}
	qid, seq, fence, ok := parseHandle(h)
	if !ok || qid != qs.meta.ID {
		qs.mu.Unlock()
		return invalidHandle(h)
	}
	m, live := qs.q.Lookup(seq)
	if !live || m.Fence() != fence {
		qs.mu.Unlock()
		return st.Errorf(st.CodeReceiptHandleIsInvalid, "The receipt handle %q is not valid for this message: it was delivered again or deleted.", h)
	}
	prev := *m
	if !f(qs.q, now, seq) {
		qs.mu.Unlock()
		return st.Errorf(st.CodeMessageNotInflight, "Message does not exist or is not available for visibility timeout change.")
	}
	qs.wakeLocked()
	if err := b.finishForLocked(qs, nil, seq); err != nil {
		qs.mu.Lock()
		if m, ok := qs.q.Lookup(seq); !ok || m.Fence() == fence {
			qs.q.Revert(b.clock.Now(), prev)
		}
		qs.mu.Unlock()
		return err
	}
	return nil
}

// sluiceReadOnlyAttrs are answered when asked for by name (not with All,
// so All answers as SQS does).
var sluiceReadOnlyAttrs = []string{
	"ApproximateAgeOfOldestMessage", "ApproximateNumberOfTenants", "ApproximateNumberOfNoisyGroups",
	"ApproximateAgeOfOldestMessageInQuietGroups", "ApproximateNumberOfMessagesSidelined", "ApproximateNumberOfMessagesDropped",
}

// maintain runs once a second: it applies retention and MaxMessageAge to
// queues nobody is receiving from, moves aged messages to their
// dead-letter queues, and releases the storage of dropped ones.
func (b *broker) scheduleMaintenance() {
	b.every(&b.maintainTimer, time.Second, b.maintain)
}

func (b *broker) maintain() {
	for _, qs := range b.allQueues() {
		qs.mu.Lock()
		if qs.deleted {
			qs.mu.Unlock()
			continue
		}
		now := b.clock.Now()
		qs.q.Advance(now)
		qs.q.Sched().Sweep(now.UnixMilli(), 250_000)
		b.afterAdvanceLocked(qs)
	}
}

// afterAdvanceLocked unlocks the queue, then releases dropped storage and
// sends messages past MaxMessageAge to the dead-letter queue.
func (b *broker) afterAdvanceLocked(qs *queueState) {
	b.finishLocked(qs, nil)
}

// finishLocked persists what the queue's retry ladder changed (with recs,
// the caller's records, in the same batch), unlocks the queue, waits for
// durability when there was anything to write, releases dropped storage,
// and sends messages past MaxMessageAge or off the ladder to the
// dead-letter queue (or drops them, durably, when the queue has none). It
// returns the write's failure (the ladder's changes then stay in memory
// only, to be made again on recovery), or the failure of message mine's
// move (it is back in the queue; 0: none is the caller's).
func (b *broker) finishLocked(qs *queueState, recs []*record) error {
	return b.finishForLocked(qs, recs, 0)
}

func (b *broker) finishForLocked(qs *queueState, recs []*record, mine uint64) error {
	for _, m := range qs.q.TakeUpdated() {
		cp := *m
		recs = append(recs, &record{T: recUpdate, Q: qs.meta.ID, Seq: m.Seq, M: &cp})
	}
	leaving := append(qs.q.TakeAged(), qs.q.TakeFailed()...)
	srcID, srcArn, dlqArn := qs.meta.ID, b.arn(qs.meta.Name), qs.dlqLocked()
	var dropped []*queue.Msg
	for _, m := range leaving {
		if dlqArn == "" {
			// Off the ladder with nowhere to go: dropped, durably.
			recs = append(recs, &record{T: recDelete, Q: srcID, Seq: m.Seq})
			dropped = append(dropped, m)
		} else {
			qs.takeOutboundLocked(m)
		}
	}
	var w waiter = doneWaiter{}
	if len(recs) > 0 {
		w = b.submit(recs...)
	}
	released := qs.q.TakeReleased()
	qs.mu.Unlock()
	err := wait(w)
	b.release(released)
	if err != nil && len(dropped) > 0 {
		// The drops were not recorded: the messages stay.
		qs.mu.Lock()
		for _, m := range dropped {
			prev := *m
			prev.State = queue.Pending
			qs.q.Revert(b.clock.Now(), prev)
		}
		qs.mu.Unlock()
		dropped = nil
	}
	for _, m := range dropped {
		b.release([]queue.Loc{m.Loc})
		switch {
		case m.Fail() != nil && m.Fail().Reason == "Reject":
			qs.ctr.droppedRejected.Add(1)
		case m.Fail() != nil && m.Fail().Reason != "MaxMessageAge":
			qs.ctr.droppedExhausted.Add(1)
		}
	}
	if dlqArn == "" {
		return err
	}
	for _, m := range leaving {
		prev := *m
		prev.State = queue.Pending // back where its visibility says
		if merr := b.deadLetter(qs, srcID, srcArn, dlqArn, m, prev); merr != nil {
			if err == nil && m.Seq == mine {
				err = merr
			}
			continue
		}
		qs.ctr.deadLettered.Add(1)
	}
	return err
}

// dlqLocked is the queue's dead-letter target ARN ("" when none).
func (qs *queueState) dlqLocked() string {
	if rp := qs.meta.Attrs["RedrivePolicy"]; rp != qs.dlqRP {
		qs.dlqRP, qs.dlqArn = rp, dlqOf(qs.meta)
	}
	return qs.dlqArn
}

func dlqOf(meta queueMeta) string {
	if rp := meta.Attrs["RedrivePolicy"]; rp != "" {
		if p, err := parseRedrivePolicy(rp); err == nil {
			return p.DeadLetterTargetArn
		}
	}
	return ""
}
