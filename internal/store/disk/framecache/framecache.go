// Package framecache keeps decoded frames of the disk log in memory, by
// where they are in the log: the frames most recently written that hold
// message bodies (Recent), and the frames last read back from disk
// (LastRead). Both are bounded in frames and bytes, safe for concurrent
// use, and usable as zero values.
//
// It holds records as they are given: it must not read files, verify
// anything or know what the records mean. Its owner puts only frames that
// are durable (or read and verified), and drops a segment's frames before
// the segment goes.
package framecache

import (
	"sort"
	"sync"

	"github.com/sluicemq/sluice/internal/store/disk/format"
)

// Key is where a frame is: its segment and its offset in it.
type Key struct{ Seg, Off uint32 }

func (k Key) less(o Key) bool { return k.Seg < o.Seg || k.Seg == o.Seg && k.Off < o.Off }

// LastRead keeps the last frames read from disk: the messages sent in
// one batch share a frame and are usually received one after another,
// from a backlog long after Recent let them go, so the frame is read and
// verified once, not once a message.
type LastRead struct {
	mu    sync.Mutex
	keys  [lastReadFrames]Key
	recs  [lastReadFrames][]format.Record
	size  [lastReadFrames]int
	bytes int
	next  int
}

const (
	lastReadFrames = 64
	lastReadBytes  = 16 << 20 // at most this much held; a frame over a quarter of it is not kept
)

// Get returns the records of the frame at k, if it is kept.
func (c *LastRead) Get(k Key) ([]format.Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.keys {
		if c.keys[i] == k && c.recs[i] != nil {
			return c.recs[i], true
		}
	}
	return nil, false
}

// Put keeps the records of the frame at k, n bytes long, in place of the
// oldest ones.
func (c *LastRead) Put(k Key, recs []format.Record, n int) {
	if n > lastReadBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked(c.next)
	for i := (c.next + 1) % lastReadFrames; c.bytes+n > lastReadBytes; i = (i + 1) % lastReadFrames {
		c.evictLocked(i) // the oldest first
	}
	c.keys[c.next], c.recs[c.next], c.size[c.next] = k, recs, n
	c.bytes += n
	c.next = (c.next + 1) % lastReadFrames
}

func (c *LastRead) evictLocked(i int) {
	c.bytes -= c.size[i]
	c.keys[i], c.recs[i], c.size[i] = Key{}, nil, 0
}

// DropSegment forgets the frames of a segment that is going away.
func (c *LastRead) DropSegment(seg uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.keys {
		if c.keys[i].Seg == seg {
			c.evictLocked(i)
		}
	}
}

// Recent keeps the records of the most recently written frames that hold
// bodies, up to recentBytes, so a consumer that keeps up reads them from
// memory instead of the page cache. It holds exactly what was written
// (and fsynced), so it needs no checksum. Frames arrive in log order, so a
// ring in that order, searched by halves, needs no map.
type Recent struct {
	mu    sync.Mutex
	ring  []recentFrame // oldest first
	bytes int
}

type recentFrame struct {
	k     Key
	recs  []format.Record
	bytes int
}

const recentBytes = 8 << 20

// Put keeps the records of the frame just written at k (after every frame
// put before it), letting the oldest go.
func (r *Recent) Put(k Key, recs []format.Record) {
	n := 0
	for _, rec := range recs {
		n += len(rec.Data)
	}
	if n > recentBytes/4 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if last := len(r.ring) - 1; last >= 0 && !r.ring[last].k.less(k) {
		r.ring, r.bytes = r.ring[:0], 0 // out of order (not expected): start again
	}
	r.ring = append(r.ring, recentFrame{k: k, recs: recs, bytes: n})
	r.bytes += n
	drop := 0
	for r.bytes > recentBytes && drop < len(r.ring) {
		r.bytes -= r.ring[drop].bytes
		r.ring[drop] = recentFrame{}
		drop++
	}
	if drop > 0 {
		r.ring = r.ring[drop:]
		if cap(r.ring) > 4*len(r.ring)+64 {
			r.ring = append([]recentFrame(nil), r.ring...) // let the old array go
		}
	}
}

// Get returns the records of the frame at k, if it is kept.
func (r *Recent) Get(k Key) ([]format.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.ring), func(i int) bool { return !r.ring[i].k.less(k) })
	if i < len(r.ring) && r.ring[i].k == k {
		return r.ring[i].recs, true
	}
	return nil, false
}

// DropSegment forgets the frames of a segment that is going away.
func (r *Recent) DropSegment(seg uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.ring[:0]
	for _, f := range r.ring {
		if f.k.Seg == seg {
			r.bytes -= f.bytes
			continue
		}
		kept = append(kept, f)
	}
	clear(r.ring[len(kept):])
	r.ring = kept
}
