package freespace

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

// TestAlarm: the alarm rises once free space is below the reserve (the
// owner told once), and clears once space is back.
func TestAlarm(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(10 << 20)
	var logs bytes.Buffer
	raised := 0
	w := New(mem, "/", slog.New(slog.NewTextHandler(&logs, nil)), func() { raised++ })
	w.Note(0, 4<<20, true)
	if d := w.Disk(); d.Alarm || d.Free != 10<<20 || d.Reserve != 4<<20 || w.Alarm() {
		t.Fatalf("with room: %+v", d)
	}
	w.Note(0, 12<<20, false) // a reserve over the free space: near it, so it looks
	if d := w.Disk(); !d.Alarm || !w.Alarm() || raised != 1 {
		t.Fatalf("below the reserve: %+v, raised %d times", d, raised)
	}
	w.Note(100, 12<<20, false) // under the alarm every write looks
	if raised != 1 || strings.Count(logs.String(), "disk alarm:") != 1 {
		t.Fatalf("the alarm rose %d times; logs: %s", raised, logs.String())
	}
	mem.SetCapacity(20 << 20)
	w.Note(100, 12<<20, false)
	if d := w.Disk(); d.Alarm || !strings.Contains(logs.String(), "disk alarm cleared") {
		t.Fatalf("space back: %+v; logs: %s", d, logs.String())
	}
}

// TestLooksWhenDue: a write far from the reserve looks at the disk only
// once a megabyte has been written or a second has passed since the last
// look (on a clock the test moves).
func TestLooksWhenDue(t *testing.T) {
	fs := &countingFS{FS: vfs.NewMem()}
	w := New(fs, "/", slog.New(slog.DiscardHandler), nil)
	clock := time.Unix(1_700_000_000, 0)
	w.now = func() time.Time { return clock }
	w.Note(0, 1<<20, true)
	looks := fs.looks
	for range 10 {
		w.Note(64<<10, 1<<20, false)
	}
	if fs.looks != looks {
		t.Fatalf("looked %d times for 640 KiB written", fs.looks-looks)
	}
	for range 10 {
		w.Note(64<<10, 1<<20, false)
	}
	if fs.looks != looks+1 {
		t.Fatalf("looked %d times for the next 640 KiB, want once at the megabyte", fs.looks-looks)
	}
	clock = clock.Add(1100 * time.Millisecond)
	w.Note(0, 1<<20, false)
	if fs.looks != looks+2 {
		t.Fatalf("looked %d times after a second, want once more", fs.looks-looks-1)
	}
	w.Disk() // not stale
	clock = clock.Add(1100 * time.Millisecond)
	w.Disk() // stale: looks again
	if fs.looks != looks+3 {
		t.Fatalf("Disk looked %d times, want once, when the last look was stale", fs.looks-looks-2)
	}
}

// TestUnreadableDisk: a disk whose free space cannot be read raises no
// alarm and is logged once.
func TestUnreadableDisk(t *testing.T) {
	fs := &countingFS{FS: vfs.NewMem(), err: errors.New("statfs: no")}
	var logs bytes.Buffer
	w := New(fs, "/", slog.New(slog.NewTextHandler(&logs, nil)), nil)
	for range 3 {
		w.Note(0, 1<<20, true)
	}
	if d := w.Disk(); d.Alarm || strings.Count(logs.String(), "cannot read the free disk space") != 1 {
		t.Fatalf("%+v; logs: %s", d, logs.String())
	}
}

type countingFS struct {
	vfs.FS
	looks int
	err   error
}

func (f *countingFS) FreeSpace(dir string) (int64, error) {
	f.looks++
	if f.err != nil {
		return 0, f.err
	}
	return f.FS.FreeSpace(dir)
}
