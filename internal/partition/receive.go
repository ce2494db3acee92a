package partition

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"math"
	"time"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/partition/attempts"
	"github.com/sluicemq/sluice/internal/partition/receipt"
	"github.com/sluicemq/sluice/internal/partition/waitlist"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Receive receives up to in.MaxMessages messages, waiting up to the wait
// time for the first one. It returns early, empty, when ctx is done or the
// broker closes.
func (o *Owner) Receive(ctx context.Context, in st.ReceiveInput) ([]st.Message, error) {
	max, err := message.CheckReceive(&in)
	if err != nil {
		return nil, err
	}
	clk := o.h.Clock
	o.mu.Lock()
	waitFor, shards, fifo := o.cfg.ReceiveWait, o.cfg.Shards, o.cfg.Queue.FIFO
	o.mu.Unlock()
	if in.WaitTimeSeconds != nil {
		waitFor = time.Duration(*in.WaitTimeSeconds) * time.Second
	}
	a := ask{max: max, vis: in.VisibilityTimeout, attemptID: in.AttemptID, part: -1}
	if in.Shard != nil {
		a.part = *in.Shard
		if fifo || a.part < -1 || a.part >= shards {
			return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for X-Sluice-Shard is invalid. Reason: the queue has %d shards, numbered from 0 (FIFO queues have none to bind to).", a.part, shards)
		}
	}
	deadline := clk.Now().Add(waitFor)
	var p *waitlist.Waiter // on the queue's waiting list, or woken from it
	for {
		now := clk.Now()
		msgs, parked, next, err := o.receiveOnce(ctx, a, p, now.Before(deadline))
		if p = parked; err != nil || len(msgs) > 0 {
			return msgs, err
		}
		if p == nil {
			if !now.Before(deadline) {
				o.ctr.EmptyReceives.Add(1)
				return nil, nil
			}
			continue // messages found but unreadable, and dropped: look again
		}
		wakeAt := deadline
		if !next.IsZero() && next.Before(wakeAt) {
			wakeAt = next
		}
		timer := make(chan struct{})
		t := clk.AfterFunc(wakeAt.Sub(now), func() { close(timer) })
		select {
		case <-p.Woken():
			p = nil // off the list already
		case <-timer: // receiveOnce takes it off the list
		case <-ctx.Done():
			t.Stop()
			o.leave(p)
			return nil, nil
		case <-o.h.Closing:
			t.Stop()
			o.leave(p)
			return nil, nil
		}
		t.Stop()
	}
}

// ask is a receive's request, checked.
type ask struct {
	max       int
	vis       *int // the VisibilityTimeout asked for, if any
	attemptID string
	part      int // the partition it is bound to, or -1
}

// receiveOnce delivers what is ready now. p, if not nil, is the caller's
// place on the waiting list from its last attempt: it is taken off.
// canWait says the caller is a long poll with time left: only such a
// receive is held back to keep TenantHeadroom receivers waiting, and when
// it finds nothing it is put on the waiting list, under the same lock, so
// that no message that comes after the look can miss it; the poller is
// returned with the queue's next timer. The deliveries are made at once,
// so that no other receive takes the same messages, and undone if their
// records cannot be written.
func (o *Owner) receiveOnce(ctx context.Context, a ask, p *waitlist.Waiter, canWait bool) ([]st.Message, *waitlist.Waiter, time.Time, error) {
	o.lock()
	if p != nil {
		o.waiting.Unpark(p)
	}
	if err := o.stoppedLocked(); err != nil {
		o.mu.Unlock()
		return nil, nil, time.Time{}, err
	}
	now := o.h.Clock.Now()
	vis := o.cfg.Queue.VisibilityTimeout
	if a.vis != nil {
		vis = time.Duration(*a.vis) * time.Second
	}
	if !o.cfg.Queue.FIFO {
		a.attemptID = "" // standard queues ignore it, as SQS does
	}
	if a.attemptID != "" {
		if msgs, ok, err := o.retryAttemptLocked(a.attemptID, now, vis); ok {
			o.unlock()
			return msgs, nil, time.Time{}, err
		}
	}
	spare := math.MaxInt
	if canWait {
		spare = o.waiting.Len()
	}
	ds := o.q.Receive(now, a.max, vis, a.part, spare)
	if len(ds) == 0 && !o.cfg.Queue.FIFO && o.q.InFlight() >= queue.MaxInFlight {
		o.unlock()
		return nil, nil, time.Time{}, st.Errorf(st.CodeOverLimit, "The maximum of %d messages in flight has been reached for this queue.", queue.MaxInFlight)
	}
	var parked *waitlist.Waiter
	if len(ds) == 0 && canWait {
		parked = o.waiting.Park(a.part)
	}
	next := o.q.NextWake()
	var w *write
	if len(ds) > 0 {
		o.flow.Took(now, len(ds))
		recs := make([]*record.Record, len(ds))
		for i := range ds {
			recs[i] = ds[i].Record
		}
		w = o.appendLocked(recs, false, func() {
			// Not recorded: the messages were not received. Put back the
			// ones still as this receive left them.
			for i := len(ds) - 1; i >= 0; i-- {
				d := &ds[i]
				if m, ok := o.q.Lookup(d.Msg.Seq); ok && m.Fence() == d.Msg.Fence() && m.State == queue.InFlight {
					o.q.Revert(o.h.Clock.Now(), d.Prev)
				}
			}
		})
	}
	o.unlock()
	if w == nil {
		return nil, parked, next, nil
	}
	if err := WriteError(w.F.Wait(context.Background())); err != nil {
		o.mu.Lock()
		o.drainLocked() // runs the undo, in order
		o.unlock()
		return nil, nil, next, err
	}
	return o.serve(ctx, ds, a.attemptID, now), nil, next, nil
}

// serve turns durable deliveries into messages: their bodies are read
// from the store, outside the queue's lock (one that cannot be read back
// intact is dropped, never served), and a FIFO receive attempt is
// remembered with them.
func (o *Owner) serve(ctx context.Context, ds []queue.Delivery, attemptID string, now time.Time) []st.Message {
	var first []uint64
	tracking := o.origins.some.Load()
	for i := range ds {
		if m := &ds[i].Msg; m.RecvCount() == 1 {
			o.ctr.ObserveFirstAttempt(time.Duration(m.LastReceive()-m.Sent)*time.Millisecond, ds[i].Old)
			if tracking {
				first = append(first, m.Seq)
			}
		}
	}
	if len(first) > 0 {
		if from := o.origins.firstReceived(first, now); len(from) > 0 && o.h.FirstAttempt != nil {
			o.h.FirstAttempt(from, now)
		}
	}
	out := make([]st.Message, 0, len(ds))
	var lost, later []uint64
	for i := range ds {
		m := &ds[i].Msg
		pl, err := o.readPayload(m)
		switch {
		case err != nil && Unreadable(err):
			// Never serve what cannot be read back intact.
			o.h.Log.Error("message record unreadable; dropping the message", "queue", o.Meta().Name, "seq", m.Seq, "request_id", st.RequestID(ctx), "err", err)
			lost = append(lost, m.Seq)
		case err != nil:
			// The store could not read it now (a replicated store between
			// leaders): it stays, visible again at once.
			o.h.Log.Warn("message record not readable now; it stays in the queue", "queue", o.Meta().Name, "seq", m.Seq, "request_id", st.RequestID(ctx), "err", err)
			later = append(later, m.Seq)
		default:
			out = append(out, o.toMessage(m, pl))
		}
	}
	if len(lost) > 0 || len(later) > 0 {
		o.unreadable(len(lost))
		o.lock()
		recs := make([]*record.Record, 0, len(lost)+len(later))
		for _, s := range lost {
			recs = append(recs, o.q.DeleteRecord(s, record.ByLoss))
		}
		for _, s := range later {
			recs = append(recs, o.q.VisibilityRecord(s, now.UnixMilli()))
		}
		_ = o.persistLocked(recs)
		o.unlock()
	}
	o.ctr.Received.Add(int64(len(out)))
	if attemptID != "" && len(out) > 0 {
		o.mu.Lock()
		rememberAttemptLocked(o, attemptID, now, out, ds)
		o.mu.Unlock()
	}
	return out
}

// Unreadable reports whether a read error says the record is gone or
// damaged for good (store.ErrNotFound, store.ErrCorrupt), so that its
// message can only be dropped; any other error may pass (a replicated
// store between leaders, a timeout), and the message stays.
func Unreadable(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCorrupt)
}

// readPayload reads a message's payload back from its Send record. When
// compaction moved the record since the message was looked at, it reads
// it again from where it is now.
func (o *Owner) readPayload(m *queue.Msg) (*record.Payload, error) {
	pl, err := o.readAt(m.Seq, m.Loc)
	if err != nil && errors.Is(err, store.ErrNotFound) {
		o.mu.Lock()
		cur, ok := o.q.Lookup(m.Seq)
		moved := ok && cur.Loc != m.Loc
		loc := m.Loc
		if moved {
			loc = cur.Loc
		}
		o.mu.Unlock()
		if moved {
			pl, err = o.readAt(m.Seq, loc)
		}
	}
	return pl, err
}

func (o *Owner) readAt(seq uint64, loc queue.Loc) (*record.Payload, error) {
	return record.ReadPayload(o.h.Store, o.p, seq, hintOf(loc))
}

// retryAttemptLocked answers a retried FIFO receive with the messages of
// the earlier attempt, their visibility reset once that is durable, if
// none of them has been deleted or delivered again since; otherwise it
// forgets the attempt.
func (o *Owner) retryAttemptLocked(id string, now time.Time, vis time.Duration) ([]st.Message, bool, error) {
	a := o.attempts.Recall(id, now)
	if a == nil {
		return nil, false, nil
	}
	for i, seq := range a.Seqs {
		m, ok := o.q.Lookup(seq)
		if !ok || m.Fence() != a.Fences[i] || m.State != queue.InFlight {
			o.attempts.Forget(id)
			return nil, false, nil
		}
	}
	at := now.Add(vis).UnixMilli()
	recs := make([]*record.Record, len(a.Seqs))
	for i, seq := range a.Seqs {
		recs[i] = o.q.VisibilityRecord(seq, at)
	}
	if err := o.persistLocked(recs); err != nil {
		return nil, true, err
	}
	return a.Msgs, true, nil
}

func rememberAttemptLocked(o *Owner, id string, now time.Time, msgs []st.Message, ds []queue.Delivery) {
	a := &attempts.Attempt{Msgs: msgs}
	for i := range ds {
		a.Seqs = append(a.Seqs, ds[i].Msg.Seq)
		a.Fences = append(a.Fences, ds[i].Msg.Fence())
	}
	o.attempts.Remember(id, now, a)
}

func (o *Owner) toMessage(m *queue.Msg, pl *record.Payload) st.Message {
	out := st.Message{
		MessageID: pl.ID, Body: pl.Body, Attributes: pl.Attrs, TraceHeader: pl.Trace, TraceParent: pl.TraceParent, SenderID: pl.Sender,
		SentTimestamp: time.UnixMilli(m.Sent), ReceiveCount: int(m.RecvCount()), GroupID: m.Group(), SequenceNumber: pl.SeqNum,
		DeadLetterSourceArn: m.DLQSource(),
	}
	// The body's MD5 (hex) and the receipt handle, in one string.
	var buf [2*md5.Size + 128]byte
	both := buf[:0]
	if pl.MD5 != "" {
		both = hex.AppendEncode(both, []byte(pl.MD5))
	}
	sum := len(both)
	if m.Fence() > 0 {
		var n [6]byte
		o.h.read(n[:])
		both = receipt.Handle{Partition: uint64(o.p), Seq: m.Seq, Fence: m.Fence()}.Append(both, n)
	}
	s := string(both)
	out.MD5OfBody, out.ReceiptHandle = s[:sum], s[sum:]
	if pl.SeqNum != "" {
		out.DedupID = pl.Dedup
	}
	if m.FirstRecv() != 0 {
		out.FirstReceiveTimestamp = time.UnixMilli(m.FirstRecv())
	}
	out.RetryLevel = int(m.Level)
	if f := m.Fail(); f != nil {
		out.FailReason, out.LastError, out.FirstFailure, out.Failures = f.Reason, f.LastError, time.UnixMilli(f.First), int(f.Failures)
	}
	return out
}
