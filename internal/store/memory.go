package store

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"sync"
)

// Memory is a store in memory: a real log per partition, with positions,
// fencing, snapshots and kept records, so that an owner's recovery runs
// against it as against the disk log. Nothing survives the process;
// Reopen hands the same logs to a new owner (a restart in tests).
type Memory struct {
	mu     sync.Mutex
	parts  map[PartitionID]*memPart
	closed bool
	fail   error // every append fails with it (tests)
	stats  Stats
	// wantRecords is how many records after a partition's snapshot make
	// Wanted ask for a new one (once they also outweigh the snapshot in
	// bytes: a queue with a large backlog is not rewritten whole every
	// few thousand records).
	wantRecords int
}

type memPart struct {
	last   uint64
	recs   []memRec // the newest snapshot (if any) and every record after it
	snapAt uint64   // position of the newest snapshot's first record, 0: none
	snapN  int      // how many records the newest snapshot has
	// snapBytes and afterBytes weigh the newest snapshot and the records
	// after it.
	snapBytes, afterBytes int
	// kept are the bodies kept since open; held the ones kept before a
	// Reopen, readable until Recovered but not kept until Keep names them.
	kept, held map[uint64][]byte
}

type memRec struct {
	pos      uint64
	data     []byte
	snapshot bool
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory {
	return &Memory{parts: map[PartitionID]*memPart{}, wantRecords: 4096}
}

// Reopen returns a store holding what m holds, for a new owner: m is
// closed.
func (m *Memory) Reopen() *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	n := NewMemory()
	n.wantRecords = m.wantRecords
	for id, p := range m.parts {
		c := &memPart{last: p.last, snapAt: p.snapAt, snapN: p.snapN, snapBytes: p.snapBytes, afterBytes: p.afterBytes, recs: append([]memRec(nil), p.recs...), kept: map[uint64][]byte{},
			held: map[uint64][]byte{}}
		for _, src := range []map[uint64][]byte{p.held, p.kept} {
			for pos, d := range src {
				c.held[pos] = d
			}
		}
		n.parts[id] = c
	}
	return n
}

// FailAppends makes every append fail with err until called with nil.
func (m *Memory) FailAppends(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

func (m *Memory) part(p PartitionID) *memPart {
	mp := m.parts[p]
	if mp == nil {
		mp = &memPart{kept: map[uint64][]byte{}}
		m.parts[p] = mp
	}
	return mp
}

func (m *Memory) Replay(fn func(Entry) error) error {
	m.mu.Lock()
	ids := make([]PartitionID, 0, len(m.parts))
	for id := range m.parts {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if err := m.ReplayPartition(id, 0, fn); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) ReplayPartition(p PartitionID, from uint64, fn func(Entry) error) error {
	m.mu.Lock()
	mp := m.parts[p]
	var recs []memRec
	var snapAt uint64
	if mp != nil {
		recs, snapAt = append([]memRec(nil), mp.recs...), mp.snapAt
	}
	m.mu.Unlock()
	if from > 0 && len(recs) > 0 && from < recs[0].pos {
		return fmt.Errorf("%w: partition %d holds no records before position %d (a snapshot replaced them)", ErrNotFound, p, recs[0].pos)
	}
	for _, r := range recs {
		if from > 0 && r.pos < from {
			continue
		}
		e := Entry{P: p, Pos: r.pos, Data: r.data, Snapshot: r.snapshot, Reset: r.snapshot && r.pos == snapAt && from == 0}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) add(p PartitionID, prev uint64, recs []Rec, snapshot bool) Future {
	size := 0
	for _, r := range recs {
		size += len(r.Data)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return Failed(ErrClosed)
	}
	var last uint64 // 0 for a partition never written or dropped
	if mp := m.parts[p]; mp != nil {
		last = mp.last
	}
	if m.fail != nil {
		m.stats.FailedWrites++
		return Failed(&AppendError{Err: m.fail, P: p, Last: last})
	}
	if prev != last {
		// Creates nothing: a late write to a dropped partition leaves it
		// dropped.
		return Failed(&AppendError{Err: ErrFenced, P: p, Last: last})
	}
	mp := m.part(p)
	if snapshot {
		mp.recs = mp.recs[:0:0]
		mp.snapAt, mp.snapN = prev+1, len(recs)
		mp.snapBytes, mp.afterBytes = size, 0
		m.stats.Snapshots++
	} else {
		mp.afterBytes += size
	}
	for i, r := range recs {
		pos := prev + 1 + uint64(i)
		d := make([]byte, len(r.Data))
		copy(d, r.Data)
		mp.recs = append(mp.recs, memRec{pos: pos, data: d, snapshot: snapshot})
		if r.Keep {
			mp.kept[pos] = d
		}
	}
	mp.last = prev + uint64(len(recs))
	m.stats.Batches++
	m.stats.BytesWritten += int64(size)
	return newMemDone(len(recs), mp.last)
}

// memDone is a memory store's append, durable at once. Its zero hints
// (the memory store reads by position) are one allocation with it for an
// append of one record, as most are.
type memDone struct {
	last  uint64
	hints []Hint
	one   [1]Hint
}

func newMemDone(n int, last uint64) *memDone {
	d := &memDone{last: last}
	if n == 1 {
		d.hints = d.one[:]
	} else {
		d.hints = make([]Hint, n)
	}
	return d
}

func (d *memDone) Wait(context.Context) error { return nil }
func (d *memDone) Done() (bool, error)        { return true, nil }
func (d *memDone) Hints() []Hint              { return d.hints }
func (d *memDone) Last() uint64               { return d.last }

func (m *Memory) Append(p PartitionID, prev uint64, recs []Rec) Future {
	return m.add(p, prev, recs, false)
}

func (m *Memory) Snapshot(p PartitionID, prev uint64, recs iter.Seq[Rec]) Future {
	return m.add(p, prev, slices.Collect(recs), true)
}

// Leave does nothing: a memory store's partitions have no other writer.
func (m *Memory) Leave(PartitionID) {}

func (m *Memory) Drop(p PartitionID, prev uint64) Future {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Failed(ErrClosed)
	}
	if mp := m.parts[p]; mp != nil && mp.last != prev {
		return Failed(&AppendError{Err: ErrFenced, P: p, Last: mp.last})
	}
	delete(m.parts, p)
	return done{}
}

// Partitions lists the partitions that hold records and are not dropped.
func (m *Memory) Partitions() ([]PartitionID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]PartitionID, 0, len(m.parts))
	for p := range m.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

func (m *Memory) Read(p PartitionID, pos uint64, _ Hint) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.parts[p]
	if mp == nil {
		return nil, fmt.Errorf("%w: partition %d", ErrNotFound, p)
	}
	if d, ok := mp.body(pos); ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: partition %d position %d", ErrNotFound, p, pos)
}

// body finds the record at pos: kept, held, or in the log.
func (mp *memPart) body(pos uint64) ([]byte, bool) {
	if d, ok := mp.kept[pos]; ok {
		return d, true
	}
	if d, ok := mp.held[pos]; ok {
		return d, true
	}
	i := sort.Search(len(mp.recs), func(i int) bool { return mp.recs[i].pos >= pos })
	if i < len(mp.recs) && mp.recs[i].pos == pos {
		return mp.recs[i].data, true
	}
	return nil, false
}

func (m *Memory) Keep(p PartitionID, pos uint64, _ Hint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.parts[p]
	if mp == nil {
		return fmt.Errorf("%w: partition %d", ErrNotFound, p)
	}
	if _, ok := mp.kept[pos]; ok {
		return nil
	}
	d, ok := mp.body(pos)
	if !ok {
		return fmt.Errorf("%w: partition %d position %d", ErrNotFound, p, pos)
	}
	mp.kept[pos] = d
	delete(mp.held, pos)
	return nil
}

// Recovered drops the bodies held from before Reopen that nobody kept.
func (m *Memory) Recovered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mp := range m.parts {
		mp.held = nil
	}
}

func (m *Memory) Release(p PartitionID, pos uint64, _ Hint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mp := m.parts[p]; mp != nil {
		if _, ok := mp.kept[pos]; ok {
			delete(mp.kept, pos)
			return
		}
	}
	m.stats.BadReleases++
}

// Wanted lists the partitions with more than a few thousand records
// since their snapshot, and more bytes of them than their snapshot has: a
// memory store holds what it replays, at most about twice what is live.
// (A snapshot record holds many messages, so counting records would
// rewrite a large backlog every few thousand appends.)
func (m *Memory) Wanted() []PartitionID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PartitionID
	for id, mp := range m.parts {
		if after := len(mp.recs) - mp.snapN; after > m.wantRecords && mp.afterBytes > mp.snapBytes {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *Memory) Disk() Disk { return Disk{Free: math.MaxInt64} }

func (m *Memory) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.PartitionsAlive = len(m.parts)
	for _, mp := range m.parts {
		s.KeptRecords += int64(len(mp.kept))
		for _, r := range mp.recs {
			s.LogBytes += int64(len(r.data))
			if r.snapshot {
				s.SnapshotBytes += int64(len(r.data))
			}
		}
	}
	return s
}

// Close ends the store; Reopen may still hand its logs to a new owner.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}
