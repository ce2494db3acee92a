package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/topic"
)

// rebuilt is what a replay rebuilt: the catalog's queues by partition,
// an owner for each partition that has records, and each one's last
// position.
type rebuilt struct {
	names map[store.PartitionID]string
	parts map[store.PartitionID]*partition.Owner
	last  map[store.PartitionID]uint64
	// topicNames are the catalog's topics; topics the partitions whose
	// records are a topic's.
	topicNames map[store.PartitionID]string
	topics     map[store.PartitionID]*topic.Owner
	// dropped are the partitions whose deletion the catalog's records
	// since its snapshot name: an orphan among them is a deletion cut
	// short.
	dropped map[store.PartitionID]bool
	// salvage is what damage the replay read past held (a store opened
	// to salvage or to check); nil when there was none.
	salvage *salvage
}

// ids lists the partitions rebuilt, in order.
func (r rebuilt) ids() []store.PartitionID {
	ids := make([]store.PartitionID, 0, len(r.parts))
	for p := range r.parts {
		ids = append(ids, p)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// live reports the queue name of partition p, if the catalog names it.
func (r rebuilt) live(p store.PartitionID) (string, bool) {
	name, ok := r.names[p]
	return name, ok && r.parts[p] != nil && r.parts[p].Meta().Name == name
}

// replay rebuilds the catalog and every partition from the store: each
// partition's newest snapshot and the records after it, applied through
// the same Apply the live path uses.
func (e *Engine) replay(now time.Time) (rebuilt, error) {
	cat := newCatalogView()
	parts := map[store.PartitionID]*partition.Owner{}
	topics := map[store.PartitionID]*topic.Owner{}
	last := map[store.PartitionID]uint64{}
	th := e.topicHost()
	var sv *salvage
	err := e.st.Replay(func(en store.Entry) error {
		if en.Damage != nil {
			if sv == nil {
				sv = newSalvage()
			}
			sv.damaged(*en.Damage)
			sv.snapshotFromDamage(now, *en.Damage, func(p store.PartitionID, reset bool) *partition.Owner {
				if topics[p] != nil {
					return nil
				}
				if parts[p] == nil || reset {
					parts[p] = partition.New(e.host, p, record.QueueMeta{ID: uint64(p)})
				}
				return parts[p]
			})
			return nil
		}
		if en.Skipped {
			last[en.P] = max(last[en.P], en.Pos)
			if en.P == store.Catalog {
				e.catLast = max(e.catLast, en.Pos)
			} else if parts[en.P] == nil && topics[en.P] == nil {
				// A partition that lost every record: a queue without
				// settings, which the catalog may name (restorable).
				parts[en.P] = partition.New(e.host, en.P, record.QueueMeta{ID: uint64(en.P)})
			}
			return nil
		}
		if sv != nil {
			sv.saw(en)
		}
		if en.P == store.Catalog {
			e.catLast = max(e.catLast, en.Pos)
			return cat.apply(en)
		}
		e.nextPart = max(e.nextPart, en.P+1)
		last[en.P] = max(last[en.P], en.Pos)
		if t := topics[en.P]; t != nil || isTopicRecord(en.Data) {
			// A topic's partition: known by its own record types. The
			// replay may begin in the middle of its history (below its
			// newest snapshot, with another partition's floor lower): the
			// records seen before one of a topic's own type are leftovers
			// of an older snapshot, which the newest one's Reset discards.
			if t == nil || en.Reset {
				t = topic.NewOwner(th, en.P, record.TopicInfo{})
				topics[en.P] = t
				delete(parts, en.P)
			}
			return t.Replayed(en)
		}
		o := parts[en.P]
		if en.Reset || o == nil {
			o = partition.New(e.host, en.P, record.QueueMeta{ID: uint64(en.P)})
			parts[en.P] = o
		}
		if err := o.Replayed(now, en); err != nil {
			return fmt.Errorf("partition %d record %d: %w", en.P, en.Pos, err)
		}
		return nil
	})
	e.nextPart = max(e.nextPart, cat.next)
	e.freeAt = cat.freeAt
	return rebuilt{cat.names, parts, last, cat.topics, topics, cat.dropped, sv}, err
}

// catalogView is what the catalog's records say: the queues by partition,
// the next partition id, and when recently deleted names may be used
// again.
type catalogView struct {
	names   map[store.PartitionID]string
	topics  map[store.PartitionID]string
	next    store.PartitionID
	freeAt  map[string]time.Time
	dropped map[store.PartitionID]bool
}

func newCatalogView() *catalogView {
	return &catalogView{names: map[store.PartitionID]string{}, topics: map[store.PartitionID]string{}, next: 1, freeAt: map[string]time.Time{},
		dropped: map[store.PartitionID]bool{}}
}

// apply applies one catalog record.
func (c *catalogView) apply(en store.Entry) error {
	r, err := record.Decode(en.Data, false)
	if err != nil {
		return fmt.Errorf("catalog record %d: %w", en.Pos, err)
	}
	if en.Reset {
		clear(c.names)
		clear(c.topics)
		clear(c.freeAt)
	}
	switch r.Type {
	case record.Create:
		c.names[store.PartitionID(r.Partition)] = r.Name
		c.next = max(c.next, store.PartitionID(r.Partition)+1)
		delete(c.freeAt, r.Name)
	case record.Drop:
		if r.Partition != uint64(store.Catalog) { // 0: a snapshot's deleted name
			delete(c.names, store.PartitionID(r.Partition))
			c.dropped[store.PartitionID(r.Partition)] = true
			c.next = max(c.next, store.PartitionID(r.Partition)+1)
		}
		if r.Name != "" {
			c.freeAt[r.Name] = time.UnixMilli(r.Until)
		}
	case record.Catalog:
		c.next = max(c.next, store.PartitionID(r.NextPartition))
	case record.TopicCreate:
		c.topics[store.PartitionID(r.Partition)] = r.Name
		c.next = max(c.next, store.PartitionID(r.Partition)+1)
	case record.TopicDrop:
		delete(c.topics, store.PartitionID(r.Partition))
		c.dropped[store.PartitionID(r.Partition)] = true
	case record.Epoch:
	default:
		return fmt.Errorf("a %s record in the catalog", r.Type)
	}
	return nil
}

// restorable reports whether partition p, which no queue of the catalog
// owns, is a queue a salvage brings back: the catalog names it but its
// settings were lost, or the catalog lost records (so its creation may
// have been among them) and did not record its deletion.
func (r rebuilt) restorable(p store.PartitionID) bool {
	if r.dropped[p] {
		return false
	}
	if name, named := r.names[p]; named {
		return r.parts[p].Meta().Name != name // lost, or read from a damaged snapshot
	}
	return r.salvage.catalog && r.parts[p].Meta().Name != ""
}

// restore brings back the queue of partition p (see restorable): under
// the catalog's name when the catalog has it, else under its own. Its
// settings and state go into a snapshot of its partition, so that the
// next replay begins with them (a FIFO queue's records are replayed into
// a FIFO queue).
func (e *Engine) restore(p store.PartitionID, r rebuilt) (string, error) {
	o := r.parts[p]
	name, named := r.names[p]
	if named {
		fifo := strings.HasSuffix(name, ".fifo")
		if err := o.UpdateMeta(func(m *record.QueueMeta) error { m.Name, m.ID, m.FIFO = name, uint64(p), fifo; return nil }); err != nil {
			return "", err
		}
		e.mu.Lock()
		e.queues[name], e.byPart[p], e.names[name] = o, o, p
		e.mu.Unlock()
	} else {
		var err error
		if name, err = e.restoreQueue(p, o); err != nil {
			return "", err
		}
	}
	return name, o.Snapshot()
}

// recreate brings back, empty and with its default settings, queue name
// of partition p, of which nothing read back: the catalog lets p go, and
// the queue is created anew on a partition of its own (so that none of
// p's positions, which the damage may have held, is used again).
func (e *Engine) recreate(p store.PartitionID, name string) (string, error) {
	if err := e.catalogAppend(&record.Record{Type: record.Drop, Partition: uint64(p)}); err != nil {
		return "", err
	}
	var attrs map[string]string
	if strings.HasSuffix(name, ".fifo") {
		attrs = map[string]string{"FifoQueue": "true"}
	}
	_, err := e.CreateQueue(context.Background(), name, attrs, nil)
	return name, err
}

// recover rebuilds the catalog and every queue from the store (replay).
// Partitions the catalog does not name (a queue whose creation or
// deletion was cut short) are dropped; every message still live tells the
// store to keep its body; messages that the replay found past their time
// leave as they would have.
func (e *Engine) recover() error {
	now := e.clock.Now()
	r, err := e.replay(now)
	if err != nil {
		return err
	}
	// Every live queue keeps its bodies first; only then do the orphans go
	// (a drop moves the replay floor) and may the store free anything.
	var live []*partition.Owner
	var orphans []store.PartitionID
	missing := 0
	var restore []store.PartitionID // a salvage's: queues whose catalog record or settings the damage took
	if r.salvage != nil {
		for _, p := range slices.Sorted(maps.Keys(r.salvage.restored)) {
			if o := r.parts[p]; o != nil {
				o.FromSends(now, r.salvage.restored[p]) // those whose Send record does not read back are lost: counted by the index's entries
			}
		}
	}
	for _, p := range r.ids() {
		o := r.parts[p]
		name, ok := r.live(p)
		if !ok {
			if r.salvage != nil && r.restorable(p) {
				if name := r.names[p]; strings.HasSuffix(name, ".fifo") && !o.Meta().FIFO {
					// Its settings were lost: its records went into a
					// queue that did not know it is a FIFO queue.
					if o, err = o.Rebuilt(now, record.QueueMeta{ID: uint64(p), Name: name, FIFO: true}); err != nil {
						return fmt.Errorf("salvage: rebuilding FIFO queue %s: %w", name, err)
					}
					r.parts[p] = o
				}
				missing += o.Recovered(now, r.last[p])
				restore = append(restore, p)
				live = append(live, o)
				continue
			}
			// Not (or no longer) in the catalog: its creation never
			// completed, or its deletion was cut short.
			orphans = append(orphans, p)
			continue
		}
		missing += o.Recovered(now, r.last[p])
		e.queues[name], e.byPart[p], e.names[name] = o, o, p
		live = append(live, o)
	}
	var topics []*topic.Owner
	for _, p := range slices.Sorted(maps.Keys(r.topics)) {
		t := r.topics[p]
		if name, ok := r.topicNames[p]; !ok || t.Info().Name != name {
			orphans = append(orphans, p) // a topic's creation or deletion cut short
			continue
		}
		t.Recovered(r.last[p])
		topics = append(topics, t)
	}
	if r.salvage != nil {
		var restored []string
		for _, p := range slices.Sorted(maps.Keys(r.names)) {
			if r.parts[p] == nil && !r.dropped[p] {
				// Nothing of its partition read back: the queue comes
				// back empty, on a partition of its own.
				name, err := e.recreate(p, r.names[p])
				if err != nil {
					return fmt.Errorf("salvage: bringing back queue %s: %w", r.names[p], err)
				}
				restored = append(restored, name)
			}
		}
		for _, p := range restore {
			name, err := e.restore(p, r)
			if err != nil {
				return fmt.Errorf("salvage: bringing back the queue of partition %d: %w", p, err)
			}
			restored = append(restored, name)
		}
		rep := e.salvaged(r.salvage, r)
		rep.Restored = restored
		e.salvage = &rep
	}
	for _, p := range orphans {
		if err := e.st.Drop(p, r.last[p]).Wait(context.Background()); err != nil {
			e.log.Warn("dropping a partition no queue owns failed", "partition", p, "err", err)
		}
	}
	e.st.Recovered()
	// Messages without a body are deleted, and the ones the replay found
	// leaving (past their age, off the ladder) go, now that every queue is
	// there.
	for _, o := range live {
		o.Start()
	}
	if e.salvage != nil {
		// What the salvage rebuilt (from a damaged snapshot's index, past
		// lost records) goes into snapshots: the damaged stretches it was
		// read from are written over, and the next start must find it.
		for _, o := range live {
			if err := o.Snapshot(); err != nil {
				return fmt.Errorf("salvage: snapshot of queue %s: %w", o.Meta().Name, err)
			}
		}
		e.logSalvage(*e.salvage)
	}
	// Topics deliver what their subscriptions' queues have not taken.
	e.mu.Lock()
	for _, t := range topics {
		e.startTopicLocked(t.Info().Name, t)
	}
	e.mu.Unlock()
	if len(e.queues) > 0 {
		e.log.Info("recovered", "queues", len(e.queues), "messages_without_body", missing)
	}
	return nil
}
