package jsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/store"
)

// ErrOutcomeUnknown: a write may or may not be in the stream (its
// acknowledgement was lost and the stream's leader could not be asked
// before RetryFor passed or the store closed). The error also wraps
// store.ErrFenced: the store no longer writes the partition until
// ReplayPartition has read what is really there.
var ErrOutcomeUnknown = store.ErrOutcomeUnknown

// Message headers of the store's own (besides JetStream's).
const (
	// hdrSnap is on every message of a snapshot: its index in the
	// snapshot, so the newest snapshot's first message is the last
	// snapshot message's sequence minus its index.
	hdrSnap = "Sluice-Snap"
	// hdrLast is on every message: the partition's last position once
	// the message is written (a partition this store has not replayed
	// learns it from its last message).
	hdrLast = "Sluice-Last"
)

// Subjects, under <prefix>.p.<n>.
const (
	subjRec   = ".r" // records of appends
	subjSnap  = ".s" // snapshots
	subjMoved = ".m" // kept records copied forward by compaction
	subjDrop  = ".d" // the tombstone of a drop under way
)

var (
	_ store.Store     = (*Store)(nil)
	_ store.Compactor = (*Store)(nil)
)

// Store is the JetStream store: one stream per partition.
type Store struct {
	cfg   Config
	nc    *nats.Conn
	log   *slog.Logger
	id    string // random: makes this store's message ids unique
	limit int    // the most bytes of a frame
	subj  string // the subjects' prefix: the prefix in lower case
	maxP  int64  // the connection's max payload (the streams' MaxMsgSize)
	cache *cache

	ctx    context.Context // cancelled by Close: retries stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the janitor
	groups atomic.Uint64 // message id counter

	mu         sync.Mutex
	idle       *sync.Cond // a partition's writer or replay finished
	parts      map[store.PartitionID]*part
	closed     bool
	recovering bool // until Recovered, nothing is purged
	stats      store.Stats
	buckets    [len(store.FsyncBounds) + 1]int64
	disk       store.Disk
	diskAt     time.Time
}

// part is what the store knows of one partition. Guarded by Store.mu.
type part struct {
	id     store.PartitionID
	stream string
	subj   string // <prefix>.p.<n>

	known     bool // tail and last are known (replayed, or read from the stream)
	exists    bool // its stream exists
	lost      bool // another writer took it over: no writes until ReplayPartition
	dropped   bool
	busy      bool // its writer goroutine runs
	replaying bool // an acquire (ReplayPartition from 0) is under way
	lead      bool // Lead asked to lead its stream: the writer does it next
	queue     []*op

	accepted uint64 // the last position, counting the queued appends
	last     uint64 // the last durable position
	tail     uint64 // the stream's last sequence, as this writer expects it
	first    uint64 // the stream's first sequence (what purges left)

	snapStart  uint64 // first message of the newest snapshot; 0: none
	snapBytes  int64  // its records' bytes
	snapStored int64  // its messages' stored bytes
	snapMsgs   int64
	logBytes   int64 // stored bytes from snapStart on (or all, without a snapshot)
	logMsgs    int64
	diskBytes  int64  // the stream's stored bytes
	statTail   uint64 // diskBytes counts the messages up to here

	// Kept records: what the owner will read back. Each costs about 100
	// bytes of memory here (its map entries and a heap slot); a store
	// holding millions of live bodies holds that many entries.
	kept     map[loc]keptRec
	keptSeqs map[uint64]int // message → kept records in it
	// keptSize is the stored bytes of the messages in keptSeqs that this
	// store wrote (the size of one kept again after a replay is not known).
	keptSize  map[uint64]int64
	keptHeap  seqHeap // messages with kept records (lazily cleaned)
	pin       uint64  // a bad release's message: nothing at or above it goes; 0: none
	purgeDue  bool
	purging   bool
	purgingTo uint64 // the floor of the purge under way
	purgedAt  time.Time
}

// loc is a record's place in its stream: the message holding its first
// byte and its entry there.
type loc struct {
	seq uint64
	idx uint32
}

type keptRec struct {
	pos    uint64
	chunks uint32
}

type opKind uint8

const (
	opAppend opKind = iota
	opSnapshot
	opMove
	opDrop
)

// op is an operation queued for a partition's writer: its messages are
// encoded before it is queued; the writer adds the headers.
type op struct {
	kind   opKind
	prev   uint64
	n      uint64 // positions it takes
	subj   string
	frames [][]byte
	locs   []recLoc
	keep   []bool   // opAppend: per record
	moves  []uint64 // opMove: the records' positions
	bytes  int      // record bytes
	fut    *store.Pending

	// Set by the writer.
	at    int    // the commit's message holding its first frame
	skip  uint32 // entries of other operations before its own there
	hints []store.Hint
	end   uint64
}

// Open returns a store on cfg.Conn. It reads nothing yet: Replay (all
// partitions, a single node) or ReplayPartition (one, an owner taking it
// over) comes first for partitions that hold records; a partition never
// written is written at once.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Conn.IsClosed() {
		return nil, errors.New("jsstore: the connection is closed")
	}
	mp := cfg.Conn.MaxPayload()
	size := int64(cfg.MaxMessage)
	if size == 0 {
		size = min(mp, 1<<20)
	}
	if size > mp {
		return nil, fmt.Errorf("jsstore: MaxMessage %d is above the servers' max payload (%d bytes)", size, mp)
	}
	if size-headerRoom < 16<<10 {
		return nil, fmt.Errorf("jsstore: messages of %d bytes are too small", size)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, nc: cfg.Conn, log: cfg.Logger, id: hex.EncodeToString(rnd[:]), limit: int(size) - headerRoom,
		subj: strings.ToLower(cfg.Prefix), maxP: mp, cache: newCache(cfg.MaxBodyCache),
		kick: make(chan struct{}, 1), parts: map[store.PartitionID]*part{}, recovering: true,
		disk: store.Disk{Free: 1<<63 - 1, Reserve: cfg.Reserve}}
	s.idle = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.janitor()
	return s, nil
}

// streamName and subject name partition p's stream and subjects.
func (s *Store) streamName(p store.PartitionID) string {
	return s.cfg.Prefix + "_P" + strconv.FormatUint(uint64(p), 10)
}

func (s *Store) partSubj(p store.PartitionID) string {
	return s.subj + ".p." + strconv.FormatUint(uint64(p), 10)
}

// partOf parses a stream name of this store.
func (s *Store) partOf(stream string) (store.PartitionID, bool) {
	rest, ok := strings.CutPrefix(stream, s.cfg.Prefix+"_P")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return store.PartitionID(n), err == nil
}

// partLocked returns p's state, making it if new.
func (s *Store) partLocked(p store.PartitionID) *part {
	pt := s.parts[p]
	if pt == nil {
		pt = &part{id: p, stream: s.streamName(p), subj: s.partSubj(p), kept: map[loc]keptRec{}, keptSeqs: map[uint64]int{}}
		s.parts[p] = pt
	}
	return pt
}

func (s *Store) fenced(pt *part, why string) error {
	return &store.AppendError{Err: fmt.Errorf("%w: %s", store.ErrFenced, why), P: pt.id, Last: pt.last}
}

// submit queues o for p's writer, after the local fence check.
func (s *Store) submit(p store.PartitionID, o *op) store.Future {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Failed(&store.AppendError{Err: store.ErrClosed, P: p})
	}
	pt := s.partLocked(p)
	if pt.dropped && o.prev == 0 && o.kind != opMove && o.kind != opDrop && !pt.busy && !pt.replaying {
		// A partition made again after its drop starts afresh.
		delete(s.parts, p)
		pt = s.partLocked(p)
	}
	switch {
	case pt.dropped:
		return store.Failed(s.fenced(pt, "the partition was dropped"))
	case pt.lost:
		return store.Failed(s.fenced(pt, "another writer took the partition over"))
	case pt.known && o.kind != opMove && o.prev != pt.accepted:
		return store.Failed(s.fenced(pt, fmt.Sprintf("an append after position %d to a partition ending at %d", o.prev, pt.accepted)))
	}
	if pt.known {
		pt.accepted += o.n
	}
	o.fut = store.NewPending()
	pt.queue = append(pt.queue, o)
	s.startLocked(pt)
	return o.fut
}

// leadDue says the writer has a Lead to do.
func (pt *part) leadDue() bool { return pt.lead && pt.exists && !pt.lost && !pt.dropped }

// startLocked starts p's writer if it has work and may run.
func (s *Store) startLocked(pt *part) {
	if (len(pt.queue) > 0 || pt.leadDue()) && !pt.busy && !pt.replaying && !s.closed {
		pt.busy = true
		s.wg.Add(1)
		go s.write(pt)
	}
}

// Append writes recs at positions prev+1 … of p, as one atomic batch of as
// few messages as they fit (a record larger than a message spans several).
// An append needing more than MaxBatch messages is refused with
// store.ErrTooBig.
func (s *Store) Append(p store.PartitionID, prev uint64, recs []store.Rec) store.Future {
	enc := newEncoder(p, s.limit)
	for i, r := range recs {
		enc.expect += entryLen(prev+1+uint64(i), len(r.Data))
	}
	keep := make([]bool, len(recs))
	for i, r := range recs {
		k := kindRec
		if r.Keep {
			k, keep[i] = kindKeep, true
		}
		enc.add(k, prev+1+uint64(i), r.Data)
		if enc.count() > s.cfg.MaxBatch {
			return s.tooBig(p, fmt.Sprintf("an append of %d records needs more than %d messages of %d bytes", len(recs), s.cfg.MaxBatch, s.limit))
		}
	}
	o := &op{kind: opAppend, prev: prev, n: uint64(len(recs)), subj: s.partSubj(p) + subjRec, frames: enc.finish(), locs: enc.locs,
		keep: keep, bytes: enc.bytes}
	return s.submit(p, o)
}

func (s *Store) tooBig(p store.PartitionID, why string) store.Future {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last uint64
	if pt := s.parts[p]; pt != nil {
		last = pt.last
	}
	return store.Failed(&store.AppendError{Err: fmt.Errorf("%w: %s", store.ErrTooBig, why), P: p, Last: last})
}

// Snapshot writes recs as p's snapshot after prev: one atomic batch on the
// snapshot subject, its messages numbered (header Sluice-Snap), consumed
// here as they come. Replay starts at the newest snapshot; what it makes
// unnecessary is purged once nothing kept lies there.
//
// A snapshot needing more than MaxBatch messages fails with
// store.ErrTooBig. (The fix, when partitions grow that large: write it
// to the Object Store and append a fenced pointer record.) Until then a
// snapshot is held whole in memory while it is written: at most MaxBatch
// messages.
func (s *Store) Snapshot(p store.PartitionID, prev uint64, recs iter.Seq[store.Rec]) store.Future {
	enc := newEncoder(p, s.limit)
	n := uint64(0)
	for r := range recs {
		k := kindSnap
		if n == 0 {
			k = kindSnapFirst
		}
		n++
		enc.add(k, prev+n, r.Data)
		if enc.count() > s.cfg.MaxBatch {
			return s.tooBig(p, fmt.Sprintf("a snapshot needs more than %d messages of %d bytes", s.cfg.MaxBatch, s.limit))
		}
	}
	enc.empty()
	o := &op{kind: opSnapshot, prev: prev, n: n, subj: s.partSubj(p) + subjSnap, frames: enc.finish(), locs: enc.locs, bytes: enc.bytes}
	return s.submit(p, o)
}

// Drop removes p, fenced on its last position: a tombstone message fenced
// on the stream's tail (so a stale writer cannot drop what a new one
// writes, and replay skips a partition whose deletion was cut short),
// then the stream's deletion.
// Leave gives p up to another writer: appends fail as fenced until a
// ReplayPartition, and what p kept is forgotten (the new owner's store
// keeps it), so that neither Stats nor a purge goes by it.
func (s *Store) Leave(p store.PartitionID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.parts[p]
	if pt == nil || pt.replaying {
		return
	}
	pt.lost = true
	pt.kept, pt.keptSeqs, pt.keptSize, pt.keptHeap, pt.pin, pt.purgeDue = map[loc]keptRec{}, map[uint64]int{}, nil, nil, 0, false
	s.cache.forget(p)
}

func (s *Store) Drop(p store.PartitionID, prev uint64) store.Future {
	enc := newEncoder(p, s.limit)
	enc.add(kindDrop, prev, nil)
	return s.submit(p, &op{kind: opDrop, prev: prev, subj: s.partSubj(p) + subjDrop, frames: enc.finish()})
}

// Partitions lists the partitions whose streams exist (and that this
// store has not dropped), in order.
func (s *Store) Partitions() ([]store.PartitionID, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	var names []string
	err := s.retry("listing streams", func(ctx context.Context) (err error) {
		names, err = s.streamNames(ctx, s.subj+".p.>")
		return err
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.PartitionID
	for _, n := range names {
		p, ok := s.partOf(n)
		if !ok {
			continue
		}
		if pt := s.parts[p]; pt != nil && pt.dropped {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// Stats returns the store's figures. DiskBytes and LogBytes are the
// streams' stored bytes (as of the last purge, plus what was written
// since) and those from each newest snapshot on; SegmentsRemoved counts
// the messages purged; Fsyncs and FsyncBuckets count the commits (an
// atomic batch or a single publish) and their round trips to a
// replicated acknowledgement; Segments is the number of streams.
// LiveBytes, DeadBytes and DeadRecords are not measured (0): the stream
// state says how many bytes, not which are live.
func (s *Store) Stats() store.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.FsyncBuckets = append([]int64(nil), s.buckets[:]...)
	for _, pt := range s.parts {
		if pt.dropped || !pt.exists || pt.lost {
			continue
		}
		st.Segments++
		st.PartitionsAlive++
		st.KeptRecords += int64(len(pt.kept))
		st.DiskBytes += pt.diskBytes
		st.LogBytes += pt.logBytes
		st.SnapshotBytes += pt.snapBytes
	}
	return st
}

// Close stops the store: queued writes fail with store.ErrClosed, a write
// in flight gets one last answer (or fails with ErrOutcomeUnknown), and
// the writers stop. The connection stays open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var failed []failure
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		pt := s.parts[p]
		for _, o := range pt.queue {
			failed = append(failed, failure{o, &store.AppendError{Err: store.ErrClosed, P: p, Last: pt.last}})
		}
		pt.queue = nil
	}
	s.mu.Unlock()
	resolveFailures(failed)
	s.cancel()
	s.wg.Wait()
	s.cache.clear()
	return nil
}

// failure is an operation to fail (outside the lock).
type failure struct {
	o   *op
	err error
}

func resolveFailures(fs []failure) {
	for _, f := range fs {
		f.o.fut.Resolve(nil, 0, f.err)
	}
}

// hintOf is a record's hint: its message's sequence (A high, B low 32
// bits), its entry in it (C) and how many messages it spans (D).
func hintOf(seq uint64, idx, chunks uint32) store.Hint {
	return store.Hint{A: uint32(seq >> 32), B: uint32(seq), C: idx, D: chunks}
}

func seqOf(h store.Hint) uint64 { return uint64(h.A)<<32 | uint64(h.B) }
