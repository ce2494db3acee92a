package format

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/sluicemq/sluice/internal/store"
)

// A snapshot file holds one snapshot too large for a frame:
// [uvarint length][data] per record, then a trailer of the CRC-32C and the
// length of what precedes it ([u32][u64], big-endian). A KindSnapFile
// record in the log points at it.

const snapTrailer = 12

// WriteSnapFile writes recs to w as a snapshot file, through a buffer of
// its own.
func WriteSnapFile(w io.Writer, recs []store.Rec) error {
	sw := NewSnapWriter(w)
	for _, r := range recs {
		sw.Add(r.Data)
	}
	return sw.Close()
}

// SnapWriter writes a snapshot file one record at a time, through a
// buffer of its own: a snapshot is never held whole in memory.
type SnapWriter struct {
	bw  *bufio.Writer
	crc uint32
	n   uint64 // bytes before the trailer
	err error
}

// NewSnapWriter begins a snapshot file on w.
func NewSnapWriter(w io.Writer) *SnapWriter {
	return &SnapWriter{bw: bufio.NewWriterSize(w, 1<<20)}
}

func (s *SnapWriter) put(b []byte) {
	if s.err == nil {
		_, s.err = s.bw.Write(b)
		s.crc = crc32.Update(s.crc, castagnoli, b)
		s.n += uint64(len(b))
	}
}

// Add writes one record's data. It returns the first error the writer
// met (it then writes nothing more).
func (s *SnapWriter) Add(data []byte) error {
	var lenBuf [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lenBuf[:], uint64(len(data)))
	s.put(lenBuf[:k])
	s.put(data)
	return s.err
}

// Close writes the trailer and flushes; the caller syncs and closes w.
func (s *SnapWriter) Close() error {
	if s.err == nil {
		var tr [snapTrailer]byte
		binary.BigEndian.PutUint32(tr[:4], s.crc)
		binary.BigEndian.PutUint64(tr[4:], s.n)
		_, s.err = s.bw.Write(tr[:])
	}
	if s.err == nil {
		s.err = s.bw.Flush()
	}
	return s.err
}

// ReadSnapFile reads a whole snapshot file from r, checking its trailer,
// and returns its records.
func ReadSnapFile(r io.Reader) ([][]byte, error) {
	all, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(all) < snapTrailer {
		return nil, fmt.Errorf("%w: snapshot file is truncated", store.ErrCorrupt)
	}
	body, tr := all[:len(all)-snapTrailer], all[len(all)-snapTrailer:]
	if binary.BigEndian.Uint64(tr[4:]) != uint64(len(body)) || crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(tr) {
		return nil, fmt.Errorf("%w: snapshot file fails its checksum", store.ErrCorrupt)
	}
	var out [][]byte
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return nil, fmt.Errorf("%w: snapshot file holds a bad record", store.ErrCorrupt)
		}
		out = append(out, body[k:k+int(n):k+int(n)])
		body = body[k+int(n):]
	}
	return out, nil
}

// ReadSnapFileUnverified reads the records of a snapshot file without
// checking its trailer, as far as they decode: what a damaged one held,
// for a report.
func ReadSnapFileUnverified(r io.Reader) ([][]byte, error) {
	all, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	body := all[:max(0, len(all)-snapTrailer)]
	var out [][]byte
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			break
		}
		out = append(out, body[k:k+int(n):k+int(n)])
		body = body[k+int(n):]
	}
	return out, nil
}
