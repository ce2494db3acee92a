package partition

import (
	"context"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

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
	if dst == nil {
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

// move copies a leaving message, body and all, into dst as a new message
// (its index as change makes it), then deletes it from src: two writes, the
// copy first, so that a crash between them leaves the message in both
// queues (delivered at least once), never in neither. Each queue's
// partition holds all of its messages' bodies: no record points into
// another queue's log.
func (src *Owner) move(dst *Owner, h queue.Handoff, change func(*record.Msg)) error {
	pl, err := src.readPayload(&h.Msg)
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
	dst.lock()
	if err := dst.stoppedLocked(); err != nil {
		dst.mu.Unlock()
		src.putBack(h)
		return err
	}
	werr := dst.persistLocked([]*record.Record{dst.q.Enter(idx, pl)})
	dstName := dst.meta.Name // (src's lock is taken next: never dst's under it)
	dst.unlock()
	if werr != nil {
		src.putBack(h)
		return werr
	}
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
func (src *Owner) Redrive(ctx context.Context, seq uint64, dst *Owner, resolve func(arn string) (*Owner, error), keepFailures bool) (bool, error) {
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
