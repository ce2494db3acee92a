// Package seqtab keeps a queue's entries by value, in sequence order, in
// chunks: no map entry, no pointer and no allocation per entry.
//
// It knows an entry only by its sequence and a mark that it is gone; what
// an entry means (a message, its state, its timers) is the queue's. It
// never reuses a slot, so a pointer it hands out stays valid, and never
// names another entry, for as long as anyone holds it.
package seqtab

import (
	"slices"
	"sort"
	"unsafe"
)

// Entry is what a Table needs of a pointer to its values: the value's
// sequence, whether it is gone, and a way to mark it gone. Marking is the
// table's alone: a gone value is never marked live again.
type Entry[T any] interface {
	*T
	Key() uint64
	Gone() bool
	MarkGone()
}

// Table holds values in arrival order. Sequences are taken in increasing
// order, so every chunk covers a range above the previous chunk's, and a
// value is found by binary search. The few that arrive out of order
// (recovery of old logs, a message put back after a failed move) live in
// a map beside the chunks.
//
// A chunk's array is let go once its last value is gone, so one value
// left behind pins at most its own chunk, never the history that
// followed it. The zero Table is empty and ready.
type Table[T any, P Entry[T]] struct {
	chunks []*chunk[T] // ascending sequence ranges; chunks[:head] are gone
	head   int
	dead   int // chunks in chunks[head:] whose values are all gone
	odd    map[uint64]*T
	n      int    // live values
	top    uint64 // the highest sequence in the chunks
	// adding is Add's copy of the value it stores, empty between calls:
	// a method called on Add's argument through the type parameter would
	// make every caller's argument escape, an allocation per value added.
	adding T
}

type chunk[T any] struct {
	vals  []T    // appended in sequence order, never beyond cap; nil when all gone
	first uint64 // sequence of vals[0]
	live  int
	lo    int // vals[:lo] are gone
}

// chunkBytes is the most a chunk's array holds.
const chunkBytes = 16384

// Len returns the number of live values.
func (t *Table[T, P]) Len() int { return t.n }

// Top returns the highest sequence ever stored in order (0 when none):
// every value in the chunks is at or below it; out-of-order ones may be
// anywhere below it too.
func (t *Table[T, P]) Top() uint64 { return t.top }

// Chunks returns how many chunks hold live values and how many the list
// keeps (live, emptied but not yet compacted away).
func (t *Table[T, P]) Chunks() (live, listed int) {
	return len(t.chunks) - t.head - t.dead, len(t.chunks)
}

func (t *Table[T, P]) last() *chunk[T] {
	if len(t.chunks) == t.head {
		return nil
	}
	return t.chunks[len(t.chunks)-1]
}

// Add stores a copy of v, which must not be gone and whose sequence must
// not be live already, and returns the stored value.
func (t *Table[T, P]) Add(v *T) *T {
	t.adding = *v
	p := t.add()
	var zero T
	t.adding = zero // holds nothing between calls
	return p
}

// add stores t.adding.
func (t *Table[T, P]) add() *T {
	t.n++
	seq := P(&t.adding).Key()
	if seq <= t.top {
		if t.odd == nil {
			t.odd = map[uint64]*T{}
		}
		p := new(T)
		*p = t.adding
		t.odd[seq] = p
		return p
	}
	t.top = seq
	c := t.last()
	if c == nil || c.vals == nil || len(c.vals) == cap(c.vals) {
		// In proportion to what the table holds: a few values cost a
		// few slots, many cost full chunks.
		var zero T
		most := max(1, chunkBytes/int(unsafe.Sizeof(zero)))
		size := 4
		for size < t.n && size < most {
			size *= 2
		}
		// Grow rounds the capacity up to what the allocator hands out.
		c = &chunk[T]{vals: slices.Grow([]T(nil), size), first: seq}
		t.chunks = append(t.chunks, c)
	}
	c.vals = append(c.vals, t.adding)
	c.live++
	return &c.vals[len(c.vals)-1]
}

// find returns the chunk and index of seq's slot (live or gone), or nil.
func (t *Table[T, P]) find(seq uint64) (*chunk[T], int) {
	cs := t.chunks[t.head:]
	var i int // the last chunk whose first sequence is seq's or below
	switch n := len(cs); {
	case n > 0 && seq >= cs[n-1].first:
		// The newest chunks first: a queue that keeps up sends, receives
		// and deletes near its end, while the list holds older chunks
		// before them (pinned by a message left behind, or emptied and
		// not yet compacted away) that a binary search wades through.
		i = n - 1
	case n > 1 && seq >= cs[n-2].first:
		i = n - 2
	default:
		i = sort.Search(len(cs), func(i int) bool { return cs[i].first > seq }) - 1
	}
	if i < 0 || cs[i].vals == nil {
		return nil, 0
	}
	c := cs[i]
	if j := seq - c.first; j < uint64(len(c.vals)) && P(&c.vals[j]).Key() == seq {
		return c, int(j) // sequences without gaps: the common case
	}
	j := sort.Search(len(c.vals), func(k int) bool { return P(&c.vals[k]).Key() >= seq })
	if j == len(c.vals) || P(&c.vals[j]).Key() != seq {
		return nil, 0
	}
	return c, j
}

// Get returns the live value of seq.
func (t *Table[T, P]) Get(seq uint64) (*T, bool) {
	if v, ok := t.odd[seq]; ok {
		return v, true
	}
	c, j := t.find(seq)
	if c == nil || P(&c.vals[j]).Gone() {
		return nil, false
	}
	return &c.vals[j], true
}

// Del marks v, a live value the table handed out, gone.
func (t *Table[T, P]) Del(v *T) {
	seq := P(v).Key()
	if p, ok := t.odd[seq]; ok && p == v {
		delete(t.odd, seq)
		t.n--
		P(v).MarkGone()
		return
	}
	c, j := t.find(seq)
	if c == nil || &c.vals[j] != v || P(v).Gone() {
		return
	}
	P(v).MarkGone()
	t.n--
	c.live--
	for c.lo < len(c.vals) && P(&c.vals[c.lo]).Gone() {
		c.lo++
	}
	if c.live > 0 {
		return
	}
	c.vals, c.lo = nil, 0
	t.dead++
	for t.head < len(t.chunks) && t.chunks[t.head].vals == nil {
		t.chunks[t.head] = nil
		t.head++
		t.dead--
	}
	if t.head == len(t.chunks) {
		t.chunks, t.head = t.chunks[:0], 0
	} else if t.dead > 8 && 2*t.dead > len(t.chunks)-t.head || t.head > 64 && 2*t.head > len(t.chunks) {
		keep := t.chunks[:0]
		for _, c := range t.chunks[t.head:] {
			if c.vals != nil {
				keep = append(keep, c)
			}
		}
		clear(t.chunks[len(keep):])
		t.chunks, t.head, t.dead = keep, 0, 0
	}
}

// Each calls f for every live value in sequence order until f returns
// false. f may remove the value it is given, and no other.
func (t *Table[T, P]) Each(f func(*T) bool) {
	odd := t.oddSeqs()
	next := func(limit uint64) bool { // the odd values below limit
		for len(odd) > 0 && odd[0] < limit {
			v, ok := t.odd[odd[0]]
			odd = odd[1:]
			if ok && !f(v) {
				return false
			}
		}
		return true
	}
	// Chunks may be compacted by a removal: walk a copy of the list.
	for _, c := range slices.Clone(t.chunks[t.head:]) {
		vals := c.vals
		for j := c.lo; j < len(vals); j++ {
			v := &vals[j]
			if P(v).Gone() {
				continue
			}
			if !next(P(v).Key()) || !f(v) {
				return
			}
		}
	}
	next(^uint64(0))
}

// Oldest returns the live value that arrived first among the chunks (the
// out-of-order values are not looked at: see Odd), or nil.
func (t *Table[T, P]) Oldest() *T {
	for _, c := range t.chunks[t.head:] {
		if c.vals == nil {
			continue
		}
		for c.lo < len(c.vals) && P(&c.vals[c.lo]).Gone() {
			c.lo++
		}
		if c.lo < len(c.vals) {
			return &c.vals[c.lo]
		}
	}
	return nil
}

// From returns the first live value among the chunks whose sequence is
// at least seq, or nil.
func (t *Table[T, P]) From(seq uint64) *T {
	cs := t.chunks[t.head:]
	i := max(0, sort.Search(len(cs), func(i int) bool { return cs[i].first > seq })-1)
	for ; i < len(cs); i++ {
		c := cs[i]
		if c.vals == nil {
			continue
		}
		j := max(c.lo, sort.Search(len(c.vals), func(k int) bool { return P(&c.vals[k]).Key() >= seq }))
		for ; j < len(c.vals); j++ {
			if !P(&c.vals[j]).Gone() {
				return &c.vals[j]
			}
		}
	}
	return nil
}

// Odd returns the values stored out of order, in sequence order (map
// order must never decide anything); nil when there are none.
func (t *Table[T, P]) Odd() []*T {
	if len(t.odd) == 0 {
		return nil
	}
	out := make([]*T, 0, len(t.odd))
	for _, s := range t.oddSeqs() {
		out = append(out, t.odd[s])
	}
	return out
}

func (t *Table[T, P]) oddSeqs() []uint64 {
	if len(t.odd) == 0 {
		return nil
	}
	out := make([]uint64, 0, len(t.odd))
	for s := range t.odd {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
