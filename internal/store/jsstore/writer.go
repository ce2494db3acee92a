package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/store"
)

// JetStream's publish headers.
const (
	hdrMsgID      = "Nats-Msg-Id"
	hdrExpectLast = "Nats-Expected-Last-Sequence"
	hdrBatchID    = "Nats-Batch-Id"
	hdrBatchSeq   = "Nats-Batch-Sequence"
	hdrBatchEnd   = "Nats-Batch-Commit"
)

// flowBytes: within an atomic batch, a message after this many bytes asks
// for an answer (the server gives an empty one once it staged the batch so
// far), so a batch of a thousand large messages never floods the route.
const flowBytes = 8 << 20

// outMsg is one message of a commit.
type outMsg struct {
	subj string
	data []byte
	snap int    // index in its snapshot; -1: not a snapshot message
	last uint64 // the partition's last position once it is written
	hlen int    // its headers' bytes (set by attempt)
}

// write is p's writer: it commits the queued operations, a group at a
// time (group commit: everything queued, up to MaxBatch messages, as one
// atomic batch), until the queue is empty.
func (s *Store) write(pt *part) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(pt.queue) == 0 && !pt.leadDue() || pt.replaying || s.closed {
			var failed []failure
			if s.closed {
				for _, o := range pt.queue {
					failed = append(failed, failure{o, &store.AppendError{Err: store.ErrClosed, P: pt.id, Last: pt.last}})
				}
				pt.queue = nil
			}
			pt.busy = false
			s.idle.Broadcast()
			s.mu.Unlock()
			resolveFailures(failed)
			return
		}
		if !pt.known {
			s.mu.Unlock()
			err := s.load(pt)
			s.mu.Lock()
			if err != nil {
				var failed []failure
				for _, o := range pt.queue {
					failed = append(failed, failure{o, &store.AppendError{Err: fmt.Errorf("jsstore: learning where partition %d ends: %w", pt.id, err), P: pt.id}})
				}
				pt.queue = nil
				s.mu.Unlock()
				resolveFailures(failed)
				continue
			}
		}
		if len(pt.queue) == 0 { // only a Lead to do
			s.mu.Unlock()
			s.takeLead(pt)
			continue
		}
		group, failed := s.takeGroupLocked(pt)
		tail, last, exists := pt.tail, pt.last, pt.exists
		s.mu.Unlock()
		resolveFailures(failed)
		if len(group) > 0 {
			s.commit(pt, group, tail, last, exists)
		}
	}
}

// takeGroupLocked takes the next group from p's queue: operations whose
// prev follows on (the others fail, fenced), up to MaxBatch messages; a
// drop goes alone.
func (s *Store) takeGroupLocked(pt *part) (group []*op, failed []failure) {
	wlast, msgs := pt.last, 0
	for len(pt.queue) > 0 {
		o := pt.queue[0]
		var err error
		switch {
		case pt.lost:
			err = s.fenced(pt, "another writer took the partition over")
		case pt.dropped:
			err = s.fenced(pt, "the partition was dropped")
		case o.kind != opMove && o.prev != wlast:
			err = s.fenced(pt, fmt.Sprintf("an append after position %d to a partition ending at %d", o.prev, wlast))
		}
		if err == nil && len(group) > 0 && (o.kind == opDrop || msgs+len(o.frames) > s.cfg.MaxBatch) {
			break
		}
		pt.queue[0] = nil
		pt.queue = pt.queue[1:]
		if err != nil {
			failed = append(failed, failure{o, err})
			continue
		}
		group = append(group, o)
		msgs += len(o.frames)
		wlast += o.n
		if o.kind == opDrop {
			break
		}
	}
	if len(pt.queue) == 0 {
		pt.queue = nil
	}
	return group, failed
}

// rechainLocked sets the accepted position from the durable one and the
// queued operations that will follow on from it.
func (pt *part) rechainLocked() {
	pt.accepted = pt.last
	for _, o := range pt.queue {
		if o.kind != opMove && o.prev == pt.accepted {
			pt.accepted += o.n
		}
	}
}

// load learns where a partition this store has not replayed ends, from
// its stream's leader: a partition written for the first time, or one
// written without being taken over (its former writers' kept records are
// unknown here, so nothing the stream held then is ever purged by this
// store).
func (s *Store) load(pt *part) error {
	lk, err := s.lookAt(pt.id, pt.stream, pt.subj, true)
	if err != nil {
		return err
	}
	st, ok := lk.st, lk.exists
	var last, snapStart uint64
	if ok && st.LastSeq > 0 {
		m := lk.last
		if strings.HasSuffix(m.subj, subjDrop) {
			// A drop cut short: finish it; the partition starts afresh.
			if err := s.deleteStream(pt.stream); err != nil {
				return err
			}
			ok, st = false, streamState{}
		} else {
			if last, err = strconv.ParseUint(m.hdr.Get(hdrLast), 10, 64); err != nil {
				return fmt.Errorf("%w: partition %d: message %d has no %s header", store.ErrCorrupt, pt.id, m.seq, hdrLast)
			}
			snapStart = lk.snap
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pt.known, pt.exists = true, ok
	pt.tail, pt.first, pt.last = st.LastSeq, st.FirstSeq, last
	pt.snapStart, pt.diskBytes, pt.statTail, pt.logBytes = snapStart, int64(st.Bytes), st.LastSeq, int64(st.Bytes)
	if ok && st.LastSeq > 0 {
		pt.pinLocked(st.LastSeq + 1)
	}
	pt.rechainLocked()
	return nil
}

// snapStart finds the first message of p's newest snapshot (0: none),
// from the last snapshot message on the leader.
func (s *Store) snapStart(pt *part) (uint64, error) {
	var m msg
	err := s.retry("finding the snapshot of "+pt.stream, func(ctx context.Context) (err error) {
		m, err = s.leaderGet(ctx, pt.stream, msgGetRequest{LastFor: pt.subj + subjSnap})
		return err
	})
	if errors.Is(err, errNoMsg) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	idx, err := strconv.ParseUint(m.hdr.Get(hdrSnap), 10, 64)
	if err != nil || idx >= m.seq {
		return 0, fmt.Errorf("%w: partition %d: snapshot message %d has a bad %s header", store.ErrCorrupt, pt.id, m.seq, hdrSnap)
	}
	return m.seq - idx, nil
}

// streamConfig is a partition's stream.
func (s *Store) streamConfig(pt *part) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               pt.stream,
		Description:        fmt.Sprintf("sluice partition %d", pt.id),
		Subjects:           []string{pt.subj + ".>"},
		Retention:          jetstream.LimitsPolicy,
		MaxConsumers:       -1,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  -1,
		Discard:            jetstream.DiscardNew,
		MaxMsgSize:         int32(min(s.maxP, 1<<31-1)),
		Storage:            jetstream.FileStorage,
		Replicas:           s.cfg.Replicas,
		Duplicates:         s.cfg.Duplicates,
		DenyDelete:         true,
		DenyPurge:          false,
		AllowRollup:        true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

const codeStreamNameInUse = 10058

// ensureStream makes p's stream (waiting for a meta leader).
func (s *Store) ensureStream(pt *part) error {
	cfg := s.streamConfig(pt)
	return s.retry("making stream "+pt.stream, func(ctx context.Context) error {
		var r apiResponse
		err := s.request(ctx, "STREAM.CREATE."+pt.stream, cfg, &r)
		if errCode(err) == codeStreamNameInUse {
			// There with another configuration (an operator changed it):
			// it is written as it is.
			s.log.Warn("jsstore: a partition's stream exists with another configuration", "stream", pt.stream, "err", err)
			return nil
		}
		return err
	})
}

func (s *Store) deleteStream(stream string) error {
	return s.retry("deleting "+stream, func(ctx context.Context) error {
		var r apiResponse
		err := s.request(ctx, "STREAM.DELETE."+stream, nil, &r)
		if errCode(err) == codeStreamNotFound {
			return nil
		}
		return err
	})
}

// commit writes one group and resolves its operations.
// tail and last are the stream's last sequence and the partition's last
// position before it.
func (s *Store) commit(pt *part, group []*op, tail, last uint64, exists bool) {
	if group[0].kind == opDrop {
		s.commitDrop(pt, group[0], tail, exists)
		return
	}
	if !exists {
		if err := s.ensureStream(pt); err != nil {
			s.failGroup(pt, group, fmt.Errorf("jsstore: making the stream of partition %d: %w", pt.id, err))
			return
		}
		s.mu.Lock()
		pt.exists = true
		s.mu.Unlock()
	}
	s.takeLead(pt)
	msgs := s.pack(group, last)
	if len(msgs) == 0 { // empty appends only
		s.landed(pt, group, msgs, tail, 0)
		return
	}
	t0 := time.Now()
	v, err := s.publish(pt, msgs, tail, s.msgBase())
	switch v {
	case landed:
		s.landed(pt, group, msgs, tail, time.Since(t0))
	case fencedOut:
		s.lose(pt, group, fmt.Errorf("%w: another writer took partition %d over (or dropped it): %v", store.ErrFenced, pt.id, err), false)
	case unknownOut:
		s.lose(pt, group, err, true)
	default:
		s.failGroup(pt, group, err)
	}
}

// pack lays a group's operations out as the messages of one commit: each
// operation's frames in order, except that appends of one frame that
// follow one another share a message, up to the message size (their
// frames joined: one stream message, and one write on each server,
// instead of one each). It sets each operation's at and skip. last is
// the partition's last position before the group.
func (s *Store) pack(group []*op, last uint64) []outMsg {
	var msgs []outMsg
	var run [][]byte // one-frame appends waiting to share a message
	runBytes, runEntries := 0, uint32(0)
	var runSubj string
	var runLast uint64
	flush := func() {
		if len(run) > 0 {
			msgs = append(msgs, outMsg{subj: runSubj, data: joinFrames(run, runBytes), snap: -1, last: runLast})
			run, runBytes, runEntries = nil, 0, 0
		}
	}
	for _, o := range group {
		if o.kind != opMove { // a move takes no position
			last = o.prev + o.n
		}
		if o.kind == opAppend && len(o.frames) == 1 {
			f := o.frames[0]
			if len(run) > 0 && (runSubj != o.subj || runBytes+len(f)-frameHead-frameTrailer > s.limit) {
				flush()
			}
			if len(run) == 0 {
				runBytes = frameHead + frameTrailer
			}
			o.at, o.skip = len(msgs), runEntries
			run = append(run, f)
			runBytes += len(f) - frameHead - frameTrailer
			runEntries += frameEntries(f)
			runSubj, runLast = o.subj, last
			continue
		}
		flush()
		o.at, o.skip = len(msgs), 0
		snap := -1
		if o.kind == opSnapshot {
			snap = 0
		}
		for _, f := range o.frames {
			msgs = append(msgs, outMsg{subj: o.subj, data: f, snap: snap, last: last})
			if snap >= 0 {
				snap++
			}
		}
	}
	flush()
	return msgs
}

func (s *Store) msgBase() string {
	return s.id + "." + strconv.FormatUint(s.groups.Add(1), 36)
}

func msgID(base string, i int) string { return base + "-" + strconv.Itoa(i) }

// landed applies a written group: positions, the tail, kept records,
// the newest snapshot; then answers (a snapshot's purge first).
func (s *Store) landed(pt *part, group []*op, msgs []outMsg, tail uint64, took time.Duration) {
	s.mu.Lock()
	k := 0 // the next message to count
	snapshot := false
	var written int64
	for _, o := range group {
		first := tail + 1 + uint64(o.at) // the sequence of its first message
		o.hints = make([]store.Hint, len(o.locs))
		for i, l := range o.locs {
			// skip is 0 unless the operation's one frame shares a message.
			o.hints[i] = hintOf(first+uint64(l.msg), l.idx+o.skip, l.chunks)
		}
		switch o.kind {
		case opAppend:
			for i, keep := range o.keep {
				if keep {
					h := o.hints[i]
					pt.keepLocked(loc{seqOf(h), h.C}, keptRec{pos: o.prev + 1 + uint64(i), chunks: h.D})
				}
			}
		case opMove:
			for i, pos := range o.moves {
				h := o.hints[i]
				pt.keepLocked(loc{seqOf(h), h.C}, keptRec{pos: pos, chunks: h.D})
			}
		case opSnapshot:
			snapshot = true
			s.stats.Snapshots++
			pt.snapStart, pt.snapBytes, pt.snapStored, pt.snapMsgs = first, int64(o.bytes), 0, int64(len(o.frames))
			pt.logBytes, pt.logMsgs = 0, 0
		}
		// Its messages not counted yet (one it shares with the operations
		// before it was).
		for ; k < o.at+len(o.frames); k++ {
			m := msgs[k]
			seq := tail + 1 + uint64(k)
			size := storedSize(m.subj, m.hlen, len(m.data))
			written += int64(m.hlen + len(m.data))
			if o.kind == opSnapshot {
				pt.snapStored += size
			}
			pt.logBytes += size
			pt.logMsgs++
			if seq > pt.statTail {
				pt.diskBytes += size
				pt.statTail = seq
			}
		}
		if o.kind != opMove {
			pt.last = o.prev + o.n
		}
		o.end = pt.last
	}
	// The sizes of the messages that hold kept records, for Compact.
	for k, m := range msgs {
		if seq := tail + 1 + uint64(k); pt.keptSeqs[seq] > 0 {
			if pt.keptSize == nil {
				pt.keptSize = map[uint64]int64{}
			}
			pt.keptSize[seq] = storedSize(m.subj, m.hlen, len(m.data))
		}
	}
	if len(msgs) > 0 {
		pt.tail = tail + uint64(len(msgs))
		if pt.first == 0 {
			pt.first = tail + 1
		}
		s.stats.Batches++
		s.stats.BytesWritten += written
		s.stats.Fsyncs++
		s.stats.FsyncSeconds += took.Seconds()
		i, _ := slices.BinarySearch(store.FsyncBounds[:], took)
		s.buckets[i]++
	}
	s.mu.Unlock()
	if snapshot {
		// Before the answer, so that what the snapshot made unnecessary
		// is gone by then.
		s.purgePart(pt, true)
	}
	for _, o := range group {
		o.fut.Resolve(o.hints, o.end, nil)
	}
	// Bodies are usually read soon after they are written: the messages
	// holding kept records go to the cache (as written: a shared message
	// whole).
	cached := -1
	for _, o := range group {
		if o.kind == opMove || o.kind == opAppend && slices.Contains(o.keep, true) {
			for k := max(o.at, cached+1); k < o.at+len(o.frames); k++ {
				if _, es, err := decodeFrame(msgs[k].data); err == nil {
					s.cache.put(pt.id, tail+1+uint64(k), es, len(msgs[k].data))
				}
				cached = k
			}
		}
	}
}

// storedSize estimates a message's bytes in a stream's file store.
func storedSize(subj string, hlen, dlen int) int64 {
	return int64(22 + len(subj) + 4 + hlen + dlen + 8)
}

// failGroup fails a group that is not in the stream; the partition goes on
// from its last durable position.
func (s *Store) failGroup(pt *part, group []*op, err error) {
	s.mu.Lock()
	s.stats.FailedWrites++
	pt.rechainLocked()
	ae := &store.AppendError{Err: err, P: pt.id, Last: pt.last}
	s.mu.Unlock()
	s.log.Error("jsstore: write failed", "partition", pt.id, "err", err)
	for _, o := range group {
		o.fut.Resolve(nil, 0, ae)
	}
}

// lose fails a group and gives the partition up: another writer took it
// over, or this store cannot tell whether the group is in the stream.
func (s *Store) lose(pt *part, group []*op, err error, failedWrite bool) {
	s.mu.Lock()
	pt.lost = true
	if failedWrite {
		s.stats.FailedWrites++
	}
	ae := &store.AppendError{Err: err, P: pt.id, Last: pt.last}
	s.mu.Unlock()
	if failedWrite {
		s.log.Error("jsstore: a write's outcome is unknown; the partition must be taken over again", "partition", pt.id, "err", err)
	} else {
		s.log.Warn("jsstore: fenced: another writer took the partition over", "partition", pt.id, "err", err)
	}
	for _, o := range group {
		o.fut.Resolve(nil, 0, ae)
	}
}

// commitDrop writes p's tombstone, fenced, then deletes its stream.
func (s *Store) commitDrop(pt *part, o *op, tail uint64, exists bool) {
	if exists || tail > 0 {
		msgs := []outMsg{{subj: o.subj, data: o.frames[0], snap: -1, last: o.prev}}
		v, err := s.publish(pt, msgs, tail, s.msgBase())
		switch v {
		case landed:
		case fencedOut:
			s.lose(pt, []*op{o}, fmt.Errorf("%w: another writer took partition %d over (or dropped it): %v", store.ErrFenced, pt.id, err), false)
			return
		case unknownOut:
			s.lose(pt, []*op{o}, err, true)
			return
		default:
			s.failGroup(pt, []*op{o}, err)
			return
		}
		if err := s.deleteStream(pt.stream); err != nil {
			// The tombstone is durable: replay skips the partition and
			// deletes the stream then.
			s.log.Error("jsstore: dropped a partition but could not delete its stream", "partition", pt.id, "stream", pt.stream, "err", err)
		}
	}
	s.mu.Lock()
	pt.dropped = true
	pt.kept, pt.keptSeqs, pt.keptSize, pt.keptHeap = map[loc]keptRec{}, map[uint64]int{}, nil, nil
	s.mu.Unlock()
	s.cache.forget(pt.id)
	o.fut.Resolve(nil, 0, nil)
}

// verdicts of a write.
type verdict int

const (
	landed     verdict = iota // in the stream
	failedOut                 // not in the stream
	fencedOut                 // not in the stream: another write holds its place
	unknownOut                // undecided
)

// publish writes msgs after the stream's sequence tail, fenced on it, as
// one atomic batch (or one message), and decides whether they landed.
// A timeout, a lost connection or a refusal of the fence leaves that in
// doubt (a refusal may come from a former leader, below): it asks the
// stream's leader whether the message after tail is its first, and while
// that cannot tell, sends the same messages again, with the same ids (the
// stream stores them once), until an answer or RetryFor. Only a write
// known not to be in the stream is reported failed or fenced.
func (s *Store) publish(pt *part, msgs []outMsg, tail uint64, base string) (verdict, error) {
	deadline := time.Now().Add(s.cfg.RetryFor)
	wait := 20 * time.Millisecond
	maybe := false // an attempt may have been stored
	want := tail + uint64(len(msgs))
	var last error
	var quiet time.Time // since when no server listens on the subject
	for attempt := 0; ; attempt++ {
		ack, sent, err := s.attempt(msgs, tail, base, attempt)
		if err == nil && ack.Seq == want {
			return landed, nil
		}
		if err == nil {
			err = fmt.Errorf("jsstore: acknowledged at sequence %d, want %d", ack.Seq, want)
			maybe = true
		}
		last = err
		switch code := errCode(err); {
		case code == codeWrongLastSeq || code == codeWrongLastSeqNoNum:
			// Another write holds the place after tail, as a rule. But
			// the answer may not be the stream's: a leader that has not
			// heard of its successor yet (a partition healing) takes the
			// publish too, and its refusal can come first while the
			// leader stores the write. The stream decides (verify).
			maybe = true
		case code == codeBatchDuplicate:
			maybe = true
		case errors.Is(err, nats.ErrNoResponders):
			// Not stored. A stream electing its leader has no listener for
			// a while; a deleted one (another store dropped the partition)
			// never again.
			if quiet.IsZero() {
				quiet = time.Now()
			} else if time.Since(quiet) >= 500*time.Millisecond && s.streamGone(pt.stream) {
				return fencedOut, err
			}
		case code == codeBatchIncomplete, code == codeNotLeader,
			code == codeUnavailable, code == codeStreamOffline, code == codeStreamOfflineWhy, code == codeBatchTooManyFlight:
			// This attempt was not stored.
		case transient(err), sent && code == 0:
			// Sent, and no answer: it may be in the stream.
			maybe = true
		default:
			if !maybe {
				return failedOut, seamError(err)
			}
		}
		if maybe {
			switch v := s.verify(s.ctx, pt.stream, tail, base); v {
			case landed, fencedOut:
				return v, err
			}
		}
		if attempt == 0 {
			s.mu.Lock()
			s.stats.ResentWrites++
			s.mu.Unlock()
			s.log.Warn("jsstore: a write's outcome is in doubt; retrying it with the same message ids", "partition", pt.id, "after", tail, "err", err)
		}
		if s.isolated() || time.Now().Add(wait).After(deadline) || !s.sleep(wait) {
			break
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
	if !maybe {
		return failedOut, seamError(last)
	}
	if !s.isolated() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AckTimeout)
		defer cancel()
		if v := s.verify(ctx, pt.stream, tail, base); v != unknownOut {
			return v, last
		}
	}
	return unknownOut, fmt.Errorf("%w (%w): partition %d, after sequence %d: %v", ErrOutcomeUnknown, store.ErrFenced, pt.id, tail, last)
}

// isolated reports whether this node is cut off from every other one
// (Config.Isolated).
func (s *Store) isolated() bool { return s.cfg.Isolated != nil && s.cfg.Isolated() }

// streamGone reports whether the stream is known not to exist (a quick
// question: no answer means it may).
func (s *Store) streamGone(stream string) bool {
	ctx, cancel := context.WithTimeout(s.ctx, 250*time.Millisecond)
	defer cancel()
	_, ok, err := s.info(ctx, stream)
	return err == nil && !ok
}

// verify asks the stream's leader whether the message after tail is the
// first of the write with ids base: landed, fencedOut (another message is
// there, or the stream is gone) or unknownOut (nothing there yet, or no
// answer).
func (s *Store) verify(ctx context.Context, stream string, tail uint64, base string) verdict {
	m, err := s.leaderGet(ctx, stream, msgGetRequest{Seq: tail + 1})
	switch {
	case err == nil && m.hdr.Get(hdrMsgID) == msgID(base, 0):
		return landed
	case err == nil, errors.Is(err, store.ErrNotFound):
		return fencedOut
	}
	return unknownOut
}

type pubAck struct {
	apiResponse
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// attempt sends msgs once: a single publish, or an atomic batch whose
// commit (and every flowBytes a message) waits for the answer. sent says
// the last message (the one that stores the write) left: without an answer
// the write may have landed.
func (s *Store) attempt(msgs []outMsg, tail uint64, base string, attempt int) (ack pubAck, sent bool, err error) {
	// Not the store's context: an attempt under way when the store closes
	// gets its answer (bounded by AckTimeout).
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AckTimeout)
	defer cancel()
	n := len(msgs)
	batch := base + "." + strconv.Itoa(attempt) // a batch id per attempt; message ids stay
	since := 0
	for i := range msgs {
		m := &msgs[i]
		h := make(nats.Header, 7)
		h.Set(hdrMsgID, msgID(base, i))
		h.Set(hdrLast, strconv.FormatUint(m.last, 10))
		if i == 0 {
			h.Set(hdrExpectLast, strconv.FormatUint(tail, 10))
		}
		if m.snap >= 0 {
			h.Set(hdrSnap, strconv.Itoa(m.snap))
		}
		if n > 1 {
			h.Set(hdrBatchID, batch)
			h.Set(hdrBatchSeq, strconv.Itoa(i+1))
			if i == n-1 {
				h.Set(hdrBatchEnd, "1")
			}
		}
		m.hlen = headerLen(h)
		nm := &nats.Msg{Subject: m.subj, Header: h, Data: m.data}
		since += len(m.data)
		if i < n-1 && since < flowBytes {
			if err := s.nc.PublishMsg(nm); err != nil {
				return pubAck{}, false, err
			}
			continue
		}
		since = 0
		r, err := s.nc.RequestMsgWithContext(ctx, nm)
		if err != nil {
			return pubAck{}, i == n-1 && !errors.Is(err, nats.ErrNoResponders), err
		}
		if i < n-1 && len(r.Data) == 0 {
			continue // staged so far
		}
		if err := json.Unmarshal(r.Data, &ack); err != nil {
			return pubAck{}, i == n-1, fmt.Errorf("jsstore: bad publish answer %q: %w", r.Data, err)
		}
		if ack.Error != nil {
			return ack, i == n-1, ack.Error
		}
		if i < n-1 {
			return ack, false, fmt.Errorf("jsstore: publish answer %q before the batch's end", r.Data)
		}
		return ack, true, nil
	}
	return pubAck{}, false, errors.New("jsstore: nothing to publish")
}

// headerLen is the bytes of h on the wire.
func headerLen(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}
