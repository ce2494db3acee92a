package segread

import (
	"sort"
	"sync"

	"github.com/sluicemq/sluice/internal/store/disk/format"
)

// Key is where a frame is: its segment and its offset in it.
type Key struct{ Seg, Off uint32 }

func (k Key) less(o Key) bool { return k.Seg < o.Seg || k.Seg == o.Seg && k.Off < o.Off }

// readCache keeps the last frames read from disk: the messages sent in
// one batch share a frame and are usually received one after another,
// from a backlog long after recentFrames let them go, so the frame is read and
// verified once, not once a message.
type readCache struct {
	mu    sync.Mutex
	keys  [readCacheFrames]Key
	recs  [readCacheFrames][]format.Record
	size  [readCacheFrames]int
	bytes int
	next  int
}

const (
	readCacheFrames = 64
	readCacheBytes  = 16 << 20 // at most this much held; a frame over a quarter of it is not kept
)

// get returns the records of the frame at k, if it is kept.
func (c *readCache) get(k Key) ([]format.Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.keys {
		if c.keys[i] == k && c.recs[i] != nil {
			return c.recs[i], true
		}
	}
	return nil, false
}

// put keeps the records of the frame at k, n bytes long, in place of the
// oldest ones.
func (c *readCache) put(k Key, recs []format.Record, n int) {
	if n > readCacheBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked(c.next)
	for i := (c.next + 1) % readCacheFrames; c.bytes+n > readCacheBytes; i = (i + 1) % readCacheFrames {
		c.evictLocked(i) // the oldest first
	}
	c.keys[c.next], c.recs[c.next], c.size[c.next] = k, recs, n
	c.bytes += n
	c.next = (c.next + 1) % readCacheFrames
}

func (c *readCache) evictLocked(i int) {
	c.bytes -= c.size[i]
	c.keys[i], c.recs[i], c.size[i] = Key{}, nil, 0
}

// dropSegment forgets the frames of a segment that is going away.
func (c *readCache) dropSegment(seg uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.keys {
		if c.keys[i].Seg == seg {
			c.evictLocked(i)
		}
	}
}

// recentFrames keeps the records of the most recently written frames that hold
// bodies, up to recentBytes, so a consumer that keeps up reads them from
// memory instead of the page cache. It holds exactly what was written
// (and fsynced), so it needs no checksum. Frames arrive in log order, so a
// ring in that order, searched by halves, needs no map.
type recentFrames struct {
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

// put keeps the records of the frame just written at k (after every frame
// put before it), letting the oldest go.
func (r *recentFrames) put(k Key, recs []format.Record) {
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

// get returns the records of the frame at k, if it is kept.
func (r *recentFrames) get(k Key) ([]format.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.ring), func(i int) bool { return !r.ring[i].k.less(k) })
	if i < len(r.ring) && r.ring[i].k == k {
		return r.ring[i].recs, true
	}
	return nil, false
}

// dropSegment forgets the frames of a segment that is going away.
func (r *recentFrames) dropSegment(seg uint32) {
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
