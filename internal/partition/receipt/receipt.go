// Package receipt is the format of receipt handles: base64url of
// "partition:sequence:fence:nonce". A handle names one delivery of one
// message: the fence is the delivery's, so a handle from an earlier
// delivery is recognised as stale (fenced) rather than acting on a later
// one. The nonce makes every handle unique; it is not checked.
//
// It knows nothing of queues: the owner checks that the partition is its
// own and the fence current.
package receipt

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strconv"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Handle is what a receipt handle names.
type Handle struct {
	Partition uint64
	Seq       uint64
	Fence     uint32
}

// Encode returns the handle as a client sees it, with nonce in it.
func (h Handle) Encode(nonce [6]byte) string { return string(h.Append(nil, nonce)) }

// Append appends Encode's answer to b.
func (h Handle) Append(b []byte, nonce [6]byte) []byte {
	var buf [72]byte // the longest: numbers of 20, 20 and 10 digits, three colons, the nonce's 12
	raw := strconv.AppendUint(buf[:0], h.Partition, 10)
	raw = append(raw, ':')
	raw = strconv.AppendUint(raw, h.Seq, 10)
	raw = append(raw, ':')
	raw = strconv.AppendUint(raw, uint64(h.Fence), 10)
	raw = append(raw, ':')
	raw = hex.AppendEncode(raw, nonce[:])
	return base64.RawURLEncoding.AppendEncode(b, raw)
}

// Parse reads a handle a client sent; ok is false when it is not one.
func Parse(s string) (h Handle, ok bool) {
	// Decoded into an array, its fields found in place: every delete and
	// visibility change parses a handle, and a decoded copy and a split
	// were three allocations each. (A longer string than any handle, which
	// is refused below anyway, is decoded as a copy.)
	var buf [96]byte
	var raw []byte
	if n := base64.RawURLEncoding.DecodedLen(len(s)); n <= len(buf) {
		n, err := base64.RawURLEncoding.Decode(buf[:n], []byte(s))
		if err != nil {
			return Handle{}, false
		}
		raw = buf[:n]
	} else {
		var err error
		if raw, err = base64.RawURLEncoding.DecodeString(s); err != nil {
			return Handle{}, false
		}
	}
	// partition:sequence:fence:nonce, exactly four fields.
	var field [3][]byte
	for i := range field {
		j := bytes.IndexByte(raw, ':')
		if j < 0 {
			return Handle{}, false
		}
		field[i], raw = raw[:j], raw[j+1:]
	}
	if bytes.IndexByte(raw, ':') >= 0 {
		return Handle{}, false
	}
	p, e1 := strconv.ParseUint(string(field[0]), 10, 64)
	seq, e2 := strconv.ParseUint(string(field[1]), 10, 64)
	f, e3 := strconv.ParseUint(string(field[2]), 10, 32)
	if e1 != nil || e2 != nil || e3 != nil {
		return Handle{}, false
	}
	return Handle{Partition: p, Seq: seq, Fence: uint32(f)}, true
}

// Invalid is the error for s, which is not a receipt handle of the queue.
func Invalid(s string) error {
	return st.Errorf(st.CodeReceiptHandleIsInvalid, "The input receipt handle \"%s\" is not a valid receipt handle.", s)
}
