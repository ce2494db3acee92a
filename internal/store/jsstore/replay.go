package jsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/store"
)

// Replay hands over every partition of the store's prefix, one after the
// other, each from its newest snapshot, and makes this store the writer
// of each (as ReplayPartition from 0 does): for a single node that owns
// them all.
func (s *Store) Replay(fn func(store.Entry) error) error {
	ps, err := s.Partitions()
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := s.ReplayPartition(p, 0, fn); err != nil {
			return err
		}
	}
	return nil
}

// ReplayPartition hands over p's records from position from on, or, from
// 0, its newest snapshot and the records after it, up to the stream's
// tail as its leader had it when the replay began.
//
// From 0 it is the acquire: it waits for this store's writes of p to
// finish, and makes this store p's writer from that tail: its next append
// is fenced on it, so it fails (store.ErrFenced) if a former writer wrote
// after it, and once it landed every write of a former writer still in
// flight fails. What this store kept of p before is forgotten (the new
// owner keeps what it needs). A partition without a stream is empty: its
// stream is made by its first append.
//
// From a position, it reads from the stream's first message and fails
// with store.ErrNotFound when p no longer holds that position (a
// snapshot's purge took it).
func (s *Store) ReplayPartition(p store.PartitionID, from uint64, fn func(store.Entry) error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	if from > 0 {
		stream, subj := s.streamName(p), s.partSubj(p)
		s.mu.Unlock()
		_, err := s.read(p, stream, subj, from, fn)
		return err
	}
	pt := s.partLocked(p)
	for pt.busy || pt.replaying || pt.purging {
		s.idle.Wait()
		pt = s.partLocked(p)
	}
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	if pt.dropped {
		delete(s.parts, p)
		pt = s.partLocked(p)
	}
	pt.replaying = true
	s.mu.Unlock()

	r, err := s.read(p, pt.stream, pt.subj, 0, fn)

	s.mu.Lock()
	defer s.mu.Unlock()
	pt.replaying = false
	s.idle.Broadcast()
	if err == nil {
		pt.known, pt.exists, pt.lost, pt.dropped = true, r.exists, false, false
		pt.tail, pt.first, pt.last = r.st.LastSeq, r.st.FirstSeq, r.last
		pt.snapStart, pt.snapBytes, pt.snapStored, pt.snapMsgs = r.snapStart, r.snapBytes, r.snapStored, r.snapMsgs
		pt.logBytes, pt.logMsgs = r.logBytes, r.logMsgs
		pt.diskBytes, pt.statTail = int64(r.st.Bytes), r.st.LastSeq
		pt.kept, pt.keptSeqs, pt.keptSize, pt.keptHeap = map[loc]keptRec{}, map[uint64]int{}, nil, nil
		pt.purgeDue = false
		pt.rechainLocked()
	}
	s.startLocked(pt)
	return err
}

// replayer turns a partition's messages into entries: it joins records
// split over messages, checks that positions follow on, and counts what
// the partition holds.
type replayer struct {
	p    store.PartitionID
	from uint64
	fn   func(store.Entry) error

	exists  bool
	st      streamState
	pending *pendingRec
	prevPos uint64 // the last record's position; 0: none yet
	emitted bool   // from > 0: a record from position from on was handed over
	handed  bool   // fn was called
	atStart bool   // the message being read is the first

	last                                               uint64
	snapStart                                          uint64
	snapBytes, snapStored, snapMsgs, logBytes, logMsgs int64
}

type pendingRec struct {
	kind byte
	pos  uint64
	hint store.Hint
	data []byte
}

var errDropped = errors.New("the partition is dropped")

// errMovedOn: the stream changed under a read that needs it still (see
// lookAt and scan).
var errMovedOn = errors.New("jsstore: another store snapshotted the partition while it was read")

// look is a partition's stream as its leader had it: its state, the
// message at its last sequence, and the first message of the newest
// snapshot at or below it (0: none; not looked for: see lookAt).
type look struct {
	st     streamState
	exists bool
	last   msg
	snap   uint64
}

// lookAt reads p's stream: its state, then its last message, then (with
// snap) where its newest snapshot begins. These are three requests, and
// another store may write in between: a former owner that has not been
// fenced yet while this one takes the partition over, the catalog's owner
// while another node reads the catalog. A snapshot written after the state
// was read begins after its last sequence, and a replay from it would
// read nothing (an empty partition: a queue without settings, a catalog
// without queues); the purge below it may take the last message. Either
// way the look is taken again (for up to RetryFor), so that the three
// answers describe one stream.
func (s *Store) lookAt(p store.PartitionID, stream, subj string, snap bool) (look, error) {
	deadline := time.Now().Add(s.cfg.RetryFor)
	for {
		lk, err := s.lookOnce(p, stream, subj, snap)
		if !errors.Is(err, errMovedOn) || time.Now().After(deadline) || s.ctx.Err() != nil {
			return lk, err
		}
	}
}

func (s *Store) lookOnce(p store.PartitionID, stream, subj string, snap bool) (lk look, err error) {
	err = s.retry("reading "+stream, func(ctx context.Context) (err error) {
		lk.st, lk.exists, err = s.info(ctx, stream)
		return err
	})
	if err != nil || !lk.exists || lk.st.LastSeq == 0 {
		return lk, err
	}
	err = s.retry("reading the last message of "+stream, func(ctx context.Context) (err error) {
		lk.last, err = s.leaderGet(ctx, stream, msgGetRequest{Seq: lk.st.LastSeq})
		return err
	})
	if errors.Is(err, errNoMsg) {
		return lk, fmt.Errorf("%w: message %d of %s was purged", errMovedOn, lk.st.LastSeq, stream)
	}
	if err != nil || !snap || strings.HasSuffix(lk.last.subj, subjDrop) {
		return lk, err
	}
	if lk.snap, err = s.snapStart(&part{id: p, stream: stream, subj: subj}); err != nil {
		return lk, err
	}
	if lk.snap > lk.st.LastSeq {
		return lk, fmt.Errorf("%w: %s's newest snapshot begins at message %d, after its last (%d) as read", errMovedOn, stream, lk.snap, lk.st.LastSeq)
	}
	return lk, nil
}

// read replays p's stream (see ReplayPartition). A purge that passes the
// replay's position while it reads (another store's snapshot) makes it
// start again from the new state, if it has handed nothing over yet; a
// replay already under way fails instead (its caller has the entries so
// far, which a newer snapshot does not always reset).
func (s *Store) read(p store.PartitionID, stream, subj string, from uint64, fn func(store.Entry) error) (*replayer, error) {
	deadline := time.Now().Add(s.cfg.RetryFor)
	for {
		r, err := s.readOnce(p, stream, subj, from, fn)
		if errors.Is(err, errMovedOn) && r != nil && !r.handed && time.Now().Before(deadline) && s.ctx.Err() == nil {
			continue
		}
		return r, err
	}
}

func (s *Store) readOnce(p store.PartitionID, stream, subj string, from uint64, fn func(store.Entry) error) (*replayer, error) {
	r := &replayer{p: p, from: from, fn: fn}
	lk, err := s.lookAt(p, stream, subj, from == 0)
	if err != nil || !lk.exists || lk.st.LastSeq == 0 {
		r.exists = lk.exists
		return r, err
	}
	r.st, r.exists = lk.st, true
	// The last message: a tombstone (a drop cut short), or the
	// partition's last position.
	m := lk.last
	if strings.HasSuffix(m.subj, subjDrop) {
		if err := s.deleteStream(stream); err != nil {
			return nil, err
		}
		return &replayer{p: p}, nil
	}
	if r.last, err = strconv.ParseUint(m.hdr.Get(hdrLast), 10, 64); err != nil {
		return nil, fmt.Errorf("%w: partition %d: message %d has no %s header", store.ErrCorrupt, p, m.seq, hdrLast)
	}
	start := r.st.FirstSeq
	if from == 0 {
		if lk.snap > 0 && lk.snap < r.st.FirstSeq {
			return nil, fmt.Errorf("%w: partition %d: its newest snapshot begins at message %d, purged (the stream begins at %d)", store.ErrCorrupt, p, lk.snap, r.st.FirstSeq)
		}
		start = max(start, lk.snap)
	}
	r.atStart = true
	err = s.scan(stream, subj, start, r.st.LastSeq, r.message)
	switch {
	case errors.Is(err, errDropped):
		if err := s.deleteStream(stream); err != nil {
			return nil, err
		}
		return &replayer{p: p}, nil
	case errors.Is(err, errMovedOn):
		return r, fmt.Errorf("partition %d: %w", p, err)
	case err != nil:
		return nil, err
	case r.pending != nil:
		return nil, fmt.Errorf("%w: partition %d: its stream ends inside record %d", store.ErrCorrupt, p, r.pending.pos)
	}
	return r, nil
}

// scan calls fn for the stream's messages from start to end, in order:
// batches of direct gets (any replica), and the leader's answer when the
// replica that answered has not got the next message yet. The messages
// follow on without a gap (the streams deny deletes): a message after the
// next one means those before it were purged under the scan (another
// store's snapshot), and it fails with errMovedOn rather than go on as if
// the partition ended, or went on, there.
func (s *Store) scan(stream, subj string, start, end uint64, fn func(msg) error) error {
	next := start
	for next <= end {
		if s.ctx.Err() != nil {
			return store.ErrClosed
		}
		ms, _ := s.directGet(s.ctx, stream, next, int(min(end-next+1, 256)), 4<<20)
		progressed := false
		for _, m := range ms {
			if m.seq < next {
				continue
			}
			if m.seq != next {
				return fmt.Errorf("%w: %s holds message %d, not %d", errMovedOn, stream, m.seq, next)
			}
			if err := fn(m); err != nil {
				return err
			}
			next, progressed = m.seq+1, true
		}
		if progressed {
			continue
		}
		var m msg
		err := s.retry("reading "+stream, func(ctx context.Context) (err error) {
			m, err = s.leaderGet(ctx, stream, msgGetRequest{Seq: next, NextFor: subj + ".>"})
			return err
		})
		if errors.Is(err, errNoMsg) {
			return fmt.Errorf("%w: %s ends before message %d", store.ErrCorrupt, stream, end)
		}
		if err != nil {
			return err
		}
		if m.seq != next {
			return fmt.Errorf("%w: %s holds message %d, not %d", errMovedOn, stream, m.seq, next)
		}
		if err := fn(m); err != nil {
			return err
		}
		next = m.seq + 1
	}
	return nil
}

// message takes one message of the replay.
func (r *replayer) message(m msg) error {
	atStart := r.atStart
	r.atStart = false
	fp, es, err := decodeFrame(m.data)
	if err != nil {
		return fmt.Errorf("%w: partition %d: message %d: %v", store.ErrCorrupt, r.p, m.seq, err)
	}
	if fp != r.p {
		return fmt.Errorf("%w: partition %d: message %d holds records of partition %d", store.ErrCorrupt, r.p, m.seq, fp)
	}
	size := storedSize(m.subj, ownHeaderLen(m.hdr), len(m.data))
	if idx := m.hdr.Get(hdrSnap); idx != "" {
		if idx == "0" {
			r.snapStart, r.snapBytes, r.snapStored, r.snapMsgs, r.logBytes, r.logMsgs = m.seq, 0, 0, 0, 0, 0
		}
		r.snapStored += size
		r.snapMsgs++
	}
	r.logBytes += size
	r.logMsgs++
	if l, err := strconv.ParseUint(m.hdr.Get(hdrLast), 10, 64); err == nil {
		r.last = max(r.last, l)
	}
	for i, e := range es {
		if e.cont() {
			if r.pending == nil && atStart && i == 0 {
				continue // the tail of a record before the replay's start
			}
			if r.pending == nil || r.pending.pos != e.pos || r.pending.kind != e.base() {
				return fmt.Errorf("%w: partition %d: message %d continues a record that is not there", store.ErrCorrupt, r.p, m.seq)
			}
			r.pending.data = append(r.pending.data, e.data...)
			r.pending.hint.D++
			if !e.more() {
				rec := *r.pending
				r.pending = nil
				if err := r.emit(rec); err != nil {
					return err
				}
			}
			continue
		}
		if r.pending != nil {
			return fmt.Errorf("%w: partition %d: record %d is cut short at message %d", store.ErrCorrupt, r.p, r.pending.pos, m.seq)
		}
		rec := pendingRec{kind: e.base(), pos: e.pos, hint: hintOf(m.seq, uint32(i), 1), data: e.data}
		if e.more() {
			rec.data = append([]byte(nil), e.data...)
			r.pending = &rec
			continue
		}
		if err := r.emit(rec); err != nil {
			return err
		}
	}
	return nil
}

func (r *replayer) emit(rec pendingRec) error {
	switch rec.kind {
	case kindDrop:
		return errDropped
	case kindMoved:
		if r.from > 0 {
			return nil
		}
		return r.hand(store.Entry{P: r.p, Pos: rec.pos, Hint: rec.hint, Moved: true})
	}
	if r.prevPos != 0 && rec.pos != r.prevPos+1 {
		return fmt.Errorf("%w: partition %d: record %d follows record %d", store.ErrCorrupt, r.p, rec.pos, r.prevPos)
	}
	r.prevPos = rec.pos
	r.last = max(r.last, rec.pos)
	snap := rec.kind == kindSnap || rec.kind == kindSnapFirst
	if snap {
		r.snapBytes += int64(len(rec.data))
	}
	e := store.Entry{P: r.p, Pos: rec.pos, Data: rec.data, Hint: rec.hint, Snapshot: snap}
	if r.from > 0 {
		if rec.pos < r.from {
			return nil
		}
		if !r.emitted && rec.pos > r.from {
			return fmt.Errorf("%w: partition %d holds nothing from position %d (it begins at %d)", store.ErrNotFound, r.p, r.from, rec.pos)
		}
		r.emitted = true
		return r.hand(e)
	}
	e.Reset = rec.kind == kindSnapFirst
	return r.hand(e)
}

// hand hands an entry over to the replay's caller.
func (r *replayer) hand(e store.Entry) error {
	r.handed = true
	return r.fn(e)
}

// ownHeaderLen is the bytes of a read message's headers as written (a
// direct get adds its own).
func ownHeaderLen(h map[string][]string) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		switch k {
		case "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending", "Nats-Last-Sequence":
			continue
		}
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}
