// Package segread reads the disk log's frames back by where they are (a
// segment and an offset), for reads of message bodies: it keeps each
// segment open, verifies every frame it reads (length, checksum,
// decoding), and keeps decoded frames in memory: the frames last written
// that hold bodies, so a consumer that keeps up reads from memory, and
// the frames last read, so the bodies sent in one batch cost one read.
//
// It must not decide what is read or what a record means (its owner
// checks that the record found is the one it asked for), nor write: its
// owner gives it only frames that are durable, and tells it when a
// segment goes.
package segread

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
)

// Reader reads frames back from the segments of one log directory. Its
// methods are safe for concurrent use.
type Reader struct {
	fs  vfs.FS
	dir string

	mu    sync.RWMutex // guards files
	files map[uint32]vfs.File

	recent   recentFrames
	lastRead readCache
}

// NewReader returns a Reader of the segments in dir.
func NewReader(fs vfs.FS, dir string) *Reader {
	return &Reader{fs: fs, dir: dir, files: map[uint32]vfs.File{}}
}

// Written keeps the records of a frame just written (and durable) at k
// that holds bodies: they are usually read soon. Frames are given in the
// order of the log.
func (r *Reader) Written(k Key, recs []format.Record) { r.recent.put(k, recs) }

// Frame returns the records of the frame of size bytes at k, which must
// hold record rec: from memory if it is kept, else read from its segment
// and verified. Records sent together are usually read together.
func (r *Reader) Frame(k Key, size, rec uint32) ([]format.Record, error) {
	if k.Seg == 0 || size < format.MinFrame || size > format.MaxFrame+format.FrameHeader {
		return nil, fmt.Errorf("%w: no frame of %d bytes at %+v", store.ErrNotFound, size, k)
	}
	if recs, ok := r.recent.get(k); ok && int(rec) < len(recs) {
		return recs, nil
	}
	if recs, ok := r.lastRead.get(k); ok && int(rec) < len(recs) {
		return recs, nil
	}
	if err := r.open(k.Seg); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: segment %d is gone", store.ErrNotFound, k.Seg)
		}
		return nil, fmt.Errorf("store: %w", err)
	}
	buf := make([]byte, size)
	// A frame that fails its checksum is read once more: what went wrong
	// on the way (a bus, memory) and not on the disk reads well again, and
	// a body is dropped only for damage that stays.
	for try := 0; ; try++ {
		r.mu.RLock()
		f := r.files[k.Seg]
		var err error
		if f == nil {
			err = fmt.Errorf("%w: segment %d was released", store.ErrNotFound, k.Seg)
		} else {
			_, err = f.ReadAt(buf, int64(k.Off))
		}
		r.mu.RUnlock()
		if err != nil {
			return nil, fmt.Errorf("store: reading %s at %d: %w", format.SegName(uint64(k.Seg)), k.Off, err)
		}
		if format.Intact(buf) {
			break
		}
		if try == 1 {
			return nil, fmt.Errorf("%w: %s at %d fails its checksum", store.ErrCorrupt, format.SegName(uint64(k.Seg)), k.Off)
		}
	}
	recs, err := format.DecodeFrame(buf[format.FrameHeader:])
	if err != nil {
		return nil, err
	}
	if int(rec) >= len(recs) {
		return nil, fmt.Errorf("%w: record %d of a frame of %d", store.ErrCorrupt, rec, len(recs))
	}
	r.lastRead.put(k, recs, int(size))
	return recs, nil
}

// open opens segment seg for reading, unless it is open.
func (r *Reader) open(seg uint32) error {
	r.mu.RLock()
	f := r.files[seg]
	r.mu.RUnlock()
	if f != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files[seg] != nil {
		return nil
	}
	f, err := r.fs.OpenFile(filepath.Join(r.dir, format.SegName(uint64(seg))), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	r.files[seg] = f
	return nil
}

// Forget lets go of a segment that is going away: its frames kept in
// memory and its open file.
func (r *Reader) Forget(seg uint32) {
	r.recent.dropSegment(seg)
	r.lastRead.dropSegment(seg)
	r.mu.Lock()
	if f := r.files[seg]; f != nil {
		f.Close()
		delete(r.files, seg)
	}
	r.mu.Unlock()
}

// Close closes the open segments.
func (r *Reader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for seg, f := range r.files {
		f.Close()
		delete(r.files, seg)
	}
}
