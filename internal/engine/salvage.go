package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// salvage is what a replay that read past damaged data (a store opened to
// salvage or to check) learned of what the damage held: the damaged
// stretches, and, per partition, the messages whose record was in one and
// was not made unnecessary by a record after it (a delete, a purge, a
// newer snapshot).
type salvage struct {
	stretches []store.Damage
	// lost are the messages of a partition lost to damage whose Send
	// record was in a damaged stretch. By sequence; the id when the
	// record read.
	lost map[store.PartitionID]map[uint64]string
	// index is, per partition, what its damaged newest snapshot's index
	// held: messages are counted by its entries, not by the sequences
	// they name (a damaged entry can name another message).
	index map[store.PartitionID]*indexLoss
	// ids are the ids of every message whose Send record was damaged and
	// read, by partition and sequence, for a report.
	ids map[store.PartitionID]map[uint64]string
	// other counts the partition's other records lost, by type.
	other map[store.PartitionID]map[record.Type]int
	// snapshots counts the partition's snapshot records lost.
	snapshots map[store.PartitionID]int
	// restored are the messages of a queue read from the index of a
	// damaged snapshot (snapshotFromDamage), to be put back as their Send
	// record says (Owner.FromSends).
	restored  map[store.PartitionID][]uint64
	fromIndex map[store.PartitionID]int
	taken     map[store.PartitionID]map[uint64]bool // restored, as a set
	// unknown counts the stretches of which nothing could be read: what
	// they held, and whose it was, is not known.
	unknown int
	// catalog: the catalog lost records, or may have (an unknown
	// stretch): a queue whose creation was among them must not be taken
	// for the leftover of one whose creation was cut short.
	catalog bool
}

func newSalvage() *salvage {
	return &salvage{lost: map[store.PartitionID]map[uint64]string{}, ids: map[store.PartitionID]map[uint64]string{}, other: map[store.PartitionID]map[record.Type]int{},
		snapshots: map[store.PartitionID]int{}, restored: map[store.PartitionID][]uint64{},
		fromIndex: map[store.PartitionID]int{}, taken: map[store.PartitionID]map[uint64]bool{}, index: map[store.PartitionID]*indexLoss{}}
}

// indexLoss is what a damaged snapshot of a queue listed, and what became
// of it: of its entries, those whose message is in the queue after the
// salvage came back (read from the index, checked against their Send
// record), those deleted or purged by a record after the snapshot were
// gone anyway, and the others are lost.
type indexLoss struct {
	pos     uint64          // the snapshot's first record: its messages are below
	entries int             // entries its Index records held
	seqs    map[uint64]bool // the sequences the entries read name
	deleted map[uint64]bool // messages below pos a later record deleted
	purged  bool            // a later purge took them all
}

func (il *indexLoss) lost(has func(uint64) bool) int {
	if il.purged {
		return 0
	}
	back := 0
	for seq := range il.seqs {
		if seq < il.pos && !il.deleted[seq] && has(seq) {
			back++
		}
	}
	return max(0, il.entries-back-len(il.deleted))
}

// indexOf is the index loss of partition p's snapshot at pos, new when
// the snapshot starts there (its first record) or none is known.
func (s *salvage) indexOf(p store.PartitionID, pos uint64, first bool) *indexLoss {
	il := s.index[p]
	if il == nil || first {
		il = &indexLoss{pos: pos, seqs: map[uint64]bool{}, deleted: map[uint64]bool{}}
		s.index[p] = il
	}
	return il
}

// damaged notes a damaged stretch the replay read past, in log order.
func (s *salvage) damaged(d store.Damage) {
	s.stretches = append(s.stretches, d)
	if len(d.Records) == 0 {
		s.unknown++
		s.catalog = true
		return
	}
	for _, lr := range d.Records {
		if lr.P == store.Catalog {
			s.catalog = true
		}
		if lr.Snapshot && lr.P != store.Catalog && lr.First {
			// A snapshot supersedes what came before it: what it lists
			// is what was there.
			delete(s.lost, lr.P)
			s.indexOf(lr.P, lr.Pos, true)
		}
		if msgs, n, ok := record.DecodeIndex(lr.Data); ok && lr.Snapshot {
			il := s.indexOf(lr.P, lr.Pos, false)
			il.entries += n
			for _, m := range msgs {
				il.seqs[m.Seq] = true
			}
			s.snapshots[lr.P]++
			continue
		}
		r, err := record.Decode(lr.Data, false)
		if err != nil {
			s.count(lr.P, 0) // type 0: not known
			continue
		}
		switch {
		case r.Type == record.Send && r.Msg != nil:
			id := ""
			if r.Payload != nil {
				id = r.Payload.ID
			}
			s.lose(lr.P, lr.Pos, id)
		case lr.Snapshot:
			s.snapshots[lr.P]++
		default:
			s.count(lr.P, r.Type)
		}
	}
}

func (s *salvage) lose(p store.PartitionID, seq uint64, id string) {
	if s.lost[p] == nil {
		s.lost[p] = map[uint64]string{}
	}
	s.lost[p][seq] = id
	if id != "" {
		if s.ids[p] == nil {
			s.ids[p] = map[uint64]string{}
		}
		s.ids[p][seq] = id
	}
}

func (s *salvage) count(p store.PartitionID, t record.Type) {
	if s.other[p] == nil {
		s.other[p] = map[record.Type]int{}
	}
	s.other[p][t]++
}

// saw notes a record replayed after the damage: a newer snapshot of its
// partition holds the truth about every message the damage held (a
// message it lists is there, its body perhaps lost: recovery counts
// that), and a delete or purge says a lost message was gone anyway.
func (s *salvage) saw(en store.Entry) {
	lost, il := s.lost[en.P], s.index[en.P]
	if en.Reset {
		delete(s.lost, en.P)
		delete(s.index, en.P)
		return
	}
	if (len(lost) == 0 && il == nil) || en.Moved || en.Snapshot {
		return
	}
	r, err := record.Decode(en.Data, false)
	if err != nil {
		return
	}
	switch r.Type {
	case record.Delete:
		delete(lost, r.Seq)
		if il != nil && r.Seq < il.pos {
			il.deleted[r.Seq] = true
		}
	case record.Purge:
		for seq := range lost {
			if seq < en.Pos {
				delete(lost, seq)
			}
		}
		if il != nil {
			il.purged = true
		}
	}
}

// snapshotFromDamage replays, as far as they decode, the records of a
// queue's snapshot that a damaged stretch held: a damaged snapshot loses
// only what cannot be read back, not every message it listed. A message
// of its index comes back only if its Send record, found where the index
// says, reads back whole and is the message's, and then as that record
// says (Owner.FromSends: as sent, visible, its delivery state, which only
// the damaged index held, lost); its settings come back as read (the
// catalog's name wins).
func (sv *salvage) snapshotFromDamage(now time.Time, d store.Damage, owner func(p store.PartitionID, reset bool) *partition.Owner) {
	for _, lr := range d.Records {
		if !lr.Snapshot || lr.P == store.Catalog {
			continue
		}
		o := owner(lr.P, lr.First)
		if o == nil {
			continue // a topic's
		}
		if lr.First { // a newer snapshot: what an older one listed is not there
			delete(sv.restored, lr.P)
			delete(sv.taken, lr.P)
			delete(sv.fromIndex, lr.P)
		}
		data := lr.Data
		msgs, _, index := record.DecodeIndex(data)
		if index {
			// The entries that read, each checked later against its
			// message's Send record (FromSends). One that names a
			// message after the snapshot, or one an earlier entry names,
			// is damaged: it must not displace that message.
			msgs = sv.plausible(lr.P, lr.Pos, msgs)
			data = record.Encode(&record.Record{Type: record.Index, Msgs: msgs})
		} else if _, err := record.Decode(data, false); err != nil {
			continue
		}
		if err := o.Replayed(now, store.Entry{P: lr.P, Pos: lr.Pos, Data: data, Snapshot: true, Reset: lr.First}); err != nil {
			continue
		}
		for _, m := range msgs {
			sv.restored[lr.P] = append(sv.restored[lr.P], m.Seq)
		}
		sv.fromIndex[lr.P] += len(msgs)
	}
}

// plausible keeps the entries of a damaged snapshot's index, of
// partition p, read at pos, that may be what they say: below the
// snapshot, and not named by an earlier entry of it.
func (sv *salvage) plausible(p store.PartitionID, pos uint64, msgs []record.Msg) []record.Msg {
	if il := sv.index[p]; il != nil {
		pos = il.pos
	}
	seen := sv.taken[p]
	if seen == nil {
		seen = map[uint64]bool{}
		sv.taken[p] = seen
	}
	return slices.DeleteFunc(msgs, func(m record.Msg) bool {
		if m.Seq >= pos || seen[m.Seq] {
			return true
		}
		seen[m.Seq] = true
		return false
	})
}

// restoreName is the name a queue or topic whose catalog record was lost
// comes back under: its own (as its partition's settings hold it), or
// one made from the partition's id when those were lost too or the name
// is taken.
func restoreName(own string, p store.PartitionID, fifo, taken bool) string {
	if own != "" && !taken {
		return own
	}
	base := strings.TrimSuffix(own, ".fifo")
	suffix := fmt.Sprintf("salvaged-%d", p)
	if base != "" {
		suffix = "-" + suffix
	}
	if fifo {
		suffix += ".fifo"
	}
	return base[:min(len(base), 80-len(suffix))] + suffix
}

// salvaged reports what the damage took, per queue, once the queues are
// rebuilt (a message the damage held that is in its queue after all, from
// a snapshot or its Send record, is not lost), and counts the lost
// messages of each queue the engine serves as unreadable.
func (e *Engine) salvaged(sv *salvage, r rebuilt) st.SalvageReport {
	rep := sv.report(r, func(p store.PartitionID) string {
		if o := e.byPart[p]; o != nil {
			return o.Meta().Name
		}
		return r.names[p] // a queue recreated on a partition of its own
	})
	for _, q := range rep.Queues {
		if o := e.queues[q.Name]; o != nil && q.Messages > 0 {
			o.CountLost(q.Messages)
		}
	}
	// Messages whose body was in a damaged stretch are in their queue
	// without one: recovery counted them and their queue deletes them.
	for _, p := range slices.Sorted(maps.Keys(e.byPart)) {
		o := e.byPart[p]
		missing := o.Missing()
		if len(missing) == 0 {
			continue
		}
		i := slices.Index(rep.parts, p)
		if i < 0 {
			rep.Queues = append(rep.Queues, st.QueueLoss{Name: o.Meta().Name})
			rep.parts = append(rep.parts, p)
			i = len(rep.Queues) - 1
		}
		q := &rep.Queues[i]
		q.WithoutBody += len(missing)
		for _, seq := range missing {
			if id := sv.ids[p][seq]; id != "" {
				q.IDs = append(q.IDs, id)
			}
		}
	}
	return rep.SalvageReport
}

// partReport is a salvage report with the partition of each of its
// queues.
type partReport struct {
	st.SalvageReport
	parts []store.PartitionID
}

// report is what the damage took, per partition (named by name, or as
// the catalog, a topic or a partition without a queue).
func (sv *salvage) report(r rebuilt, name func(store.PartitionID) string) partReport {
	var rep partReport
	for _, d := range sv.stretches {
		rep.Damage = append(rep.Damage, st.DamageInfo{File: d.File, Offset: d.Offset, Length: d.Length, Reason: d.Reason, Records: len(d.Records), BelowFloor: d.BelowFloor})
	}
	rep.Unknown = sv.unknown
	parts := map[store.PartitionID]bool{}
	for _, m := range []map[store.PartitionID]int{sv.snapshots} {
		for p := range m {
			parts[p] = true
		}
	}
	for p := range sv.lost {
		parts[p] = true
	}
	for p := range sv.index {
		parts[p] = true
	}
	for p := range sv.other {
		parts[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		name := name(p)
		switch {
		case p == store.Catalog:
			name = st.CatalogLoss
		case name == "" && r.topicNames[p] != "":
			name = "topic " + r.topicNames[p]
		case name == "":
			name = fmt.Sprintf("(partition %d, no queue)", p)
		}
		loss := st.QueueLoss{Name: name, Snapshots: sv.snapshots[p], FromSnapshot: sv.fromIndex[p]}
		o := r.parts[p]
		if il := sv.index[p]; il != nil {
			loss.Messages += il.lost(func(seq uint64) bool { return o != nil && o.Has(seq) })
		}
		for _, seq := range slices.Sorted(maps.Keys(sv.lost[p])) {
			if o != nil && o.Has(seq) {
				continue // there after all
			}
			loss.Messages++
			if id := sv.lost[p][seq]; id != "" {
				loss.IDs = append(loss.IDs, id)
			}
		}
		for t, n := range sv.other[p] {
			loss.Records += n
			switch t {
			case record.Delete, record.Purge:
				loss.Deletes += n
			case 0:
				loss.Unknown += n
			}
		}
		if loss.Messages == 0 && loss.Records == 0 && loss.Snapshots == 0 {
			continue
		}
		rep.Queues = append(rep.Queues, loss)
		rep.parts = append(rep.parts, p)
	}
	return rep
}

// logSalvage tells the operator what a salvage did, in the log.
func (e *Engine) logSalvage(rep st.SalvageReport) {
	for _, d := range rep.Damage {
		e.log.Error("salvage: a damaged stretch of the data directory was skipped; what it held is lost",
			"file", d.File, "offset", d.Offset, "bytes", d.Length, "reason", d.Reason, "records", d.Records)
	}
	for _, q := range rep.Queues {
		e.log.Error("salvage: lost to damage", "queue", q.Name, "messages", q.Messages, "without_body", q.WithoutBody, "message_ids", q.IDs,
			"read_from_damaged_snapshot", q.FromSnapshot,
			"snapshot_records", q.Snapshots, "other_records", q.Records, "deletes", q.Deletes, "unreadable_records", q.Unknown)
	}
	for _, name := range rep.Restored {
		e.log.Error("salvage: a queue or topic whose catalog record was lost is back", "name", name)
	}
	if rep.Unknown > 0 {
		e.log.Error("salvage: damaged stretches of which nothing could be read: what they held, and whose, is unknown", "stretches", rep.Unknown)
	}
}

// restoreQueue brings back a queue whose partition survived but whose
// catalog record (or settings) the damage took, under restoreName, and
// registers it.
func (e *Engine) restoreQueue(p store.PartitionID, o *partition.Owner) (string, error) {
	meta := o.Meta()
	fifo := meta.FIFO
	e.mu.Lock()
	_, taken := e.names[meta.Name]
	name := restoreName(meta.Name, p, fifo, taken)
	e.mu.Unlock()
	if meta.Name != name {
		if err := o.UpdateMeta(func(m *record.QueueMeta) error { m.Name, m.ID = name, uint64(p); return nil }); err != nil {
			return "", err
		}
	}
	if err := e.catalogAppend(&record.Record{Type: record.Create, Partition: uint64(p), Name: name}); err != nil {
		return "", err
	}
	e.mu.Lock()
	e.queues[name], e.byPart[p], e.names[name] = o, o, p
	e.mu.Unlock()
	return name, nil
}
