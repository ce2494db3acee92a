package sluice

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/sluicemq/sluice/internal/queue"
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
)

type record struct {
	T     string     `json:"t"`
	Q     uint64     `json:"q,omitempty"`
	Meta  *queueMeta `json:"meta,omitempty"`
	M     *queue.Msg `json:"m,omitempty"`
	Seq   uint64     `json:"seq,omitempty"`
	RC    int        `json:"rc,omitempty"`
	First int64      `json:"f,omitempty"`
	Dlv   int64      `json:"dl,omitempty"`
	Vis   int64      `json:"v,omitempty"`
	Fence uint32     `json:"fe,omitempty"`
	To    uint64     `json:"to,omitempty"`
	UpTo  uint64     `json:"up,omitempty"`
	// Header fields.
	NextQ   uint64 `json:"nq,omitempty"`
	NextSeq uint64 `json:"ns,omitempty"`
}

// snapshot writes the broker's whole state: a header, then per queue its
// metadata and its live messages. Called by the store's writer.
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
		if qs.deleted {
			qs.mu.Unlock()
			continue
		}
		meta := qs.meta
		err := write(&record{T: recQueue, Meta: &meta})
		// In send order, so recovery rebuilds the queue's orders cheaply.
		var msgs []*queue.Msg
		qs.q.Messages(func(m *queue.Msg) { msgs = append(msgs, m) })
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].Seq < msgs[j].Seq })
		for _, m := range msgs {
			if err != nil {
				break
			}
			err = write(&record{T: recSend, Q: meta.ID, M: m})
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
		if err := b.replay(raw); err != nil {
			return err
		}
	}
}

func (b *broker) replay(raw []byte) error {
	rec, err := decodeRecord(raw)
	if err != nil {
		return fmt.Errorf("decoding record: %w", err)
	}
	return b.apply(rec)
}

// apply replays one record during recovery (single-threaded).
func (b *broker) apply(r *record) error {
	now := b.clock.Now()
	qs := b.byID[r.Q]
	switch r.T {
	case recHeader:
		if r.NextQ > b.nextQID {
			b.nextQID = r.NextQ
		}
		if r.NextSeq > b.seq.Load() {
			b.seq.Store(r.NextSeq)
		}
	case recQueue:
		if r.Meta == nil {
			return fmt.Errorf("queue record without metadata")
		}
		if old := b.byID[r.Meta.ID]; old != nil {
			old.meta = *r.Meta
			if old.meta.Attrs == nil {
				old.meta.Attrs = map[string]string{}
			}
			old.q.SetConfig(queueConfig(old.meta.Attrs, old.meta.FIFO))
			return nil
		}
		b.installLocked(*r.Meta)
	case recQueueDelete:
		if qs != nil {
			delete(b.queues, qs.meta.Name)
			delete(b.byID, r.Q)
		}
	case recSend:
		if r.M == nil {
			return fmt.Errorf("send record without message")
		}
		b.noteSeq(r.M.Seq)
		if qs != nil {
			qs.q.Restore(now, r.M)
		}
	case recReceive:
		if qs != nil {
			qs.q.ApplyReceive(now, r.Seq, r.RC, r.First, r.Dlv, r.Vis, r.Fence)
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
		if qs != nil {
			qs.q.Delete(r.Seq)
		}
		if r.M != nil {
			b.noteSeq(r.M.Seq)
			if to := b.byID[r.To]; to != nil {
				to.q.Restore(now, r.M)
			}
		}
	default:
		return fmt.Errorf("unknown record type %q", r.T)
	}
	return nil
}

func (b *broker) noteSeq(s uint64) {
	if s > b.seq.Load() {
		b.seq.Store(s)
	}
}
