package disk

import (
	"fmt"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/store/disk/segread"
)

// Read reads the record (p, pos) back through its hint (segment, offset,
// frame length, record), verifying its frame's checksum (package segread)
// and that the record there is (p, pos): a record that fails the check is
// never returned.
func (l *Log) Read(p store.PartitionID, pos uint64, h store.Hint) ([]byte, error) {
	l.mu.Lock()
	_, known := l.parts[p]
	l.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("%w: partition %d", store.ErrNotFound, p)
	}
	recs, err := l.reader.Frame(segread.Key{Seg: h.A, Off: h.B}, h.C, h.D)
	if err != nil {
		return nil, err
	}
	r := recs[h.D]
	if r.P != p || r.Pos != pos || r.Kind == format.KindManifest {
		return nil, fmt.Errorf("%w: partition %d position %d is not at %+v", store.ErrNotFound, p, pos, h)
	}
	return r.Data, nil
}
