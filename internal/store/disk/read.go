package disk

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
)

// Read reads the record (p, pos) back through its hint, verifying its
// frame's checksum and that the record there is (p, pos): a record that
// fails the check is never returned.
func (l *Log) Read(p store.PartitionID, pos uint64, h store.Hint) ([]byte, error) {
	l.mu.Lock()
	_, known := l.parts[p]
	l.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("%w: partition %d", store.ErrNotFound, p)
	}
	recs, err := l.readFrame(h)
	if err != nil {
		return nil, err
	}
	r := recs[h.D]
	if r.P != p || r.Pos != pos || r.Kind == format.KindManifest {
		return nil, fmt.Errorf("%w: partition %d position %d is not at %+v", store.ErrNotFound, p, pos, h)
	}
	return r.Data, nil
}

func (l *Log) reader(seg uint32) (bool, error) {
	l.rmu.RLock()
	f := l.readers[seg]
	l.rmu.RUnlock()
	if f != nil {
		return true, nil
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.readers[seg] != nil {
		return true, nil
	}
	f, err := l.fs.OpenFile(l.path(format.SegName(uint64(seg))), os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	l.readers[seg] = f
	return true, nil
}

// readFrame reads back (and verifies) every record of the frame a hint
// names: records sent together are usually read together.
func (l *Log) readFrame(h store.Hint) ([]format.Record, error) {
	if h.A == 0 || h.C < format.MinFrame || h.C > format.MaxFrame+format.FrameHeader {
		return nil, fmt.Errorf("%w: no record at %+v", store.ErrNotFound, h)
	}
	k := frameKey{h.A, h.B}
	if recs, ok := l.recent.get(k); ok && int(h.D) < len(recs) {
		return recs, nil
	}
	if recs, ok := l.lastRead.get(k); ok && int(h.D) < len(recs) {
		return recs, nil
	}
	if _, err := l.reader(h.A); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: segment %d is gone", store.ErrNotFound, h.A)
		}
		return nil, fmt.Errorf("store: %w", err)
	}
	buf := make([]byte, h.C)
	l.rmu.RLock()
	f := l.readers[h.A]
	var err error
	if f == nil {
		err = fmt.Errorf("%w: segment %d was released", store.ErrNotFound, h.A)
	} else {
		_, err = f.ReadAt(buf, int64(h.B))
	}
	l.rmu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("store: reading %s at %d: %w", format.SegName(uint64(h.A)), h.B, err)
	}
	if !format.Intact(buf) {
		return nil, fmt.Errorf("%w: %s at %d fails its checksum", store.ErrCorrupt, format.SegName(uint64(h.A)), h.B)
	}
	recs, err := format.DecodeFrame(buf[format.FrameHeader:])
	if err != nil {
		return nil, err
	}
	if int(h.D) >= len(recs) {
		return nil, fmt.Errorf("%w: record %d of a frame of %d", store.ErrCorrupt, h.D, len(recs))
	}
	l.lastRead.put(k, recs, int(h.C))
	return recs, nil
}

// readCache keeps the last frames read from disk: the messages sent in
// one batch share a frame and are usually received one after another,
// from a backlog long after the recent-frames cache let them go, so the
// frame is read and verified once, not once a message.
type readCache struct {
	mu    sync.Mutex
	keys  [readCacheFrames]frameKey
	recs  [readCacheFrames][]format.Record
	size  [readCacheFrames]int
	bytes int
	next  int
}

const (
	readCacheFrames = 64
	readCacheBytes  = 16 << 20 // at most this much held; a frame over a quarter of it is not kept
)

func (c *readCache) get(k frameKey) ([]format.Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.keys {
		if c.keys[i] == k && c.recs[i] != nil {
			return c.recs[i], true
		}
	}
	return nil, false
}

func (c *readCache) put(k frameKey, recs []format.Record, n int) {
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
	c.keys[i], c.recs[i], c.size[i] = frameKey{}, nil, 0
}

// dropSegment forgets the frames of a segment that is going away.
func (c *readCache) dropSegment(seg uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.keys {
		if c.keys[i].seg == seg {
			c.evictLocked(i)
		}
	}
}

type frameKey struct{ seg, off uint32 }

// recentFrames keeps the records of the most recently written frames that
// hold bodies, up to recentBytes, so a consumer that keeps up reads them
// from memory instead of the page cache. It holds exactly what was written
// (and fsynced), so it needs no checksum. Frames arrive in log order, so a
// ring in that order, searched by halves, needs no map.
type recentFrames struct {
	mu    sync.Mutex
	ring  []recentFrame // oldest first
	bytes int
}

type recentFrame struct {
	k     frameKey
	recs  []format.Record
	bytes int
}

const recentBytes = 8 << 20

func (k frameKey) less(o frameKey) bool { return k.seg < o.seg || k.seg == o.seg && k.off < o.off }

func (r *recentFrames) put(k frameKey, recs []format.Record) {
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

func (r *recentFrames) get(k frameKey) ([]format.Record, bool) {
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
		if f.k.seg == seg {
			r.bytes -= f.bytes
			continue
		}
		kept = append(kept, f)
	}
	clear(r.ring[len(kept):])
	r.ring = kept
}
