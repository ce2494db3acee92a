package jsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
		pt.kept, pt.keptSeqs, pt.keptHeap = map[loc]keptRec{}, map[uint64]int{}, nil
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
	emitted bool
	atStart bool // the message being read is the first

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

// read replays p's stream (see ReplayPartition).
func (s *Store) read(p store.PartitionID, stream, subj string, from uint64, fn func(store.Entry) error) (*replayer, error) {
	r := &replayer{p: p, from: from, fn: fn}
	var ok bool
	err := s.retry("reading "+stream, func(ctx context.Context) (err error) {
		r.st, ok, err = s.info(ctx, stream)
		return err
	})
	if err != nil || !ok || r.st.LastSeq == 0 {
		r.st = streamState{}
		r.exists = ok
		return r, err
	}
	r.exists = true
	// The last message: a tombstone (a drop cut short), or the
	// partition's last position.
	var m msg
	err = s.retry("reading the last message of "+stream, func(ctx context.Context) (err error) {
		m, err = s.leaderGet(ctx, stream, msgGetRequest{Seq: r.st.LastSeq})
		return err
	})
	if err != nil {
		return nil, err
	}
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
		snap, err := s.snapStart(&part{id: p, stream: stream, subj: subj})
		if err != nil {
			return nil, err
		}
		if snap > 0 && snap < r.st.FirstSeq {
			return nil, fmt.Errorf("%w: partition %d: its newest snapshot begins at message %d, purged (the stream begins at %d)", store.ErrCorrupt, p, snap, r.st.FirstSeq)
		}
		start = max(start, snap)
	}
	r.atStart = true
	err = s.scan(stream, subj, start, r.st.LastSeq, r.message)
	switch {
	case errors.Is(err, errDropped):
		if err := s.deleteStream(stream); err != nil {
			return nil, err
		}
		return &replayer{p: p}, nil
	case err != nil:
		return nil, err
	case r.pending != nil:
		return nil, fmt.Errorf("%w: partition %d: its stream ends inside record %d", store.ErrCorrupt, p, r.pending.pos)
	}
	return r, nil
}

// scan calls fn for the stream's messages from start to end, in order:
// batches of direct gets (any replica), and the leader's answer when the
// replica that answered has not got the next message yet.
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
			if m.seq > end {
				return nil
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
		if m.seq > end {
			return nil
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
		return r.fn(store.Entry{P: r.p, Pos: rec.pos, Hint: rec.hint, Moved: true})
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
		return r.fn(e)
	}
	e.Reset = rec.kind == kindSnapFirst
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
