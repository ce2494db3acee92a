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

func bucketName(cluster string) string     { return token(cluster) + "-leases" }
func catalogSubject(cluster string) string { return Subjects(cluster).catalog() }
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

// Subjects builds every NATS subject the nodes of cluster (its name) talk
// on: one place, so that no two services can collide. The catalog's
// subject carries the name's token, the others its lower case (as nodes
// of earlier releases name them: a rolling upgrade mixes the two).
type Subjects string

func (c Subjects) lower() string   { return strings.ToLower(string(c)) }
func (c Subjects) catalog() string { return "sluice." + token(string(c)) + ".catalog" }

// Partition is what the owner of partition p serves a service on (the
// calls between owners: hand-overs, a topic's deliveries, first
// attempts).
func (c Subjects) Partition(p store.PartitionID, service string) string {
	return fmt.Sprintf("sluice.%s.p.%d.%s", c.lower(), p, service)
}

// Node is where node serves the requests forwarded to it for the service
// of partition p (its decimal token, or "*" for the subscription).
func (c Subjects) Node(node, service, p string) string {
	return fmt.Sprintf("sluice.%s.n.%s.%s.%s", c.lower(), token(node), service, p)
}

// Ask is where every node answers the others' question.
func (c Subjects) Ask(question string) string { return "sluice." + c.lower() + ".ask." + question }
