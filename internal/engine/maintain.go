package engine

import (
	"context"

	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
)

// maintain runs once a second: it applies retention, MaxMessageAge and the
// retry ladder to queues nobody is receiving from, forgets idle tenants,
// and renews the snapshots the store asks for.
func (e *Engine) maintain() {
	for _, o := range e.all() {
		o.lock()
		if o.deleted {
			o.mu.Unlock()
			continue
		}
		now := e.clock.Now()
		o.q.Advance(now)
		o.q.Sched().Sweep(now.UnixMilli(), 250_000)
		o.unlock()
	}
	e.snapshotWanted()
}

// snapshotWanted renews the snapshots of the partitions the store names
// (they pin old log). One round at a time.
func (e *Engine) snapshotWanted() {
	e.snapshotting.Lock()
	defer e.snapshotting.Unlock()
	for _, p := range e.st.Wanted() {
		if err := e.snapshot(p); err != nil {
			e.log.Warn("snapshot failed; the store will ask again", "partition", p, "err", err)
		}
	}
}

// Snapshot renews every partition's snapshot (for tools and tests; the
// engine renews them by itself as the store asks).
func (e *Engine) Snapshot() error {
	e.snapshotting.Lock()
	defer e.snapshotting.Unlock()
	if err := e.snapshot(store.Catalog); err != nil {
		return err
	}
	for _, o := range e.all() {
		if err := e.snapshot(o.p); err != nil {
			return err
		}
	}
	return nil
}

// snapshot writes partition p's state as its snapshot. A queue's writes
// are held back while the writes in flight finish (so the snapshot holds
// exactly the records before it) and while its state is written out.
func (e *Engine) snapshot(p store.PartitionID) error {
	if p == store.Catalog {
		return e.snapshotCatalog()
	}
	e.mu.RLock()
	o := e.byPart[p]
	e.mu.RUnlock()
	if o == nil {
		return nil // dropped meanwhile
	}
	o.mu.Lock()
	for o.snapshotting {
		o.cond.Wait()
	}
	o.snapshotting = true
	for len(o.writes) > 0 {
		w := o.writes[len(o.writes)-1]
		o.mu.Unlock()
		_ = w.f.Wait(context.Background())
		o.mu.Lock()
		o.drainLocked()
	}
	defer func() {
		o.snapshotting = false
		o.cond.Broadcast()
		o.unlock()
	}()
	if o.deleted {
		return nil
	}
	now := e.clock.Now()
	meta := o.meta.Clone()
	recs := append([]*record.Record{{Type: record.Meta, Meta: &meta}}, o.q.Snapshot(now)...)
	prev := o.q.Last()
	data := make([]store.Rec, len(recs))
	for i, r := range recs {
		data[i] = store.Rec{Data: record.Encode(r)}
	}
	o.q.SetLast(prev + uint64(len(recs)))
	w := &write{prev: prev, epoch: o.epoch, f: e.st.Snapshot(p, prev, data)}
	o.writes = append(o.writes, w)
	o.mu.Unlock()
	err := w.f.Wait(context.Background())
	o.mu.Lock()
	o.drainLocked()
	return writeError(err)
}

// snapshotCatalog writes the catalog's snapshot: the live queues and the
// next partition id.
func (e *Engine) snapshotCatalog() error {
	e.mu.RLock()
	recs := []*record.Record{{Type: record.Catalog, NextPartition: uint64(e.nextPart)}}
	for name, o := range e.queues {
		recs = append(recs, &record.Record{Type: record.Create, Partition: uint64(o.p), Name: name})
	}
	e.mu.RUnlock()
	data := make([]store.Rec, len(recs))
	for i, r := range recs {
		data[i] = store.Rec{Data: record.Encode(r)}
	}
	e.catMu.Lock()
	prev := e.catLast
	f := e.st.Snapshot(store.Catalog, prev, data)
	e.catLast += uint64(len(recs))
	e.catMu.Unlock()
	err := f.Wait(context.Background())
	if err != nil {
		e.catMu.Lock()
		if last, ok := store.LastPosition(err); ok && last < e.catLast {
			e.catLast = last
		}
		e.catMu.Unlock()
	}
	return writeError(err)
}

// compact copies live message bodies out of mostly dead files, at most
// 16 MiB a round.
func (e *Engine) compact() {
	if c, ok := e.st.(store.Compactor); ok {
		e.relocated.Add(c.Compact(16<<20, compactOwner{e}))
	}
}

// compactOwner answers the store's compaction about the engine's messages.
type compactOwner struct{ e *Engine }

func (c compactOwner) Live(p store.PartitionID, pos uint64, h store.Hint) bool {
	c.e.mu.RLock()
	o := c.e.byPart[p]
	c.e.mu.RUnlock()
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.q.Find(pos)
	return ok && m.Loc == locOf(h)
}

func (c compactOwner) Moved(p store.PartitionID, pos uint64, old, new store.Hint) bool {
	c.e.mu.RLock()
	o := c.e.byPart[p]
	c.e.mu.RUnlock()
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.q.Find(pos)
	if !ok || m.Loc != locOf(old) {
		return false
	}
	m.Loc = locOf(new)
	return true
}

// catchUp, under the disk alarm, renews the snapshots the store says would
// free space, before a send is refused: a drained disk lets sends go on by
// themselves.
func (e *Engine) catchUp() {
	if len(e.st.Wanted()) > 0 {
		e.snapshotWanted()
	}
}
