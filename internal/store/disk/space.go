package disk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
)

// Keep counts a kept record again (after a restart). It fails when the
// record's segment is gone or too short to hold its frame.
func (l *Log) Keep(p store.PartitionID, pos uint64, h store.Hint) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.segs[h.A]
	if s == nil || h.A == 0 || int64(h.B)+int64(h.C) > s.size {
		return fmt.Errorf("%w: partition %d position %d: segment %d does not hold it", store.ErrNotFound, p, pos, h.A)
	}
	if l.inDamageLocked(h) {
		return fmt.Errorf("%w: partition %d position %d: its frame in segment %d is damaged", store.ErrNotFound, p, pos, h.A)
	}
	l.keepLocked(s, h)
	return nil
}

// Recovered lets the log free what nobody kept: until now it unlinked and
// compacted nothing.
func (l *Log) Recovered() {
	l.mu.Lock()
	l.recovering = false
	l.mu.Unlock()
	l.sweep()
}

// Release says a kept record is no longer needed; a segment below the
// floor left with none is unlinked at once.
func (l *Log) Release(p store.PartitionID, pos uint64, h store.Hint) {
	l.releaseHint(p, pos, h)
}

func (l *Log) releaseHint(p store.PartitionID, pos uint64, h store.Hint) {
	l.mu.Lock()
	s := l.segs[h.A]
	if s == nil || h.A == 0 || !l.unkeepLocked(s, h) {
		// More releases than keeps: some live record's count would go.
		// The segment (if it is still there) is never freed now.
		l.stats.BadReleases++
		if s != nil {
			s.pinned = true
		}
		l.mu.Unlock()
		l.log.Error("store: release of a record that is not kept; nothing is freed for it", "partition", p, "position", pos, "segment", h.A)
		return
	}
	dead := s.kept == 0 && uint64(h.A) < l.man.Floor && h.A != l.active
	l.mu.Unlock()
	if dead {
		l.unlink(h.A)
	}
}

// unlink removes a segment nothing needs: below the floor, not active,
// nothing kept in it, no bad release seen in it, and recovery over.
func (l *Log) unlink(seg uint32) {
	l.mu.Lock()
	s := l.segs[seg]
	if s == nil || !l.freeableLocked(seg, s) {
		l.mu.Unlock()
		return
	}
	delete(l.segs, seg)
	l.stats.SegmentsRemoved++
	l.mu.Unlock()
	l.reader.Forget(seg)
	if err := l.fs.Remove(l.path(format.SegName(uint64(seg)))); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.log.Warn("store: unlinking a dead segment failed", "segment", format.SegName(uint64(seg)), "err", err)
	}
}

// freeableLocked reports whether segment n may be unlinked.
func (l *Log) freeableLocked(n uint32, s *segment) bool {
	return !l.recovering && !l.opts.ReadOnly && s.kept == 0 && !s.pinned && uint64(n) < l.man.Floor && n != l.active
}

// sweep unlinks the segments below the floor that hold no kept record.
func (l *Log) sweep() {
	l.mu.Lock()
	var dead []uint32
	for n, s := range l.segs {
		if l.freeableLocked(n, s) {
			dead = append(dead, n)
		}
	}
	l.mu.Unlock()
	for _, n := range dead {
		l.unlink(n)
	}
}

// floorLocked is the first segment replay needs: where the partition that
// starts earliest starts.
func (l *Log) floorLocked() uint64 {
	f := uint64(l.active)
	for _, pt := range l.parts {
		f = min(f, uint64(pt.from))
	}
	return f
}

// advanceFloor (in the writer, after a snapshot or a drop) writes a
// manifest when the floor moved or a dropped partition no longer has
// records at or after it, fsyncs it, and only then lets go of what the
// old floor kept.
func (l *Log) advanceFloor() {
	l.mu.Lock()
	floor := l.floorLocked()
	var dropped []store.PartitionID
	for _, p := range l.man.Dropped {
		if uint64(l.dropLast[p]) >= floor {
			dropped = append(dropped, p)
		} else {
			delete(l.dropLast, p)
		}
	}
	m := format.Manifest{Floor: floor, Dropped: dropped}
	changed := floor != l.man.Floor || len(dropped) != len(l.man.Dropped)
	l.mu.Unlock()
	if !changed {
		return
	}
	buf := format.AppendManifest(nil, m)
	full := l.off > 0 && l.off+int64(len(buf)) > l.opts.SegmentBytes
	if full {
		if err := l.roll(); err != nil {
			l.log.Warn("store: moving the replay floor failed; will retry", "err", l.fail(err))
			return
		}
	}
	if err := l.writeAt(buf, true); err != nil {
		l.log.Warn("store: moving the replay floor failed; will retry", "err", err)
		return
	}
	l.mu.Lock()
	l.man = m
	l.mu.Unlock()
	l.sweep()
	l.noteDisk(0, true)
}

// Wanted lists the partitions whose snapshots pin the floor, once the log
// after the floor outgrows every partition's newest snapshot (and
// SnapshotBytes), or, under the disk alarm, once renewing them would free
// more than they write. It also unlinks what nothing needs any more.
func (l *Log) Wanted() []store.PartitionID {
	l.sweep()
	alarm := l.inAlarm()
	l.mu.Lock()
	defer l.mu.Unlock()
	floor := uint32(l.man.Floor)
	var since, snaps int64
	for n, s := range l.segs {
		if n >= floor {
			since += s.size
		}
	}
	for _, pt := range l.parts {
		snaps += pt.snapBytes
	}
	want := since > max(l.opts.SnapshotBytes, snaps)
	if !want && alarm {
		next := l.active
		var cost int64
		for _, pt := range l.parts {
			if pt.from > floor {
				next = min(next, pt.from)
			} else {
				cost += pt.snapBytes + 4<<10
			}
		}
		var free int64
		for n, s := range l.segs {
			if n >= floor && n < next && s.kept <= 0 {
				free += s.size
			}
		}
		want = free > cost
	}
	if !want {
		return nil
	}
	var out []store.PartitionID
	for _, p := range slices.Sorted(maps.Keys(l.parts)) { // in a fixed order
		if l.parts[p].from <= floor {
			out = append(out, p)
		}
	}
	return out
}

// Compact copies the kept records out of the sparsest segments below the
// floor (less than half of what was kept in them still is), at most
// budget bytes, and returns the bytes copied. A segment left with nothing
// kept is unlinked. Not under the disk alarm: copies need space first.
func (l *Log) Compact(budget int64, k store.Keeper) int64 {
	if l.inAlarm() {
		return 0
	}
	type cand struct {
		seg   uint32
		ratio float64
	}
	var cands []cand
	var uncounted []uint32
	l.mu.Lock()
	if l.recovering || l.opts.ReadOnly {
		l.mu.Unlock()
		return 0
	}
	floor := uint32(l.man.Floor)
	for n, s := range l.segs {
		switch {
		case n >= floor || n == l.active || s.pinned:
		case s.written == 0 && s.kept > 0:
			uncounted = append(uncounted, n)
		case s.written > 0 && float64(s.kept)/float64(s.written) < 0.5:
			cands = append(cands, cand{n, float64(s.kept) / float64(s.written)})
		}
	}
	l.mu.Unlock()
	// A segment below the floor that recovery found was not replayed: how
	// many kept records were written in it is unknown until it is read
	// once. A round reads at most budget bytes of them.
	slices.Sort(uncounted)
	var scanned int64
	for _, n := range uncounted {
		if scanned >= budget {
			break
		}
		size, r, ok := l.countWritten(n)
		scanned += size
		if ok && r < 0.5 {
			cands = append(cands, cand{n, r})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(a.ratio, b.ratio), cmp.Compare(a.seg, b.seg)) })
	var copied int64
	for _, c := range cands {
		if copied >= budget {
			break
		}
		copied += l.compactSegment(c.seg, budget-copied, k)
	}
	return copied
}

// countWritten reads segment n to count the kept records ever written in
// it, and returns its size and the share of them still kept.
func (l *Log) countWritten(n uint32) (size int64, ratio float64, ok bool) {
	var written int64
	size, err := l.scanSegment(uint64(n), -1, func(_ int64, _ int, recs []format.Record) error {
		for _, r := range recs {
			if r.Kind == format.KindKeep || r.Kind == format.KindMoved {
				written++
			}
		}
		return nil
	})
	if err != nil {
		return size, 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.segs[n]
	if s == nil || written == 0 {
		return size, 0, false
	}
	s.written = max(written, s.kept)
	return size, float64(s.kept) / float64(s.written), true
}

func (l *Log) compactSegment(seg uint32, budget int64, k store.Keeper) int64 {
	var moves []format.Record
	var olds []store.Hint
	var size int64
	_, err := l.scanSegment(uint64(seg), -1, func(off int64, flen int, recs []format.Record) error {
		for i, r := range recs {
			if r.Kind != format.KindKeep && r.Kind != format.KindMoved {
				continue
			}
			h := store.Hint{A: seg, B: uint32(off), C: uint32(flen), D: uint32(i)}
			if !k.Live(r.P, r.Pos, h) {
				continue
			}
			moves = append(moves, format.Record{Kind: format.KindMoved, P: r.P, Pos: r.Pos, Data: append([]byte(nil), r.Data...)})
			olds = append(olds, h)
			size += int64(len(r.Data))
			if size >= budget {
				return errBudget
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errBudget) {
		l.mu.Lock()
		_, there := l.segs[seg]
		l.mu.Unlock()
		if !there {
			return 0 // emptied and unlinked since it was chosen
		}
		l.log.Warn("store: compaction could not read a segment", "segment", format.SegName(uint64(seg)), "err", err)
		return 0
	}
	// The copies go in frames of at most moveFrameBytes: every read of a
	// moved body reads and verifies its whole frame, so a 16 MiB frame
	// would cost 16 MiB a message received (measured: a backlog's receives
	// spent 80% of the CPU re-reading such frames). The frames are all
	// submitted at once, to share group commits.
	type chunk struct {
		f     store.Future
		moves []format.Record
		olds  []store.Hint
	}
	var chunks []chunk
	for len(moves) > 0 {
		n, size := 0, 0
		for n < len(moves) && (n == 0 || size+moves[n].Bound() < moveFrameBytes) {
			size += moves[n].Bound()
			n++
		}
		chunks = append(chunks, chunk{f: l.submit(&op{kind: opMove, moves: moves[:n]}, size), moves: moves[:n], olds: olds[:n]})
		moves, olds = moves[n:], olds[n:]
	}
	var copied int64
	for _, c := range chunks {
		if err := c.f.Wait(context.Background()); err != nil {
			continue // the records stay where they were
		}
		for i, nh := range c.f.Hints() {
			r := c.moves[i]
			if k.Moved(r.P, r.Pos, c.olds[i], nh) {
				l.releaseHint(r.P, r.Pos, c.olds[i])
			} else {
				l.releaseHint(r.P, r.Pos, nh)
			}
			copied += int64(len(r.Data))
		}
		l.mu.Lock()
		l.stats.Relocated += int64(len(c.moves))
		l.mu.Unlock()
	}
	return copied
}

// errBudget stops a compaction's scan once it has its round's bytes.
var errBudget = errors.New("store: the round's budget is spent")

// moveFrameBytes bounds the frames compaction writes.
const moveFrameBytes = 256 << 10

// ---- free space and the disk alarm ----

// Disk reports the free space, the reserve in effect, and whether free
// space is below it (package freespace watches it).
func (l *Log) Disk() store.Disk { return l.disk.Disk() }

// noteDisk is called after each write (n bytes) and snapshot: it tells the
// watch of the write and of the reserve in effect, at least twice the
// newest snapshots and a segment.
func (l *Log) noteDisk(n int64, force bool) {
	l.mu.Lock()
	var snaps int64
	for _, pt := range l.parts {
		snaps += pt.snapBytes
	}
	l.mu.Unlock()
	l.disk.Note(n, max(l.opts.Reserve, 2*snaps+l.opts.SegmentBytes), force)
}

func (l *Log) inAlarm() bool { return l.disk.Alarm() }
