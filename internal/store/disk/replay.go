package disk

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sluicemq/sluice/internal/store"
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
		switch {
		case strings.HasSuffix(n, ".tmp"):
			_ = l.fs.Remove(l.path(n))
		case strings.HasPrefix(n, "log-"):
			if v, ok := parseNum(n, "log-", ".seg"); ok {
				segs = append(segs, v)
			}
		case strings.HasPrefix(n, "snap-") && strings.HasSuffix(n, ".snap"):
			snapFiles[n] = true
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	l.lost = map[store.PartitionID]string{}
	if len(segs) == 0 {
		return l.start(1, 0, true)
	}
	newest := segs[len(segs)-1]
	man, found, err := l.newestManifest(newest)
	if err != nil {
		return err
	}
	if !found || man.floor == 0 {
		man.floor = segs[0]
	}
	l.man = man
	skip := map[store.PartitionID]bool{}
	for _, p := range man.dropped {
		skip[p] = true
	}
	var good int64
	for _, s := range segs {
		if s < man.floor {
			if fi, err := l.fs.Stat(l.path(segName(s))); err == nil {
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
	f, err := l.fs.OpenFile(l.path(segName(seg)), flags, 0o644)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if fresh {
		l.man = manifest{floor: seg}
		head := appendFrame(nil, []frec{{kind: kManifest, data: l.man.encode()}})
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
func (l *Log) newestManifest(seg uint64) (manifest, bool, error) {
	var m manifest
	found := false
	_, err := l.scanSegment(seg, true, func(off int64, flen int, recs []frec) error {
		for _, r := range recs {
			if r.kind == kManifest {
				mm, err := decodeManifest(r.data)
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
func (l *Log) scanSegment(n uint64, last bool, fn func(off int64, flen int, recs []frec) error) (int64, error) {
	name := segName(n)
	f, err := l.fs.OpenFile(l.path(name), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [frameHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return off, nil
			}
			return l.torn(name, off, last, "truncated frame header")
		}
		ln := binary.BigEndian.Uint32(hdr[:4])
		if ln == 0 && binary.BigEndian.Uint32(hdr[4:]) == 0 {
			// A prepared segment's unwritten tail. Only zeros may follow.
			if allZero(r) {
				return off, nil
			}
			return l.torn(name, off, last, "data after the zeroed tail")
		}
		if ln > MaxFrame {
			return l.torn(name, off, last, "frame length out of range")
		}
		payload := make([]byte, ln)
		if _, err := io.ReadFull(r, payload); err != nil {
			return l.torn(name, off, last, "truncated frame")
		}
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
			return l.torn(name, off, last, "checksum mismatch")
		}
		recs, err := decodeFrame(payload)
		if err != nil {
			return l.torn(name, off, last, err.Error())
		}
		if err := fn(off, frameHeader+int(ln), recs); err != nil {
			return 0, fmt.Errorf("store: %s at %d: %w", name, off, err)
		}
		off += frameHeader + int64(ln)
	}
}

func (l *Log) torn(name string, off int64, last bool, why string) (int64, error) {
	if !last {
		return 0, fmt.Errorf("%w: %s at offset %d: %s", store.ErrCorrupt, name, off, why)
	}
	l.log.Warn("store: cutting torn tail of the log", "segment", name, "offset", off, "reason", why)
	return off, nil
}

// allZero reports whether r holds nothing but zeros to its end.
func allZero(r io.Reader) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// replaySegment hands over the records of one segment during recovery
// and rebuilds what the log knows of its partitions.
func (l *Log) replaySegment(n uint64, last bool, skip map[store.PartitionID]bool, fn func(store.Entry) error) (int64, error) {
	seg := uint32(n)
	if l.segs[seg] == nil {
		l.segs[seg] = &segment{}
	}
	s := l.segs[seg]
	return l.scanSegment(n, last, func(off int64, flen int, recs []frec) error {
		for i, r := range recs {
			if r.kind == kManifest {
				continue
			}
			if skip[r.p] {
				l.dropLast[r.p] = seg
				continue
			}
			if _, lost := l.lost[r.p]; lost && r.kind != kSnapFirst && r.kind != kSnapFile {
				// After a superseded snapshot whose file is gone: its
				// records wait for the snapshot that replaced it.
				continue
			}
			h := store.Hint{A: seg, B: uint32(off), C: uint32(flen), D: uint32(i)}
			pt := l.parts[r.p]
			if pt == nil {
				pt = &part{from: seg}
				l.parts[r.p] = pt
			}
			pt.lastSeg = seg
			e := store.Entry{P: r.p, Pos: r.pos, Data: r.data, Hint: h}
			switch r.kind {
			case kKeep:
				s.written++
			case kMoved:
				s.written++
				e.Moved, e.Data = true, nil
			case kSnapFirst, kSnap:
				e.Snapshot = true
				if r.kind == kSnapFirst {
					delete(l.lost, r.p)
					e.Reset = true
					l.supersede(pt, seg)
					pt.snapBytes = 0
				}
				pt.snapBytes += int64(len(r.data))
			case kSnapFile:
				cnt, k := binary.Uvarint(r.data)
				if k <= 0 {
					return fmt.Errorf("%w: snapshot pointer", store.ErrCorrupt)
				}
				name := snapFileName(r.p, r.pos)
				data, err := l.readSnapFile(name)
				if errors.Is(err, os.ErrNotExist) {
					// Superseded: a later snapshot of the partition follows
					// (or the log is damaged: Replay says so at the end).
					l.lost[r.p] = name
					continue
				}
				if err != nil {
					return fmt.Errorf("snapshot of partition %d: %w", r.p, err)
				}
				delete(l.lost, r.p)
				if uint64(len(data)) != cnt {
					return fmt.Errorf("%w: snapshot %s holds %d records, its pointer says %d", store.ErrCorrupt, name, len(data), cnt)
				}
				l.supersede(pt, seg)
				pt.snapFile = name
				pt.snapBytes = 0
				for j, d := range data {
					pt.snapBytes += int64(len(d))
					if err := fn(store.Entry{P: r.p, Pos: r.pos + uint64(j), Data: d, Snapshot: true, Reset: j == 0}); err != nil {
						return err
					}
				}
				if cnt > 0 {
					l.last[r.p] = r.pos + cnt - 1
				}
				continue
			}
			if !e.Moved {
				l.last[r.p] = r.pos
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
	floor := l.man.floor
	var segs []uint64
	limit := map[uint64]int64{}
	for n, s := range l.segs {
		if uint64(n) >= floor {
			segs = append(segs, uint64(n))
			limit[uint64(n)] = s.size
		}
	}
	l.mu.Unlock()
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	var buffered []store.Entry // from 0: the records since the newest snapshot seen so far
	first := true
	for _, n := range segs {
		_, err := l.scanSegment(n, true, func(off int64, flen int, recs []frec) error {
			if off+int64(flen) > limit[n] {
				return errStopScan
			}
			for i, r := range recs {
				if r.p != p || r.kind == kManifest {
					continue
				}
				e := store.Entry{P: p, Pos: r.pos, Data: r.data, Hint: store.Hint{A: uint32(n), B: uint32(off), C: uint32(flen), D: uint32(i)}}
				var es []store.Entry
				switch r.kind {
				case kMoved:
					e.Moved, e.Data = true, nil
				case kSnapFirst, kSnap:
					e.Snapshot, e.Reset = true, r.kind == kSnapFirst
				case kSnapFile:
					cnt, _ := binary.Uvarint(r.data)
					data, err := l.readSnapFile(snapFileName(p, r.pos))
					if err != nil {
						return err
					}
					for j, d := range data[:min(int(cnt), len(data))] {
						es = append(es, store.Entry{P: p, Pos: r.pos + uint64(j), Data: append([]byte(nil), d...), Snapshot: true, Reset: j == 0})
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
