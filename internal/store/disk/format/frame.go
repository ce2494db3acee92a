// Package format is the disk log's on-disk format: the bytes a data
// directory holds, which must stay readable by later releases. It owns
// frames of records and their CRC-32C, the record kinds, the manifest,
// the snapshot file, the names of the files, and reading a segment frame
// by frame up to its end or its first bad frame.
//
// It owns bytes, not files, and decides nothing: it must not open, sync
// or remove a file (package disk does, through vfs), hold state, or know
// what the log does with what it reads: when to write what, whether a bad
// frame is a torn tail or damage, what may be deleted.
package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/sluicemq/sluice/internal/store"
)

// A frame is [u32 length][u32 CRC-32C of payload][payload]; the payload is
// [u32 record count] then, per record, [u8 kind][uvarint partition]
// [uvarint position][uvarint length][data]. Integers are big-endian. A
// frame is the unit of atomicity: recovery reads all of it or none.

// MaxFrame bounds one frame's payload (a bit over ten 1 MiB messages;
// larger snapshots go to a snapshot file).
const MaxFrame = 64 << 20

// FrameHeader is the size of a frame's header: its length and checksum.
const FrameHeader = 8

// MinFrame is the size of the smallest frame, one of no records.
const MinFrame = FrameHeader + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Kind is what a record is to the log.
type Kind byte

// Record kinds.
const (
	KindRec       Kind = iota // a record
	KindKeep                  // a record kept readable until released (a message body)
	KindSnap                  // a record of a snapshot
	KindSnapFirst             // the first record of a snapshot
	KindSnapFile              // a snapshot in a file of its own: data is its record count (SnapFileData)
	KindMoved                 // a kept record copied forward by compaction
	KindManifest              // the replay floor and the dropped partitions (Manifest)
	KindLost                  // a damaged stretch that a salvage replaced: data is a LostNote
)

// Record is one record of a frame.
type Record struct {
	Kind Kind
	P    store.PartitionID
	Pos  uint64
	Data []byte
}

// Bound is an upper bound of the record's size in a frame.
func (r Record) Bound() int {
	return 1 + binary.MaxVarintLen64*3 + len(r.Data)
}

// AppendFrame encodes recs as one frame at the end of buf.
func AppendFrame(buf []byte, recs []Record) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(recs)))
	for _, r := range recs {
		buf = append(buf, byte(r.Kind))
		buf = binary.AppendUvarint(buf, uint64(r.P))
		buf = binary.AppendUvarint(buf, r.Pos)
		buf = binary.AppendUvarint(buf, uint64(len(r.Data)))
		buf = append(buf, r.Data...)
	}
	payload := buf[start+FrameHeader:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf
}

// Intact reports whether frame, a whole frame read back (header
// included), has the length and the checksum its header says.
func Intact(frame []byte) bool {
	return len(frame) >= FrameHeader &&
		binary.BigEndian.Uint32(frame) == uint32(len(frame)-FrameHeader) &&
		crc32.Checksum(frame[FrameHeader:], castagnoli) == binary.BigEndian.Uint32(frame[4:])
}

// DecodeFrame decodes a frame's payload (its checksum already verified).
// The records' data alias p.
func DecodeFrame(p []byte) ([]Record, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("%w: short frame", store.ErrCorrupt)
	}
	n := binary.BigEndian.Uint32(p)
	p = p[4:]
	if uint64(n) > uint64(len(p))/4 {
		return nil, fmt.Errorf("%w: record count out of range", store.ErrCorrupt)
	}
	out := make([]Record, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(p) < 1 {
			return nil, fmt.Errorf("%w: short record", store.ErrCorrupt)
		}
		r := Record{Kind: Kind(p[0])}
		p = p[1:]
		if r.Kind > KindLost {
			return nil, fmt.Errorf("%w: record kind %d", store.ErrCorrupt, r.Kind)
		}
		var vals [3]uint64
		for j := range vals {
			v, k := binary.Uvarint(p)
			if k <= 0 {
				return nil, fmt.Errorf("%w: short record header", store.ErrCorrupt)
			}
			vals[j], p = v, p[k:]
		}
		r.P, r.Pos = store.PartitionID(vals[0]), vals[1]
		if vals[2] > uint64(len(p)) {
			return nil, fmt.Errorf("%w: record length out of range", store.ErrCorrupt)
		}
		r.Data, p = p[:vals[2]:vals[2]], p[vals[2]:]
		out = append(out, r)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes in frame", store.ErrCorrupt)
	}
	return out, nil
}

// SnapFileData is the data of a KindSnapFile record: the number of
// records in the snapshot file.
func SnapFileData(n uint64) []byte { return binary.AppendUvarint(nil, n) }

// SnapFileCount decodes the data of a KindSnapFile record (0 and false if
// it is bad).
func SnapFileCount(data []byte) (uint64, bool) {
	n, k := binary.Uvarint(data)
	return n, k > 0
}

// LostNote is what a KindLost record says of the damaged stretch it
// replaced: when the salvage was, how many bytes it replaced, and what was
// wrong with them. Its data is [u8 version 1][varint unix ms][uvarint
// length][uvarint len][reason], then zeros that fill the stretch.
type LostNote struct {
	At     int64 // unix ms
	Length int64
	Reason string
}

func (n LostNote) encode() []byte {
	b := []byte{1}
	b = binary.AppendVarint(b, n.At)
	b = binary.AppendUvarint(b, uint64(n.Length))
	b = binary.AppendUvarint(b, uint64(len(n.Reason)))
	return append(b, n.Reason...)
}

// DecodeLostNote decodes a KindLost record's data.
func DecodeLostNote(b []byte) (LostNote, error) {
	bad := fmt.Errorf("%w: lost-stretch note", store.ErrCorrupt)
	if len(b) < 1 || b[0] != 1 {
		return LostNote{}, bad
	}
	b = b[1:]
	var n LostNote
	at, k := binary.Varint(b)
	if k <= 0 {
		return n, bad
	}
	n.At, b = at, b[k:]
	ln, k := binary.Uvarint(b)
	if k <= 0 {
		return n, bad
	}
	n.Length, b = int64(ln), b[k:]
	rl, k := binary.Uvarint(b)
	if k <= 0 || rl > uint64(len(b)-k) {
		return n, bad
	}
	n.Reason = string(b[k : k+int(rl)])
	return n, nil
}

// LostFrame returns a frame of exactly size bytes that holds one KindLost
// record of n (cut short when it does not fit), to write over a damaged
// stretch of that size, so that every other frame of the segment stays
// where it is. ok is false when no frame is that size: below MinFrame, or
// from MinFrame+1 to 15 bytes (size MinFrame is a frame of no records).
func LostFrame(size int, n LostNote) (frame []byte, ok bool) {
	if size == MinFrame {
		return AppendFrame(nil, nil), true
	}
	note := n.encode()
	// A frame of one record: header, count, kind, partition 0, the
	// position (whose varint, one or two bytes long, takes up the slack a
	// data length crossing a varint boundary would leave) and the data.
	for _, pos := range []uint64{0, 1 << 7} {
		fixed := FrameHeader + 4 + 1 + 1 + uvarintLen(pos)
		for k := 1; k <= binary.MaxVarintLen64; k++ {
			d := size - fixed - k
			if d < 0 || uvarintLen(uint64(d)) != k {
				continue
			}
			data := make([]byte, d)
			copy(data, note)
			f := AppendFrame(make([]byte, 0, size), []Record{{Kind: KindLost, Pos: pos, Data: data}})
			if len(f) != size {
				panic("format: a lost frame of the wrong size") // the arithmetic above
			}
			return f, true
		}
	}
	return nil, false
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}
