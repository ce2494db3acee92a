// Package partition owns one queue's partition: its lock, its state
// machine (internal/queue), its writes in flight, its waiting receivers,
// and the operations on its messages (send, receive, settle, verdicts,
// moves out of it, its snapshot). A partition is the unit of ownership:
// its state is rebuilt from its records alone (Apply), so that another
// node could take it over.
//
// Lock discipline: an Owner's mutex guards its state; lock begins work on
// it and unlock ends it (acting on what the state machine reported);
// helpers named ...Locked need the lock held. Everything that can be done
// before taking the lock (validation, hashing, encoding payloads) is. A
// write is submitted under the lock (so the partition's positions are in
// order) and waited for without it; its change is applied under the lock
// again once durable, in submission order, by whoever takes the lock
// first. The store never calls back into an Owner while writing.
package partition

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/attr"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/inflight"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/partition/attempts"
	"github.com/sluicemq/sluice/internal/partition/figures"
	"github.com/sluicemq/sluice/internal/partition/flow"
	"github.com/sluicemq/sluice/internal/partition/waitlist"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Host is what the owners of one broker share.
type Host struct {
	Store     store.Store
	Clock     clock.Clock
	Log       *slog.Logger
	Region    string
	AccountID string
	// Rand is the source of message ids and receipt handle nonces; it is
	// read under a lock of the Host's.
	Rand io.Reader
	// Resolve finds the queue an ARN names (nil: none), for dead-letter
	// moves: its owner here, or its owner on another node.
	Resolve func(arn string) Destination
	// Closing is closed when the broker closes.
	Closing <-chan struct{}
	// Fenced, when set, is told (on a goroutine of its own) that an
	// owner lost its partition: an append of it was fenced by a newer
	// owner. The owner has stopped; whoever owns the registry finds the
	// partition a new owner.
	Fenced func(o *Owner)
	// Started, when set, is told that an owner serves its partition (Start:
	// after a recovery, a takeover, a hand-over to this node), so that
	// the work kept in the partition (move tasks) goes on here.
	Started func(o *Owner)
	// FlowControl lets the queues hold sends back while consumers take
	// messages off a backlog (flow.go); a queue's FlowControl attribute
	// turns it off for that queue. Only with a clock that moves by itself:
	// under one its caller moves, a held send would wait for it.
	FlowControl bool
	// Unreadable counts the messages of every queue dropped because their
	// body could not be read back.
	Unreadable atomic.Int64
	// FirstAttempt, when set, is told of the first receive (at) of each
	// message delivered from an origin (a topic's publish), for the
	// topic's figures.
	FirstAttempt func(from []queue.Origin, at time.Time)

	randMu sync.Mutex
	// randBuf is what read reads Rand into, under randMu: a caller's
	// buffer handed to the io.Reader interface would escape, an
	// allocation for each message id and receipt handle.
	randBuf [16]byte
}

// read fills p (at most 16 bytes) from Rand.
func (h *Host) read(p []byte) {
	h.randMu.Lock()
	defer h.randMu.Unlock()
	b := h.randBuf[:len(p)]
	_, _ = io.ReadFull(h.Rand, b)
	copy(p, b)
}

// ARN is a queue's ARN.
func (h *Host) ARN(name string) string {
	return "arn:aws:sqs:" + h.Region + ":" + h.AccountID + ":" + name
}

// NewID is a message id (a version 4 UUID from the host's random source).
func (h *Host) NewID() string {
	var b [16]byte
	h.read(b[:])
	return message.NewID(b)
}

func (h *Host) closed() bool {
	select {
	case <-h.Closing:
		return true
	default:
		return false
	}
}

// Owner owns one queue: its partition, state machine and waiting
// receivers. mu guards every field below it.
type Owner struct {
	h *Host
	p store.PartitionID
	// metaMu serialises changes of meta (taken before mu), so each is
	// computed from the one before it while that one is being written.
	metaMu sync.Mutex

	mu   sync.Mutex
	cond *sync.Cond // signalled when a snapshot ends (writes wait for it) and the waiting list changes
	meta record.QueueMeta
	cfg  attr.Config
	q    *queue.Queue
	// state: serving, or why not (deleted, relinquished).
	state state
	// stopped is closed when state leaves serving.
	stopped chan struct{}
	// lastPurge is this owner's last purge, durable or being written (the
	// queue knows the durable ones, also those of earlier owners).
	lastPurge time.Time
	ctr       figures.Counters
	// waiting are the long polls waiting on the queue.
	waiting waitlist.List
	// attempts remembers FIFO receives by ReceiveRequestAttemptId for five
	// minutes, so a retried receive gets the same messages and handles.
	attempts attempts.Memory
	// writes are the appends in flight, in position order.
	writes inflight.Writes[pending]
	// snapshotting holds new writes back while a snapshot waits for the
	// writes in flight to finish.
	snapshotting bool
	// lost are the messages recovery found without a body, for Start.
	lost []uint64
	// origins times first receives of messages delivered from a topic
	// (origins.go).
	origins originTrack
	// flow holds sends back while consumers take messages off a backlog
	// (flow.go).
	flow flow.Gate
}

// state is where an owner is in its life: it serves from acquire (or
// create) until its queue is deleted or it relinquishes the partition.
type state uint8

const (
	serving state = iota
	// deleted: the queue's deletion is durable (or it never was created).
	deleted
	// relinquished: the owner let the partition go, or a newer owner
	// fenced it off. It writes nothing and releases nothing: what it held
	// is the new owner's.
	relinquished
)

// stoppedLocked is the error for a request to an owner that no longer
// serves (nil while it does).
func (o *Owner) stoppedLocked() error {
	switch o.state {
	case deleted:
		return NoQueue()
	case relinquished:
		return NotOwner()
	}
	return nil
}

// write is an append in flight.
type write = inflight.Write[pending]

// pending is what the owner does with an append once it is durable, or
// if it fails.
type pending struct {
	// recs are applied once durable (nil: the change was made at once).
	recs []*record.Record
	// failed, when set, runs (under the lock) if the append fails.
	failed func()
	// one holds the encoded record of an append of one (most are), so
	// that it is allocated with the write.
	one [1]store.Rec
}

// New returns the owner of partition p, a queue with the given settings
// (not written: Create writes them; recovery applies them).
func New(h *Host, p store.PartitionID, meta record.QueueMeta) *Owner {
	if meta.Attrs == nil {
		meta.Attrs = map[string]string{}
	}
	o := &Owner{h: h, p: p, meta: meta, cfg: attr.Parse(&meta), stopped: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
	o.waiting.Changed = o.cond.Broadcast
	o.q = queue.New(o.cfg.Queue)
	o.setFlowLocked()
	return o
}

// lock takes the Owner's lock for a new write: it waits while a snapshot
// is being taken, and applies the writes that finished meanwhile.
func (o *Owner) lock() {
	o.mu.Lock()
	for o.snapshotting {
		o.cond.Wait()
	}
	o.drainLocked()
}

func locOf(h store.Hint) queue.Loc  { return queue.Loc{Seg: h.A, Off: h.B, FLen: h.C, Idx: h.D} }
func hintOf(l queue.Loc) store.Hint { return store.Hint{A: l.Seg, B: l.Off, C: l.FLen, D: l.Idx} }

// appendLocked submits recs (with consecutive positions from the queue
// core) to the queue's partition. With apply set they are applied once
// durable; otherwise the change was made already.
func (o *Owner) appendLocked(recs []*record.Record, apply bool, failed func()) *write {
	// Records the queue made on its own before these (time moved on, and
	// a visibility timeout that ran out moved a message up the retry
	// ladder) go first: the store takes a partition's appends in
	// position order, and would fence these.
	if early := o.q.RecordsBefore(recs[0].Pos); len(early) > 0 {
		o.appendLocked(early, false, nil)
	}
	w := &write{Prev: recs[0].Pos - 1, Of: pending{failed: failed}}
	data := w.Of.one[:]
	if len(recs) > 1 {
		data = make([]store.Rec, len(recs))
	}
	var small []byte // the records other than sends, encoded into one buffer
	for i, r := range recs {
		if r.Type == record.Send {
			data[i] = store.Rec{Data: record.Encode(r), Keep: true}
			continue
		}
		if small == nil {
			small = make([]byte, 0, 64*len(recs))
		}
		at := len(small)
		small = record.Append(small, r)
		data[i] = store.Rec{Data: small[at:len(small):len(small)]}
	}
	switch {
	case o.h.closed():
		w.F = store.Failed(Unavailable())
	case o.state == relinquished:
		w.F = store.Failed(NotOwner())
	default:
		w.F = o.h.Store.Append(o.p, w.Prev, data)
	}
	if apply {
		w.Of.recs = recs
	}
	return o.writes.Add(w)
}

// waitLocked is called with the lock held and returns with it held: it
// lets the lock go while it waits for w, then applies every finished
// write (or undoes it).
func (o *Owner) waitLocked(w *write) error {
	return WriteError(inflight.Wait(&o.mu, w, o.drainLocked))
}

// drainLocked applies, in order, the writes that have finished, up to the
// first still under way. A failed write changes nothing; its failure
// resets the queue's positions to the partition's durable end (once: the
// writes behind it fail too) and runs its failed hook.
func (o *Owner) drainLocked() {
	if o.writes.Len() == 0 {
		return
	}
	var now time.Time // read once, if a write has records to apply
	o.writes.Settle(func(w *write) {
		if w.Of.recs == nil {
			return
		}
		if now.IsZero() {
			now = o.h.Clock.Now()
		}
		hints := w.F.Hints()
		for j, r := range w.Of.recs {
			var loc queue.Loc
			if j < len(hints) {
				loc = locOf(hints[j])
			}
			if r.Type == record.Meta {
				o.applyMetaLocked(r.Meta)
			}
			if err := o.q.Apply(now, r, loc); err != nil {
				o.h.Log.Error("applying a record failed", "queue", o.meta.Name, "err", err)
			}
			if r.Type == record.Send && !o.q.Hold(r.Msg.Seq, loc) {
				// Written with Keep, held by no message: let it go.
				o.q.Requeue(queue.Effects{Gone: []queue.Gone{{Seq: r.Pos, Loc: loc}}})
			}
		}
	}, func(w *write, err error, first bool) {
		if first && errors.Is(err, store.ErrFenced) && o.state == serving {
			// Not a failure of this owner's own write before it (its
			// epoch would have moved on): another owner wrote to the
			// partition. This one must stop.
			o.relinquishLocked()
			if o.h.Fenced != nil {
				go o.h.Fenced(o)
			}
		}
		if first {
			o.q.SetLast(inflight.Reset(err, w.Prev))
		}
		for _, r := range w.Of.recs {
			o.q.Unwritten(r)
		}
		if w.Of.failed != nil {
			w.Of.failed()
		}
	})
}

// applyMetaLocked takes new settings.
func (o *Owner) applyMetaLocked(m *record.QueueMeta) {
	meta := m.Clone()
	if meta.Attrs == nil {
		meta.Attrs = map[string]string{}
	}
	o.meta = meta
	o.cfg = attr.Parse(&meta)
	o.q.SetConfig(o.cfg.Queue)
	o.setFlowLocked()
}

// persistLocked submits recs, applied once durable, waits, and returns
// with the lock held and the change applied (or not: the error says why).
func (o *Owner) persistLocked(recs []*record.Record) error {
	return o.waitLocked(o.appendLocked(recs, true, nil))
}

// unlock ends what lock began: it acts on what the queue core reported
// (records the retry ladder made, messages made ready, storage to release,
// messages leaving for another queue), releases the lock, and then does
// what needs none: releasing storage and moving messages away.
func (o *Owner) unlock() {
	eff := o.q.TakeEffects()
	if o.state == relinquished {
		// What the core asks for is the new owner's to do.
		o.mu.Unlock()
		return
	}
	if len(eff.Records) > 0 {
		o.appendLocked(eff.Records, false, nil)
	}
	if eff.WakeAll {
		o.waiting.WakeAll()
	} else if eff.Ready > 0 {
		o.waiting.Wake(eff.Ready)
	}
	o.mu.Unlock()
	o.release(eff.Gone)
	for _, h := range eff.Handoffs {
		o.deadLetter(h)
	}
}

// unreadable counts n messages dropped for a body that cannot be read.
func (o *Owner) unreadable(n int) {
	o.ctr.Unreadable.Add(int64(n))
	o.h.Unreadable.Add(int64(n))
}

// release lets the store go of the bodies of messages that left.
func (o *Owner) release(gone []queue.Gone) {
	for _, g := range gone {
		o.h.Store.Release(o.p, g.Seq, hintOf(g.Loc))
	}
}

// ---- errors ----

// ErrNotOwner is the cause of NotOwner.
var ErrNotOwner = errors.New("partition: this node no longer owns the partition")

// NotOwner is the error for a request to an owner that relinquished its
// partition (another owner took it over): retryable; the request has not
// been done.
func NotOwner() error {
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second, Message: "The queue is moving to another owner; retry the request.", Cause: ErrNotOwner}
}

// NoQueue is the error for a queue that does not exist.
func NoQueue() error {
	return st.Errorf(st.CodeQueueDoesNotExist, "The specified queue does not exist.")
}

// Unavailable is the error while the broker shuts down.
func Unavailable() error {
	return st.Errorf(st.CodeServiceUnavailable, "The server is shutting down.")
}

// WriteError is the error a client gets for a failed write.
func WriteError(err error) error {
	if err == nil {
		return nil
	}
	var se *st.Error
	if errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, store.ErrClosed):
		return &st.Error{Code: st.CodeServiceUnavailable, Message: "The server is shutting down; the request was not persisted.", Cause: err}
	case errors.Is(err, store.ErrOutcomeUnknown):
		// Not "not the owner": the request may be in the queue, and a
		// forwarding node must not send it again on its own.
		return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
			Message: "The queue's owner lost its hold on the queue while it wrote the request, which may or may not have been persisted; retry the request.", Cause: err}
	case errors.Is(err, store.ErrFenced):
		// Another node took the queue over: nothing was written, and the
		// request may go to the new owner.
		return NotOwner()
	}
	msg := "The server could not persist the request."
	if errors.Is(err, store.ErrNoSpace) {
		msg = "The server is out of disk space; the request was not persisted."
	}
	return &st.Error{Code: st.CodeInternal, Message: msg, Cause: err}
}

// ---- long polls ----

// leave takes a long poll that gives up off the waiting list
// (waitlist.List.Leave).
func (o *Owner) leave(w *waitlist.Waiter) {
	o.mu.Lock()
	o.waiting.Leave(w)
	o.mu.Unlock()
}
