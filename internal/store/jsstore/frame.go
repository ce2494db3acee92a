package jsstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluicemq/sluice/internal/store"
)

// A frame is the payload of one stream message: records of one partition,
// packed in order, with a checksum.
//
//	magic    1 byte  0xE5
//	version  1 byte  1
//	part     8 bytes the partition, big-endian
//	count    4 bytes the entries that follow, big-endian
//	entries  count × { kind 1 byte, pos uvarint, len uvarint, data len bytes }
//	crc      4 bytes CRC-32C of everything before it, big-endian
//
// An entry's kind byte is a kind (low four bits) and flags: flagMore says
// the record's data goes on in the next message of the same operation,
// flagCont that the entry goes on with the record of the previous
// message's last entry (same kind and position). A record larger than a
// message is split that way; a record that fits one message is never
// split.
const (
	frameMagic   = 0xE5
	frameVersion = 1
	frameHead    = 2 + 8 + 4
	frameTrailer = 4
	maxEntryHead = 1 + 2*binary.MaxVarintLen64
	// minChunk is the least data a split record starts with in a message
	// that already holds records; less, and it starts a message of its own.
	minChunk = 4 << 10
)

// Entry kinds.
const (
	kindRec       byte = 1 // a record
	kindKeep      byte = 2 // a record appended with Keep
	kindSnapFirst byte = 3 // the first record of a snapshot
	kindSnap      byte = 4 // a later record of a snapshot
	kindMoved     byte = 5 // a copy of a kept record (compaction); pos is the record's
	kindDrop      byte = 6 // the partition's tombstone: a drop is under way

	kindMask byte = 0x0f
	flagMore byte = 0x10
	flagCont byte = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a decoded frame entry; data points into the frame.
type entry struct {
	kind byte
	pos  uint64
	data []byte
}

func (e entry) base() byte { return e.kind & kindMask }
func (e entry) more() bool { return e.kind&flagMore != 0 }
func (e entry) cont() bool { return e.kind&flagCont != 0 }

var errFrame = errors.New("malformed frame")

// decodeFrame checks a frame and returns its partition and entries.
func decodeFrame(b []byte) (store.PartitionID, []entry, error) {
	if len(b) < frameHead+frameTrailer {
		return 0, nil, fmt.Errorf("%w: %d bytes", errFrame, len(b))
	}
	if b[0] != frameMagic || b[1] != frameVersion {
		return 0, nil, fmt.Errorf("%w: magic %#x version %d", errFrame, b[0], b[1])
	}
	body := b[:len(b)-frameTrailer]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(b)-frameTrailer:]); got != want {
		return 0, nil, fmt.Errorf("%w: checksum %#x, want %#x", errFrame, got, want)
	}
	p := store.PartitionID(binary.BigEndian.Uint64(b[2:10]))
	n := binary.BigEndian.Uint32(b[10:14])
	rest := body[frameHead:]
	if uint64(n) > uint64(len(rest)) {
		return 0, nil, fmt.Errorf("%w: %d entries in %d bytes", errFrame, n, len(rest))
	}
	es := make([]entry, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(rest) < 1 {
			return 0, nil, fmt.Errorf("%w: entry %d cut", errFrame, i)
		}
		k := rest[0]
		pos, w := binary.Uvarint(rest[1:])
		if w <= 0 {
			return 0, nil, fmt.Errorf("%w: entry %d position", errFrame, i)
		}
		l, w2 := binary.Uvarint(rest[1+w:])
		if w2 <= 0 {
			return 0, nil, fmt.Errorf("%w: entry %d length", errFrame, i)
		}
		rest = rest[1+w+w2:]
		if l > uint64(len(rest)) {
			return 0, nil, fmt.Errorf("%w: entry %d holds %d bytes, %d left", errFrame, i, l, len(rest))
		}
		if b := k & kindMask; b < kindRec || b > kindDrop || k&^(kindMask|flagMore|flagCont) != 0 {
			return 0, nil, fmt.Errorf("%w: entry %d kind %#x", errFrame, i, k)
		}
		es = append(es, entry{kind: k, pos: pos, data: rest[:l:l]})
		rest = rest[l:]
	}
	if len(rest) != 0 {
		return 0, nil, fmt.Errorf("%w: %d bytes after the last entry", errFrame, len(rest))
	}
	return p, es, nil
}

// frameEntries is how many entries a well-formed frame holds.
func frameEntries(f []byte) uint32 { return binary.BigEndian.Uint32(f[10:14]) }

// joinFrames makes one frame of the entries of frames (of one partition,
// in order), size bytes long; one frame is returned as it is.
func joinFrames(frames [][]byte, size int) []byte {
	if len(frames) == 1 {
		return frames[0]
	}
	out := make([]byte, frameHead, size)
	copy(out, frames[0][:frameHead])
	n := uint32(0)
	for _, f := range frames {
		out = append(out, f[frameHead:len(f)-frameTrailer]...)
		n += frameEntries(f)
	}
	binary.BigEndian.PutUint32(out[10:14], n)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// recLoc is where an encoder put a record: the message of its first byte,
// its entry there, and how many messages it spans.
type recLoc struct {
	msg    int
	idx    uint32
	chunks uint32
}

// encoder packs the records of one operation into frames of at most limit
// bytes each.
type encoder struct {
	p      store.PartitionID
	limit  int
	frames [][]byte
	cur    []byte
	n      uint32
	locs   []recLoc
	bytes  int // data bytes added
	// expect is about how many bytes are still to come (0: unknown): a
	// message is allocated for them, not for the limit, so a small
	// append does not allocate a large buffer.
	expect int
}

func newEncoder(p store.PartitionID, limit int) *encoder {
	return &encoder{p: p, limit: limit}
}

func (e *encoder) open() {
	size := 64 << 10
	if e.expect > 0 {
		size = frameHead + frameTrailer + e.expect
	}
	e.cur = make([]byte, frameHead, min(e.limit, size))
	e.cur[0], e.cur[1] = frameMagic, frameVersion
	binary.BigEndian.PutUint64(e.cur[2:10], uint64(e.p))
	e.n = 0
}

func (e *encoder) close() {
	binary.BigEndian.PutUint32(e.cur[10:14], e.n)
	e.cur = binary.BigEndian.AppendUint32(e.cur, crc32.Checksum(e.cur, castagnoli))
	e.frames = append(e.frames, e.cur)
	e.cur = nil
}

func (e *encoder) entry(kind byte, pos uint64, data []byte) {
	e.cur = append(e.cur, kind)
	e.cur = binary.AppendUvarint(e.cur, pos)
	e.cur = binary.AppendUvarint(e.cur, uint64(len(data)))
	e.cur = append(e.cur, data...)
	e.n++
}

func entryLen(pos uint64, n int) int {
	var b [binary.MaxVarintLen64]byte
	return 1 + binary.PutUvarint(b[:], pos) + binary.PutUvarint(b[:], uint64(n)) + n
}

// add appends one record.
func (e *encoder) add(kind byte, pos uint64, data []byte) {
	e.bytes += len(data)
	defer func() { e.expect = max(0, e.expect-entryLen(pos, len(data))) }()
	if e.cur == nil {
		e.open()
	}
	need := entryLen(pos, len(data))
	free := e.limit - frameTrailer - len(e.cur)
	if need <= free {
		e.locs = append(e.locs, recLoc{msg: len(e.frames), idx: e.n, chunks: 1})
		e.entry(kind, pos, data)
		return
	}
	if e.n > 0 && (need <= e.limit-frameHead-frameTrailer || free < maxEntryHead+minChunk) {
		// It fits a message of its own, or too little of it fits here.
		e.close()
		e.open()
		if need <= e.limit-frameHead-frameTrailer {
			e.locs = append(e.locs, recLoc{msg: len(e.frames), idx: e.n, chunks: 1})
			e.entry(kind, pos, data)
			return
		}
	}
	loc := recLoc{msg: len(e.frames), idx: e.n, chunks: 1}
	k := kind
	for {
		room := e.limit - frameTrailer - len(e.cur) - maxEntryHead
		part := data[:min(room, len(data))]
		data = data[len(part):]
		if len(data) > 0 {
			e.entry(k|flagMore, pos, part)
			e.close()
			e.open()
			loc.chunks++
			k = kind | flagCont
			continue
		}
		e.entry(k, pos, part)
		break
	}
	e.locs = append(e.locs, loc)
}

// empty starts a frame with no entries if none is open (an empty snapshot
// is still one message: it marks where replay starts).
func (e *encoder) empty() {
	if e.cur == nil && len(e.frames) == 0 {
		e.open()
	}
}

// finish closes the open frame and returns the frames.
func (e *encoder) finish() [][]byte {
	if e.cur != nil {
		e.close()
	}
	return e.frames
}

// count is how many frames the records so far need.
func (e *encoder) count() int {
	if e.cur != nil {
		return len(e.frames) + 1
	}
	return len(e.frames)
}
