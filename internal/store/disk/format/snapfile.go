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
	bw := bufio.NewWriterSize(w, 1<<20)
	var err error
	crc, n := uint32(0), uint64(0)
	var lenBuf [binary.MaxVarintLen64]byte
	put := func(b []byte) {
		if err == nil {
			_, err = bw.Write(b)
			crc = crc32.Update(crc, castagnoli, b)
			n += uint64(len(b))
		}
	}
	for _, r := range recs {
		k := binary.PutUvarint(lenBuf[:], uint64(len(r.Data)))
		put(lenBuf[:k])
		put(r.Data)
	}
	if err == nil {
		var tr [snapTrailer]byte
		binary.BigEndian.PutUint32(tr[:4], crc)
		binary.BigEndian.PutUint64(tr[4:], n)
		_, err = bw.Write(tr[:])
	}
	if err == nil {
		err = bw.Flush()
	}
	return err
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
