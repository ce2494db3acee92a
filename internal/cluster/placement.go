package cluster

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/sluicemq/sluice/internal/store"
)

// Rendezvous (highest random weight) hashing: every node has a weight for
// every partition, and a partition's preferred order is its nodes by
// weight, heaviest first. When a node leaves, only its partitions move;
// when one joins, it takes about 1/n of the others', from each evenly.

// weight is node's rendezvous weight for partition p.
func weight(node string, p store.PartitionID) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(p))
	h.Write(b[:])
	return mix(h.Sum64())
}

// mix is splitmix64's finalizer: FNV alone spreads the last bytes poorly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// heavier reports whether a comes before b in p's preferred order.
func heavier(a, b string, p store.PartitionID) bool {
	wa, wb := weight(a, p), weight(b, p)
	if wa != wb {
		return wa > wb
	}
	return a < b
}

// rank is node's position in p's preferred order over members (0 is the
// preferred node). node counts whether or not members holds it.
func rank(members []string, p store.PartitionID, node string) int {
	r := 0
	for _, m := range members {
		if m != node && heavier(m, node, p) {
			r++
		}
	}
	return r
}

// preferred is the first node of p's preferred order over members; "" if
// there are none.
func preferred(members []string, p store.PartitionID) string {
	best := ""
	for _, m := range members {
		if best == "" || heavier(m, best, p) {
			best = m
		}
	}
	return best
}
