package prealloc

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestPrepareAndTake: the next segment is prepared full of zeros, once,
// and taken under the segment's name, at its start.
func TestPrepareAndTake(t *testing.T) {
	mem := vfs.NewMem()
	const size = 3<<20 + 5
	p := New(mem, "/d", size, quiet())
	defer p.Stop()
	if p.Ready() {
		t.Fatal("ready before it was started")
	}
	p.Start()
	p.Start() // under way: nothing more
	p.Wait()
	if !p.Ready() {
		t.Fatal("not ready once prepared")
	}
	f, err := p.Take("/d/" + format.SegName(2))
	if err != nil {
		t.Fatal(err)
	}
	if p.Ready() {
		t.Fatal("still ready once taken")
	}
	if _, err := f.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := readAll(t, mem, "/d/"+format.SegName(2))
	if len(got) != size || !bytes.Equal(got[:4], []byte("head")) || bytes.ContainsFunc(got[4:], func(r rune) bool { return r != 0 }) {
		t.Fatalf("the taken segment: %d bytes, %q...", len(got), got[:8])
	}
	if names, _ := mem.ReadDir("/d"); len(names) != 1 {
		t.Fatalf("files: %v", names)
	}
}

// TestDrop: a prepared segment can be given back to the disk.
func TestDrop(t *testing.T) {
	mem := vfs.NewMem()
	p := New(mem, "/d", 64<<10, quiet())
	defer p.Stop()
	if p.Drop() {
		t.Fatal("dropped what was never prepared")
	}
	p.Start()
	p.Wait()
	if !p.Drop() || p.Ready() {
		t.Fatal("the prepared segment was not dropped")
	}
	if names, _ := mem.ReadDir("/d"); len(names) != 0 {
		t.Fatalf("files after the drop: %v", names)
	}
}

// TestFailureWaits: a preparation that fails leaves no file and is not
// tried again for a minute.
func TestFailureWaits(t *testing.T) {
	fault := vfs.NewFault(vfs.NewMem())
	p := New(fault, "/d", 64<<10, quiet())
	defer p.Stop()
	fault.Set(vfs.Faults{NoSpace: true})
	p.Start()
	p.Wait()
	fault.Set(vfs.Faults{})
	p.Start()
	p.Wait()
	if p.Ready() {
		t.Fatal("tried again at once after a failure")
	}
	if names, _ := fault.ReadDir("/d"); len(names) != 0 {
		t.Fatalf("a failed preparation left %v", names)
	}
}

// TestStop: stopping the preparation under way removes its file.
func TestStop(t *testing.T) {
	mem := vfs.NewMem()
	p := New(mem, "/d", 1<<30, quiet())
	p.Start()
	p.Stop()
	if p.Ready() {
		t.Fatal("ready after a stop")
	}
	if names, _ := mem.ReadDir("/d"); len(names) != 0 {
		t.Fatalf("a stopped preparation left %v", names)
	}
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.OpenFile(name, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
