package partition

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/partition/flow"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// OriginMarks reports how far the queue took each origin partition
// (durably): a topic's cursor delivers after it.
func (o *Owner) OriginMarks() (map[uint64]uint64, error) {
	if _, err := o.locked(); err != nil {
		return nil, err
	}
	defer o.unlock()
	return o.q.OriginMarks(), nil
}

// ForgetOrigin drops, durably, the queue's mark of origin partition p,
// whose topic was deleted (partition ids are not used again, so the mark
// would only stay in every snapshot).
func (o *Owner) ForgetOrigin(ctx context.Context, p uint64) error {
	if _, err := o.locked(); err != nil {
		return err
	}
	defer o.unlock()
	r := o.q.ForgetRecord(p)
	if r == nil {
		return nil
	}
	return o.persistLocked([]*record.Record{r})
}

// Send sends messages in one durable write; errs[i] is nil when entry i
// succeeded (batch says it is a batch: some errors differ). (The number
// of entries is the wire's concern: SQS allows 1 to 10, which the SQS
// front checks; their total size is checked here.)
func (o *Owner) Send(ctx context.Context, in []st.SendInput, batch bool) ([]st.SendResult, []error, error) {
	return o.send(ctx, in, nil, batch)
}

// Deliver sends, as one batch, messages that come from records of other
// partitions (a topic's publishes), each at most once: from[i] is where
// in[i] comes from, and deliveries from one origin partition come in
// position order, each naming the one it follows (queue.Origin). A
// message from a position the queue has taken already is answered as
// sent, with no message id, and not sent again: a cursor that delivers
// again after a crash makes no duplicate. One that does not follow the
// queue's mark of its origin is refused (the error names the mark): a
// refused delivery is never passed over. The marks are written in the
// same append as the messages, one record an origin. A message refused
// (errs[i]) takes no position, and the later messages of its origin in
// the call are refused with it: deliver them again after it.
func (o *Owner) Deliver(ctx context.Context, in []st.SendInput, from []queue.Origin) ([]st.SendResult, []error, error) {
	return o.send(ctx, in, from, true)
}

// send is Send, or Deliver with from.
func (o *Owner) send(ctx context.Context, in []st.SendInput, from []queue.Origin, batch bool) ([]st.SendResult, []error, error) {
	if batch {
		if err := message.CheckBatch(in); err != nil {
			return nil, nil, err
		}
	}
	// Everything that needs no lock first: the queue's rules (read under
	// the lock briefly), each message's checks, its MD5 and its payload.
	h := o.h
	o.mu.Lock()
	cfg := o.cfg
	var waiter *flow.Waiter
	if from == nil {
		waiter = o.flow.Enter(h.Clock.Now(), len(in), o.q.Ready())
	}
	o.mu.Unlock()
	if waiter != nil {
		o.holdSend(ctx, waiter)
	}
	res := make([]st.SendResult, len(in))
	errs := make([]error, len(in))
	specs := make([]*queue.SendSpec, len(in))
	// Each message's spec and payload, allocated together.
	type entry struct {
		spec queue.SendSpec
		pl   record.Payload
	}
	entries := make([]entry, len(in))
	maxSize := cfg.MaxMessageSize
	if from != nil {
		// A topic's delivery is held to SQS's limit, not to the queue's
		// MaximumMessageSize: the envelope adds about a kilobyte to a
		// publish the topic took, and SNS delivers it (a refusal would
		// drop it).
		maxSize = max(maxSize, message.MaxBatchBytes)
	}
	for i := range in {
		m := &in[i]
		if err := message.Validate(m, cfg.Queue.FIFO, cfg.Queue.ContentDedup, maxSize, batch); err != nil {
			errs[i] = err
			continue
		}
		// The MD5 as stored (raw) and as answered (hex), in one string.
		var sums [md5.Size * 3]byte
		sum := message.BodySum(m.Body)
		copy(sums[:], sum[:])
		hex.Encode(sums[md5.Size:], sum[:])
		both := string(sums[:])
		p := &entries[i].pl
		*p = record.Payload{ID: h.NewID(), Body: m.Body, Attrs: m.Attributes, Trace: m.TraceHeader, TraceParent: m.TraceParent,
			Sender: m.SenderID, MD5: both[:md5.Size]}
		delay := cfg.Queue.Delay
		if !cfg.Queue.FIFO && m.DelaySeconds != nil {
			delay = time.Duration(*m.DelaySeconds) * time.Second
		}
		spec := &entries[i].spec
		*spec = queue.SendSpec{Group: m.GroupID, Tenant: cfg.Tenant(m), Dedup: m.DedupID, Delay: delay, Payload: p}
		if from != nil {
			spec.Origin = &from[i]
		}
		if !cfg.Queue.FIFO {
			spec.Raw = record.EncodePayload(p) // FIFO payloads get their sequence number under the lock
		}
		specs[i] = spec
		res[i].MD5OfBody = both[md5.Size:]
	}
	o.lock()
	if err := o.stoppedLocked(); err != nil {
		o.mu.Unlock()
		return nil, nil, err
	}
	now := h.Clock.Now()
	recs := make([]*record.Record, 0, len(specs)+1)
	sent := make([]int, 0, len(specs))
	var held []uint64   // with from: the origins with a message refused in this call
	var marked []uint64 // the origins whose marks moved: one OriginMark record each
	for i, spec := range specs {
		if from != nil && (errs[i] != nil || slices.Contains(held, from[i].Partition)) {
			// Nothing after a refused message of an origin is taken: the
			// mark would pass over it.
			held = append(held, from[i].Partition)
			if errs[i] == nil {
				errs[i] = st.Errorf(st.CodeServiceUnavailable, "Not delivered: an earlier message from partition %d was not; deliver this one again after it.", from[i].Partition)
			}
			continue
		}
		if spec == nil {
			continue
		}
		r := o.q.Send(now, spec)
		switch {
		case r.Throttled:
			o.ctr.Throttled.Add(1)
			errs[i] = &st.Error{Code: st.CodeRequestThrottled, RetryAfter: r.RetryAfter,
				Message: fmt.Sprintf("Request is throttled: tenant %q is over its send limit; retry after %s.", spec.Tenant, r.RetryAfter)}
			if from != nil {
				held = append(held, from[i].Partition)
			}
		case r.Gap:
			errs[i] = st.Errorf(st.CodeServiceUnavailable, "Not delivered: the queue has taken partition %d up to position %d, and this delivery follows %d; deliver from there.",
				from[i].Partition, r.Mark, from[i].After)
			held = append(held, from[i].Partition)
		case r.Dup:
			res[i].MessageID, res[i].SequenceNumber = r.DupID, r.SeqNum
		default:
			res[i].MessageID, res[i].SequenceNumber = spec.Payload.ID, r.SeqNum
			recs = append(recs, r.Record)
			sent = append(sent, i)
		}
		if r.Marked && !slices.Contains(marked, from[i].Partition) {
			marked = append(marked, from[i].Partition)
		}
	}
	recs = append(recs, o.q.Marks(marked)...)
	if len(recs) == 0 {
		o.mu.Unlock()
		if !batch && errs[0] != nil {
			return nil, nil, errs[0]
		}
		return res, errs, nil
	}
	// Messages become deliverable once durable: the first to take the lock
	// after the write applies them (and wakes waiting receivers).
	werr := o.persistLocked(recs)
	o.unlock()
	if werr == nil {
		o.ctr.Sent.Add(int64(len(sent)))
		if from != nil && len(sent) > 0 {
			seqs, origins := make([]uint64, len(sent)), make([]queue.Origin, len(sent))
			for k, i := range sent {
				seqs[k], origins[k] = recs[k].Pos, from[i]
			}
			if !o.origins.track(seqs, origins) && o.origins.sweepDue() {
				// Full: forget the messages that left without a receive
				// (deleted, purged, moved), then what fits is tracked.
				o.lock()
				o.origins.forget(func(seq uint64) bool {
					_, ok := o.q.Lookup(seq)
					return ok
				})
				o.unlock()
				o.origins.track(seqs, origins)
			}
		}
		return res, errs, nil
	}
	if !batch {
		return nil, nil, werr
	}
	failEntries(errs, sent, werr)
	return res, errs, nil
}
