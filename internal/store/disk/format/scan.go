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
