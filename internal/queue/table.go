package queue

import (
	"slices"
	"sort"
	"unsafe"
)

// table holds a queue's messages by value, in arrival order, in chunks: no
// map entry, no pointer and no allocation per message. A queue's sends
// take increasing sequence numbers, so every chunk covers a range of them
// above the previous chunk's, and a message is found by binary search.
// The few that arrive out of order (recovery of old logs, a message put
// back after a failed move) live in a map beside the chunks.
//
// Slots are never reused: a pointer to an entry stays valid (and never
// names another message) for as long as anyone holds it. A chunk's array
// is let go once its last message is gone, so one message left behind
// pins at most its own chunk, never the history that followed it.
type table struct {
	chunks []*chunk // ascending sequence ranges; chunks[:head] are gone
	head   int
	dead   int // chunks in chunks[head:] whose messages are all gone
	odd    map[uint64]*Msg
	n      int    // live messages
	top    uint64 // the highest sequence in the chunks
}

type chunk struct {
	msgs  []Msg  // appended in sequence order, never beyond cap; nil when all gone
	first uint64 // sequence of msgs[0]
	live  int
	lo    int // msgs[:lo] are gone
}

// maxChunk is the most entries a chunk holds: 16 KiB of them.
const maxChunk = 16384 / int(unsafe.Sizeof(Msg{}))

// fGone marks an entry whose message left the queue.
const fGone msgFlags = 1 << 7

func (t *table) last() *chunk {
	if len(t.chunks) == t.head {
		return nil
	}
	return t.chunks[len(t.chunks)-1]
}

// add stores a copy of m and returns the stored entry.
func (t *table) add(m *Msg) *Msg {
	t.n++
	if m.Seq <= t.top {
		if t.odd == nil {
			t.odd = map[uint64]*Msg{}
		}
		p := new(Msg)
		*p = *m
		t.odd[m.Seq] = p
		return p
	}
	t.top = m.Seq
	c := t.last()
	if c == nil || c.msgs == nil || len(c.msgs) == cap(c.msgs) {
		// In proportion to what the queue holds: a queue with a few
		// messages costs a few entries, a deep one full chunks.
		size := 4
		for size < t.n && size < maxChunk {
			size *= 2
		}
		// Grow rounds the capacity up to what the allocator hands out.
		c = &chunk{msgs: slices.Grow([]Msg(nil), size), first: m.Seq}
		t.chunks = append(t.chunks, c)
	}
	c.msgs = append(c.msgs, *m)
	c.live++
	return &c.msgs[len(c.msgs)-1]
}

// find returns the chunk and index of seq's entry (live or gone), or nil.
func (t *table) find(seq uint64) (*chunk, int) {
	cs := t.chunks[t.head:]
	i := sort.Search(len(cs), func(i int) bool { return cs[i].first > seq }) - 1
	if i < 0 || cs[i].msgs == nil {
		return nil, 0
	}
	c := cs[i]
	if j := seq - c.first; j < uint64(len(c.msgs)) && c.msgs[j].Seq == seq {
		return c, int(j) // sequences without gaps: the common case
	}
	j, ok := slices.BinarySearchFunc(c.msgs, seq, func(m Msg, s uint64) int {
		switch {
		case m.Seq < s:
			return -1
		case m.Seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, 0
	}
	return c, j
}

// get returns the live entry of seq.
func (t *table) get(seq uint64) (*Msg, bool) {
	if m, ok := t.odd[seq]; ok {
		return m, true
	}
	c, j := t.find(seq)
	if c == nil || c.msgs[j].is(fGone) {
		return nil, false
	}
	return &c.msgs[j], true
}

// del marks a live entry gone.
func (t *table) del(m *Msg) {
	if p, ok := t.odd[m.Seq]; ok && p == m {
		delete(t.odd, m.Seq)
		t.n--
		m.set(fGone, true)
		return
	}
	c, j := t.find(m.Seq)
	if c == nil || &c.msgs[j] != m || m.is(fGone) {
		return
	}
	m.set(fGone, true)
	t.n--
	c.live--
	for c.lo < len(c.msgs) && c.msgs[c.lo].is(fGone) {
		c.lo++
	}
	if c.live > 0 {
		return
	}
	c.msgs, c.lo = nil, 0
	t.dead++
	for t.head < len(t.chunks) && t.chunks[t.head].msgs == nil {
		t.chunks[t.head] = nil
		t.head++
		t.dead--
	}
	if t.head == len(t.chunks) {
		t.chunks, t.head = t.chunks[:0], 0
	} else if t.dead > 8 && 2*t.dead > len(t.chunks)-t.head || t.head > 64 && 2*t.head > len(t.chunks) {
		keep := t.chunks[:0]
		for _, c := range t.chunks[t.head:] {
			if c.msgs != nil {
				keep = append(keep, c)
			}
		}
		clear(t.chunks[len(keep):])
		t.chunks, t.head, t.dead = keep, 0, 0
	}
}

// each calls f for every live entry in sequence order until f returns
// false. f may remove the entry it is given, and no other.
func (t *table) each(f func(*Msg) bool) {
	var odd []uint64
	for s := range t.odd {
		odd = append(odd, s)
	}
	slices.Sort(odd)
	next := func(limit uint64) bool { // the odd entries below limit
		for len(odd) > 0 && odd[0] < limit {
			m, ok := t.odd[odd[0]]
			odd = odd[1:]
			if ok && !f(m) {
				return false
			}
		}
		return true
	}
	// Chunks may be compacted by a removal: walk a copy of the list.
	for _, c := range slices.Clone(t.chunks[t.head:]) {
		msgs := c.msgs
		for j := c.lo; j < len(msgs); j++ {
			m := &msgs[j]
			if m.is(fGone) {
				continue
			}
			if !next(m.Seq) || !f(m) {
				return
			}
		}
	}
	next(^uint64(0))
}

// oldest returns the live entry that arrived first among the chunks (the
// odd entries are not looked at), or nil.
func (t *table) oldest() *Msg {
	for _, c := range t.chunks[t.head:] {
		if c.msgs == nil {
			continue
		}
		for c.lo < len(c.msgs) && c.msgs[c.lo].is(fGone) {
			c.lo++
		}
		if c.lo < len(c.msgs) {
			return &c.msgs[c.lo]
		}
	}
	return nil
}

// from returns the first live entry among the chunks whose sequence is at
// least seq, or nil.
func (t *table) from(seq uint64) *Msg {
	cs := t.chunks[t.head:]
	i := max(0, sort.Search(len(cs), func(i int) bool { return cs[i].first > seq })-1)
	for ; i < len(cs); i++ {
		c := cs[i]
		if c.msgs == nil {
			continue
		}
		j := max(c.lo, sort.Search(len(c.msgs), func(k int) bool { return c.msgs[k].Seq >= seq }))
		for ; j < len(c.msgs); j++ {
			if !c.msgs[j].is(fGone) {
				return &c.msgs[j]
			}
		}
	}
	return nil
}
