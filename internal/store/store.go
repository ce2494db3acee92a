// Package store is Sluice's durable log. It knows nothing of queues: its
// owner (the broker) hands it batches of opaque records and gets them back,
// in commit order, on recovery.
//
// A batch holds
//   - puts: large immutable records (message bodies) written to segment
//     files; each gets a Loc and is read back with ReadPut;
//   - entries: small owner records (state changes: receive counts,
//     visibility, deletes, queue metadata) written to the journal;
//   - frees: Locs of puts that are no longer needed (their message was
//     deleted); once the batch is durable the store drops them from its live
//     accounting, unlinks a segment with nothing live at once, and compacts
//     mostly-dead segments at a bounded rate.
//
// Every put also leaves a small journal record (its key, loc and owner
// index bytes), so the journal is the single ordered history; segments only
// hold bodies. When the journal grows past a threshold the store asks the
// owner for a snapshot (Options.Snapshot) from inside its writer, between
// batches, writes it as a checkpoint and drops the journal before it.
// Recovery therefore reads the last checkpoint, the journal after it, and
// nothing else: its cost depends on live data, not on history.
//
// This shape (append a batch, replay from a position, install a snapshot)
// is the seam a replicated log can implement later (DESIGN.md section 7).
package store

import (
	"context"
	"errors"
	"io"
)

// Loc is where a put lives. The zero Loc is invalid.
type Loc struct {
	Seg uint32 // segment number, from 1
	Off uint32 // byte offset of the record in the segment
	Len uint32 // length of the put's data
}

// Put is a large immutable record.
type Put struct {
	// Key identifies the record to its owner (for example queue id and
	// message sequence). At most 64 bytes. It is stored with the data and
	// handed back on relocation and replay.
	Key []byte
	// Index is small owner data journalled with the put (for example the
	// sent time, delay and group id) so that recovery can rebuild the
	// owner's index without reading Data. At most 64 KiB.
	Index []byte
	// Data is the record body; it is read back with ReadPut.
	Data []byte
}

// Batch is one group of records written atomically with respect to
// recovery: after a crash either all of a batch's records are replayed or
// none is.
type Batch struct {
	Puts    []Put
	Entries [][]byte
	Frees   []Loc

	// Locs is filled by the store (one per put) before Applied runs.
	Locs []Loc

	// Applied, when not nil, runs in the store's writer once the batch is
	// durable and before any later snapshot, so state the owner changes in
	// it is always in the next snapshot. It must be quick and must not call
	// the store (it may take the owner's locks; callers must therefore never
	// hold those locks while waiting for a commit).
	Applied func(locs []Loc)
}

// Pending is a submitted batch.
type Pending interface {
	// Wait blocks until the batch is durable (per the sync mode) or failed.
	// Cancelling ctx stops the wait, not the write.
	Wait(ctx context.Context) error
}

// Replayer receives the recovered history, in commit order.
type Replayer interface {
	// Snapshot is called first with the latest checkpoint, if there is one.
	Snapshot(r io.Reader) error
	// Put is called for a put committed after the checkpoint.
	Put(key, index []byte, loc Loc) error
	// Entry is called for an owner entry committed after the checkpoint.
	Entry(data []byte) error
	// Relocate is called when compaction moved a put after the checkpoint.
	Relocate(key []byte, from, to Loc) error
}

// Store is the log. Disk and Memory implement it and pass one conformance
// suite.
type Store interface {
	// Replay replays the recovered history into r. It must be called once,
	// after opening and before the first Submit.
	Replay(r Replayer) error
	// Submit queues a batch for the writer and returns at once; it never
	// blocks on I/O. Batches are committed in submission order.
	Submit(b *Batch) Pending
	// ReadPut returns a put's data, verifying its checksum.
	ReadPut(loc Loc) ([]byte, error)
	// Stats returns the store's accounting.
	Stats() Stats
	// Close flushes, fsyncs and closes. Submit after Close fails.
	Close() error
}

// Options configure a store. The owner callbacks are required.
type Options struct {
	// Snapshot writes the owner's complete state. It is called from the
	// writer between batches; the owner must include every batch whose
	// Applied has run.
	Snapshot func(w io.Writer) error
	// Relocate tells the owner that compaction moved the put with key from
	// one loc to another. It returns false if the owner no longer needs the
	// put (the copy is then dropped). Called from the writer goroutine.
	Relocate func(key []byte, from, to Loc) bool
}

// Stats is a point-in-time view of the store.
type Stats struct {
	Segments        int
	LiveBytes       int64
	DeadBytes       int64
	LivePuts        int64
	JournalBytes    int64
	CheckpointBytes int64
	Checkpoints     int64
	Compactions     int64
	CompactedBytes  int64
	Fsyncs          int64
}

// Errors.
var (
	ErrClosed  = errors.New("store: closed")
	ErrCorrupt = errors.New("store: corrupt record")
	ErrNoSpace = errors.New("store: no space left on device")
)
