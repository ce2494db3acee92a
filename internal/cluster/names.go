package cluster

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/store"
)

// Key prefixes in the lease bucket.
const (
	nodePrefix = "node."
	partPrefix = "part."
)

// token makes s usable as a bucket name, a subject token and a key token:
// letters, digits, '-' and '_' are kept, anything else becomes '_', and if
// anything was replaced, a hash of s is appended so that "a.b" and "a_b"
// stay apart.
func token(s string) string {
	var b strings.Builder
	changed := s == ""
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	if changed {
		h := fnv.New32a()
		h.Write([]byte(s))
		fmt.Fprintf(&b, "-%08x", h.Sum32())
	}
	return b.String()
}

// Token is s made usable as a NATS subject token (see token).
func Token(s string) string { return token(s) }

func bucketName(cluster string) string     { return token(cluster) + "-leases" }
func catalogSubject(cluster string) string { return "sluice." + token(cluster) + ".catalog" }
func nodeKey(node string) string           { return nodePrefix + token(node) }

func partKey(p store.PartitionID) string {
	return partPrefix + strconv.FormatUint(uint64(p), 10)
}

// parsePartKey returns the partition of a "part.<p>" key.
func parsePartKey(key string) (store.PartitionID, bool) {
	s, ok := strings.CutPrefix(key, partPrefix)
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return store.PartitionID(p), true
}
