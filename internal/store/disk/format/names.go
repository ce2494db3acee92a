package format

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/store"
)

// The files of a data directory:
//
//	log-<n>.seg           segment n: frames, beginning with a manifest
//	snap-<p>-<pos>.snap   partition p's snapshot at position pos, too large for one frame
//	next-segment.tmp      the next segment, being written full of zeros
//	<name>.tmp            a file being written, renamed into place once whole
//
// Recovery removes every ".tmp" file.

// NextSegment is the name of the next segment while it is prepared.
const NextSegment = "next-segment.tmp"

// SegName is the name of segment n.
func SegName(n uint64) string { return fmt.Sprintf("log-%016d.seg", n) }

// ParseSegName returns the number of the segment named name, if it names
// one.
func ParseSegName(name string) (uint64, bool) {
	const prefix, suffix = "log-", ".seg"
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, prefix), suffix), 10, 64)
	return n, err == nil
}

// SnapFileName is the name of the file of partition p's snapshot whose
// first record is at position pos.
func SnapFileName(p store.PartitionID, pos uint64) string {
	return fmt.Sprintf("snap-%d-%d.snap", p, pos)
}

// IsSnapFile reports whether name is a snapshot file's.
func IsSnapFile(name string) bool {
	return strings.HasPrefix(name, "snap-") && strings.HasSuffix(name, ".snap")
}

// TempName is the name under which the file name is written before it is
// renamed into place.
func TempName(name string) string { return name + ".tmp" }

// IsTemp reports whether name is a file still being written (a TempName or
// NextSegment): one recovery removes.
func IsTemp(name string) bool { return strings.HasSuffix(name, ".tmp") }
