// Package inflight is an owner's appends in flight: each submitted under
// the owner's lock (so that a partition's positions are appended in
// order), waited for without it (so that other appends join the same group
// commit), and settled in submission order once finished, by whoever
// holds the lock next. The queue owner (internal/partition) and the topic
// owner (internal/topic) both write through one.
//
// A failed append changes nothing. The first failure of a run of appends
// (an epoch) resets the owner's positions to the partition's durable end;
// the appends submitted behind it fail too (the store fences them), and
// are failures of the same epoch, which the first ended.
package inflight

import (
	"context"
	"sync"

	"github.com/sluicemq/sluice/internal/store"
)

// Write is one append in flight, and what its owner does with it once it
// is durable (Of).
type Write[T any] struct {
	F     store.Future
	Prev  uint64 // the partition's position before it
	Of    T
	epoch uint64
}

// Writes are an owner's appends in flight, oldest first. Its methods
// need the owner's lock.
type Writes[T any] struct {
	ws    []*Write[T]
	epoch uint64
}

// Add notes w, its append submitted just now, as the newest in flight.
func (p *Writes[T]) Add(w *Write[T]) *Write[T] {
	w.epoch = p.epoch
	p.ws = append(p.ws, w)
	return w
}

// Len is how many appends are in flight.
func (p *Writes[T]) Len() int { return len(p.ws) }

// Newest is the newest append in flight (nil: none).
func (p *Writes[T]) Newest() *Write[T] {
	if len(p.ws) == 0 {
		return nil
	}
	return p.ws[len(p.ws)-1]
}

// Settle settles, in order, the appends that have finished, up to the
// first still under way: durable(w) for one that is durable, failed(w,
// err, first) for one that failed, with first set for the first failure
// of its epoch (the owner resets its positions: to store.LastPosition(err),
// or else w.Prev). The epoch then moves on.
func (p *Writes[T]) Settle(durable func(w *Write[T]), failed func(w *Write[T], err error, first bool)) {
	i := 0
	for ; i < len(p.ws); i++ {
		w := p.ws[i]
		done, err := w.F.Done()
		if !done {
			break
		}
		if err == nil {
			durable(w)
			continue
		}
		first := w.epoch == p.epoch
		if first {
			p.epoch++
		}
		failed(w, err, first)
	}
	n := copy(p.ws, p.ws[i:])
	clear(p.ws[n:])
	p.ws = p.ws[:n]
}

// Reset is where an owner's positions go back to after a failed append
// that started after prev: where the store says the partition ends, or
// else prev.
func Reset(err error, prev uint64) uint64 {
	if last, ok := store.LastPosition(err); ok {
		return last
	}
	return prev
}

// Wait is called with mu (the owner's lock) held and returns with it
// held: it lets mu go while w finishes (as sync.Cond.Wait does), takes it
// again and settles (the owner's Settle).
func Wait[T any](mu sync.Locker, w *Write[T], settle func()) error {
	mu.Unlock()
	err := w.F.Wait(context.Background())
	mu.Lock()
	settle()
	return err
}

// WaitAll is Wait for every append in flight, until none is: mu is held
// when it is called and when it returns.
func (p *Writes[T]) WaitAll(mu sync.Locker, settle func()) {
	for w := p.Newest(); w != nil; w = p.Newest() {
		_ = Wait(mu, w, settle)
	}
}
