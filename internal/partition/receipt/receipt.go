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
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Handle is what a receipt handle names.
type Handle struct {
	Partition uint64
	Seq       uint64
	Fence     uint32
}

// Encode returns the handle as a client sees it, with nonce in it.
func (h Handle) Encode(nonce [6]byte) string {
	raw := make([]byte, 0, 64)
	raw = strconv.AppendUint(raw, h.Partition, 10)
	raw = append(raw, ':')
	raw = strconv.AppendUint(raw, h.Seq, 10)
	raw = append(raw, ':')
	raw = strconv.AppendUint(raw, uint64(h.Fence), 10)
	raw = append(raw, ':')
	raw = hex.AppendEncode(raw, nonce[:])
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Parse reads a handle a client sent; ok is false when it is not one.
func Parse(s string) (h Handle, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Handle{}, false
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 4 {
		return Handle{}, false
	}
	p, e1 := strconv.ParseUint(parts[0], 10, 64)
	seq, e2 := strconv.ParseUint(parts[1], 10, 64)
	f, e3 := strconv.ParseUint(parts[2], 10, 32)
	if e1 != nil || e2 != nil || e3 != nil {
		return Handle{}, false
	}
	return Handle{Partition: p, Seq: seq, Fence: uint32(f)}, true
}

// Invalid is the error for s, which is not a receipt handle of the queue.
func Invalid(s string) error {
	return st.Errorf(st.CodeReceiptHandleIsInvalid, "The input receipt handle \"%s\" is not a valid receipt handle.", s)
}
