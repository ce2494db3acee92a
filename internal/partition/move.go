package partition

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Destination is a queue that messages leaving another queue enter (a
// dead-letter queue, a redrive's target): an Owner on this node, or, in a
// cluster, the owner of the queue on another node.
type Destination interface {
	// Enter stores, durably, a message handed over under key, the
	// hand-over's identity (its source partition and message): a retry
	// under the same key within the deduplication window (five minutes)
	// enters nothing twice and succeeds.
	Enter(ctx context.Context, key string, m *record.Msg, p *record.Payload) error
	// Name is the queue's name (for logs).
	Name() string
}

// Enter stores a message handed over from another queue (Destination).
func (o *Owner) Enter(ctx context.Context, key string, m *record.Msg, p *record.Payload) error {
	for {
		o.lock()
		if err := o.stoppedLocked(); err != nil {
			o.mu.Unlock()
			return err
		}
		recs, dup, pending := o.q.EnterOnce(o.h.Clock.Now(), key, m, p)
		switch {
		case dup:
			o.unlock()
			return nil
		case pending:
			// The same hand-over is being written (a retry overtook its
			// first try): its outcome decides.
			w := o.writes.Newest()
			o.mu.Unlock()
			if err := w.F.Wait(ctx); err != nil && ctx.Err() != nil {
				return err
			}
			continue
		}
		err := o.persistLocked(recs)
		o.unlock()
		return err
	}
}

// Name is the queue's name.
func (o *Owner) Name() string { return o.Meta().Name }

// handOverKey is the identity of a message's hand-over from partition p:
// a message leaves its queue once (a redrive back enters it anew, with a
// new position), and partitions are never reused.
func handOverKey(p uint64, seq uint64) string { return fmt.Sprintf("%d/%d", p, seq) }

// deadLetter moves a message that left its queue for failing (over
// maxReceiveCount, off the retry ladder, rejected, past MaxMessageAge) to
// the queue's dead-letter queue, or drops it, durably, when the queue has
// none. When that cannot be done the message goes back as it was.
func (src *Owner) deadLetter(h queue.Handoff) error {
	src.mu.Lock()
	target := src.cfg.DeadLetterTarget
	srcArn := src.h.ARN(src.meta.Name)
	src.mu.Unlock()
	if target == "" {
		return src.drop(h)
	}
	dst := src.h.Resolve(target)
	if dst == nil || isNilOwner(dst) {
		src.putBack(h)
		src.h.Log.Warn("dead-letter queue missing; message kept", "queue", srcArn, "dlq", target)
		return NoQueue()
	}
	err := src.move(dst, h, func(m *record.Msg) { m.DLQSource = srcArn })
	if err == nil {
		src.ctr.DeadLettered.Add(1)
	}
	return err
}

// drop deletes, durably, a message that left with nowhere to go.
func (src *Owner) drop(h queue.Handoff) error {
	src.lock()
	err := src.persistLocked([]*record.Record{src.q.DeleteRecord(h.Msg.Seq, record.ByDrop)})
	if err != nil {
		src.q.Revert(src.h.Clock.Now(), h.Prev)
	} else if f := h.Msg.Fail(); f != nil && f.Reason == "Reject" {
		src.ctr.DroppedRejected.Add(1)
	} else if f != nil && f.Reason != "MaxMessageAge" {
		src.ctr.DroppedExhausted.Add(1)
	}
	src.unlock()
	return err
}

// putBack returns a message that could not leave its queue.
func (o *Owner) putBack(h queue.Handoff) {
	o.mu.Lock()
	o.q.Revert(o.h.Clock.Now(), h.Prev)
	o.unlock()
}

// isNilOwner reports a Destination that is a nil *Owner.
func isNilOwner(d Destination) bool {
	o, ok := d.(*Owner)
	return ok && o == nil
}

// move copies a leaving message, body and all, into dst as a new message
// (its index as change makes it), then deletes it from src: two writes, the
// copy first, so that a crash between them leaves the message in both
// queues (delivered at least once), never in neither; a retry of the copy
// (its answer lost, or the delete failed and the message leaves again) is
// entered once (Destination.Enter). Each queue's partition holds all of
// its messages' bodies: no record points into another queue's log.
func (src *Owner) move(dst Destination, h queue.Handoff, change func(*record.Msg)) error {
	pl, err := src.readPayload(&h.Msg)
	if err != nil && !Unreadable(err) {
		src.putBack(h) // not readable now: it stays, and leaves later
		return err
	}
	if err != nil {
		// Its body cannot be read back intact: it cannot be moved, and is
		// never served. Dropped, as a receive would.
		src.h.Log.Error("message record unreadable; dropping the message instead of moving it", "queue", src.Meta().Name, "seq", h.Msg.Seq, "err", err)
		src.unreadable(1)
		src.lock()
		_ = src.persistLocked([]*record.Record{src.q.DeleteRecord(h.Msg.Seq, record.ByLoss)})
		src.unlock()
		return err
	}
	idx := queue.ToRecord(&h.Msg)
	idx.State, idx.VisibleAt, idx.Fence, idx.Level = 0, 0, 0, 0
	change(idx)
	werr := dst.Enter(context.Background(), handOverKey(uint64(src.p), h.Msg.Seq), idx, pl)
	if werr != nil {
		src.putBack(h)
		return werr
	}
	dstName := dst.Name()
	src.lock()
	if derr := src.persistLocked([]*record.Record{src.q.DeleteRecord(h.Msg.Seq, record.ByMove)}); derr != nil {
		// The copy is durable, its delete here is not: the message stays
		// in both (at least once), rather than in neither.
		src.q.Revert(src.h.Clock.Now(), h.Prev)
		src.h.Log.Error("a moved message could not be deleted from its source; it is in both queues", "queue", src.meta.Name, "to", dstName, "err", derr)
	}
	src.unlock()
	return nil
}

// Redrive moves a ready message of this queue to dst, with its receive
// count reset (and its retry level and failures, unless keepFailures).
// dst nil sends it back to the queue it was dead-lettered from (resolve
// finds that queue's owner by ARN, after checking the caller may use it;
// nil: none). It reports false when the message is not there or not
// ready (in flight, moved meanwhile).
func (src *Owner) Redrive(ctx context.Context, seq uint64, dst Destination, resolve func(arn string) (Destination, error), keepFailures bool) (bool, error) {
	now, err := src.locked()
	if err != nil {
		return false, err
	}
	if !src.q.Leave(now, seq, func(m *queue.Msg) bool { return m.State == queue.Ready }) {
		src.unlock()
		return false, nil
	}
	mine := src.takeHandoffLocked(seq)
	src.unlock()
	if mine == nil {
		return false, nil
	}
	if dst == nil {
		if mine.Msg.DLQSource() == "" {
			src.putBack(*mine)
			return false, st.Errorf(st.CodeInvalidParameterValue, "Message %d was not dead-lettered: it has no source queue to go back to.", seq)
		}
		if dst, err = resolve(mine.Msg.DLQSource()); err != nil {
			src.putBack(*mine)
			return false, err
		}
	}
	err = src.move(dst, *mine, func(m *record.Msg) {
		m.DLQSource, m.Count, m.First = "", 0, 0
		if !keepFailures {
			m.Level, m.Fail = 0, nil
		}
	})
	if err != nil {
		return false, err
	}
	src.ctr.Redriven.Add(1)
	return true, nil
}
