package sluice

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Record types. Every record is absolute (it states a result, not a
// delta), so replaying one that a checkpoint already reflects is harmless.
const (
	recQueue       = "q"  // queue created or changed: the whole metadata
	recQueueDelete = "qd" // queue deleted
	recSend        = "s"  // message stored
	recReceive     = "r"  // delivery: receive count, times, fence
	recVisibility  = "v"  // visibility changed
	recDelete      = "d"  // message deleted
	recPurge       = "p"  // messages below a sequence purged
	recMove        = "mv" // message moved to another queue (DLQ, redrive)
	recHeader      = "h"  // checkpoint header
	recDedup       = "dd" // a FIFO deduplication id still in its window (checkpoints)
	recRelocate    = "rl" // compaction copied a message's record (M.Loc: where it was)
	recUpdate      = "up" // retry ladder, retry, defer: M holds the new level, failure, receive count, visibility
)

// payload is the part of a message that lives only on disk: it is read
// back on receive from the send record's location.
type payload struct {
	ID, Body, Trace, Sender, Dedup, SeqNum string
	TraceParent                            string // W3C traceparent of the send request
	MD5                                    string // MD5 of Body, 16 raw bytes ("" in records before codec version 3)
	Attrs                                  map[string]st.AttributeValue
}

// record is one change, encoded by codec.go. Which fields a type uses:
// q/qd: Meta or Q; s: Q, M (index), P (payload; absent in checkpoints);
// r: Q, Seq, RC, First, Dlv, Vis, Fence; v: Q, Seq, Vis; d: Q, Seq;
// p: Q, UpTo; mv: Q, Seq, To, M; rl: Q, Seq, M (old place), P;
// dd: Q, First (until), P (key, id, sequence number); h: NextQ, NextSeq.
type record struct {
	T     string
	Q     uint64
	Meta  *queueMeta
	M     *queue.Msg
	P     *payload
	Seq   uint64
	RC    int
	First int64
	Dlv   int64
	Vis   int64
	Fence uint32
	To    uint64
	UpTo  uint64
	Lvl   uint8 // r: the retry level of the delivery
	// Header fields.
	NextQ   uint64
	NextSeq uint64
}

// snapshot writes the broker's whole state: a header, then per queue its
// metadata, its remembered deduplication ids and the index entry of every
// live message (bodies stay where they are in the log). Called by the
// store's writer between batches.
func (b *broker) snapshot(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenBuf [binary.MaxVarintLen64]byte
	write := func(r *record) error {
		raw := r.encode()
		n := binary.PutUvarint(lenBuf[:], uint64(len(raw)))
		if _, err := bw.Write(lenBuf[:n]); err != nil {
			return err
		}
		_, err := bw.Write(raw)
		return err
	}
	b.mu.RLock()
	qss := make([]*queueState, 0, len(b.queues))
	for _, qs := range b.queues {
		qss = append(qss, qs)
	}
	hdr := &record{T: recHeader, NextQ: b.nextQID, NextSeq: b.seq.Load() + 1}
	b.mu.RUnlock()
	if err := write(hdr); err != nil {
		return err
	}
	for _, qs := range qss {
		qs.mu.Lock()
		// Every batch written so far is answered before a checkpoint: apply
		// the changes that wait for it, so that the checkpoint holds them.
		b.applyDurableLocked(qs)
		if qs.deleted {
			qs.mu.Unlock()
			continue
		}
		meta := qs.meta
		err := write(&record{T: recQueue, Meta: &meta})
		for _, e := range qs.q.DedupEntries(b.clock.Now()) {
			if err == nil {
				err = write(&record{T: recDedup, Q: meta.ID, First: e.Until, P: &payload{Dedup: e.Key, ID: e.ID, SeqNum: e.SeqNum}})
			}
		}
		// In sequence order (as Messages goes), so recovery stores the
		// entries in order: densely, with no lookups.
		qs.q.Messages(func(m *queue.Msg) {
			if err != nil || m.State == queue.Pending {
				// A pending message's send is being written; the send
				// record (after this checkpoint) brings it back with its
				// location.
				return
			}
			err = write(&record{T: recSend, Q: meta.ID, M: m})
		})
		// Messages leaving for another queue are still here as far as the
		// log knows, until their move record is durable.
		for _, o := range qs.outbound {
			if o.w != nil {
				if done, werr := o.w.Done(); done && werr == nil {
					continue
				}
			}
			if err == nil {
				m := o.m
				err = write(&record{T: recSend, Q: meta.ID, M: &m})
			}
		}
		qs.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

func (b *broker) loadSnapshot(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		n, err := binary.ReadUvarint(br)
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if n > 64<<20 {
			return fmt.Errorf("checkpoint record of %d bytes", n)
		}
		raw := make([]byte, n)
		if _, err := io.ReadFull(br, raw); err != nil {
			return err
		}
		rec, err := decodeRecord(raw)
		if err != nil {
			return fmt.Errorf("decoding checkpoint record: %w", err)
		}
		if err := b.apply(rec, queue.Loc{}); err != nil {
			return err
		}
	}
}

func (b *broker) replay(raw []byte, loc store.Loc) error {
	rec, err := decodeRecord(raw)
	if err != nil {
		return fmt.Errorf("decoding record: %w", err)
	}
	return b.apply(rec, qloc(loc))
}

// apply replays one record during recovery (single-threaded). loc is where
// the record itself is (zero for checkpoint records).
func (b *broker) apply(r *record, loc queue.Loc) error {
	now := b.clock.Now()
	qs := b.byID[r.Q]
	switch r.T {
	case recHeader:
		if r.NextQ > b.nextQID {
			b.nextQID = r.NextQ
		}
		b.noteSeq(r.NextSeq)
	case recQueue:
		if r.Meta == nil {
			return fmt.Errorf("queue record without metadata")
		}
		if old := b.byID[r.Meta.ID]; old != nil {
			old.meta = *r.Meta
			if old.meta.Attrs == nil {
				old.meta.Attrs = map[string]string{}
			}
			old.q.SetConfig(queueConfig(old.meta))
			return nil
		}
		b.installLocked(*r.Meta)
	case recQueueDelete:
		if qs != nil {
			var locs []queue.Loc
			qs.q.Messages(func(m *queue.Msg) { locs = append(locs, m.Loc) })
			b.release(locs)
			delete(b.queues, qs.meta.Name)
			delete(b.byID, r.Q)
		}
	case recDedup:
		if qs != nil && r.P != nil && r.First > now.UnixMilli() {
			qs.q.RestoreDedup(queue.DedupEntry{Key: r.P.Dedup, ID: r.P.ID, SeqNum: r.P.SeqNum, Until: r.First})
		}
	case recSend:
		if r.M == nil {
			return fmt.Errorf("send record without message")
		}
		b.noteSeq(r.M.Seq)
		if qs == nil {
			return nil
		}
		if r.P != nil {
			// A send from the log: the body is in this very record.
			r.M.Loc = loc
			if qs.meta.FIFO && r.P.Dedup != "" {
				qs.q.Remember(time.UnixMilli(r.M.Sent), r.M.Group(), r.P.Dedup, r.P.ID, r.P.SeqNum)
			}
		}
		if _, dup := qs.q.Lookup(r.M.Seq); dup {
			return nil
		}
		qs.q.Restore(now, r.M)
		b.acquire(r.M.Loc)
	case recRelocate:
		if qs != nil && r.M != nil {
			if m, ok := qs.q.Lookup(r.Seq); ok && m.Loc == r.M.Loc {
				m.Loc = loc
				b.acquire(loc)
				b.release([]queue.Loc{r.M.Loc})
			}
		}
	case recReceive:
		if qs != nil {
			qs.q.ApplyReceive(now, r.Seq, int32(r.RC), r.First, r.Dlv, r.Vis, r.Fence, r.Lvl)
		}
	case recUpdate:
		if qs != nil && r.M != nil {
			qs.q.ApplyUpdate(now, r.M)
		}
	case recVisibility:
		if qs != nil {
			qs.q.ApplyVisibility(now, r.Seq, r.Vis)
		}
	case recDelete:
		if qs != nil {
			qs.q.Delete(r.Seq)
		}
	case recPurge:
		b.noteSeq(r.UpTo)
		if qs != nil {
			qs.q.Purge(r.UpTo)
		}
	case recMove:
		moved := false
		if qs != nil {
			_, moved = qs.q.TakeForMove(r.Seq)
		}
		if r.M != nil {
			b.noteSeq(r.M.Seq)
			to := b.byID[r.To]
			switch {
			case to != nil && !moved:
				qs2 := to
				if _, dup := qs2.q.Lookup(r.M.Seq); !dup {
					qs2.q.Restore(now, r.M)
					b.acquire(r.M.Loc)
				}
			case to != nil:
				to.q.Restore(now, r.M)
			case moved:
				b.release([]queue.Loc{r.M.Loc})
			}
		}
	default:
		return fmt.Errorf("unknown record type %q", r.T)
	}
	if qs != nil {
		b.release(qs.q.TakeReleased())
	}
	return nil
}

func (b *broker) noteSeq(s uint64) {
	if s > b.seq.Load() {
		b.seq.Store(s)
	}
}
