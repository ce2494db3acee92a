// Package disk is the embedded implementation of the store seam: every
// partition's records multiplexed into one append-only, segmented log on
// local disk, so that one group commit (one fsync) makes the records of
// every queue durable together.
//
// A data directory holds (their names and layout are package format's)
//
//	log-<n>.seg           segments of checksummed frames
//	snap-<p>-<pos>.snap   a partition's snapshot too large for one frame
//	next-segment.tmp      the next segment, being written full of zeros
//
// Each segment begins with a manifest frame: the first segment that
// replay reads (the floor) and the partitions dropped whose records may
// still be at or after it. Replay starts at the floor of the newest
// manifest; a manifest is written (and fsynced) whenever the floor moves
// or a partition is dropped, before any segment below the floor goes.
//
// Disk use follows live data: the floor is the oldest segment holding a
// partition's newest snapshot (or its first record, if it has none); a
// segment below it is unlinked as soon as no kept record (a live message
// body) is in it, and a segment that is mostly dead is compacted (its kept
// records copied forward). Wanted names the partitions that pin the floor
// once the log after it outgrows the snapshots, so their owner renews them.
//
// One writer goroutine does group commit: it takes every operation
// submitted since its last write, checks each against its partition's last
// position (fencing), writes them in one call, fsyncs once (SyncAlways),
// and only then resolves their futures. A failed write fails every
// operation in it and cuts the segment back, so a later write never
// follows a half-written frame. The writer never calls the owner.
package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/store/disk/freespace"
	"github.com/sluicemq/sluice/internal/store/disk/prealloc"
	"github.com/sluicemq/sluice/internal/store/disk/segread"
	"github.com/sluicemq/sluice/internal/store/disk/snapfile"
	"github.com/sluicemq/sluice/internal/vfs"
)

// SyncMode is when writes are fsynced.
type SyncMode int

const (
	// SyncAlways resolves an append after fsync.
	SyncAlways SyncMode = iota
	// SyncBatch resolves after the write reaches the OS and fsyncs every
	// SyncInterval: a power failure may lose the last interval.
	SyncBatch
	// SyncNone never fsyncs but at segment ends, manifests and Close.
	SyncNone
)

// maxInlineSnapshot is the largest snapshot written as a frame of the log;
// larger ones get a file of their own and a pointer record.
const maxInlineSnapshot = 4 << 20

// Options configure Open. Zero values mean the documented default.
type Options struct {
	Sync SyncMode
	// SyncInterval is the fsync period in SyncBatch mode. Default 10ms.
	SyncInterval time.Duration
	// SegmentBytes is the size at which the writer rolls to a new segment.
	// Default 64 MiB.
	SegmentBytes int64
	// SnapshotBytes is how much log after the floor makes Wanted ask for
	// the snapshots that pin it to be renewed (or the size of every
	// partition's newest snapshot together, if larger). Default 64 MiB.
	SnapshotBytes int64
	// Reserve is the free disk space, in bytes, below which the disk alarm
	// is raised (see Disk). The reserve in effect is at least twice the
	// newest snapshots plus one segment. 0: only that.
	Reserve int64
	// Logger gets recovery and failure notes. Default slog.Default().
	Logger *slog.Logger
	// Preallocate prepares the next segment in the background, its full
	// size written with zeros, and rolls into it: appends into blocks the
	// file system has already allocated make each fsync cheaper (measured
	// on ext4: 0.27-0.44 ms against 0.35-0.55 ms). The active segment's tail
	// is then zeros, which recovery reads as the end of the log. For real
	// disks.
	Preallocate bool
	// CheckReleases makes the log track each kept record, not only a count
	// per segment, so that every wrong release (of a record not kept, or a
	// second one) is caught, not only one that would take a count below
	// zero. It costs about 14 bytes of memory per live record: for tests.
	CheckReleases bool
	// Salvage makes Replay read on past damage (see Replay): each damaged
	// stretch is handed over as an Entry with Damage set, and written over
	// with a frame that says it was lost, so that the next start reads
	// on. Without it, damage fails Replay with a *store.DamageError.
	Salvage bool
	// ReadOnly opens the log to check it: Replay reads on past damage as a
	// salvage does, but writes, cuts and removes nothing, and starts no
	// writer (the log takes no appends).
	ReadOnly bool
}

type opKind uint8

const (
	opAppend opKind = iota
	opSnapshot
	opSnapFile
	opDrop
	opMove
	opManifest
)

// op is one operation submitted to the writer.
type op struct {
	kind  opKind
	p     store.PartitionID
	prev  uint64
	recs  []store.Rec
	n     uint64          // opSnapFile: records in the file
	file  string          // opSnapFile
	moves []format.Record // opMove
	fut   *store.Pending
	// Set by the writer.
	frameOff, frameLen int
	hints              []store.Hint
	end                uint64 // the partition's last position after it
}

func (o *op) count() uint64 {
	switch o.kind {
	case opSnapFile:
		return o.n
	case opAppend, opSnapshot:
		return uint64(len(o.recs))
	}
	return 0
}

// segment is what the log knows of one segment file.
type segment struct {
	size    int64 // bytes written (or found) in it
	kept    int64 // kept records in it not yet released
	written int64 // kept records ever put in it (for compaction)
	// pinned: a release came for a record it did not count (an owner's
	// bug): it is never freed, in case a live record is still in it.
	pinned bool
	// keys are the kept records in it, with Options.CheckReleases.
	keys map[recKey]struct{}
}

// recKey names a record within its segment: its frame and its place in it.
type recKey struct{ off, idx uint32 }

// keepLocked counts one more kept record at h in s (once, when the log
// tracks records).
func (l *Log) keepLocked(s *segment, h store.Hint) {
	if l.opts.CheckReleases {
		k := recKey{h.B, h.D}
		if _, dup := s.keys[k]; dup {
			return
		}
		if s.keys == nil {
			s.keys = map[recKey]struct{}{}
		}
		s.keys[k] = struct{}{}
	}
	s.kept++
	l.stats.KeptRecords++
}

// unkeepLocked counts one kept record at h in s less. It reports false
// when nothing is kept there (a count would go below zero; or, tracking
// records, h is not kept).
func (l *Log) unkeepLocked(s *segment, h store.Hint) bool {
	if s.kept <= 0 {
		return false
	}
	if l.opts.CheckReleases {
		k := recKey{h.B, h.D}
		if _, ok := s.keys[k]; !ok {
			return false
		}
		delete(s.keys, k)
	}
	s.kept--
	l.stats.KeptRecords--
	return true
}

// part is what the log knows of one partition.
type part struct {
	from      uint32 // where replay of it starts: its newest snapshot, or its first record
	lastSeg   uint32 // the newest segment with a record of it
	snapBytes int64  // size of its newest snapshot
	snapFile  string // its newest snapshot's file, if it has one
}

// Log is the disk store.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	cond      *sync.Cond
	kick      chan struct{} // wakes the writer from a timed idle wait
	queue     []*op
	closed    bool
	running   bool
	stopped   chan struct{}
	stats     store.Stats
	buckets   [len(store.FsyncBounds) + 1]int64
	segs      map[uint32]*segment
	parts     map[store.PartitionID]*part
	man       format.Manifest              // the newest durable manifest
	dropLast  map[store.PartitionID]uint32 // dropped partitions: their newest segment
	deadSnaps []string                     // snapshot files superseded or dropped, to remove
	lost      map[store.PartitionID]string // replay: superseded snapshots whose file is gone
	damage    []damaged                    // replay: the damaged stretches read past (salvage, check)
	tailMark  int64                        // replay: the offset after the newest segment's last sync mark
	active    uint32                       // the segment being written (for readers)
	// recovering: from Open until Recovered, nothing is freed (the owner
	// has not told which records it keeps yet).
	recovering bool

	// writer-owned
	seg      uint64
	f        vfs.File
	off      int64
	unsynced bool
	// durable: every byte written to the active segment is durable, so a
	// write may begin with a sync mark (format.Manifest.Synced).
	durable bool
	// marked: the offset after the active segment's last sync mark (0:
	// none): nothing was written since when it is the end.
	marked   int64
	lastSync time.Time
	prealloc bool // the active segment was prepared: zeros past off
	last     map[store.PartitionID]uint64
	// gone: partitions dropped in this process or named by the manifest
	// at replay. A later write to one is fenced: it would bring back a
	// partition no one snapshots or drops, holding the floor for good.
	gone  map[store.PartitionID]bool
	frame []format.Record // scratch: the records of the frame being encoded

	reader *segread.Reader    // reads bodies back
	prep   *prealloc.Preparer // prepares the next segment, if Preallocate
	disk   *freespace.Watch   // free space and the disk alarm
}

// Open opens the log in dir, creating it if needed. Replay comes next.
func Open(fs vfs.FS, dir string, opts Options) (*Log, error) {
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = 10 * time.Millisecond
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 64 << 20
	}
	if opts.SegmentBytes > 1<<30 {
		return nil, errors.New("store: SegmentBytes is at most 1 GiB")
	}
	if opts.SnapshotBytes <= 0 {
		opts.SnapshotBytes = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Salvage && opts.ReadOnly {
		return nil, errors.New("store: a log opened read-only cannot salvage")
	}
	if !opts.ReadOnly {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	l := &Log{fs: fs, dir: dir, opts: opts, log: opts.Logger, stopped: make(chan struct{}),
		segs: map[uint32]*segment{}, parts: map[store.PartitionID]*part{},
		dropLast: map[store.PartitionID]uint32{}, last: map[store.PartitionID]uint64{}, gone: map[store.PartitionID]bool{}, kick: make(chan struct{}, 1),
		recovering: true}
	l.cond = sync.NewCond(&l.mu)
	l.disk = freespace.New(fs, dir, opts.Logger, l.dropPrepared)
	l.prep = prealloc.New(fs, dir, opts.SegmentBytes, opts.Logger)
	l.reader = segread.NewReader(fs, dir)
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// ---- submission ----

func (l *Log) submit(o *op, size int) store.Future {
	if size > format.MaxFrame-format.MinFrame {
		return store.Failed(&store.AppendError{Err: fmt.Errorf("%w: %d bytes in one append", store.ErrTooBig, size), P: o.p})
	}
	o.fut = store.NewPending()
	l.mu.Lock()
	if l.closed || !l.running {
		l.mu.Unlock()
		return store.Failed(&store.AppendError{Err: store.ErrClosed, P: o.p})
	}
	l.queue = append(l.queue, o)
	l.cond.Signal()
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return o.fut
}

func recsSize(recs []store.Rec) int {
	n := 0
	for _, r := range recs {
		n += format.Record{Data: r.Data}.Bound()
	}
	return n
}

// Append appends recs to p after position prev. The records' data must not
// change until the future resolves (the log caches recent ones as given).
func (l *Log) Append(p store.PartitionID, prev uint64, recs []store.Rec) store.Future {
	return l.submit(&op{kind: opAppend, p: p, prev: prev, recs: recs}, recsSize(recs))
}

// Snapshot appends recs as p's snapshot after prev: as one frame when it
// is small, else as a file of its own (written and fsynced here, in the
// caller's goroutine, so the writer is not held up) and a pointer record.
//
// The records are written as they come: those that fit a frame are held
// until the sequence ends; once they outgrow it, they and the rest go
// into the file, so a large snapshot is never held whole.
func (l *Log) Snapshot(p store.PartitionID, prev uint64, recs iter.Seq[store.Rec]) store.Future {
	var held []store.Rec
	size, n := 0, uint64(0)
	name := format.SnapFileName(p, prev+1)
	var sf *snapfile.Writer
	var err error
	for r := range recs {
		n++
		if sf != nil {
			if err = sf.Add(r.Data); err != nil {
				break
			}
			continue
		}
		held = append(held, r)
		if size += (format.Record{Data: r.Data}).Bound(); size <= maxInlineSnapshot {
			continue
		}
		if sf, err = snapfile.Create(l.fs, l.dir, name); err != nil {
			break
		}
		for _, h := range held {
			err = sf.Add(h.Data)
		}
		if held = nil; err != nil {
			break
		}
	}
	if sf == nil && err == nil {
		return l.submit(&op{kind: opSnapshot, p: p, prev: prev, recs: held}, size)
	}
	if err == nil {
		err = sf.Finish()
	} else if sf != nil {
		sf.Abandon()
	}
	if err != nil {
		return store.Failed(&store.AppendError{Err: fmt.Errorf("store: writing snapshot %s: %w", name, wrapIO(err)), P: p, Last: prev})
	}
	f := l.submit(&op{kind: opSnapFile, p: p, prev: prev, n: n, file: name}, 64)
	go func() {
		if f.Wait(context.Background()) != nil {
			_ = l.fs.Remove(l.path(name))
		}
	}()
	return f
}

// Drop removes p, fenced on its last position prev: once the future
// resolves nothing of it is replayed, and every later write to it is
// fenced (its id is not used again: the engine reserves ids in its
// catalog before it writes to them).
// Leave does nothing: the log's partitions have no other writer.
func (l *Log) Leave(store.PartitionID) {}

func (l *Log) Drop(p store.PartitionID, prev uint64) store.Future {
	return l.submit(&op{kind: opDrop, p: p, prev: prev}, 64)
}

// ---- the writer ----

// Replay has started it (replay.go).
func (l *Log) run() {
	defer close(l.stopped)
	var buf []byte
	for {
		l.mu.Lock()
		for len(l.queue) == 0 && !l.closed {
			if l.opts.Sync == SyncBatch && l.unsynced {
				// Wake up to fsync at the interval even when idle, or at
				// once for new work (which must not wait for the timer).
				l.mu.Unlock()
				t := time.NewTimer(max(0, l.opts.SyncInterval-time.Since(l.lastSync)))
				select {
				case <-t.C:
					l.syncIfDue(true)
				case <-l.kick:
				}
				t.Stop()
				l.mu.Lock()
				continue
			}
			l.cond.Wait()
		}
		batch := l.queue
		l.queue = nil
		closed := l.closed
		l.mu.Unlock()
		if len(batch) < joinBelow && l.opts.Sync == SyncAlways && !closed {
			batch = l.letJoin(batch)
		}
		if len(batch) > 0 {
			buf = l.writeBatch(batch, buf[:0])
		}
		if closed && len(batch) == 0 {
			l.shutdown()
			return
		}
	}
}

// joinBelow is the size of a group below which the writer lets others
// join it before its fsync (letJoin).
const joinBelow = 16

// letJoin yields the writer's processor once before a small group's
// write, so that every goroutine already runnable (requests being
// decoded, a delete batch about to submit) runs first and the operations
// it submits join this group's fsync instead of waiting for one of their
// own after it. When nothing else is runnable it returns at once: an idle
// server's lone write is not delayed. Under a moderate load (the writer
// woken by one request while a few more are on their way) it cuts the
// fsyncs a message by a quarter to a third (docs/benchmarks.md). When
// every processor is busy the writer waits for one here, as it already
// does on its way back from each fsync.
func (l *Log) letJoin(batch []*op) []*op {
	runtime.Gosched()
	l.mu.Lock()
	defer l.mu.Unlock()
	batch = append(batch, l.queue...)
	l.queue = nil
	return batch
}

// writeBatch writes a group of operations as one write (and fsync) and
// resolves them. buf is scratch space, returned for reuse.
func (l *Log) writeBatch(batch []*op, buf []byte) []byte {
	// Room for a sync mark first: write decides whether it goes in.
	mark := l.syncMark()
	room := len(mark)
	buf = append(buf[:0], make([]byte, room)...)
	restore := map[store.PartitionID]uint64{}
	ok := batch[:0:0]
	var dropped []store.PartitionID // dropped in this group, for their manifests
	for _, o := range batch {
		switch o.kind {
		case opAppend, opSnapshot, opSnapFile:
			last := l.last[o.p]
			if o.prev != last || l.gone[o.p] {
				o.fut.Resolve(nil, 0, &store.AppendError{Err: store.ErrFenced, P: o.p, Last: last})
				continue
			}
			if _, seen := restore[o.p]; !seen {
				restore[o.p] = last
			}
			l.last[o.p] = last + o.count()
			o.end = l.last[o.p]
		case opDrop:
			last := l.last[o.p]
			if o.prev != last || l.gone[o.p] {
				o.fut.Resolve(nil, 0, &store.AppendError{Err: store.ErrFenced, P: o.p, Last: last})
				continue
			}
			if last == 0 && l.parts[o.p] == nil {
				o.fut.Resolve(nil, 0, nil) // never written: nothing to drop
				continue
			}
			dropped = append(dropped, o.p)
			l.gone[o.p] = true
		}
		o.frameOff = len(buf)
		buf = l.appendOp(buf, o, dropped)
		o.frameLen = len(buf) - o.frameOff
		ok = append(ok, o)
	}
	if len(ok) == 0 {
		return buf
	}
	seg, base, err := l.write(buf, mark)
	if err != nil {
		for p, v := range restore {
			l.last[p] = v
		}
		for _, p := range dropped {
			delete(l.gone, p)
		}
		for _, o := range ok {
			o.fut.Resolve(nil, 0, &store.AppendError{Err: err, P: o.p, Last: l.last[o.p]})
		}
		return buf
	}
	floorMoved := false
	l.mu.Lock()
	for _, o := range ok {
		if l.applyOpLocked(o, uint32(seg), base) {
			floorMoved = true
		}
	}
	l.mu.Unlock()
	if floorMoved {
		// Before the snapshot or drop is answered, so that what it made
		// unnecessary is gone by then.
		l.advanceFloor()
	}
	for _, f := range l.takeDeadSnapFiles() {
		_ = l.fs.Remove(l.path(f))
	}
	for _, o := range ok {
		o.fut.Resolve(o.hints, o.end, nil)
	}
	for _, o := range ok {
		if o.kind == opMove || o.kind == opAppend && o.keeps() {
			// Bodies are usually read soon after they are written: keep
			// the frames of recent ones in memory for a while. (After the
			// answers: the writer's callers need not wait for it.)
			l.reader.Written(segread.Key{Seg: uint32(seg), Off: uint32(base + int64(o.frameOff))}, o.records(make([]format.Record, 0, len(o.recs)+len(o.moves))))
		}
	}
	l.noteDisk(int64(len(buf)-room), false)
	return buf
}

// keeps reports whether an append holds a record to keep (a body).
func (o *op) keeps() bool {
	return slices.ContainsFunc(o.recs, func(r store.Rec) bool { return r.Keep })
}

// records appends to out the records of an append or move as its frame
// holds them.
func (o *op) records(out []format.Record) []format.Record {
	if o.kind == opMove {
		return append(out, o.moves...)
	}
	for i, r := range o.recs {
		k := format.KindRec
		if r.Keep {
			k = format.KindKeep
		}
		out = append(out, format.Record{Kind: k, P: o.p, Pos: o.prev + 1 + uint64(i), Data: r.Data})
	}
	return out
}

// appendOp encodes one operation as one frame. dropped are the partitions
// dropped by this group so far (a drop is a manifest that names them).
func (l *Log) appendOp(buf []byte, o *op, dropped []store.PartitionID) []byte {
	switch o.kind {
	case opAppend, opMove:
		l.frame = o.records(l.frame[:0])
		buf = format.AppendFrame(buf, l.frame)
		clear(l.frame) // holds no record past its frame
		return buf
	case opSnapshot:
		fr := make([]format.Record, len(o.recs))
		for i, r := range o.recs {
			k := format.KindSnap
			if i == 0 {
				k = format.KindSnapFirst
			}
			fr[i] = format.Record{Kind: k, P: o.p, Pos: o.prev + 1 + uint64(i), Data: r.Data}
		}
		return format.AppendFrame(buf, fr)
	case opSnapFile:
		return format.AppendFrame(buf, []format.Record{{Kind: format.KindSnapFile, P: o.p, Pos: o.prev + 1, Data: format.SnapFileData(o.n)}})
	case opDrop, opManifest:
		l.mu.Lock()
		m := format.Manifest{Floor: l.man.Floor, Dropped: append(append([]store.PartitionID(nil), l.man.Dropped...), dropped...)}
		l.mu.Unlock()
		return format.AppendManifest(buf, m)
	}
	panic("store: unknown operation")
}

// applyOpLocked records what a written operation changed and sets its
// hints. It reports whether the floor may have moved.
func (l *Log) applyOpLocked(o *op, seg uint32, base int64) bool {
	off := uint32(base + int64(o.frameOff))
	hint := func(i int) store.Hint { return store.Hint{A: seg, B: off, C: uint32(o.frameLen), D: uint32(i)} }
	s := l.segs[seg]
	switch o.kind {
	case opAppend:
		pt := l.partLocked(o.p, seg)
		pt.lastSeg = seg
		o.hints = make([]store.Hint, len(o.recs))
		for i, r := range o.recs {
			o.hints[i] = hint(i)
			if r.Keep {
				l.keepLocked(s, o.hints[i])
				s.written++
			}
		}
	case opSnapshot, opSnapFile:
		pt := l.partLocked(o.p, seg)
		if pt.snapFile != "" {
			// Replay skips a superseded snapshot whose file is gone.
			l.deadSnaps = append(l.deadSnaps, pt.snapFile)
		}
		moved := pt.from != seg
		pt.from, pt.lastSeg, pt.snapFile = seg, seg, o.file
		if o.kind == opSnapshot {
			pt.snapBytes = int64(recsSize(o.recs))
		} else {
			if fi, err := l.fs.Stat(l.path(o.file)); err == nil {
				pt.snapBytes = fi.Size()
			}
		}
		o.hints = make([]store.Hint, o.count())
		l.stats.Snapshots++
		return moved
	case opDrop:
		if pt := l.parts[o.p]; pt != nil {
			l.dropLast[o.p] = pt.lastSeg
			if pt.snapFile != "" {
				l.deadSnaps = append(l.deadSnaps, pt.snapFile)
			}
			delete(l.parts, o.p)
		}
		l.man.Dropped = append(l.man.Dropped, o.p)
		return true
	case opMove:
		o.hints = make([]store.Hint, len(o.moves))
		for i := range o.moves {
			o.hints[i] = hint(i)
			l.keepLocked(s, o.hints[i])
			s.written++
		}
	}
	return false
}

func (l *Log) takeDeadSnapFiles() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.deadSnaps
	l.deadSnaps = nil
	return d
}

func (l *Log) partLocked(p store.PartitionID, seg uint32) *part {
	pt := l.parts[p]
	if pt == nil {
		pt = &part{from: seg, lastSeg: seg}
		l.parts[p] = pt
	}
	return pt
}

// write appends buf to the active segment and makes it durable per the
// sync mode, and returns where buf's start is (its frames are at base +
// their offset in buf). buf begins with room for mark, a sync mark: it
// goes there when everything before it in the segment is durable, else
// the room is left out. On failure it cuts the segment back to the last
// good offset.
func (l *Log) write(buf, mark []byte) (seg uint64, base int64, err error) {
	room := len(mark)
	full := l.off > 0 && l.off+int64(len(buf)) > l.opts.SegmentBytes
	if full || (!l.prealloc && l.prepReady()) {
		if err := l.roll(); err != nil {
			if full {
				return 0, 0, l.fail(err)
			}
			l.log.Warn("store: rolling into the prepared segment failed; appending to the current one", "err", err)
		}
	}
	seg, base = l.seg, l.off
	if l.durable {
		copy(buf, mark) // the manifest is the writer's: it has not changed since
		l.marked = l.off + int64(room)
	} else {
		buf, base = buf[room:], base-int64(room)
	}
	return seg, base, l.writeAt(buf, l.opts.Sync == SyncAlways)
}

// syncMark is a sync mark frame: the manifest, marked synced.
func (l *Log) syncMark() []byte {
	l.mu.Lock()
	m := format.Manifest{Floor: l.man.Floor, Dropped: l.man.Dropped, Synced: true}
	l.mu.Unlock()
	return format.AppendManifest(nil, m)
}

func (l *Log) writeAt(buf []byte, fsync bool) error {
	n, err := l.f.Write(buf)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil {
		l.mu.Lock()
		l.stats.BytesWritten += int64(n)
		l.mu.Unlock()
	}
	if err == nil && fsync {
		t0 := time.Now()
		err = l.f.Sync()
		l.observeFsync(time.Since(t0))
	}
	if err != nil {
		// Cut back what may have reached the file, so the next frame follows
		// the last good one. Everything before l.off was fsynced by an
		// earlier batch, so a failed fsync here cannot take acknowledged
		// data with it; the next batch fsyncs again.
		if terr := l.f.Truncate(l.off); terr == nil {
			_, _ = l.f.Seek(l.off, io.SeekStart)
		}
		l.prealloc = false // the zeroed tail went with the cut
		l.durable = false
		return l.fail(err)
	}
	l.off += int64(len(buf))
	l.durable = fsync
	l.noteSegSize(uint32(l.seg), l.off)
	if !l.prealloc && l.off >= min(1<<20, l.opts.SegmentBytes/4) {
		// Only a store that writes prepares segments: a store opened to
		// read or to write a little never pays for the zeros.
		l.startPrepare()
	}
	if !fsync && l.opts.Sync != SyncAlways {
		l.unsynced = true
		l.syncIfDue(false)
	}
	l.mu.Lock()
	l.stats.Batches++
	l.mu.Unlock()
	return nil
}

func (l *Log) observeFsync(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Fsyncs++
	l.stats.FsyncSeconds += d.Seconds()
	i, _ := slices.BinarySearch(store.FsyncBounds[:], d) // the first bound d is within
	l.buckets[i]++
}

func (l *Log) noteSegSize(seg uint32, n int64) {
	l.mu.Lock()
	s := l.segs[seg]
	if s == nil {
		s = &segment{}
		l.segs[seg] = s
	}
	s.size = n
	l.mu.Unlock()
}

func (l *Log) syncIfDue(force bool) {
	if !l.unsynced || l.opts.Sync == SyncNone {
		return
	}
	if !force && time.Since(l.lastSync) < l.opts.SyncInterval {
		return
	}
	t0 := time.Now()
	if err := l.f.Sync(); err != nil {
		l.log.Error("store: periodic fsync failed", "err", err)
		return
	}
	l.unsynced, l.durable = false, true
	l.lastSync = time.Now()
	l.observeFsync(l.lastSync.Sub(t0))
}

func wrapIO(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %v", store.ErrNoSpace, err)
	}
	return fmt.Errorf("store: write failed: %w", err)
}

func (l *Log) fail(err error) error {
	l.mu.Lock()
	l.stats.FailedWrites++
	l.mu.Unlock()
	l.log.Error("store: write failed; failing the batch", "err", err)
	return wrapIO(err)
}

// roll closes the active segment and starts the next one (the prepared one
// if it is ready, else a new empty file), which begins with a manifest.
func (l *Log) roll() error {
	if err := l.f.Sync(); err != nil {
		return err
	}
	if l.prealloc {
		// Cut the zeroed tail, so that only the active segment has one.
		l.prealloc = false
		if err := l.f.Truncate(l.off); err != nil {
			return err
		}
		if err := l.f.Sync(); err != nil {
			return err
		}
	}
	next := l.seg + 1
	name := l.path(format.SegName(next))
	var f vfs.File
	prepared := false
	if l.prepReady() {
		if pf, err := l.prep.Take(name); err != nil {
			l.log.Warn("store: using the prepared segment failed", "err", err)
		} else {
			f, prepared = pf, true
		}
	}
	if f == nil {
		var err error
		f, err = l.fs.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
	}
	l.mu.Lock()
	head := format.AppendManifest(nil, l.man)
	l.mu.Unlock()
	if _, err := f.Write(head); err != nil {
		f.Close()
		_ = l.fs.Remove(name)
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		_ = l.fs.Remove(name)
		return err
	}
	l.f.Close()
	l.f, l.seg, l.off, l.unsynced, l.prealloc = f, next, int64(len(head)), true, prepared
	l.durable, l.marked = false, 0
	l.mu.Lock()
	l.segs[uint32(next)] = &segment{size: l.off}
	l.active = uint32(next)
	l.mu.Unlock()
	if prepared {
		l.startPrepare()
	}
	return nil
}

func (l *Log) prepReady() bool { return l.opts.Preallocate && l.prep.Ready() }

// startPrepare starts preparing the next segment in the background (see
// package prealloc), unless the disk alarm is raised.
func (l *Log) startPrepare() {
	if l.opts.Preallocate && !l.inAlarm() {
		l.prep.Start()
	}
}

// dropPrepared removes a prepared next segment (its zeros hold a whole
// segment of disk) while the alarm is raised.
func (l *Log) dropPrepared() {
	if l.prep.Drop() {
		l.log.Info("store: removed the prepared next segment to free its space")
	}
}

// Stats returns the log's figures.
// Partitions lists the partitions that hold records and are not dropped.
func (l *Log) Partitions() ([]store.PartitionID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, store.ErrClosed
	}
	out := make([]store.PartitionID, 0, len(l.parts))
	for p := range l.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

func (l *Log) Stats() store.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.FsyncBuckets = append([]int64(nil), l.buckets[:]...)
	s.Segments = len(l.segs)
	s.PartitionsAlive = len(l.parts)
	for n, seg := range l.segs {
		s.DiskBytes += seg.size
		if n >= uint32(l.man.Floor) {
			s.LogBytes += seg.size
		}
		if seg.written > 0 {
			s.LiveBytes += seg.size * min(seg.kept, seg.written) / seg.written
			s.DeadRecords += max(0, seg.written-seg.kept)
		}
	}
	for _, pt := range l.parts {
		s.SnapshotBytes += pt.snapBytes
		if pt.snapFile != "" {
			s.DiskBytes += pt.snapBytes // a file of its own
		}
	}
	s.DeadBytes = max(0, s.DiskBytes-s.LiveBytes)
	return s
}

// Close writes what is queued, fsyncs and stops the writer.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.cond.Signal()
	started := l.running
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	if started {
		<-l.stopped
	}
	l.prep.Stop()
	return nil
}

// shutdown makes everything written durable and ends the log with a sync
// mark, so that the next start tells damage anywhere in it from a torn
// write.
func (l *Log) shutdown() {
	l.reader.Close()
	if l.f != nil {
		err := l.f.Sync()
		if err == nil && l.marked != l.off {
			err = l.writeAt(l.syncMark(), true) // past SegmentBytes if need be: a roll threshold, not a size
		}
		if err != nil {
			l.log.Error("store: final fsync failed", "err", err)
		}
		l.f.Close()
	}
}
