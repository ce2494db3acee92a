package sluice

import (
	"sort"

	"github.com/sluicemq/sluice/internal/queue"
)

// Compaction: a segment older than the newest checkpoint stays on disk
// while any message in it lives. When fewer than half of the records
// written into such a segment are still live, the live ones are copied
// forward (one relocate record each, carrying the payload) and the
// segment goes when the last copy is durable. Each round copies at most
// compactBytesPerRound, so compaction runs at a bounded rate.
const compactBytesPerRound = 16 << 20

func (b *broker) scheduleCompaction() {
	b.every(&b.compactTimer, b.cfg.CompactInterval, b.compactRound)
}

// compactRound relocates the live messages of old segments that are
// less than half live, sparsest first, within the round's byte budget.
func (b *broker) compactRound() {
	if b.store.Alarm().Alarm {
		return // copies need space first; checkpoints free it under the alarm
	}
	from := b.store.CheckpointFrom()
	type cand struct {
		seg   uint32
		ratio float64
	}
	var cands []cand
	b.segMu.Lock()
	for s, live := range b.live {
		w := b.written[s]
		if s >= from || w == 0 {
			continue
		}
		if ratio := float64(live) / float64(w); ratio < 0.5 {
			cands = append(cands, cand{s, ratio})
		}
	}
	b.segMu.Unlock()
	sort.Slice(cands, func(i, j int) bool { return cands[i].ratio < cands[j].ratio })
	budget := compactBytesPerRound
	for _, c := range cands {
		if budget <= 0 || b.closed.Load() {
			return
		}
		budget -= b.compactSegment(c.seg, budget)
	}
}

type relocation struct {
	qs  *queueState
	qid uint64
	m   queue.Msg
}

// compactSegment copies forward the live messages whose records are in
// seg, up to budget bytes, and returns the bytes it copied.
func (b *broker) compactSegment(seg uint32, budget int) int {
	var todo []relocation
	for _, qs := range b.allQueues() {
		qs.mu.Lock()
		qs.q.Messages(func(m *queue.Msg) {
			if m.Loc.Seg == seg && m.State != queue.Pending {
				todo = append(todo, relocation{qs: qs, qid: qs.meta.ID, m: *m})
			}
		})
		qs.mu.Unlock()
	}
	copied := 0
	for _, r := range todo {
		if budget <= 0 || b.closed.Load() {
			break
		}
		p, err := b.readPayload(r.m.Loc)
		if err != nil {
			continue // deleted meanwhile, or unreadable: receive deals with it
		}
		budget -= int(r.m.Loc.FLen)
		copied += int(r.m.Loc.FLen)
		old := r.m.Loc
		idx := r.m
		rec := &record{T: recRelocate, Q: r.qid, Seq: r.m.Seq, M: &idx, P: p}
		qs := r.qs
		w := b.submitPayload([]*record{rec}, func(locs []queue.Loc) {
			qs.mu.Lock()
			m, ok := qs.q.Lookup(rec.Seq)
			relocated := ok && m.Loc == old
			if relocated {
				m.Loc = locs[0]
			}
			qs.mu.Unlock()
			if relocated {
				b.acquire(locs[0])
				b.release([]queue.Loc{old})
				b.relocated.Add(1)
			}
		})
		_ = wait(w) // a failed copy leaves the message where it was
	}
	return copied
}
