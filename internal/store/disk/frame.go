package disk

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/sluicemq/sluice/internal/store"
)

// A frame is [u32 length][u32 CRC-32C of payload][payload]; the payload is
// [u32 record count] then, per record, [u8 kind][uvarint partition]
// [uvarint position][uvarint length][data]. A frame is the unit of
// atomicity: recovery reads all of it or none.

// MaxFrame bounds one frame (a bit over ten 1 MiB messages; snapshots
// larger than maxInlineSnapshot go to a file of their own).
const MaxFrame = 64 << 20

const frameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record kinds.
const (
	kRec       byte = iota // a record
	kKeep                  // a record kept readable until released (a message body)
	kSnap                  // a record of a snapshot
	kSnapFirst             // the first record of a snapshot
	kSnapFile              // a snapshot in a file of its own: data is its record count
	kMoved                 // a kept record copied forward by compaction
	kManifest              // the replay floor and the dropped partitions
)

// frec is one record of a frame.
type frec struct {
	kind byte
	p    store.PartitionID
	pos  uint64
	data []byte
}

func frecSize(r frec) int {
	return 1 + binary.MaxVarintLen64*3 + len(r.data)
}

// appendFrame encodes recs as one frame at the end of buf.
func appendFrame(buf []byte, recs []frec) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(recs)))
	for _, r := range recs {
		buf = append(buf, r.kind)
		buf = binary.AppendUvarint(buf, uint64(r.p))
		buf = binary.AppendUvarint(buf, r.pos)
		buf = binary.AppendUvarint(buf, uint64(len(r.data)))
		buf = append(buf, r.data...)
	}
	payload := buf[start+frameHeader:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf
}

// decodeFrame decodes a frame's payload (checksum already verified). The
// records' data alias p.
func decodeFrame(p []byte) ([]frec, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("%w: short frame", store.ErrCorrupt)
	}
	n := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(n) > uint64(len(p))/4 {
		return nil, fmt.Errorf("%w: record count out of range", store.ErrCorrupt)
	}
	out := make([]frec, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(p) < 1 {
			return nil, fmt.Errorf("%w: short record", store.ErrCorrupt)
		}
		r := frec{kind: p[0]}
		p = p[1:]
		if r.kind > kManifest {
			return nil, fmt.Errorf("%w: record kind %d", store.ErrCorrupt, r.kind)
		}
		var vals [3]uint64
		for j := range vals {
			v, k := binary.Uvarint(p)
			if k <= 0 {
				return nil, fmt.Errorf("%w: short record header", store.ErrCorrupt)
			}
			vals[j], p = v, p[k:]
		}
		r.p, r.pos = store.PartitionID(vals[0]), vals[1]
		if vals[2] > uint64(len(p)) {
			return nil, fmt.Errorf("%w: record length out of range", store.ErrCorrupt)
		}
		r.data, p = p[:vals[2]:vals[2]], p[vals[2]:]
		out = append(out, r)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes in frame", store.ErrCorrupt)
	}
	return out, nil
}

// manifest is what recovery needs before it reads the log: the first
// segment replay reads, and the partitions dropped since (whose records in
// the segments from floor on are skipped). Each segment begins with one,
// and one is written whenever either changes.
type manifest struct {
	floor   uint64
	dropped []store.PartitionID
}

func (m manifest) encode() []byte {
	b := binary.AppendUvarint(nil, m.floor)
	b = binary.AppendUvarint(b, uint64(len(m.dropped)))
	for _, p := range m.dropped {
		b = binary.AppendUvarint(b, uint64(p))
	}
	return b
}

func decodeManifest(b []byte) (manifest, error) {
	var m manifest
	bad := fmt.Errorf("%w: manifest", store.ErrCorrupt)
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return m, bad
	}
	m.floor, b = v, b[k:]
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
		m.dropped, b = append(m.dropped, store.PartitionID(v)), b[k:]
	}
	return m, nil
}
