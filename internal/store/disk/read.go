package disk

import (
	"errors"
	"fmt"
	"os"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/store/disk/framecache"
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
	k := framecache.Key{Seg: h.A, Off: h.B}
	if recs, ok := l.recent.Get(k); ok && int(h.D) < len(recs) {
		return recs, nil
	}
	if recs, ok := l.lastRead.Get(k); ok && int(h.D) < len(recs) {
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
	l.lastRead.Put(k, recs, int(h.C))
	return recs, nil
}
