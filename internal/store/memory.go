package store

import (
	"fmt"
	"sync"
)

// Memory keeps records in memory: nothing survives Close. It gives each
// record a location like the disk log does, so an owner can read records
// back, and forgets a record when the owner frees it.
type Memory struct {
	mu     sync.Mutex
	next   uint32
	recs   map[Loc][]byte
	closed bool
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory { return &Memory{recs: map[Loc][]byte{}} }

// SubmitFunc stores the records and returns; applied then runs with their
// locations on another goroutine (as the disk log runs it on its writer,
// so a caller may hold locks that applied takes), and Wait returns after it.
func (m *Memory) SubmitFunc(recs [][]byte, applied func(locs []Loc)) *Pending {
	p := &Pending{done: make(chan struct{})}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		p.err = ErrClosed
		close(p.done)
		return p
	}
	m.next++
	locs := make([]Loc, len(recs))
	for i, r := range recs {
		locs[i] = Loc{Seg: 1, Off: m.next, FLen: uint32(len(r)) + 12, Idx: uint32(i)}
		m.recs[locs[i]] = append([]byte(nil), r...)
	}
	m.mu.Unlock()
	go func() {
		if applied != nil {
			applied(locs)
		}
		close(p.done)
	}()
	return p
}

// ReadRecord returns a stored record.
func (m *Memory) ReadRecord(loc Loc) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[loc]
	if !ok {
		return nil, fmt.Errorf("%w: no record at %+v", ErrCorrupt, loc)
	}
	return r, nil
}

// Free forgets a record.
func (m *Memory) Free(loc Loc) {
	m.mu.Lock()
	delete(m.recs, loc)
	m.mu.Unlock()
}

// Len is the number of records held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Close drops everything.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.recs = nil
	m.mu.Unlock()
	return nil
}
