package format

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
)

// Scan reads a segment from r, from its start, and calls fn for each
// frame in order with its offset, its length (header included) and its
// records, whose data fn may keep. It returns the offset after the last
// good frame, where it stopped:
//
//   - at the end of r, or at a zeroed frame header followed by nothing but
//     zeros (a prepared segment's unwritten tail): bad is empty;
//   - at a bad frame (cut short, out of range, failing its checksum or
//     not decoding, or data after a zeroed tail): bad says what is wrong
//     with the frame at end (a torn tail or damage: the caller knows
//     which);
//   - at fn's first error, returned with the offset of its frame.
func Scan(r io.Reader, fn func(off int64, flen int, recs []Record) error) (end int64, bad string, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var off int64
	var hdr [FrameHeader]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF {
				return off, "", nil
			}
			return off, "truncated frame header", nil
		}
		ln := binary.BigEndian.Uint32(hdr[:4])
		if ln == 0 && binary.BigEndian.Uint32(hdr[4:]) == 0 {
			// A prepared segment's unwritten tail. Only zeros may follow.
			if allZero(br) {
				return off, "", nil
			}
			return off, "data after the zeroed tail", nil
		}
		if ln > MaxFrame {
			return off, "frame length out of range", nil
		}
		payload := make([]byte, ln)
		if _, err := io.ReadFull(br, payload); err != nil {
			return off, "truncated frame", nil
		}
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
			return off, "checksum mismatch", nil
		}
		recs, err := DecodeFrame(payload)
		if err != nil {
			return off, err.Error(), nil
		}
		if err := fn(off, FrameHeader+int(ln), recs); err != nil {
			return off, "", err
		}
		off += FrameHeader + int64(ln)
	}
}

// allZero reports whether r holds nothing but zeros to its end.
func allZero(r io.Reader) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// FrameAt reads the frame at off in r, which must end by end, and returns
// its records and length when it is intact (length in range, checksum,
// decoding).
func FrameAt(r io.ReaderAt, off, end int64) (recs []Record, flen int, ok bool) {
	var hdr [FrameHeader]byte
	if off+MinFrame > end {
		return nil, 0, false
	}
	if _, err := r.ReadAt(hdr[:], off); err != nil {
		return nil, 0, false
	}
	ln := int64(binary.BigEndian.Uint32(hdr[:4]))
	if ln < MinFrame-FrameHeader || ln > MaxFrame || off+FrameHeader+ln > end {
		return nil, 0, false
	}
	payload := make([]byte, ln)
	if _, err := r.ReadAt(payload, off+FrameHeader); err != nil {
		return nil, 0, false
	}
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
		return nil, 0, false
	}
	recs, err := DecodeFrame(payload)
	if err != nil {
		return nil, 0, false
	}
	return recs, FrameHeader + int(ln), true
}

// Unverified decodes the damaged frame at off in r, which the next
// intact frame (or the end) follows at end, without its checksum: what it
// held, for a report. Its payload is taken to run to end (its own length
// may be what is damaged); when that does not decode, to the length its
// header says. The records may be wrong; nil when nothing decodes.
func Unverified(r io.ReaderAt, off, end int64) []Record {
	var hdr [FrameHeader]byte
	if end-off < MinFrame {
		return nil
	}
	if _, err := r.ReadAt(hdr[:], off); err != nil {
		return nil
	}
	payload := make([]byte, end-off-FrameHeader)
	if _, err := r.ReadAt(payload, off+FrameHeader); err != nil {
		return nil
	}
	if recs, err := DecodeFrame(payload); err == nil {
		return recs
	}
	if ln := int64(binary.BigEndian.Uint32(hdr[:4])); ln >= 4 && ln < int64(len(payload)) {
		if recs, err := DecodeFrame(payload[:ln]); err == nil {
			return recs
		}
	}
	return nil
}

// Resync finds where the frames go on after a bad one at off, in a
// segment whose bytes end at end: the offset of the first intact frame
// after it, or ok false when none follows. When the bad frame's length is
// plausible and an intact frame (or the end) follows where it says it
// ends, that is where (a frame damaged inside, its length intact: the
// common case); otherwise every offset after its header is tried, the
// checksum only where the length and the first record look right. It
// reads what it searches into memory: it is for damaged segments, not
// for the common path.
func Resync(r io.ReaderAt, off, end int64) (next int64, ok bool, err error) {
	var hdr [FrameHeader]byte
	if off+FrameHeader <= end {
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return 0, false, err
		}
		ln := int64(binary.BigEndian.Uint32(hdr[:4]))
		if skip := off + FrameHeader + ln; ln >= MinFrame-FrameHeader && ln <= MaxFrame && skip <= end {
			if _, _, intact := FrameAt(r, skip, end); intact {
				return skip, true, nil
			}
		}
	}
	from := off + MinFrame
	if from+MinFrame > end {
		return 0, false, nil
	}
	buf := make([]byte, end-from)
	if _, err := r.ReadAt(buf, from); err != nil && err != io.EOF {
		return 0, false, err
	}
	for o := 0; o+MinFrame <= len(buf); o++ {
		ln := int(binary.BigEndian.Uint32(buf[o:]))
		if ln < MinFrame-FrameHeader || ln > MaxFrame || o+FrameHeader+ln > len(buf) {
			continue
		}
		payload := buf[o+FrameHeader : o+FrameHeader+ln]
		if n := binary.BigEndian.Uint32(payload); uint64(n) > uint64(ln)/4 || n > 0 && ln < 5 || n > 0 && Kind(payload[4]) > KindLost {
			continue
		}
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(buf[o+4:]) {
			continue
		}
		if _, err := DecodeFrame(payload); err == nil {
			return from + int64(o), true, nil
		}
	}
	return 0, false, nil
}
