package engine

import (
	"maps"
	"slices"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
)

// maintain runs once a second: it applies retention, MaxMessageAge and the
// retry ladder to queues nobody is receiving from, forgets idle tenants,
// and renews the snapshots the store asks for.
func (e *Engine) maintain() {
	for _, o := range e.all() {
		o.Maintain()
	}
	e.snapshotWanted()
}

// snapshotWanted renews the snapshots of the partitions the store names
// (they pin old log). One round at a time.
func (e *Engine) snapshotWanted() {
	e.snapshotMu.Lock()
	defer e.snapshotMu.Unlock()
	for _, p := range e.st.Wanted() {
		if err := e.snapshot(p); err != nil {
			e.log.Warn("snapshot failed; the store will ask again", "partition", p, "err", err)
		}
	}
}

// Snapshot renews every partition's snapshot (for tools and tests; the
// engine renews them by itself as the store asks).
func (e *Engine) Snapshot() error {
	e.snapshotMu.Lock()
	defer e.snapshotMu.Unlock()
	if err := e.snapshot(store.Catalog); err != nil {
		return err
	}
	for _, o := range e.all() {
		if err := o.Snapshot(); err != nil {
			return err
		}
	}
	for _, t := range e.allTopics() {
		if err := t.Snapshot(); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) snapshot(p store.PartitionID) error {
	if p == store.Catalog {
		return e.snapshotCatalog()
	}
	if t := e.topicOf(p); t != nil {
		return t.Snapshot()
	}
	e.mu.RLock()
	o := e.byPart[p]
	e.mu.RUnlock()
	if o == nil {
		return nil // dropped meanwhile
	}
	return o.Snapshot()
}

// snapshotCatalog writes the catalog's snapshot: the live queues, the next
// partition id, and the names deleted too recently to be used again.
func (e *Engine) snapshotCatalog() error {
	if !e.ownsCatalog() {
		return nil // its owner's to do
	}
	e.mu.Lock() // it forgets the names free again
	recs := []*record.Record{{Type: record.Catalog, NextPartition: uint64(e.nextPart)}}
	for _, name := range slices.Sorted(maps.Keys(e.names)) { // the same catalog, the same bytes
		recs = append(recs, &record.Record{Type: record.Create, Partition: uint64(e.names[name]), Name: name})
	}
	for _, name := range slices.Sorted(maps.Keys(e.topicIDs)) {
		recs = append(recs, &record.Record{Type: record.TopicCreate, Partition: uint64(e.topicIDs[name]), Name: name})
	}
	now := e.clock.Now()
	for _, name := range slices.Sorted(maps.Keys(e.freeAt)) {
		if at := e.freeAt[name]; now.Before(at) {
			recs = append(recs, &record.Record{Type: record.Drop, Partition: uint64(store.Catalog), Name: name, Until: at.UnixMilli()})
		} else {
			delete(e.freeAt, name)
		}
	}
	e.mu.Unlock()
	data := make([]store.Rec, len(recs))
	for i, r := range recs {
		data[i] = store.Rec{Data: record.Encode(r)}
	}
	e.catMu.Lock()
	prev := e.catLast
	f := e.st.Snapshot(store.Catalog, prev, slices.Values(data))
	e.catLast += uint64(len(recs))
	e.catMu.Unlock()
	return e.catalogWait(f)
}

// compact copies live message bodies out of mostly dead files, at most
// 16 MiB a round. Never while a snapshot is taken: a snapshot made after a
// move is durable but before its owner learns of it would hold the old
// location, and replay (which starts at the snapshot) would never see the
// move; one made before the round is durable before the moves, and one
// after it holds the new locations.
func (e *Engine) compact() {
	if c, ok := e.st.(store.Compactor); ok {
		e.snapshotMu.Lock()
		defer e.snapshotMu.Unlock()
		e.relocated.Add(c.Compact(16<<20, compactOwner{e}))
	}
}

// compactOwner answers the store's compaction about the engine's messages.
type compactOwner struct{ e *Engine }

func (c compactOwner) owner(p store.PartitionID) *partition.Owner {
	c.e.mu.RLock()
	defer c.e.mu.RUnlock()
	return c.e.byPart[p]
}

func (c compactOwner) Live(p store.PartitionID, pos uint64, h store.Hint) bool {
	o := c.owner(p)
	return o != nil && o.BodyAt(pos, h)
}

func (c compactOwner) Moved(p store.PartitionID, pos uint64, old, new store.Hint) bool {
	o := c.owner(p)
	return o != nil && o.BodyMoved(pos, old, new)
}
