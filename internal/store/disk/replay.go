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
// starts the writer. A torn or corrupt frame at the end of the newest
// segment (a crash during a write) is cut off with a log line; one
// anywhere else is an error: the store refuses to guess.
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
			_ = l.fs.Remove(l.path(n))
		case isSeg:
			segs = append(segs, seg)
		case format.IsSnapFile(n):
			snapFiles[n] = true
		}
	}
	slices.Sort(segs)
	l.lost = map[store.PartitionID]string{}
	if len(segs) == 0 {
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
	l.man = man
	skip := map[store.PartitionID]bool{}
	for _, p := range man.Dropped {
		skip[p] = true
		l.gone[p] = true
	}
	var good int64
	for _, s := range segs {
		if s < man.Floor {
			if fi, err := l.fs.Stat(l.path(format.SegName(s))); err == nil {
				l.segs[uint32(s)] = &segment{size: fi.Size()}
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
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("store: %w", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fmt.Errorf("store: %w", err)
	}
	l.f, l.seg, l.off = f, seg, off
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

// newestManifest finds the last manifest frame of a segment that reads
// well (a torn tail is ignored here; replay cuts it).
func (l *Log) newestManifest(seg uint64) (format.Manifest, bool, error) {
	var m format.Manifest
	found := false
	_, err := l.scanSegment(seg, true, func(off int64, flen int, recs []format.Record) error {
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
	})
	return m, found, err
}

// scanSegment calls fn for each frame of a segment, in order, and returns
// the offset after the last good one. last says the segment is the newest:
// a bad frame there is a torn tail (scanning stops), elsewhere an error.
func (l *Log) scanSegment(n uint64, last bool, fn func(off int64, flen int, recs []format.Record) error) (int64, error) {
	name := format.SegName(n)
	f, err := l.fs.OpenFile(l.path(name), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	off, bad, err := format.Scan(f, fn)
	switch {
	case err != nil:
		return 0, fmt.Errorf("store: %s at %d: %w", name, off, err)
	case bad != "" && !last:
		return 0, fmt.Errorf("%w: %s at offset %d: %s", store.ErrCorrupt, name, off, bad)
	case bad != "":
		l.log.Warn("store: cutting torn tail of the log", "segment", name, "offset", off, "reason", bad)
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
	return l.scanSegment(n, last, func(off int64, flen int, recs []format.Record) error {
		for i, r := range recs {
			if r.Kind == format.KindManifest {
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
				if errors.Is(err, os.ErrNotExist) {
					// Superseded: a later snapshot of the partition follows
					// (or the log is damaged: Replay says so at the end).
					l.lost[r.P] = name
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
	})
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
		_, err := l.scanSegment(n, true, func(off int64, flen int, recs []format.Record) error {
			if off+int64(flen) > limit[n] {
				return errStopScan
			}
			for i, r := range recs {
				if r.P != p || r.Kind == format.KindManifest {
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
		if err != nil && !errors.Is(err, errStopScan) {
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

var errStopScan = errors.New("store: end of what was durable")
