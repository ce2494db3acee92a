package queue

import (
	"testing"
	"unsafe"
)

// TestEntrySize: the index entry is what every waiting message costs in
// memory; keep it at 88 bytes (see DESIGN.md section 4 and
// BenchmarkMemoryPerMessage).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(Msg{}); n > 88 {
		t.Fatalf("an index entry is %d bytes, more than 88", n)
	}
}
