// Package store is the engine's storage seam: a set of partitioned,
// append-only logs, shaped so that a replicated log (NATS JetStream, one
// stream per partition) implements it as directly as the embedded disk log.
//
// A partition is the unit of ownership: a queue's partition holds every
// record needed to rebuild that queue alone (its settings, its messages
// with their bodies, their deliveries and deletes); partition 0 is the
// catalog of queues. Records are opaque to the store. Within a partition
// each record has a position: 1, 2, 3 … without gaps, never reused.
//
// The contract, which the conformance suite (package storetest) checks:
//
//   - Append(p, prev, recs) writes recs at positions prev+1 … and resolves
//     once they are durable. prev must be the partition's last position,
//     counting the appends submitted before that have not failed: otherwise
//     the append fails with ErrFenced (a stale owner is fenced, as
//     JetStream's expected-last-sequence does). An append that fails leaves
//     the partition as it was, so the appends of the partition submitted
//     after it fail with ErrFenced too, until the owner appends after the
//     last position that did succeed. Appends of one partition are durable
//     in submission order. An append is atomic: after a crash all of its
//     records are there or none (a message and the mark of where it came
//     from are one append; JetStream: an atomic batch).
//   - Snapshot(p, prev, recs) is an append whose records are p's state as
//     of prev: replay of p starts with its newest snapshot, and the records
//     before it are no longer replayed (JetStream: a rollup). It is atomic:
//     after a crash either all of it is there or none. It takes the
//     records as a sequence and consumes it before it returns, on the
//     caller's goroutine: the owner produces them from the state its lock
//     guards, one at a time, and a store may write them out as they come,
//     so a snapshot of millions of messages is never held whole in memory.
//     A store that stops early (it could not write) fails the snapshot.
//   - Records appended with Keep hold what the owner reads back (message
//     bodies): they stay readable with Read until Release, whatever
//     snapshots follow; other records may go once a snapshot covers them.
//     After a restart the owner calls Keep again for each record it still
//     needs (the store does not know which were released); Keep reports
//     ErrNotFound when the store no longer holds the record. Until the
//     owner calls Recovered, once it has called Keep for everything it
//     needs, the store frees nothing: no file is removed, nothing is
//     compacted. (So a partition dropped at recovery cannot take the
//     records of another partition that has not called Keep yet.)
//   - The owner releases only what it holds since open: a record appended
//     with Keep, or named by Keep after Replay, at most once, at the
//     location compaction last moved it to. A release the store can tell
//     is wrong (of a record not kept, a second one, or of a location the
//     store no longer has) is an owner's bug: the store counts it in
//     Stats.BadReleases, logs it, and frees nothing for it, ever, in this
//     process: storage is freed only when nothing live needs it.
//   - Replay hands over, once, before any append, each partition's newest
//     snapshot and the records after it, in position order within a
//     partition; partitions may interleave. A snapshot entry with Reset set
//     begins a snapshot: the owner discards what it rebuilt of that
//     partition so far.
//   - Drop(p, prev) removes a partition: once the drop is durable nothing
//     of it is replayed or read again. It is fenced as an append is: prev
//     must be p's last position, so a stale owner cannot drop what a new
//     one writes. A write after the drop at one of p's old positions (a
//     late compaction copy, a writer that does not know) is fenced and
//     brings nothing back. A store may refuse p for good (the disk log
//     does); a shared one starts p anew on an append at position 0 (the
//     owner reserves a partition id in its catalog before it writes
//     there, so a node reuses one only when its catalog write failed).
//   - ReplayPartition(p, 0, fn) is how an owner takes p over (acquire):
//     it hands over p's newest snapshot and the records after it, and
//     makes this store the writer of p from the last position replayed,
//     so that the new owner's first append (its epoch record) fences off
//     every append of a former owner still in flight elsewhere. An owner
//     whose append fails with ErrFenced has lost p and must stop: it
//     writes nothing more, and releases nothing (the new owner holds the
//     bodies now).
//   - Positions are the owner's: a store that writes records of its own
//     (JetStream: chunks of a large append, moved bodies) keeps them out
//     of the positions the owner sees. A Future reports the partition's
//     last position once durable (Last), which the owner checks against
//     its own count.
//   - An append is whole or refused: a store with limits (JetStream: a
//     message of at most max_payload bytes, 1,000 messages an atomic
//     batch) splits the records to fit, or, when it cannot, refuses the
//     whole append up front with ErrTooBig and leaves p as it was.
//   - Partitions lists the partitions that hold records and are not
//     dropped (a store that learns them by reading its log, as the disk
//     log does, knows them once Replay has run).
//
// Implementations: Memory (in this package: a real log in memory, for
// tests and experiments) and the disk log (package store/disk): partitions
// multiplexed into one group-commit log, so one fsync makes every queue's
// records durable.
package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
)

// PartitionID names a partition. Catalog is the catalog of queues; every
// queue has one of its own.
type PartitionID uint64

// Catalog is the partition of the queue catalog.
const Catalog PartitionID = 0

// Hint is an opaque locator a store returns with a record so that it can
// read the record back without an index (the disk log: where its frame
// is). Only the store that made it interprets it; the zero Hint is valid
// for stores that read by position alone.
type Hint struct{ A, B, C, D uint32 }

// Rec is one record to append.
type Rec struct {
	// Data is read, never changed, by the store (an owner may encode
	// several records into one buffer).
	Data []byte
	// Keep says the owner will read the record back (a message body): it
	// stays readable until Release.
	Keep bool
}

// Entry is one record handed over by Replay.
type Entry struct {
	P    PartitionID
	Pos  uint64
	Data []byte
	Hint Hint
	// Snapshot says the record is part of a snapshot of P; Reset marks the
	// first record of one (the owner starts P afresh).
	Snapshot, Reset bool
	// Moved says the store moved the kept record at Pos (compaction): it
	// is now at Hint; Data is nil.
	Moved bool
	// Damage, when set, is no record: it reports a damaged stretch of the
	// store that a salvage (or a check) found, and what it held as far
	// as that could be read. Only a store opened to salvage or to check
	// reports one; the other fields are zero.
	Damage *Damage
	// Skipped, after every record (a salvage's), is no record either: P's
	// positions up to Pos were taken by records the damage held, so its
	// next record goes after Pos (a position is never used twice).
	Skipped bool
}

// Damage is a stretch of a store's data that fails its checks where it
// cannot be a write cut short by a crash (intact data follows it, or it
// was durable once): a flipped bit, a bad block.
type Damage struct {
	File   string // the file, as named in the data directory
	Offset int64  // where the stretch begins in File
	Length int64
	Reason string // what is wrong ("checksum mismatch")
	// Records are what the stretch held, read without its checksum: as
	// damaged, so possibly wrong; nil when nothing could be read.
	Records []LostRecord
	// BelowFloor says it is in a part of the store a start does not read
	// (the disk log: a segment below the replay floor, kept for the
	// bodies in it): only a check or a salvage finds it, or a read of a
	// body there.
	BelowFloor bool
}

// LostRecord is one record of a damaged stretch, as far as it could be
// read.
type LostRecord struct {
	P    PartitionID
	Pos  uint64
	Data []byte
	// Snapshot says it was part of a snapshot of P; First that it was
	// the snapshot's first record (a snapshot begins P afresh).
	Snapshot, First bool
}

func (d Damage) String() string {
	return fmt.Sprintf("%s at offset %d (%d bytes: %s)", d.File, d.Offset, d.Length, d.Reason)
}

// DamageError is how a store refuses to open damaged data (ErrDamaged):
// where the damage is. Salvage keeps what reads back.
type DamageError struct {
	Damage
	// More counts the damaged stretches found after this one, when a
	// store looks further (a check).
	More int
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%v: %v, with intact data after it (damage, not a write cut short by a crash)", ErrDamaged, e.Damage)
}

func (e *DamageError) Unwrap() error { return ErrDamaged }

// Future is an append under way.
type Future interface {
	// Wait blocks until the records are durable or failed. Cancelling ctx
	// stops the wait, not the write.
	Wait(ctx context.Context) error
	// Done reports, without blocking, whether it is finished and how.
	Done() (bool, error)
	// Hints are the records' hints, in order, once durable.
	Hints() []Hint
	// Last is the partition's last position once durable (the position
	// of the last record written; 0 for a drop).
	Last() uint64
}

// Errors.
var (
	ErrClosed = errors.New("store: closed")
	// ErrFenced: the append's prev is not the partition's last position:
	// nothing of it was written (unless the error also wraps
	// ErrOutcomeUnknown).
	ErrFenced = errors.New("store: fenced: the partition's last position is not the one given")
	// ErrOutcomeUnknown: an append may or may not have been written (a
	// replicated store lost its acknowledgement and could not ask); the
	// partition must be taken over again before it is written.
	ErrOutcomeUnknown = errors.New("store: the write's outcome is unknown")
	ErrCorrupt        = errors.New("store: corrupt record")
	// ErrDamaged: data that was durable fails its checks (DamageError).
	ErrDamaged = errors.New("store: damaged data")
	ErrNoSpace = errors.New("store: no space left on device")
	ErrTooBig  = errors.New("store: record too large")
	// ErrNotFound: Read of a record the store does not hold (released,
	// dropped, or never written).
	ErrNotFound = errors.New("store: no such record")
)

// AppendError is how an append, snapshot or drop fails: Err says why
// (ErrFenced, ErrNoSpace, an I/O error …) and Last is the partition's last
// durable position as the store saw it then, so that the owner can go on
// appending after it.
type AppendError struct {
	Err  error
	P    PartitionID
	Last uint64
}

func (e *AppendError) Error() string {
	return fmt.Sprintf("%v (partition %d ends at %d)", e.Err, e.P, e.Last)
}

func (e *AppendError) Unwrap() error { return e.Err }

// LastPosition returns the last position an append error reports.
func LastPosition(err error) (uint64, bool) {
	var ae *AppendError
	if errors.As(err, &ae) {
		return ae.Last, true
	}
	return 0, false
}

// Disk is the free space of a store's disk and its alarm: below Reserve,
// the owner refuses new data so that what it needs to drain still fits.
type Disk struct {
	Free, Reserve int64
	Alarm         bool
}

// FsyncBounds are the upper bounds of Stats.FsyncBuckets.
var FsyncBounds = [...]time.Duration{100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second}

// Stats are a store's figures.
type Stats struct {
	Segments      int
	LogBytes      int64 // bytes of log that replay reads
	SnapshotBytes int64 // the newest snapshots, summed
	Snapshots     int64 // snapshots written
	Fsyncs        int64
	Batches       int64
	FailedWrites  int64
	// ResentWrites counts writes sent again because their outcome was in
	// doubt (a replicated store: the leader changed or was lost with the
	// write in flight, and waited out an acknowledgement timeout; or a
	// refusal came that a former leader may have sent).
	ResentWrites    int64
	FsyncBuckets    []int64 // by FsyncBounds, then above
	FsyncSeconds    float64
	BytesWritten    int64
	KeptRecords     int64 // records kept (live message bodies)
	DeadRecords     int64 // records in segments that no replay needs and nothing keeps
	Relocated       int64 // kept records moved by compaction
	DiskBytes       int64 // the log's files
	LiveBytes       int64 // the part of them estimated to hold kept records
	DeadBytes       int64
	PartitionsAlive int
	// SegmentsRemoved counts the files freed (unlinked) since open.
	SegmentsRemoved int64
	// BadReleases counts releases the store refused (see Release): each
	// is an owner's bug, and what it named stays.
	BadReleases int64
}

// Store is the seam. All methods are safe for concurrent use, except that
// Replay runs alone, once, before anything else.
type Store interface {
	Replay(fn func(Entry) error) error
	// ReplayPartition hands over the records of p from position from on
	// (0: from its newest snapshot), for an owner that takes p over.
	ReplayPartition(p PartitionID, from uint64, fn func(Entry) error) error
	Append(p PartitionID, prev uint64, recs []Rec) Future
	Snapshot(p PartitionID, prev uint64, recs iter.Seq[Rec]) Future
	Drop(p PartitionID, prev uint64) Future
	// Leave says that this store's owner gave p up (it handed p over, or
	// was fenced off) to an owner elsewhere: the store writes nothing more
	// to p, forgets what it kept of p (freeing nothing: the new owner
	// keeps those bodies now) and counts nothing of p in Stats, until a
	// ReplayPartition acquires p again. The records stay. A store whose
	// data has no other writer (disk, memory) has no one to leave p to
	// and ignores it.
	Leave(p PartitionID)
	// Partitions lists the partitions that hold records, in order.
	Partitions() ([]PartitionID, error)
	Read(p PartitionID, pos uint64, h Hint) ([]byte, error)
	Keep(p PartitionID, pos uint64, h Hint) error
	// Recovered says that the owner has called Keep for every record it
	// still needs: from now on the store may free what nobody kept.
	Recovered()
	Release(p PartitionID, pos uint64, h Hint)
	// Wanted lists the partitions whose snapshots the store asks the owner
	// to renew: they hold old log that replay would otherwise read.
	Wanted() []PartitionID
	Disk() Disk
	Stats() Stats
	Close() error
}

// Keeper is what a compacting store asks of whoever keeps the index of
// its records (the engine): which kept records are still needed, and
// where the ones it moved are now.
type Keeper interface {
	// Live reports whether the kept record (p, pos) at h is still needed.
	Live(p PartitionID, pos uint64, h Hint) bool
	// Moved tells that the kept record (p, pos) moved from old to new. It
	// reports false when the record is no longer needed (the copy is then
	// released by the store).
	Moved(p PartitionID, pos uint64, old, new Hint) bool
}

// Compactor is a store that copies kept records out of mostly dead files.
type Compactor interface {
	// Compact copies at most budget bytes of kept records out of the
	// sparsest files and returns how many it copied.
	Compact(budget int64, k Keeper) int64
}

// done is a finished Future.
type done struct {
	err   error
	hints []Hint
	last  uint64
}

func (d done) Wait(context.Context) error { return d.err }
func (d done) Done() (bool, error)        { return true, d.err }
func (d done) Hints() []Hint              { return d.hints }
func (d done) Last() uint64               { return d.last }

// Done returns a Future that succeeded: hints for the records written, and
// the partition's last position.
func Done(hints []Hint, last uint64) Future { return done{hints: hints, last: last} }

// Failed returns a Future that failed with err.
func Failed(err error) Future { return done{err: err} }

// Pending is a Future a store resolves later (Resolve).
type Pending struct {
	ch    chan struct{}
	err   error
	hints []Hint
	last  uint64
}

// NewPending returns an unresolved Future.
func NewPending() *Pending { return &Pending{ch: make(chan struct{})} }

// Resolve finishes it; the hints and the last position are for a
// success.
func (p *Pending) Resolve(hints []Hint, last uint64, err error) {
	p.hints, p.last, p.err = hints, last, err
	close(p.ch)
}

func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.ch:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Pending) Done() (bool, error) {
	select {
	case <-p.ch:
		return true, p.err
	default:
		return false, nil
	}
}

func (p *Pending) Hints() []Hint {
	select {
	case <-p.ch:
		return p.hints
	default:
		return nil
	}
}

func (p *Pending) Last() uint64 {
	select {
	case <-p.ch:
		return p.last
	default:
		return 0
	}
}
