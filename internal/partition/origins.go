package partition

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

// A message delivered from an origin (a topic's publish) is remembered
// with its origin until its first receive, which is then timed from the
// publish: per origin here (a subscription's age at first attempt), and
// at the topic through Host.FirstAttempt (its first subscriber's). These
// are figures only: in memory, never written, lost at a restart or a
// move of the queue (the messages then are not timed).

// maxTracked bounds the messages a queue remembers the origin of: past
// it, further deliveries are not timed until receives make room.
const maxTracked = 1 << 16

type originTrack struct {
	// some: the queue remembers some origin (receives of a queue no topic
	// delivers to skip the lock).
	some  atomic.Bool
	mu    sync.Mutex
	bySeq map[uint64]queue.Origin
	ages  map[uint64]*st.AgeHistogram // by origin partition
	// swept is when forget last ran: a queue that holds more delivered
	// messages than the bound (its consumers are away) sweeps once in a
	// while, not on every delivery.
	swept time.Time
}

// sweepEvery paces forget (process time: it paces work, not semantics).
const sweepEvery = 10 * time.Second

// sweepDue reports whether a sweep may run now, and if so notes it.
func (t *originTrack) sweepDue() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.swept) < sweepEvery {
		return false
	}
	t.swept = time.Now()
	return true
}

// track remembers the origins of messages delivered durably (seqs[i]
// from from[i]); false when it is full (the rest are not remembered).
func (t *originTrack) track(seqs []uint64, from []queue.Origin) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bySeq == nil {
		t.bySeq = map[uint64]queue.Origin{}
	}
	for i, seq := range seqs {
		if len(t.bySeq) >= maxTracked {
			return false
		}
		if from[i].At > 0 {
			t.bySeq[seq] = from[i]
			t.some.Store(true)
		}
	}
	return true
}

// firstReceived times the first receives of messages seqs at now, and
// returns the origins of those it remembered.
func (t *originTrack) firstReceived(seqs []uint64, now time.Time) []queue.Origin {
	if !t.some.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []queue.Origin
	for _, seq := range seqs {
		o, ok := t.bySeq[seq]
		if !ok {
			continue
		}
		delete(t.bySeq, seq)
		t.some.Store(len(t.bySeq) > 0)
		if t.ages == nil {
			t.ages = map[uint64]*st.AgeHistogram{}
		}
		h := t.ages[o.Partition]
		if h == nil {
			h = &st.AgeHistogram{}
			t.ages[o.Partition] = h
		}
		h.Observe(max(0, now.Sub(time.UnixMilli(o.At))))
		out = append(out, o)
	}
	return out
}

// forget drops what the queue no longer holds (messages deleted, purged
// or moved without a receive), once the bound is reached: keep reports
// whether a message is still there.
func (t *originTrack) forget(keep func(seq uint64) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for seq := range t.bySeq {
		if !keep(seq) {
			delete(t.bySeq, seq)
		}
	}
	t.some.Store(len(t.bySeq) > 0)
}

// OriginFirstAttempts returns, by origin partition (a topic's), how long
// messages delivered from it waited from their publish to their first
// receive here, since this owner took the queue.
func (o *Owner) OriginFirstAttempts() map[uint64]st.AgeHistogram {
	t := &o.origins
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[uint64]st.AgeHistogram, len(t.ages))
	for p, h := range t.ages {
		out[p] = h.Clone()
	}
	return out
}
