package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"

	"github.com/sluicemq/sluice/internal/store"
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
	if r.p != p || r.pos != pos || r.kind == kManifest {
		return nil, fmt.Errorf("%w: partition %d position %d is not at %+v", store.ErrNotFound, p, pos, h)
	}
	return r.data, nil
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
	f, err := l.fs.OpenFile(l.path(segName(uint64(seg))), os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	l.readers[seg] = f
	return true, nil
}

// readFrame reads back (and verifies) every record of the frame a hint
// names: records sent together are usually read together.
func (l *Log) readFrame(h store.Hint) ([]frec, error) {
	if h.A == 0 || h.C < frameHeader+4 || h.C > MaxFrame+frameHeader {
		return nil, fmt.Errorf("%w: no record at %+v", store.ErrNotFound, h)
	}
	if recs, ok := l.recent.get(frameKey{h.A, h.B}); ok && int(h.D) < len(recs) {
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
		return nil, fmt.Errorf("store: reading %s at %d: %w", segName(uint64(h.A)), h.B, err)
	}
	if binary.BigEndian.Uint32(buf) != h.C-frameHeader || crc32.Checksum(buf[frameHeader:], castagnoli) != binary.BigEndian.Uint32(buf[4:]) {
		return nil, fmt.Errorf("%w: %s at %d fails its checksum", store.ErrCorrupt, segName(uint64(h.A)), h.B)
	}
	recs, err := decodeFrame(buf[frameHeader:])
	if err != nil {
		return nil, err
	}
	if int(h.D) >= len(recs) {
		return nil, fmt.Errorf("%w: record %d of a frame of %d", store.ErrCorrupt, h.D, len(recs))
	}
	return recs, nil
}

type frameKey struct{ seg, off uint32 }

// recentFrames keeps the records of the most recently written frames that
// hold bodies, up to recentBytes, so a consumer that keeps up reads them
// from memory instead of the page cache. It holds exactly what was written
// (and fsynced), so it needs no checksum.
type recentFrames struct {
	mu    sync.Mutex
	m     map[frameKey][]frec
	order []frameKey
	bytes int
}

const recentBytes = 8 << 20

func (r *recentFrames) put(k frameKey, recs []frec) {
	n := 0
	for _, rec := range recs {
		n += len(rec.data)
	}
	if n > recentBytes/4 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[frameKey][]frec{}
	}
	r.m[k] = recs
	r.order = append(r.order, k)
	r.bytes += n
	for r.bytes > recentBytes && len(r.order) > 0 {
		old := r.order[0]
		r.order = r.order[1:]
		for _, rec := range r.m[old] {
			r.bytes -= len(rec.data)
		}
		delete(r.m, old)
	}
}

func (r *recentFrames) get(k frameKey) ([]frec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs, ok := r.m[k]
	return recs, ok
}

// dropSegment forgets the frames of a segment that is going away.
func (r *recentFrames) dropSegment(seg uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, recs := range r.m {
		if k.seg == seg {
			for _, rec := range recs {
				r.bytes -= len(rec.data)
			}
			delete(r.m, k)
		}
	}
}
