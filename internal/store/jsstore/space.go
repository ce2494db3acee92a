package jsstore

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/store"
)

// seqHeap is a min-heap of message sequences.
type seqHeap []uint64

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *seqHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// keepLocked counts a kept record (once).
func (pt *part) keepLocked(l loc, r keptRec) {
	if _, dup := pt.kept[l]; dup {
		return
	}
	pt.kept[l] = r
	if pt.keptSeqs[l.seq]++; pt.keptSeqs[l.seq] == 1 {
		heap.Push(&pt.keptHeap, l.seq)
	}
}

// unkeepLocked forgets a kept record; false if it is not kept at pos.
func (pt *part) unkeepLocked(l loc, pos uint64) bool {
	r, ok := pt.kept[l]
	if !ok || r.pos != pos {
		return false
	}
	delete(pt.kept, l)
	if pt.keptSeqs[l.seq]--; pt.keptSeqs[l.seq] <= 0 {
		delete(pt.keptSeqs, l.seq)
		delete(pt.keptSize, l.seq)
		if len(pt.keptHeap) > 2*len(pt.keptSeqs)+64 {
			// Mostly released messages: rebuild, so that the heap stays
			// the size of what is kept.
			pt.keptHeap = slices.Collect(maps.Keys(pt.keptSeqs))
			heap.Init(&pt.keptHeap)
		}
	}
	return true
}

// minKeptLocked is the oldest message holding a kept record.
func (pt *part) minKeptLocked() (uint64, bool) {
	for pt.keptHeap.Len() > 0 {
		if seq := pt.keptHeap[0]; pt.keptSeqs[seq] > 0 {
			return seq, true
		}
		heap.Pop(&pt.keptHeap)
	}
	return 0, false
}

func (pt *part) pinLocked(seq uint64) {
	if seq > 0 && (pt.pin == 0 || seq < pt.pin) {
		pt.pin = seq
	}
}

// floorLocked is the first message p must hold: its newest snapshot's
// first, or an older one holding a kept record, or a pinned one. Without
// a snapshot every message is needed (0).
func (pt *part) floorLocked() uint64 {
	if pt.snapStart == 0 {
		return 0
	}
	f := pt.snapStart
	if m, ok := pt.minKeptLocked(); ok {
		f = min(f, m)
	}
	if pt.pin > 0 {
		f = min(f, pt.pin)
	}
	return f
}

// Keep counts a kept record again (after a restart or a takeover). It
// reports store.ErrNotFound when p is dropped or not replayed here, or
// when its stream no longer holds (or never held) the record's message.
func (s *Store) Keep(p store.PartitionID, pos uint64, h store.Hint) error {
	seq := seqOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.parts[p]
	switch {
	case pt == nil || !pt.known:
		return fmt.Errorf("%w: partition %d is not replayed here", store.ErrNotFound, p)
	case pt.dropped:
		return fmt.Errorf("%w: partition %d is dropped", store.ErrNotFound, p)
	case seq == 0 || h.D == 0 || seq < max(pt.first, pt.purgingTo) || seq > pt.tail:
		return fmt.Errorf("%w: partition %d position %d: its stream holds messages %d to %d, not %d", store.ErrNotFound, p, pos, pt.first, pt.tail, seq)
	}
	pt.keepLocked(loc{seq, h.C}, keptRec{pos: pos, chunks: h.D})
	return nil
}

// Recovered lets the store purge what nobody kept.
func (s *Store) Recovered() {
	s.mu.Lock()
	s.recovering = false
	for _, pt := range s.parts {
		pt.purgeDue = true
	}
	s.mu.Unlock()
	s.kickJanitor()
}

// Release says a kept record is no longer needed. A release of a record
// not kept (or not at that position, or a second one) is an owner's bug:
// it is counted, logged, and the record's message pins the partition's
// purge floor for the rest of the process.
func (s *Store) Release(p store.PartitionID, pos uint64, h store.Hint) {
	s.release(p, pos, h)
}

func (s *Store) release(p store.PartitionID, pos uint64, h store.Hint) {
	seq := seqOf(h)
	s.mu.Lock()
	pt := s.parts[p]
	if pt == nil || !pt.unkeepLocked(loc{seq, h.C}, pos) {
		s.stats.BadReleases++
		if pt != nil {
			pt.pinLocked(seq)
		}
		s.mu.Unlock()
		s.log.Error("jsstore: release of a record that is not kept; nothing is freed for it", "partition", p, "position", pos, "sequence", seq)
		return
	}
	if pt.keptSeqs[seq] == 0 {
		pt.purgeDue = true
	}
	s.mu.Unlock()
}

// purgePart purges p's stream below its floor, if it moved. With wait, it
// waits for a purge under way to end first; without, it leaves the purge
// due.
func (s *Store) purgePart(pt *part, wait bool) {
	s.mu.Lock()
	for wait && pt.purging {
		s.idle.Wait()
	}
	if pt.purging {
		pt.purgeDue = true
		s.mu.Unlock()
		return
	}
	pt.purgeDue = false
	floor := pt.floorLocked()
	if s.recovering || pt.lost || pt.dropped || !pt.known || pt.replaying || floor <= pt.first {
		s.mu.Unlock()
		return
	}
	// A Keep meanwhile of a record below the floor finds it gone; a
	// takeover waits for the purge.
	pt.purging, pt.purgingTo = true, floor
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AckTimeout)
	defer cancel()
	n, err := s.purge(ctx, pt.stream, floor)
	var st streamState
	ok := false
	if err == nil {
		st, ok, _ = s.info(ctx, pt.stream)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pt.purging, pt.purgingTo = false, 0
	pt.purgedAt = time.Now()
	s.idle.Broadcast()
	if err != nil {
		pt.purgeDue = true
		s.log.Warn("jsstore: purge failed; will retry", "partition", pt.id, "below", floor, "err", err)
		return
	}
	pt.first = max(pt.first, floor)
	s.stats.SegmentsRemoved += int64(n)
	if ok {
		pt.diskBytes, pt.statTail = int64(st.Bytes), st.LastSeq
	}
}

func (s *Store) kickJanitor() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// janitor purges what releases freed, at most once a PurgeInterval a
// partition, and keeps Disk's figures fresh.
func (s *Store) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.PurgeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		s.mu.Lock()
		refresh := time.Since(s.diskAt) >= s.diskEvery()
		var due []*part
		for _, p := range slices.Sorted(maps.Keys(s.parts)) {
			pt := s.parts[p]
			if pt.purgeDue && !s.recovering && time.Since(pt.purgedAt) >= s.cfg.PurgeInterval {
				due = append(due, pt)
			}
		}
		s.mu.Unlock()
		if refresh {
			s.refreshDisk()
		}
		for _, pt := range due {
			if s.ctx.Err() != nil {
				return
			}
			s.purgePart(pt, false)
		}
	}
}

// diskEvery is how old Disk's reading may be: 2 s, or less with a short
// PurgeInterval.
func (s *Store) diskEvery() time.Duration { return min(2*time.Second, 4*s.cfg.PurgeInterval) }

// refreshDisk reads the account's JetStream storage use and limit.
func (s *Store) refreshDisk() {
	var ai accountInfo
	err := s.request(s.ctx, "INFO", nil, &ai)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diskAt = time.Now()
	if err != nil {
		return
	}
	reserve := s.cfg.Reserve
	limit, used := ai.Limits.MaxStore, ai.Store
	if t, ok := ai.Tiers[fmt.Sprint("R", s.cfg.Replicas)]; limit <= 0 && ok && t.Limits.MaxStore > 0 {
		limit, used = t.Limits.MaxStore, t.Store
	}
	if limit <= 0 {
		limit = s.cfg.StoreLimit
	}
	if limit > 0 {
		if reserve == 0 {
			reserve = min(256<<20, limit/20)
		}
		free := max(0, limit-used)
		s.disk = store.Disk{Free: free, Reserve: reserve, Alarm: free < reserve}
		return
	}
	if reserve == 0 {
		reserve = 256 << 20
	}
	s.disk = store.Disk{Free: 1<<63 - 1, Reserve: reserve}
}

// Disk reports the JetStream account's free storage (its limit, or
// Config.StoreLimit, less its use, both as of the last reading, at most a
// couple of seconds old) and the alarm. Without either limit, Free is
// unknown (the largest int64) and the alarm never rises.
func (s *Store) Disk() store.Disk {
	s.mu.Lock()
	d, stale := s.disk, time.Since(s.diskAt) >= s.diskEvery()
	s.mu.Unlock()
	if stale {
		s.kickJanitor()
	}
	return d
}

// Wanted lists the partitions this store writes whose log after the
// newest snapshot outweighs both SnapshotBytes and the snapshot: replay
// reads all of it. A message weighs its bytes plus
// SnapshotBytes/SnapshotMessages, so that many small messages (deletes,
// receives) count as what they cost a replay. Against the snapshot, so
// that a large backlog is not written out again every SnapshotMessages:
// each snapshot is paid for by at least as much log.
func (s *Store) Wanted() []store.PartitionID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.PartitionID
	perMsg := s.cfg.SnapshotBytes / int64(max(1, s.cfg.SnapshotMessages))
	for p, pt := range s.parts {
		if !pt.known || !pt.exists || pt.lost || pt.dropped {
			continue
		}
		since, msgs := pt.logBytes-pt.snapStored, pt.logMsgs-pt.snapMsgs
		if since+msgs*perMsg > max(s.cfg.SnapshotBytes, pt.snapStored) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// compactMin is how many messages must lie below a partition's newest
// snapshot before compaction looks at it (the look is under the lock the
// writer needs): one for every 16 KiB of SnapshotBytes, 256 at the
// default, at least 16. A store snapshotted more often has fewer messages
// below each snapshot (a partition snapshotted every 128 KiB of large
// bodies may never have 256), and a smaller range to look through.
func (s *Store) compactMin() uint64 {
	return uint64(min(max(s.cfg.SnapshotBytes/(16<<10), 16), 256))
}

// Compact copies kept records out of the oldest messages below each
// partition's newest snapshot (they hold its purge floor down), at most
// budget bytes: the copies are appended (fenced, taking no position) as
// moved records, the keeper learns their new hints (Keeper.Moved), the
// originals are released and the floor passes them. It returns the bytes
// copied. Not under the disk alarm (the copies need space first), nor
// before Recovered; only where the messages below the snapshot are mostly
// dead.
func (s *Store) Compact(budget int64, k store.Keeper) int64 {
	if s.Disk().Alarm {
		return 0
	}
	type cand struct {
		l loc
		r keptRec
	}
	s.mu.Lock()
	if s.recovering || s.closed {
		s.mu.Unlock()
		return 0
	}
	work := map[store.PartitionID][]cand{}
	for p, pt := range s.parts {
		if !pt.known || pt.lost || pt.dropped || pt.snapStart == 0 {
			continue
		}
		// Only a range that is mostly dead is worth copying out of (as the
		// disk log compacts segments under half live): a backlog below
		// the snapshot, live from end to end, is left where it is, and
		// its purge floor moves as it drains. Decided from the messages
		// holding kept records before looking at the records: this runs
		// under the lock the writer needs, every CompactInterval, and a
		// backlog is millions of records.
		below := pt.snapStart - max(pt.first, 1)
		if below < s.compactMin() || !mostlyDead(pt, below) {
			continue
		}
		var cs []cand
		for l, r := range pt.kept {
			if l.seq < pt.snapStart {
				cs = append(cs, cand{l, r})
			}
		}
		work[p] = cs
	}
	s.mu.Unlock()
	var copied int64
	for _, p := range slices.Sorted(maps.Keys(work)) {
		if copied >= budget {
			break
		}
		cs := work[p]
		slices.SortFunc(cs, func(a, b cand) int {
			return cmp.Or(cmp.Compare(a.l.seq, b.l.seq), cmp.Compare(a.l.idx, b.l.idx))
		})
		var moves []moved
		for i, c := range cs {
			if copied >= budget && (i == 0 || c.l.seq != cs[i-1].l.seq) {
				break // whole messages only: a message half moved still holds the floor
			}
			h := hintOf(c.l.seq, c.l.idx, c.r.chunks)
			if !k.Live(p, c.r.pos, h) {
				continue
			}
			data, err := s.Read(p, c.r.pos, h)
			if err != nil {
				s.log.Warn("jsstore: compaction could not read a kept record", "partition", p, "position", c.r.pos, "err", err)
				continue
			}
			moves = append(moves, moved{pos: c.r.pos, old: h, data: data})
			copied += int64(len(data))
		}
		s.move(p, moves, k)
	}
	return copied
}

// mostlyDead reports whether at most half of the bytes of the below
// messages under pt's newest snapshot are in messages that hold kept
// records (below counts those messages). By bytes, not messages: a send's message holds many bodies,
// a receive's or a delete's a few marks, and a range of large live
// messages among many small dead ones is mostly live. A live message
// whose size is not known (kept again after a replay) weighs the range's
// mean; without the stream's byte figures, messages are counted.
func mostlyDead(pt *part, below uint64) bool {
	var live, unknown uint64
	var liveBytes int64
	for seq := range pt.keptSeqs {
		if seq < pt.snapStart {
			live++
			if size, ok := pt.keptSize[seq]; ok {
				liveBytes += size
			} else {
				unknown++
			}
		}
	}
	belowBytes := pt.diskBytes - pt.logBytes
	if belowBytes <= 0 {
		return live*2 <= below
	}
	liveBytes += int64(unknown) * (belowBytes / int64(below))
	return liveBytes*2 <= belowBytes
}

type moved struct {
	pos  uint64
	old  store.Hint
	data []byte
}

// move appends the copies (in operations of at most half a batch), tells
// the owner, releases what the owner no longer refers to, and purges.
func (s *Store) move(p store.PartitionID, moves []moved, k store.Keeper) {
	type sub struct {
		f     store.Future
		moves []moved
	}
	var subs []sub
	for len(moves) > 0 {
		enc := newEncoder(p, s.limit)
		n := 0
		var poss []uint64
		for n < len(moves) && (n == 0 || enc.count() < max(1, s.cfg.MaxBatch/2)) {
			enc.add(kindMoved, moves[n].pos, moves[n].data)
			poss = append(poss, moves[n].pos)
			n++
		}
		if enc.count() > s.cfg.MaxBatch {
			break // one record too large to move: it stays
		}
		op := &op{kind: opMove, subj: s.partSubj(p) + subjMoved, frames: enc.finish(), locs: enc.locs, moves: poss, bytes: enc.bytes}
		subs = append(subs, sub{s.submit(p, op), moves[:n]})
		moves = moves[n:]
	}
	relocated := 0
	for _, sb := range subs {
		if err := sb.f.Wait(context.Background()); err != nil {
			continue // the records stay where they were
		}
		for i, nh := range sb.f.Hints() {
			m := sb.moves[i]
			if k.Moved(p, m.pos, m.old, nh) {
				s.release(p, m.pos, m.old)
			} else {
				s.release(p, m.pos, nh)
			}
			relocated++
		}
	}
	s.mu.Lock()
	s.stats.Relocated += int64(relocated)
	pt := s.parts[p]
	s.mu.Unlock()
	if pt != nil && relocated > 0 {
		s.purgePart(pt, true)
	}
}
