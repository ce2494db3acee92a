package partition

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/internal/partition/receipt"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// locked takes the lock of a live queue, its timers advanced to now. The
// caller ends with o.unlock().
func (o *Owner) locked() (time.Time, error) {
	o.lock()
	if err := o.stoppedLocked(); err != nil {
		o.mu.Unlock()
		return time.Time{}, err
	}
	now := o.h.Clock.Now()
	o.q.Advance(now)
	return now, nil
}

// parseHandle reads a receipt handle of this partition.
func (o *Owner) parseHandle(h string) (seq uint64, fence uint32, err error) {
	rh, ok := receipt.Parse(h)
	if !ok || rh.Partition != uint64(o.p) {
		return 0, 0, receipt.Invalid(h)
	}
	return rh.Seq, rh.Fence, nil
}

func expired(h string) error {
	return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.", h)
}

func failEntries(errs []error, idx []int, err error) {
	for _, i := range idx {
		errs[i] = err
	}
}

// Delete deletes the messages receipt handles name, in one durable write;
// errs[i] is nil when entry i succeeded.
func (o *Owner) Delete(ctx context.Context, hs []string) ([]error, error) {
	if _, err := o.locked(); err != nil {
		return nil, err
	}
	errs := make([]error, len(hs))
	recs := make([]*record.Record, 0, len(hs))
	idx := make([]int, 0, len(hs))
	// The records themselves, in one allocation (never grown past its
	// capacity, so recs' pointers into it hold).
	all := make([]record.Record, 0, len(hs))
	for i, h := range hs {
		seq, fence, err := o.parseHandle(h)
		if err != nil {
			errs[i] = err
			continue
		}
		m, live := o.q.Lookup(seq)
		if !live {
			continue // already deleted (durably: deletes apply once written): idempotent, as SQS
		}
		if m.Fence() != fence {
			// Fenced: the message was delivered again since this handle.
			if o.cfg.Queue.FIFO {
				errs[i] = expired(h)
			}
			continue
		}
		if o.cfg.Queue.FIFO && m.State != queue.InFlight {
			errs[i] = expired(h)
			continue
		}
		all = append(all, *o.q.DeleteRecord(seq, record.ByClient))
		recs = append(recs, &all[len(all)-1])
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		o.unlock()
		return errs, nil
	}
	// The messages go once their deletes are durable: until then a retry
	// finds them and writes its own delete, so it is never answered with
	// success for a delete that was not recorded.
	if werr := o.persistLocked(recs); werr != nil {
		failEntries(errs, idx, werr)
	} else {
		o.ctr.Deleted.Add(int64(len(recs)))
		if o.q.Sched().HasCaps() {
			o.waiting.WakeAll() // a tenant at its in-flight cap may go on
		}
	}
	o.unlock()
	return errs, nil
}

// ChangeVisibility changes visibility timeouts, in one durable write.
func (o *Owner) ChangeVisibility(ctx context.Context, in []st.VisibilityChange) ([]error, error) {
	now, err := o.locked()
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(in))
	var recs []*record.Record
	var idx []int
	for i, c := range in {
		if c.Seconds < 0 || c.Seconds > 43200 {
			errs[i] = st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200, if provided.", c.Seconds)
			continue
		}
		seq, fence, err := o.parseHandle(c.ReceiptHandle)
		if err != nil {
			errs[i] = err
			continue
		}
		m, live := o.q.Lookup(seq)
		if !live {
			errs[i] = st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", c.ReceiptHandle)
			continue
		}
		if m.Fence() != fence {
			errs[i] = expired(c.ReceiptHandle)
			continue
		}
		if m.State != queue.InFlight {
			if o.cfg.Queue.FIFO {
				errs[i] = st.Errorf(st.CodeMessageNotInflight, "The message referred to isn't in flight.")
			}
			continue // standard: an expired handle is answered 200, as SQS
		}
		if now.Add(time.Duration(c.Seconds)*time.Second).Sub(time.UnixMilli(m.LastReceive())) > 12*time.Hour {
			errs[i] = st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", c.Seconds)
			continue
		}
		recs = append(recs, o.q.VisibilityRecord(seq, now.Add(time.Duration(c.Seconds)*time.Second).UnixMilli()))
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		o.unlock()
		return errs, nil
	}
	if werr := o.persistLocked(recs); werr != nil {
		failEntries(errs, idx, werr)
	}
	o.unlock()
	return errs, nil
}

// Purge deletes every message in the queue (at most once per 60 seconds).
func (o *Owner) Purge(ctx context.Context) error {
	now, err := o.locked()
	if err != nil {
		return err
	}
	// The queue knows the last durable purge (its record and snapshots
	// carry the time); lastPurge also covers one being written.
	if !o.q.PurgeAllowed(now) || !o.lastPurge.IsZero() && now.Sub(o.lastPurge) < queue.PurgeInterval {
		o.unlock()
		return st.Errorf(st.CodePurgeQueueInProgress, "Only one PurgeQueue operation on %s is allowed every 60 seconds.", o.meta.Name)
	}
	last := o.lastPurge
	o.lastPurge = now
	err = o.persistLocked([]*record.Record{o.q.PurgeRecord(now)})
	if err != nil && o.lastPurge.Equal(now) {
		o.lastPurge = last // not purged: it may be tried again at once
	}
	o.unlock()
	return err
}

// DeleteMessages deletes the listed messages (a filtered purge, the
// watermark) in one durable write and returns how many were live.
func (o *Owner) DeleteMessages(ctx context.Context, seqs []uint64, reason uint8) (int, error) {
	if _, err := o.locked(); err != nil {
		return 0, err
	}
	var recs []*record.Record
	for _, s := range seqs {
		if _, ok := o.q.Lookup(s); ok {
			recs = append(recs, o.q.DeleteRecord(s, reason))
		}
	}
	if len(recs) == 0 {
		o.unlock()
		return 0, nil
	}
	err := o.persistLocked(recs)
	if err == nil {
		o.waiting.WakeAll()
	}
	o.unlock()
	if err != nil {
		return 0, err
	}
	return len(recs), nil
}

// DropBefore drops every message of the queue sent before t, of one
// tenant (all when allTenants): the watermark.
func (o *Owner) DropBefore(ctx context.Context, before time.Time, tenant string, allTenants bool) (int, error) {
	if _, err := o.locked(); err != nil {
		return 0, err
	}
	seqs := o.q.SentBefore(before.UnixMilli(), tenant, allTenants)
	o.unlock()
	return o.DeleteMessages(ctx, seqs, record.ByWatermark)
}

// RetryMessage fails a received message on the consumer's word: it
// climbs the queue's retry ladder (RetryDelays), waiting delaySeconds
// instead of the level's delay when not nil; without a ladder it becomes
// visible again after delaySeconds (0 when nil).
func (o *Owner) RetryMessage(ctx context.Context, h string, delaySeconds *int, reason string) error {
	if delaySeconds != nil && (*delaySeconds < 0 || *delaySeconds > 43200) {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: Must be >= 0 and <= 43200.", *delaySeconds)
	}
	d := time.Duration(-1)
	if delaySeconds != nil {
		d = time.Duration(*delaySeconds) * time.Second
	}
	return o.verdict(h, reason, func(q *queue.Queue, now time.Time, seq uint64) (*record.Record, bool) {
		r, _, ok := q.Retry(now, seq, d, reason)
		return r, ok
	})
}

// RejectMessage fails a received message for good: it goes to the
// dead-letter queue at once (or is dropped when there is none).
func (o *Owner) RejectMessage(ctx context.Context, h, reason string) error {
	return o.verdict(h, reason, func(q *queue.Queue, now time.Time, seq uint64) (*record.Record, bool) {
		_, ok := q.Reject(now, seq, reason)
		return nil, ok
	})
}

// DeferMessage puts a received message off for delaySeconds without
// counting it as a failure or as a receive.
func (o *Owner) DeferMessage(ctx context.Context, h string, delaySeconds int) error {
	if delaySeconds < 0 || delaySeconds > 43200 {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: Must be >= 0 and <= 43200.", delaySeconds)
	}
	return o.verdict(h, "", func(q *queue.Queue, now time.Time, seq uint64) (*record.Record, bool) {
		r, _, ok := q.Defer(now, seq, time.Duration(delaySeconds)*time.Second)
		return r, ok
	})
}

// verdict applies a consumer's verdict to the message a receipt handle
// names, fenced like ChangeMessageVisibility. The verdict takes effect at
// once; when it cannot be recorded (or its move to the dead-letter queue
// cannot be made) the message is put back in flight as it was.
func (o *Owner) verdict(h, reason string, f func(q *queue.Queue, now time.Time, seq uint64) (*record.Record, bool)) error {
	if len(reason) > 4096 {
		return st.Errorf(st.CodeInvalidParameterValue, "Value for parameter Reason is invalid. Reason: at most 4096 characters.")
	}
	now, err := o.locked()
	if err != nil {
		return err
	}
	seq, fence, err := o.parseHandle(h)
	if err != nil {
		o.unlock()
		return err
	}
	m, live := o.q.Lookup(seq)
	if !live || m.Fence() != fence {
		o.unlock()
		return st.Errorf(st.CodeReceiptHandleIsInvalid, "The receipt handle %q is not valid for this message: it was delivered again or deleted.", h)
	}
	prev := *m
	rec, ok := f(o.q, now, seq)
	if !ok {
		o.unlock()
		return st.Errorf(st.CodeMessageNotInflight, "Message does not exist or is not available for visibility timeout change.")
	}
	o.waiting.WakeAll()
	undo := func() {
		if m, ok := o.q.Lookup(seq); !ok || m.Fence() == fence {
			o.q.Revert(o.h.Clock.Now(), prev)
		}
	}
	if rec != nil {
		err = o.waitLocked(o.appendLocked([]*record.Record{rec}, false, undo))
		o.unlock()
		return err
	}
	// It left (rejected, or off the ladder): its move is this call's.
	mine := o.takeHandoffLocked(seq)
	o.unlock()
	if mine == nil {
		return nil
	}
	mine.Prev = prev // back in flight if the move fails
	return o.deadLetter(*mine)
}

// takeHandoffLocked takes message seq's hand-off out of what the queue
// reported (the caller moves it itself); the rest stays for unlock.
func (o *Owner) takeHandoffLocked(seq uint64) *queue.Handoff {
	eff := o.q.TakeEffects()
	var mine *queue.Handoff
	rest := eff.Handoffs[:0]
	for i := range eff.Handoffs {
		if eff.Handoffs[i].Msg.Seq == seq {
			mine = &eff.Handoffs[i]
		} else {
			rest = append(rest, eff.Handoffs[i])
		}
	}
	eff.Handoffs = rest
	o.q.Requeue(eff)
	return mine
}
