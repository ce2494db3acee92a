package format

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicemq/sluice/internal/store"
)

// Manifest is what recovery needs before it reads the log: the first
// segment replay reads (the floor), and the partitions dropped since (whose
// records in the segments from the floor on are skipped). It is the data
// of a KindManifest record, alone in its frame: [uvarint floor][uvarint
// count][uvarint partition]... and, in a sync mark only, [uvarint flags]
// (releases before the mark ignore what follows the partitions).
type Manifest struct {
	Floor   uint64
	Dropped []store.PartitionID
	// Synced makes the manifest a sync mark: the writer puts one at the
	// start of a write when everything before it in its segment is
	// durable. A bad frame with a sync mark after it was durable once, so
	// it is damage, never a write cut short by a crash.
	Synced bool
}

// manifestSynced is the flag of a sync mark.
const manifestSynced = 1

// Encode encodes m as a KindManifest record's data.
func (m Manifest) Encode() []byte {
	b := binary.AppendUvarint(nil, m.Floor)
	b = binary.AppendUvarint(b, uint64(len(m.Dropped)))
	for _, p := range m.Dropped {
		b = binary.AppendUvarint(b, uint64(p))
	}
	if m.Synced {
		b = binary.AppendUvarint(b, manifestSynced)
	}
	return b
}

// AppendManifest encodes m as one frame at the end of buf.
func AppendManifest(buf []byte, m Manifest) []byte {
	return AppendFrame(buf, []Record{{Kind: KindManifest, Data: m.Encode()}})
}

// DecodeManifest decodes a KindManifest record's data.
func DecodeManifest(b []byte) (Manifest, error) {
	var m Manifest
	bad := fmt.Errorf("%w: manifest", store.ErrCorrupt)
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return m, bad
	}
	m.Floor, b = v, b[k:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return m, bad
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return m, bad
		}
		m.Dropped, b = append(m.Dropped, store.PartitionID(v)), b[k:]
	}
	if len(b) > 0 {
		flags, k := binary.Uvarint(b)
		if k <= 0 {
			return m, bad
		}
		m.Synced = flags&manifestSynced != 0
	}
	return m, nil
}

// IsSyncMark reports whether recs, a frame's records, are a sync mark.
func IsSyncMark(recs []Record) bool {
	if len(recs) != 1 || recs[0].Kind != KindManifest {
		return false
	}
	m, err := DecodeManifest(recs[0].Data)
	return err == nil && m.Synced
}
