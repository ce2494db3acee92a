package partition

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/attr"
	"github.com/sluicemq/sluice/internal/inflight"
	"github.com/sluicemq/sluice/internal/partition/figures"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Partition is the owner's partition.
func (o *Owner) Partition() store.PartitionID { return o.p }

// Meta returns a copy of the queue's settings.
func (o *Owner) Meta() record.QueueMeta {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.meta.Clone()
}

// Config returns the queue's parsed settings.
func (o *Owner) Config() attr.Config {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cfg
}

// Create writes the queue's settings as the first record of its
// partition: the partition is whole on its own.
func (o *Owner) Create() error {
	o.lock()
	meta := o.meta.Clone()
	err := o.persistLocked([]*record.Record{o.q.MetaRecord(&meta)})
	o.unlock()
	return err
}

// settleLocked waits, letting the lock go meanwhile, until no write is in
// flight, and applies them all. Applying a write moves the queue's time
// on, and a visibility timeout that ran out since then takes its message
// up the retry ladder, with a record at the next position: those records
// are written too, so that the partition ends at the queue's last
// position (o.q.Last) when it returns, as a snapshot or a drop needs.
func (o *Owner) settleLocked() {
	for {
		if early := o.q.RecordsBefore(math.MaxUint64); len(early) > 0 && o.state != relinquished {
			o.appendLocked(early, false, nil)
		}
		w := o.writes.Newest()
		if w == nil {
			return
		}
		_ = inflight.Wait(&o.mu, w, o.drainLocked)
	}
}

// Deleted ends the queue once its deletion is durable: its waiting
// receivers return, and its messages' bodies are released. It returns the
// partition's last position once the writes in flight are done (to fence
// the partition's drop on), and false when the owner no longer owned the
// partition (it releases nothing then, and must not drop it).
func (o *Owner) Deleted() (last uint64, owned bool) {
	o.mu.Lock()
	o.settleLocked()
	if o.state == relinquished {
		o.mu.Unlock()
		return 0, false
	}
	if o.state == serving {
		close(o.stopped)
	}
	o.state = deleted
	o.waiting.WakeAll()
	gone := o.q.LetGoAll()
	last = o.q.Last()
	o.mu.Unlock()
	o.release(gone)
	return last, true
}

// Relinquish lets the partition go: the owner stops serving (its long
// polls return, its requests fail with NotOwner) and releases nothing,
// so that another owner can take the partition over. Writes in flight
// finish or fail on their own; the next owner's epoch record fences off
// any that have not landed.
func (o *Owner) Relinquish() {
	o.mu.Lock()
	o.relinquishLocked()
	o.mu.Unlock()
}

func (o *Owner) relinquishLocked() {
	if o.state != serving {
		return
	}
	o.state = relinquished
	close(o.stopped)
	o.waiting.WakeAll()
	o.h.Log.Warn("stopped owning a queue's partition", "queue", o.meta.Name, "partition", o.p)
}

// Stopped is closed once the owner no longer serves its partition (its
// queue was deleted, or it let the partition go).
func (o *Owner) Stopped() <-chan struct{} { return o.stopped }

// Serving reports whether the owner still serves its partition.
func (o *Owner) Serving() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.state == serving
}

// Claim writes the owner's epoch record (node, term): once it is durable
// every append a former owner of the partition still has in flight is
// fenced. An owner that took a partition over claims it before serving.
func (o *Owner) Claim(node string, term uint64) error {
	o.lock()
	defer o.unlock()
	if err := o.stoppedLocked(); err != nil {
		return err
	}
	return o.persistLocked([]*record.Record{o.q.EpochRecord(node, term)})
}

// UpdateMeta changes the queue's settings and persists them whole; the
// change takes effect once durable.
func (o *Owner) UpdateMeta(f func(m *record.QueueMeta) error) error {
	o.metaMu.Lock()
	defer o.metaMu.Unlock()
	o.lock()
	if err := o.stoppedLocked(); err != nil {
		o.mu.Unlock()
		return err
	}
	meta := o.meta.Clone() // Attrs never nil (New, applyMetaLocked)
	if err := f(&meta); err != nil {
		o.mu.Unlock()
		return err
	}
	meta.Modified = o.h.Clock.Now().UnixMilli()
	err := o.persistLocked([]*record.Record{o.q.MetaRecord(&meta)})
	o.waiting.WakeAll() // new limits may let receivers on
	o.unlock()
	return err
}

// Attributes returns the named attributes ("All" for all) as SQS renders
// them.
func (o *Owner) Attributes(names []string) (map[string]string, error) {
	sel, err := attr.Select(names)
	if err != nil {
		return nil, err
	}
	now := o.h.Clock.Now()
	o.lock()
	counts := o.q.Counts(now)
	out := attr.Render(&o.meta)
	if sel.AnySluice() {
		maps.Copy(out, figures.Attributes(now, counts, o.q.Stats(), o.q.Sched().Stats(now.UnixMilli())))
	}
	out["ApproximateNumberOfMessages"] = strconv.Itoa(counts.Visible)
	out["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(counts.InFlight)
	out["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(counts.Delayed)
	out["CreatedTimestamp"] = strconv.FormatInt(o.meta.Created/1000, 10)
	out["LastModifiedTimestamp"] = strconv.FormatInt(o.meta.Modified/1000, 10)
	out["QueueArn"] = o.h.ARN(o.meta.Name)
	o.unlock()
	return sel.Keep(out), nil
}

// Maintain applies retention, MaxMessageAge and the retry ladder (for a
// queue nobody receives from) and forgets idle tenants.
func (o *Owner) Maintain() {
	if now, err := o.locked(); err == nil {
		o.q.Sched().Sweep(now.UnixMilli(), 250_000)
		o.unlock()
	}
}

// Snapshot writes the queue's state as its partition's snapshot. New
// writes are held back while the writes in flight finish (so the snapshot
// holds exactly the records before it) and while the state is written out.
func (o *Owner) Snapshot() error {
	o.mu.Lock()
	for o.snapshotting {
		o.cond.Wait()
	}
	o.snapshotting = true
	o.settleLocked()
	defer func() {
		o.snapshotting = false
		o.cond.Broadcast()
		o.unlock()
	}()
	if o.state != serving {
		return nil
	}
	now := o.h.Clock.Now()
	meta := o.meta.Clone()
	// The store consumes the records as they are made, under the lock: a
	// queue of millions of messages is never held encoded at once.
	n := uint64(0)
	recs := func(yield func(store.Rec) bool) {
		if !yield(store.Rec{Data: record.Encode(&record.Record{Type: record.Meta, Meta: &meta})}) {
			return
		}
		n++
		o.q.SnapshotEach(now, func(r *record.Record) bool {
			if !yield(store.Rec{Data: record.Encode(r)}) {
				return false
			}
			n++
			return true
		})
	}
	prev := o.q.Last()
	w := o.writes.Add(&write{Prev: prev, F: o.h.Store.Snapshot(o.p, prev, recs)})
	o.q.SetLast(prev + n)
	return o.waitLocked(w)
}

// ---- recovery ----

// Replayed applies a record recovery read (through the same apply as the
// live path, without moving time on: Recovered does), or notes where
// compaction moved a body.
func (o *Owner) Replayed(now time.Time, e store.Entry) error {
	if e.Moved {
		if m, ok := o.q.Find(e.Pos); ok {
			m.Loc = locOf(e.Hint)
		}
		return nil
	}
	r, err := record.Decode(e.Data, false)
	if err != nil {
		return err
	}
	r.Pos = e.Pos
	if r.Type == record.Meta {
		o.applyMetaLocked(r.Meta)
	}
	return o.q.Replay(now, r, locOf(e.Hint))
}

// Rebuilt returns a new owner of o's partition whose settings are meta,
// holding o's messages as a replay of o's snapshot would: for a salvage
// that learns a queue's settings (that it is a FIFO queue) only after its
// records were replayed into a queue without them. Before Recovered.
func (o *Owner) Rebuilt(now time.Time, meta record.QueueMeta) (*Owner, error) {
	n := New(o.h, o.p, meta)
	var err error
	o.q.SnapshotEach(now, func(r *record.Record) bool {
		err = n.Replayed(now, store.Entry{P: o.p, Data: record.Encode(r), Snapshot: true})
		return err == nil
	})
	return n, err
}

// Acquire takes partition p over, as a node does that becomes its owner:
// it replays p's newest snapshot and the records after it (the store
// makes this node p's writer), keeps every live message's body, and
// claims p with an epoch record (node, term), which fences off whatever a
// former owner still has in flight. The caller starts the owner (Start)
// once the queues its messages may move to are there. It also returns how
// many messages had lost their body (Recovered).
//
// A claim the store fences (a write of the former owner, in doubt when it
// was lost, landed after the replay read the partition's end: the
// stream's new leader had it, the replica the replay read had not yet)
// is tried again from a new replay, up to claimAttempts in all, rather
// than given up with the lease and taken again seconds later.
func Acquire(h *Host, p store.PartitionID, now time.Time, node string, term uint64) (*Owner, int, error) {
	for attempt := 1; ; attempt++ {
		o, missing, err := acquireOnce(h, p, now, node, term, attempt > 1)
		if err == nil || attempt == claimAttempts || !errors.Is(err, errClaimFenced) {
			return o, missing, err
		}
		h.Log.Info("a write landed after the takeover's replay; replaying again", "partition", p, "term", term, "attempt", attempt)
	}
}

// claimAttempts bounds the replays of one Acquire whose claims the store
// fences.
const claimAttempts = 3

// errClaimFenced marks a claim the store fenced.
var errClaimFenced = errors.New("partition: the takeover's epoch record was fenced")

// acquireOnce is one replay and claim. Again (a replay after a fenced
// claim), it does not claim over an owner whose term is newer than term:
// the write that fenced the first claim was that owner's epoch record, so
// this node's lease is not the partition's latest.
func acquireOnce(h *Host, p store.PartitionID, now time.Time, node string, term uint64, again bool) (*Owner, int, error) {
	o := New(h, p, record.QueueMeta{ID: uint64(p)})
	var last uint64
	err := h.Store.ReplayPartition(p, 0, func(e store.Entry) error {
		if e.Reset {
			o = New(h, p, record.QueueMeta{ID: uint64(p)})
		}
		last = max(last, e.Pos)
		return o.Replayed(now, e)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("replaying partition %d: %w", p, err)
	}
	if again && o.q.ClaimTerm() > term {
		o.Relinquish()
		return nil, 0, fmt.Errorf("claiming partition %d: %w (an owner of a newer term, %d, claimed it after term %d)", p, NotOwner(), o.q.ClaimTerm(), term)
	}
	missing := o.Recovered(now, last)
	if err := o.Claim(node, term); err != nil {
		o.Relinquish()
		if errors.Is(err, ErrNotOwner) {
			err = fmt.Errorf("%w: %w", errClaimFenced, err)
		}
		return nil, missing, fmt.Errorf("claiming partition %d: %w", p, err)
	}
	return o, missing, nil
}

// Recovered ends the replay: the partition's last position, and the store
// told to keep every live message's body (the queue holds them from now
// on; what left during the replay was never kept since the store opened,
// so nothing is released for it). Messages whose body the store no longer
// has are counted, and deleted by Start; messages found leaving (past
// their age, off the ladder) wait for Start too. The records the retry
// ladder made as time moved on (visibility timeouts that ran out while
// nobody looked) took the positions after last: they go to the store
// first, before a takeover's epoch record or Start's writes, which the
// store would fence otherwise. It returns how many bodies were missing.
func (o *Owner) Recovered(now time.Time, last uint64) int {
	o.q.SetLast(last)
	o.q.Advance(now)
	o.lost = o.q.HoldAll(func(m *queue.Msg) error { return o.h.Store.Keep(o.p, m.Seq, hintOf(m.Loc)) })
	eff := o.q.TakeEffects()
	o.q.Requeue(queue.Effects{Handoffs: eff.Handoffs, Records: eff.Records})
	if n := len(o.lost); n > 0 {
		o.unreadable(n)
		o.h.Log.Error("messages whose body the store no longer has; they are deleted", "queue", o.meta.Name, "messages", n)
	}
	return len(o.lost)
}

// Start deletes, durably, the messages recovery found without a body,
// and moves away what recovery found leaving, once every queue is there.
func (o *Owner) Start() {
	o.lock()
	if len(o.lost) > 0 {
		recs := make([]*record.Record, len(o.lost))
		for i, seq := range o.lost {
			recs[i] = o.q.DeleteRecord(seq, record.ByLoss)
		}
		o.lost = nil
		if err := o.persistLocked(recs); err != nil {
			o.h.Log.Warn("deleting the messages without a body failed; the next start will", "queue", o.meta.Name, "err", err)
		}
	}
	serving := o.state == serving
	o.unlock()
	if serving && o.h.Started != nil {
		o.h.Started(o)
	}
}

// ---- move tasks ----

// Tasks returns the queue's move tasks as its partition holds them,
// oldest first.
func (o *Owner) Tasks() ([]record.MoveTask, error) {
	now, err := o.locked()
	if err != nil {
		return nil, err
	}
	ts := o.q.Tasks(now)
	o.unlock()
	return ts, nil
}

// Task returns the move task of handle as the partition holds it.
func (o *Owner) Task(handle string) (record.MoveTask, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.q.Task(handle)
}

// SaveTask writes a move task's state to the queue's partition and waits
// (fenced like every write: an owner that no longer serves writes
// nothing).
func (o *Owner) SaveTask(t record.MoveTask) error {
	o.lock()
	if err := o.stoppedLocked(); err != nil {
		o.mu.Unlock()
		return err
	}
	err := o.persistLocked([]*record.Record{o.q.TaskRecord(t)})
	o.unlock()
	return err
}

// Has reports whether the queue holds message seq.
func (o *Owner) Has(seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.q.Lookup(seq)
	return ok
}

// Missing lists the messages recovery found without a body (Recovered),
// which Start deletes.
func (o *Owner) Missing() []uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lost)
}

// FromSends puts back as sent the messages seqs names, which a salvage
// read from the index of a damaged snapshot: each is replaced by its Send
// record, read back (checksum verified, and its own), so that nothing of
// the damaged index stays (a receive count or a visibility as read); one
// whose Send record does not read back is taken out. It returns those.
// Before Recovered: nothing is kept yet, and nothing is written.
func (o *Owner) FromSends(now time.Time, seqs []uint64) (lost []uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, seq := range seqs {
		m, ok := o.q.Find(seq)
		if !ok {
			continue
		}
		loc := m.Loc
		data, err := o.h.Store.Read(o.p, seq, hintOf(loc))
		var r *record.Record
		if err == nil {
			r, err = record.Decode(data, false)
		}
		if err == nil && (r.Type != record.Send || r.Msg == nil || r.Msg.Seq != seq) {
			err = fmt.Errorf("%w: not message %d's Send record", store.ErrCorrupt, seq)
		}
		_ = o.q.Replay(now, &record.Record{Type: record.Delete, Pos: seq, Seq: seq, Reason: record.ByLoss}, loc)
		if err != nil {
			lost = append(lost, seq)
			continue
		}
		r.Pos = seq
		_ = o.q.Replay(now, r, loc)
	}
	return lost
}

// CountLost counts n messages lost to damaged data (a salvage) as
// unreadable.
func (o *Owner) CountLost(n int) { o.unreadable(n) }

// Verify reads back the body of every message of a replayed queue (no
// broker serving it): how many messages it has, how many bodies cannot be
// read back intact, and why the first of them could not.
func (o *Owner) Verify() (messages, unreadable int, first string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.q.Messages(func(m *queue.Msg) {
		messages++
		if _, err := o.readAt(m.Seq, m.Loc); err != nil {
			if unreadable++; first == "" {
				first = err.Error()
			}
		}
	})
	return messages, unreadable, first
}

// ---- compaction ----

// BodyAt reports whether the queue holds message pos's body at h.
func (o *Owner) BodyAt(pos uint64, h store.Hint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.q.Held(pos, locOf(h))
}

// BodyMoved notes that message pos's body moved from old to new; false
// when the queue no longer holds it at old.
func (o *Owner) BodyMoved(pos uint64, old, new store.Hint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.q.Held(pos, locOf(old)) {
		return false
	}
	m, _ := o.q.Find(pos)
	m.Loc = locOf(new)
	return true
}

// ---- figures ----

// Stats returns the queue's figures.
func (o *Owner) Stats(resolveName func(arn string) string) st.QueueStats {
	now := o.h.Clock.Now()
	o.lock()
	in := figures.State{Now: now, Name: o.meta.Name, FIFO: o.meta.FIFO, Counts: o.q.Counts(now), Queue: o.q.Stats(),
		Tenants: o.q.Sched().Stats(now.UnixMilli()), Limits: o.meta.Tenants, Waiting: o.waiting.Len(), Order: figures.Order(o.cfg.Queue)}
	in.FIFOEngaged, in.FIFOOld = o.q.FIFOMode()
	dlq := o.cfg.DeadLetterTarget
	o.unlock()
	s := figures.Queue(in, &o.ctr)
	if dlq != "" {
		s.DLQ = resolveName(dlq)
	}
	return s
}

// Tenants lists the tenants that hold messages, largest backlog first, at
// most max (0: all).
func (o *Owner) Tenants(max int) []st.TenantInfo {
	now := o.h.Clock.Now()
	o.lock()
	o.q.Advance(now)
	stats, over := o.q.Sched().Stats(now.UnixMilli()), o.meta.Tenants
	o.unlock()
	return figures.Tenants(stats, now, over, max)
}

// Tenant describes one tenant, including the partitions it hashes to,
// whether or not it holds messages.
func (o *Owner) Tenant(tenant string) st.TenantInfo {
	now := o.h.Clock.Now()
	o.lock()
	defer o.unlock()
	o.q.Advance(now)
	for _, t := range o.q.Sched().Stats(now.UnixMilli()) {
		if t.Name == tenant {
			return figures.Tenant(t, now, o.meta.Tenants)
		}
	}
	info := figures.Tenant(sched.TenantStats{Name: tenant, Shards: o.q.Sched().TenantShards(tenant)}, now, o.meta.Tenants)
	info.Lanes = map[string]int{}
	return info
}

// Messages lists copies of the queue's messages that match (all when match
// is nil), in send order, after sequence after, at most max (0: all), with
// the time it looked (for peeks). Messages leaving are left out.
func (o *Owner) Messages(after uint64, max int, match func(m *queue.Msg) bool) ([]queue.Msg, time.Time, error) {
	now, err := o.locked()
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []queue.Msg
	o.q.Messages(func(m *queue.Msg) {
		if m.Seq > after && m.State != queue.Leaving && (max == 0 || len(out) < max) && (match == nil || match(m)) {
			out = append(out, *m)
		}
	})
	o.unlock()
	return out, now, nil
}

// Body reads a message's payload back (for peeks).
func (o *Owner) Body(m *queue.Msg) (*record.Payload, error) { return o.readPayload(m) }
