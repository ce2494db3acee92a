package disk

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/store/disk/snapfile"
)

// frameFunc is called for each intact frame of a segment, in order.
type frameFunc func(off int64, flen int, recs []format.Record) error

// damaged is a damaged stretch found by a replay that salvages or checks:
// what to report (d) and, to salvage, the stretch of a segment to write a
// lost-stretch frame over (for a damaged snapshot file: its pointer).
type damaged struct {
	d        store.Damage
	seg      uint32
	off, end int64
	// last is the last position of partition p it is known to have
	// taken, when more is known than its records say (a snapshot file's
	// pointer counts its records).
	p    store.PartitionID
	last uint64
}

// walk calls fn for each intact frame of segment n, in order, and returns
// the offset after the last frame it read: the end of the segment's
// frames, where writing goes on. A bad frame (see Replay) is
//
//   - in the newest segment with no sync mark after it: the torn tail of
//     a write a crash cut short. walk stops there (the caller cuts it)
//     and warns, unless onDamage is nil (a first look);
//   - otherwise damage: a *store.DamageError, unless the log salvages or
//     checks: then onDamage gets it (unless nil) and walk goes on at the
//     next intact frame.
func (l *Log) walk(n uint64, newest bool, fn frameFunc, onDamage func(damaged) error) (int64, error) {
	name := format.SegName(n)
	f, err := l.fs.OpenFile(l.path(name), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	fi, err := l.fs.Stat(l.path(name))
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	size := fi.Size()
	for from := int64(0); ; {
		at, bad, err := format.Scan(io.NewSectionReader(f, from, size-from), func(off int64, flen int, recs []format.Record) error {
			return fn(from+off, flen, recs)
		})
		at += from
		if err != nil {
			return at, fmt.Errorf("store: %s at %d: %w", name, at, err)
		}
		if bad == "" {
			return at, nil
		}
		if _, flen, ok := format.FrameAt(f, at, size); ok {
			// It reads well a second time: what went wrong was on the way
			// (a bus, memory), not on the disk.
			from = at + int64(flen)
			l.log.Warn("store: a frame failed its checks once and read well again", "segment", name, "offset", at, "reason", bad)
			if err := l.frameAgain(f, at, flen, fn); err != nil {
				return at, err
			}
			continue
		}
		next, found, err := format.Resync(f, at, size)
		if err != nil {
			return at, fmt.Errorf("store: reading %s: %w", name, err)
		}
		if newest && !(found && l.markAfter(f, next, size)) {
			if onDamage != nil {
				l.log.Warn("store: cutting the torn tail of the log (a write a crash cut short, never acknowledged)",
					"segment", name, "offset", at, "bytes", size-at, "reason", bad)
			}
			return at, nil
		}
		end := size
		if found {
			end = next
		}
		d := damaged{d: store.Damage{File: name, Offset: at, Length: end - at, Reason: bad, Records: lostRecords(format.Unverified(f, at, end)),
			BelowFloor: n < l.man.Floor}, seg: uint32(n), off: at, end: end}
		if !l.opts.Salvage && !l.opts.ReadOnly {
			return at, &store.DamageError{Damage: d.d}
		}
		if onDamage != nil {
			if err := onDamage(d); err != nil {
				return at, err
			}
		}
		if !found {
			return size, nil
		}
		from = next
	}
}

// frameAgain hands fn the frame at off, read again.
func (l *Log) frameAgain(f io.ReaderAt, off int64, flen int, fn frameFunc) error {
	recs, _, ok := format.FrameAt(f, off, off+int64(flen))
	if !ok {
		return fmt.Errorf("%w: a frame at %d reads differently each time", store.ErrCorrupt, off)
	}
	return fn(off, flen, recs)
}

// markAfter reports whether a sync mark is among the frames from off on
// (reading on past bad ones).
func (l *Log) markAfter(f io.ReaderAt, off, size int64) bool {
	errFound := errors.New("found")
	for off < size {
		at, bad, err := format.Scan(io.NewSectionReader(f, off, size-off), func(_ int64, _ int, recs []format.Record) error {
			if format.IsSyncMark(recs) {
				return errFound
			}
			return nil
		})
		if err == errFound {
			return true
		}
		if err != nil || bad == "" {
			return false
		}
		next, found, err := format.Resync(f, off+at, size)
		if err != nil || !found {
			return false
		}
		off = next
	}
	return false
}

// lostRecords turns the records a damaged frame held, as far as they
// decode, into a report's.
func lostRecords(recs []format.Record) []store.LostRecord {
	var out []store.LostRecord
	for _, r := range recs {
		switch r.Kind {
		case format.KindManifest, format.KindLost, format.KindMoved, format.KindSnapFile:
			// Nothing of a partition's (a moved body's original is where
			// it was; a snapshot file's loss is reported by its file).
			continue
		}
		out = append(out, store.LostRecord{P: r.P, Pos: r.Pos, Data: append([]byte(nil), r.Data...),
			Snapshot: r.Kind == format.KindSnap || r.Kind == format.KindSnapFirst, First: r.Kind == format.KindSnapFirst})
	}
	return out
}

// handDamage returns what a replay does with a damaged stretch it read
// past: remember it (to salvage: to write over it, and to refuse Keep in
// it) and hand it over as an Entry.
func (l *Log) handDamage(fn func(store.Entry) error) func(damaged) error {
	return func(d damaged) error {
		l.damage = append(l.damage, d)
		return fn(store.Entry{Damage: &d.d})
	}
}

// damagedSnapFile reports the snapshot file a pointer record at (seg, off)
// names, which fails its checks, as damage: a *store.DamageError unless
// the log salvages or checks. Salvaged, the pointer's frame is written
// over, and the file is kept aside as <name>.damaged.
func (l *Log) damagedSnapFile(seg uint32, off int64, flen int, r format.Record, cnt uint64, fn func(store.Entry) error) error {
	name := format.SnapFileName(r.P, r.Pos)
	var size int64
	if fi, err := l.fs.Stat(l.path(name)); err == nil {
		size = fi.Size()
	}
	d := store.Damage{File: name, Offset: 0, Length: size, Reason: "snapshot file fails its checksum", BelowFloor: uint64(seg) < l.man.Floor}
	if data, err := snapfile.ReadUnverified(l.fs, l.dir, name); err == nil {
		for j, rec := range data[:min(uint64(len(data)), cnt)] {
			d.Records = append(d.Records, store.LostRecord{P: r.P, Pos: r.Pos + uint64(j), Data: rec, Snapshot: true, First: j == 0})
		}
	}
	if !l.opts.Salvage && !l.opts.ReadOnly {
		return &store.DamageError{Damage: d}
	}
	dm := damaged{d: d, seg: seg, off: off, end: off + int64(flen), p: r.P}
	if cnt > 0 {
		dm.last = r.Pos + cnt - 1
	}
	return l.handDamage(fn)(dm)
}

// skipLost, at the end of a replay that read past damage, moves the last
// position of each partition that lost records past theirs (as far as
// they read), so that no position is used twice, and hands the moves
// over (Entry.Skipped). A partition of which nothing else was replayed
// (its snapshot was all there was of it from the floor on) is known from
// the damaged stretch on: the bodies it keeps below the floor stay
// readable. (A partition named by a damaged record's flipped bit is known
// so too; its owner, finding it is no queue's, drops it.)
func (l *Log) skipLost(fn func(store.Entry) error) error {
	moved := map[store.PartitionID]bool{}
	skip := func(p store.PartitionID, pos uint64, seg uint32) {
		if l.gone[p] || pos <= l.last[p] {
			return
		}
		if l.parts[p] == nil {
			l.parts[p] = &part{from: seg, lastSeg: seg}
		}
		l.last[p] = pos
		moved[p] = true
	}
	for _, d := range l.damage {
		if d.d.BelowFloor {
			continue // what a snapshot at or after the floor supersedes
		}
		for _, r := range d.d.Records {
			skip(r.P, r.Pos, d.seg)
		}
		if d.last > 0 {
			skip(d.p, d.last, d.seg)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(moved)) {
		if err := fn(store.Entry{P: p, Pos: l.last[p], Skipped: true}); err != nil {
			return err
		}
	}
	return nil
}

// repair, at the end of a salvage's replay, writes a lost-stretch frame
// over each damaged stretch found (of the same size: every other frame
// stays where it is) and fsyncs it, and keeps damaged snapshot files
// aside, so that the next start reads on.
func (l *Log) repair() error {
	if !l.opts.Salvage {
		return nil
	}
	for _, d := range l.damage {
		name := format.SegName(uint64(d.seg))
		frame, ok := format.LostFrame(int(d.end-d.off), format.LostNote{At: time.Now().UnixMilli(), Length: d.end - d.off, Reason: d.d.Reason})
		if !ok {
			return fmt.Errorf("store: salvaging %s: a damaged stretch of %d bytes at %d cannot be written over", name, d.end-d.off, d.off)
		}
		if err := l.overwrite(name, d.off, frame); err != nil {
			return fmt.Errorf("store: salvaging %s at %d: %w", name, d.off, err)
		}
		if d.d.File != name { // a snapshot file: kept aside, for a look
			_ = l.fs.Rename(l.path(d.d.File), l.path(d.d.File+".damaged"))
		}
		l.log.Error("store: salvaged a damaged stretch: what it held is lost",
			"file", d.d.File, "offset", d.d.Offset, "bytes", d.d.Length, "reason", d.d.Reason, "records", len(d.d.Records))
	}
	if len(l.damage) > 0 {
		return l.fs.SyncDir(l.dir)
	}
	return nil
}

// overwrite writes b at off in the file name of the log's directory and
// fsyncs it.
func (l *Log) overwrite(name string, off int64, b []byte) error {
	f, err := l.fs.OpenFile(filepath.Join(l.dir, name), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// inDamageLocked reports whether the frame at h lies in a damaged stretch
// this replay found (its records are lost).
func (l *Log) inDamageLocked(h store.Hint) bool {
	for _, d := range l.damage {
		if d.seg == h.A && int64(h.B) < d.end && int64(h.B)+int64(h.C) > d.off {
			return true
		}
	}
	return false
}
