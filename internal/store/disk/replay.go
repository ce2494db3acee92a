package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/store/disk/snapfile"
)

// Replay reads the log once, from the floor of the newest manifest, and
// hands over every partition's records (skipping dropped partitions), then
// starts the writer (unless the log was opened ReadOnly).
//
// A frame that fails its checks is one of two things (walk tells them
// apart):
//
//   - the torn tail of the newest segment: a write a crash cut short. The
//     writer begins each write made when everything before it in its
//     segment was durable with a sync mark (format.Manifest.Synced); a bad
//     frame with no sync mark after it was never durable, nor was anything
//     after it: it is cut off, with a warning.
//   - damage: a bad frame in an older segment, or with a sync mark after
//     it, was durable once, and acknowledged messages may be in it or
//     behind it. The log refuses to open (a *store.DamageError naming the
//     segment and offset) unless it is opened to salvage or to check
//     (Options.Salvage, Options.ReadOnly): then it reads on past the
//     damage, hands it over as an Entry whose Damage says where it is and
//     what it held as far as that reads, and a salvage writes a frame of
//     the same size over it (format.LostFrame), so that every other frame
//     stays where it is and the next start reads on.
//
// Segments below the floor are read only to salvage or to check (a start
// reads none of them; a body read back from one is checked then).
func (l *Log) Replay(fn func(store.Entry) error) error {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	var segs []uint64
	snapFiles := map[string]bool{}
	for _, n := range names {
		seg, isSeg := format.ParseSegName(n)
		switch {
		case format.IsTemp(n):
			if !l.opts.ReadOnly {
				_ = l.fs.Remove(l.path(n))
			}
		case isSeg:
			segs = append(segs, seg)
		case format.IsSnapFile(n):
			snapFiles[n] = true
		}
	}
	slices.Sort(segs)
	l.lost = map[store.PartitionID]string{}
	if len(segs) == 0 {
		if l.opts.ReadOnly {
			return nil
		}
		return l.start(1, 0, true)
	}
	newest := segs[len(segs)-1]
	man, found, err := l.newestManifest(newest)
	if err != nil {
		return err
	}
	if !found || man.Floor == 0 {
		man.Floor = segs[0]
	}
	man.Synced = false
	l.man = man
	skip := map[store.PartitionID]bool{}
	for _, p := range man.Dropped {
		skip[p] = true
		l.gone[p] = true
	}
	var good int64
	for _, s := range segs {
		if s < man.Floor {
			if err := l.checkBelowFloor(s, fn); err != nil {
				return err
			}
			continue
		}
		n, err := l.replaySegment(s, s == newest, skip, fn)
		if err != nil {
			return err
		}
		l.segs[uint32(s)].size = n
		if s == newest {
			good = n
		}
	}
	if len(l.lost) > 0 {
		for p, name := range l.lost {
			return fmt.Errorf("%w: the snapshot of partition %d (%s) is missing", store.ErrCorrupt, p, name)
		}
	}
	if err := l.skipLost(fn); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return nil
	}
	if err := l.repair(); err != nil {
		return err
	}
	// Snapshot files no replay will read again go.
	keep := map[string]bool{}
	for _, pt := range l.parts {
		if pt.snapFile != "" {
			keep[pt.snapFile] = true
		}
	}
	for f := range snapFiles {
		if !keep[f] {
			_ = l.fs.Remove(l.path(f))
		}
	}
	return l.start(newest, good, false)
}

// checkBelowFloor notes the size of segment s, below the floor, and, to
// salvage or to check, reads it for damage.
func (l *Log) checkBelowFloor(s uint64, fn func(store.Entry) error) error {
	fi, err := l.fs.Stat(l.path(format.SegName(s)))
	if err != nil {
		return nil // gone meanwhile: nothing to keep in it
	}
	l.segs[uint32(s)] = &segment{size: fi.Size()}
	if !l.opts.Salvage && !l.opts.ReadOnly {
		return nil
	}
	_, err = l.walk(s, false, func(int64, int, []format.Record) error { return nil }, l.handDamage(fn))
	return err
}

// start opens segment seg for appending at off (creating it with a
// manifest when fresh) and starts the writer.
func (l *Log) start(seg uint64, off int64, fresh bool) error {
	flags := os.O_CREATE | os.O_RDWR
	if fresh {
		flags |= os.O_TRUNC
	}
	f, err := l.fs.OpenFile(l.path(format.SegName(seg)), flags, 0o644)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if fresh {
		l.man = format.Manifest{Floor: seg}
		head := format.AppendManifest(nil, l.man)
		if _, err := f.Write(head); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("store: %w", err)
		}
		off = int64(len(head))
	}
	if err := f.Truncate(off); err != nil {
		f.Close()
		return fmt.Errorf("store: %w", err)
	}
	// What is before off is durable from here on (a process killed
	// before may have left it in the page cache only), so the first
	// write may begin with a sync mark.
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("store: %w", err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("store: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fmt.Errorf("store: %w", err)
	}
	l.f, l.seg, l.off, l.durable = f, seg, off, true
	if l.tailMark == off {
		l.marked = off // the log ends with a sync mark already
	}
	l.mu.Lock()
	if l.segs[uint32(seg)] == nil {
		l.segs[uint32(seg)] = &segment{}
	}
	l.segs[uint32(seg)].size = off
	l.active = uint32(seg)
	l.running = true
	l.mu.Unlock()
	l.noteDisk(0, true)
	go l.run()
	return nil
}

// newestManifest finds the last manifest of the newest segment that
// reads well (before its torn tail; past damage, to salvage or check).
func (l *Log) newestManifest(seg uint64) (format.Manifest, bool, error) {
	var m format.Manifest
	found := false
	_, err := l.walk(seg, true, func(off int64, flen int, recs []format.Record) error {
		for _, r := range recs {
			if r.Kind == format.KindManifest {
				mm, err := format.DecodeManifest(r.Data)
				if err != nil {
					return err
				}
				m, found = mm, true
			}
		}
		return nil
	}, nil)
	return m, found, err
}

// scanSegment calls fn for each frame of segment n, in order, up to limit
// bytes (-1: all of it), and returns the offset after the last one. Any
// bad frame is an error: it is for segments that were durable (below the
// floor, or up to what was durable when a partition's replay began).
func (l *Log) scanSegment(n uint64, limit int64, fn func(off int64, flen int, recs []format.Record) error) (int64, error) {
	name := format.SegName(n)
	f, err := l.fs.OpenFile(l.path(name), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if limit >= 0 {
		r = io.NewSectionReader(f, 0, limit)
	}
	off, bad, err := format.Scan(r, fn)
	switch {
	case err != nil:
		return off, fmt.Errorf("store: %s at %d: %w", name, off, err)
	case bad != "":
		return off, fmt.Errorf("%w: %s at offset %d: %s", store.ErrCorrupt, name, off, bad)
	}
	return off, nil
}

// replaySegment hands over the records of one segment during recovery
// and rebuilds what the log knows of its partitions.
func (l *Log) replaySegment(n uint64, last bool, skip map[store.PartitionID]bool, fn func(store.Entry) error) (int64, error) {
	seg := uint32(n)
	if l.segs[seg] == nil {
		l.segs[seg] = &segment{}
	}
	s := l.segs[seg]
	return l.walk(n, last, func(off int64, flen int, recs []format.Record) error {
		if last && format.IsSyncMark(recs) {
			l.tailMark = off + int64(flen)
		}
		for i, r := range recs {
			if r.Kind == format.KindManifest || r.Kind == format.KindLost {
				continue
			}
			if skip[r.P] {
				l.dropLast[r.P] = seg
				continue
			}
			if _, lost := l.lost[r.P]; lost && r.Kind != format.KindSnapFirst && r.Kind != format.KindSnapFile {
				// After a superseded snapshot whose file is gone: its
				// records wait for the snapshot that replaced it.
				continue
			}
			h := store.Hint{A: seg, B: uint32(off), C: uint32(flen), D: uint32(i)}
			pt := l.parts[r.P]
			if pt == nil && r.Kind == format.KindMoved {
				// A copy compaction made of a body of a partition dropped
				// meanwhile, whose drop the manifest no longer names (a
				// live partition's records start before any copy of its
				// bodies). Nobody keeps it; taken for a partition, it
				// would hold the floor for good.
				continue
			}
			if pt == nil {
				pt = &part{from: seg}
				l.parts[r.P] = pt
			}
			pt.lastSeg = seg
			e := store.Entry{P: r.P, Pos: r.Pos, Data: r.Data, Hint: h}
			switch r.Kind {
			case format.KindKeep:
				s.written++
			case format.KindMoved:
				s.written++
				e.Moved, e.Data = true, nil
			case format.KindSnapFirst, format.KindSnap:
				e.Snapshot = true
				if r.Kind == format.KindSnapFirst {
					delete(l.lost, r.P)
					e.Reset = true
					l.supersede(pt, seg)
					pt.snapBytes = 0
				}
				pt.snapBytes += int64(len(r.Data))
			case format.KindSnapFile:
				cnt, ok := format.SnapFileCount(r.Data)
				if !ok {
					return fmt.Errorf("%w: snapshot pointer", store.ErrCorrupt)
				}
				name := format.SnapFileName(r.P, r.Pos)
				data, err := snapfile.Read(l.fs, l.dir, name)
				if errors.Is(err, store.ErrCorrupt) {
					data, err = snapfile.Read(l.fs, l.dir, name) // damage on the way reads well again
				}
				if errors.Is(err, os.ErrNotExist) {
					// Superseded: a later snapshot of the partition follows
					// (or the log is damaged: Replay says so at the end).
					l.lost[r.P] = name
					continue
				}
				if errors.Is(err, store.ErrCorrupt) {
					// The file is damaged: the snapshot is lost (its
					// positions with it), and the partition's records
					// before it stay as they were replayed.
					if err := l.damagedSnapFile(seg, off, flen, r, cnt, fn); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return fmt.Errorf("snapshot of partition %d: %w", r.P, err)
				}
				delete(l.lost, r.P)
				if uint64(len(data)) != cnt {
					return fmt.Errorf("%w: snapshot %s holds %d records, its pointer says %d", store.ErrCorrupt, name, len(data), cnt)
				}
				l.supersede(pt, seg)
				pt.snapFile = name
				pt.snapBytes = 0
				for j, d := range data {
					pt.snapBytes += int64(len(d))
					if err := fn(store.Entry{P: r.P, Pos: r.Pos + uint64(j), Data: d, Snapshot: true, Reset: j == 0}); err != nil {
						return err
					}
				}
				if cnt > 0 {
					l.last[r.P] = r.Pos + cnt - 1
				}
				continue
			}
			if !e.Moved {
				l.last[r.P] = r.Pos
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}, l.handDamage(fn))
}

// supersede notes that a partition's replay now starts at seg, with a new
// snapshot (its older file, if any, goes after replay).
func (l *Log) supersede(pt *part, seg uint32) {
	pt.snapFile = ""
	pt.from = seg
}

// ReplayPartition hands over the records of one partition from position
// from on (0: from its newest snapshot), reading the log from the floor.
// For an owner taking a partition over; it may run while the log is
// written, and sees what was durable when it began.
func (l *Log) ReplayPartition(p store.PartitionID, from uint64, fn func(store.Entry) error) error {
	l.mu.Lock()
	floor := l.man.Floor
	var segs []uint64
	limit := map[uint64]int64{}
	for n, s := range l.segs {
		if uint64(n) >= floor {
			segs = append(segs, uint64(n))
			limit[uint64(n)] = s.size
		}
	}
	l.mu.Unlock()
	slices.Sort(segs)
	var buffered []store.Entry // from 0: the records since the newest snapshot seen so far
	first := true
	for _, n := range segs {
		_, err := l.scanSegment(n, limit[n], func(off int64, flen int, recs []format.Record) error {
			for i, r := range recs {
				if r.P != p || r.Kind == format.KindManifest || r.Kind == format.KindLost {
					continue
				}
				e := store.Entry{P: p, Pos: r.Pos, Data: r.Data, Hint: store.Hint{A: uint32(n), B: uint32(off), C: uint32(flen), D: uint32(i)}}
				var es []store.Entry
				switch r.Kind {
				case format.KindMoved:
					e.Moved, e.Data = true, nil
				case format.KindSnapFirst, format.KindSnap:
					e.Snapshot, e.Reset = true, r.Kind == format.KindSnapFirst
				case format.KindSnapFile:
					cnt, _ := format.SnapFileCount(r.Data)
					data, err := snapfile.Read(l.fs, l.dir, format.SnapFileName(p, r.Pos))
					if err != nil {
						return err
					}
					for j, d := range data[:min(int(cnt), len(data))] {
						es = append(es, store.Entry{P: p, Pos: r.Pos + uint64(j), Data: append([]byte(nil), d...), Snapshot: true, Reset: j == 0})
					}
				}
				if es == nil {
					e.Data = append([]byte(nil), e.Data...)
					es = []store.Entry{e}
				}
				for _, e := range es {
					if from == 0 {
						if e.Reset {
							buffered = buffered[:0]
						}
						buffered = append(buffered, e)
						continue
					}
					if e.Moved || e.Pos < from {
						continue
					}
					if first && e.Pos > from {
						return fmt.Errorf("%w: partition %d holds nothing from position %d (it begins at %d)", store.ErrNotFound, p, from, e.Pos)
					}
					first = false
					if err := fn(e); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, e := range buffered {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
