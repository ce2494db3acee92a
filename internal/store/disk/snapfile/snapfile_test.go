package snapfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/vfs"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A snapshot file written record by record reads back whole; before
// Finish only its temporary name exists, and a power loss after Finish
// keeps it.
func TestWriteFinishRead(t *testing.T) {
	mem := vfs.NewMem()
	w, err := Create(mem, "/d", "snap-1-5.snap")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte("meta"), {}, bytes.Repeat([]byte("x"), 3<<20)}
	for _, d := range want {
		if err := w.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	if names, _ := mem.ReadDir("/d"); !slices.Equal(names, []string{"snap-1-5.snap.tmp"}) {
		t.Fatalf("before Finish: %v", names)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(mem.Crash(), "/d", "snap-1-5.snap")
	if err != nil || len(got) != len(want) {
		t.Fatalf("read back %d records, %v", len(got), err)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

// A write that fails (the disk is full) leaves nothing behind, whether
// Finish meets the failure or the writer gives up with Abandon; a
// damaged file is refused as corrupt.
func TestFailuresLeaveNothing(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(1 << 20)
	w, err := Create(mem, "/d", "snap-2-9.snap")
	if err != nil {
		t.Fatal(err)
	}
	w.Add(bytes.Repeat([]byte("y"), 2<<20))
	if err := w.Finish(); err == nil {
		t.Fatal("a snapshot larger than the disk was finished")
	}
	w2, err := Create(mem, "/d", "snap-2-10.snap")
	if err != nil {
		t.Fatal(err)
	}
	w2.Add([]byte("a"))
	w2.Abandon()
	if names, _ := mem.ReadDir("/d"); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	mem.SetCapacity(0)
	w3, _ := Create(mem, "/d", "snap-3-1.snap")
	w3.Add([]byte("state"))
	if err := w3.Finish(); err != nil {
		t.Fatal(err)
	}
	f, _ := mem.OpenFile("/d/snap-3-1.snap", os.O_RDWR, 0)
	f.Seek(1, io.SeekStart)
	f.Write([]byte("X")) // a byte of the record changes
	f.Close()
	if _, err := Read(mem, "/d", "snap-3-1.snap"); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a damaged file: %v", err)
	}
}
