package topic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/inflight"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
)

// Host is what the owners of a broker's topics share.
type Host struct {
	Store store.Store
	Clock clock.Clock
	Log   *slog.Logger
	// Deliver and Marks reach the queues subscriptions deliver into
	// (package deliver.go says how they are used).
	Queues Queues
	// Format makes the message a subscription's queue gets for a publish
	// (the SNS envelope, or the raw message and attributes).
	Format Formatter
	// Fenced, when set, is told (on a goroutine of its own) that another
	// owner's write fenced o off: o writes and delivers nothing more.
	Fenced func(o *Owner)
}

// Owner owns one topic's partition: it writes the topic's records,
// applies them once durable, and delivers its publishes to its
// subscriptions' queues (Deliver).
type Owner struct {
	h *Host
	p store.PartitionID

	mu     sync.Mutex
	t      *Topic
	writes inflight.Writes[[]*record.Record] // appends in flight, in order: the records each applies once durable
	closed bool                              // relinquished or deleted: writes nothing more
	named  atomic.Pointer[string]

	// delivery is the state of each subscription's cursor (deliver.go).
	delivery deliveryState
}

// write is an append in flight, with the records it applies once durable.
type write = inflight.Write[[]*record.Record]

// ErrNotOwner: the owner was relinquished (another node took the topic,
// or it was deleted); nothing was written.
var ErrNotOwner = errors.New("topic: not the owner of the topic's partition")

// NewOwner returns the owner of partition p, a topic with info (not
// written: Create writes it; recovery applies what the log holds).
func NewOwner(h *Host, p store.PartitionID, info record.TopicInfo) *Owner {
	o := &Owner{h: h, p: p, t: New(info)}
	o.delivery.init()
	o.named.Store(&info.Name)
	return o
}

// Partition is the topic's partition.
func (o *Owner) Partition() store.PartitionID { return o.p }

// Info returns the topic's settings and subscriptions.
func (o *Owner) Info() record.TopicInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.drainLocked()
	return o.t.Info()
}

// Create writes the topic's settings: the first record of its partition.
func (o *Owner) Create() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.persistLocked([]*record.Record{o.t.MetaRecord(o.t.info)})
}

// Acquire takes a topic's partition over (in a cluster, under a lease
// of term): it replays the partition, then writes an epoch record, which
// fences off the former owner's appends. The owner delivers once Run
// starts.
func Acquire(h *Host, p store.PartitionID, node string, term uint64) (*Owner, error) {
	o := NewOwner(h, p, record.TopicInfo{})
	var last uint64
	err := h.Store.ReplayPartition(p, 0, func(e store.Entry) error {
		if e.Reset {
			o = NewOwner(h, p, record.TopicInfo{})
		}
		last = max(last, e.Pos)
		return o.Replayed(e)
	})
	if err != nil {
		return nil, fmt.Errorf("topic: replaying partition %d: %w", p, err)
	}
	if o.Info().Name == "" {
		return nil, fmt.Errorf("topic: partition %d holds no topic", p)
	}
	o.Recovered(last)
	o.mu.Lock()
	err = o.persistLocked([]*record.Record{o.t.EpochRecord(node, term)})
	o.mu.Unlock()
	if err != nil {
		o.Relinquish()
		return nil, fmt.Errorf("topic: claiming partition %d: %w", p, err)
	}
	return o, nil
}

// Replayed applies a record recovery read.
func (o *Owner) Replayed(e store.Entry) error {
	r, err := record.Decode(e.Data, true)
	if err != nil {
		return err
	}
	r.Pos = e.Pos
	if r.Type == record.TopicMeta && r.Topic != nil {
		o.named.Store(&r.Topic.Name)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.t.Apply(r)
}

// Recovered ends recovery: last is the partition's last position.
func (o *Owner) Recovered(last uint64) {
	o.mu.Lock()
	o.t.SetLast(max(last, o.t.Last()))
	o.mu.Unlock()
	o.delivery.kick()
}

// Update changes the topic's settings or subscriptions: f edits a copy
// (an error from it changes nothing), written whole. A subscription it
// adds starts after the topic's last publish.
func (o *Owner) Update(f func(*record.TopicInfo) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.drainLocked()
	old := o.t.Info()
	info := o.t.Info()
	if err := f(&info); err != nil {
		return err
	}
	for id, sub := range info.Subs {
		if _, ok := old.Subs[id]; !ok {
			// A new subscription gets what is published from now on
			// (publishes are numbered under this lock).
			sub.From = o.t.LastNumber()
			sub.Created = o.h.Clock.Now().UnixMilli()
			info.Subs[id] = sub
		}
	}
	if err := o.persistLocked([]*record.Record{o.t.MetaRecord(info)}); err != nil {
		return err
	}
	o.delivery.kick() // a new subscription, a new filter
	return nil
}

// Publish publishes messages in one durable write (however many
// subscriptions the topic has): res[i] is in[i]'s outcome (a FIFO
// duplicate is answered with the first message's id).
func (o *Owner) Publish(ctx context.Context, in []PublishSpec) ([]PublishResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.drainLocked()
	now := o.h.Clock.Now()
	res := make([]PublishResult, len(in))
	var recs []*record.Record
	for i := range in {
		res[i] = o.t.Publish(now, in[i])
		if res[i].Record != nil {
			recs = append(recs, res[i].Record)
		}
	}
	if len(recs) > 0 {
		if err := o.persistLocked(recs); err != nil {
			return nil, err
		}
		o.delivery.Published.Add(int64(len(recs)))
		o.delivery.kick()
	}
	return res, nil
}

// Snapshot writes the topic's state as its partition's new start, so
// that the store lets go of what came before (publishes every
// subscription went past among it).
func (o *Owner) Snapshot() error {
	o.mu.Lock()
	o.drainLocked()
	o.writes.WaitAll(&o.mu, o.drainLocked) // a snapshot follows every write before it
	if o.closed {
		o.mu.Unlock()
		return ErrNotOwner
	}
	recs := o.t.Snapshot(o.h.Clock.Now())
	prev := o.t.Last()
	data := make([]store.Rec, len(recs))
	for i, r := range recs {
		data[i] = store.Rec{Data: record.Encode(r)}
	}
	// A write in flight like the others (publishes made while it is
	// written follow it, their positions after its records).
	w := o.writes.Add(&write{Prev: prev, F: o.h.Store.Snapshot(o.p, prev, slices.Values(data))})
	o.t.SetLast(prev + uint64(len(recs)))
	err := inflight.Wait(&o.mu, w, o.drainLocked)
	o.mu.Unlock()
	if err != nil {
		return fmt.Errorf("topic: snapshot of partition %d: %w", o.p, err)
	}
	return nil
}

// Relinquish stops the owner: it writes nothing more (another node owns
// the topic now, or it was deleted), and stops delivering.
func (o *Owner) Relinquish() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.delivery.stop()
}

// Deleted stops the owner, as Relinquish does, once the writes under way
// finished, and returns the partition's last position, for the drop of a
// deleted topic (owned false: a newer owner fenced it off, and drops).
func (o *Owner) Deleted() (last uint64, owned bool) {
	o.mu.Lock()
	o.writes.WaitAll(&o.mu, o.drainLocked)
	owned = !o.closed
	o.closed = true
	last = o.t.Last()
	o.mu.Unlock()
	o.delivery.stop()
	return last, owned
}

// persistLocked writes recs and waits, applying them once durable (the
// lock is let go meanwhile, so that other writes join the same group
// commit).
func (o *Owner) persistLocked(recs []*record.Record) error {
	return inflight.Wait(&o.mu, o.appendLocked(recs), o.drainLocked)
}

func (o *Owner) appendLocked(recs []*record.Record) *write {
	data := make([]store.Rec, len(recs))
	for i, r := range recs {
		data[i] = store.Rec{Data: record.Encode(r)}
	}
	w := &write{Prev: recs[0].Pos - 1, Of: recs}
	if o.closed {
		w.F = store.Failed(ErrNotOwner)
	} else {
		w.F = o.h.Store.Append(o.p, w.Prev, data)
	}
	return o.writes.Add(w)
}

// drainLocked applies, in order, the writes that have finished, up to the
// first still under way. A failed write changes nothing; the first
// failure resets the topic's positions to where the partition ends (the
// writes behind it fail too).
func (o *Owner) drainLocked() {
	o.writes.Settle(func(w *write) {
		for _, r := range w.Of {
			if err := o.t.Apply(r); err != nil {
				o.h.Log.Error("applying a topic record failed", "topic", o.name(), "err", err)
			}
		}
	}, func(w *write, err error, first bool) {
		if first {
			o.failedLocked(err, w.Prev)
		}
		for _, r := range w.Of {
			o.t.Unwritten(r)
		}
	})
}

// failedLocked notes a failed write that started after prev: the topic's
// end goes back to where the store says the partition ends, and a fenced
// write (another owner wrote) stops this owner.
func (o *Owner) failedLocked(err error, prev uint64) {
	o.t.SetLast(inflight.Reset(err, prev))
	if errors.Is(err, store.ErrFenced) && !o.closed {
		o.closed = true
		o.h.Log.Warn("a topic's write was fenced: another owner took it", "topic", o.name(), "partition", o.p)
		go o.delivery.stop()
		if o.h.Fenced != nil {
			go o.h.Fenced(o)
		}
	}
}
