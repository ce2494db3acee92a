package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/vfs"
)

var ctx = context.Background()

// owner is a minimal store owner: a set of records, snapshotted whole.
type owner struct {
	mu   sync.Mutex
	recs []string
}

func (o *owner) add(s string) { o.mu.Lock(); o.recs = append(o.recs, s); o.mu.Unlock() }

func (o *owner) snapshot(w io.Writer) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := io.WriteString(w, strings.Join(o.recs, "\n"))
	return err
}

func (o *owner) load(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(b) > 0 {
		o.recs = strings.Split(string(b), "\n")
	}
	return nil
}

func (o *owner) record(b []byte, _ Loc) error { o.recs = append(o.recs, string(b)); return nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t *testing.T, fs vfs.FS, dir string, o *owner, opts Options) *Log {
	t.Helper()
	opts.Snapshot = o.snapshot
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	l, err := Open(fs, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Recover(o.load, o.record); err != nil {
		t.Fatal(err)
	}
	return l
}

// commit submits one record and adds it to the owner's state once durable,
// in the writer (as the contract asks), and returns the error.
func commit(l *Log, o *owner, s string) error {
	return l.SubmitFunc([][]byte{[]byte(s)}, func([]Loc) { o.add(s) }).Wait(ctx)
}

func TestReplayAfterReopen(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := commit(l, o, fmt.Sprintf("g%d-%d", g, i)); err != nil {
					t.Error(err)
				}
			}
		}(g)
	}
	wg.Wait()
	l.Close()
	o2 := &owner{}
	l2 := open(t, vfs.OS{}, dir, o2, Options{})
	defer l2.Close()
	if len(o2.recs) != 400 {
		t.Fatalf("replayed %d records, want 400", len(o2.recs))
	}
}

func TestBatchIsAtomicAndOrdered(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{})
	for i := 0; i < 10; i++ {
		if err := l.Submit([]byte(fmt.Sprint("a", i)), []byte(fmt.Sprint("b", i))).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	o2 := &owner{}
	open(t, vfs.OS{}, dir, o2, Options{}).Close()
	for i := 0; i < 10; i++ {
		if o2.recs[2*i] != fmt.Sprint("a", i) || o2.recs[2*i+1] != fmt.Sprint("b", i) {
			t.Fatalf("order broken at %d: %v", i, o2.recs)
		}
	}
}

func TestCheckpointDropsHistory(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{SegmentBytes: 4096, CheckpointBytes: 16 << 10})
	// Records come and go: the owner keeps only the last 10.
	for i := 0; i < 5000; i++ {
		if err := l.Submit([]byte(fmt.Sprintf("rec-%05d-%s", i, strings.Repeat("x", 100)))).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		o.mu.Lock()
		o.recs = append(o.recs, fmt.Sprintf("rec-%05d", i))
		if len(o.recs) > 10 {
			o.recs = o.recs[1:]
		}
		o.mu.Unlock()
	}
	st := l.Stats()
	l.Close()
	if st.Checkpoints == 0 {
		t.Fatal("no checkpoint taken")
	}
	var total int64
	names, _ := vfs.OS{}.ReadDir(dir)
	for _, n := range names {
		fi, _ := os.Stat(filepath.Join(dir, n))
		total += fi.Size()
	}
	// 5000 records of ~110 bytes passed through; what stays is bounded by
	// the checkpoint threshold, not by history.
	if total > 64<<10 {
		t.Fatalf("disk use %d bytes after checkpoints (files %v)", total, names)
	}
	o2 := &owner{}
	open(t, vfs.OS{}, dir, o2, Options{}).Close()
	// Recovery reads the checkpoint (10 records) and the log after it only.
	last := o2.recs[len(o2.recs)-1]
	if len(o2.recs) > 200 || !strings.HasPrefix(last, "rec-04999") || !strings.HasPrefix(o2.recs[0], "rec-049") {
		t.Fatalf("recovered %d records, %q .. %q", len(o2.recs), o2.recs[0], last)
	}
}

func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{})
	for i := 0; i < 5; i++ {
		commit(l, o, fmt.Sprint("r", i))
	}
	l.Close()
	seg := filepath.Join(dir, segName(1))
	data, _ := os.ReadFile(seg)
	// Append half a frame, as a crash mid-write would leave it.
	half := appendFrame(nil, [][]byte{[]byte("never acknowledged")})
	os.WriteFile(seg, append(data, half[:len(half)/2]...), 0o644)
	var logs bytes.Buffer
	o2 := &owner{}
	l2 := open(t, vfs.OS{}, dir, o2, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if len(o2.recs) != 5 {
		t.Fatalf("recovered %v", o2.recs)
	}
	if !strings.Contains(logs.String(), "torn tail") {
		t.Fatalf("no log line for the cut: %s", logs.String())
	}
	// The store appends after the cut, and the next reopen is clean.
	commit(l2, o2, "after")
	l2.Close()
	o3 := &owner{}
	open(t, vfs.OS{}, dir, o3, Options{}).Close()
	if len(o3.recs) != 6 || o3.recs[5] != "after" {
		t.Fatalf("after cut and append: %v", o3.recs)
	}
}

func TestBitFlipInOldSegmentIsAnError(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{SegmentBytes: 256, CheckpointBytes: 1 << 30})
	for i := 0; i < 40; i++ {
		commit(l, o, fmt.Sprintf("record-%02d-%s", i, strings.Repeat("y", 40)))
	}
	l.Close()
	seg := filepath.Join(dir, segName(1))
	data, _ := os.ReadFile(seg)
	data[20] ^= 0x01
	os.WriteFile(seg, data, 0o644)
	l2, _ := Open(vfs.OS{}, dir, Options{Snapshot: (&owner{}).snapshot, Logger: quiet()})
	o2 := &owner{}
	err := l2.Recover(o2.load, o2.record)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt middle segment: got %v", err)
	}
}

func TestBitFlipInTailFrameIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{})
	commit(l, o, "good")
	commit(l, o, "flipped")
	l.Close()
	seg := filepath.Join(dir, segName(1))
	data, _ := os.ReadFile(seg)
	data[len(data)-2] ^= 0x40
	os.WriteFile(seg, data, 0o644)
	o2 := &owner{}
	open(t, vfs.OS{}, dir, o2, Options{}).Close()
	for _, r := range o2.recs {
		if r != "good" {
			t.Fatalf("served a corrupt record: %q", r)
		}
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name   string
		faults vfs.Faults
		want   error
	}{
		{"enospc", vfs.Faults{NoSpace: true}, ErrNoSpace},
		{"fsync error", vfs.Faults{SyncError: true}, nil},
		{"short write", vfs.Faults{ShortWrite: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := vfs.NewFault(vfs.OS{})
			o := &owner{}
			l := open(t, fs, dir, o, Options{})
			for i := 0; i < 3; i++ {
				if err := commit(l, o, fmt.Sprint("before", i)); err != nil {
					t.Fatal(err)
				}
			}
			fs.Set(tc.faults)
			err := commit(l, o, "during")
			if err == nil {
				t.Fatal("write under fault acknowledged")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			fs.Set(vfs.Faults{})
			// The store keeps serving once the disk recovers.
			if err := commit(l, o, "after"); err != nil {
				t.Fatalf("after the fault cleared: %v", err)
			}
			l.Close()
			o2 := &owner{}
			open(t, vfs.OS{}, dir, o2, Options{}).Close()
			want := []string{"before0", "before1", "before2", "after"}
			if strings.Join(o2.recs, ",") != strings.Join(want, ",") {
				t.Fatalf("recovered %v, want %v", o2.recs, want)
			}
		})
	}
}

func TestRecordTooLarge(t *testing.T) {
	o := &owner{}
	l := open(t, vfs.OS{}, t.TempDir(), o, Options{})
	defer l.Close()
	if err := l.Submit(make([]byte, MaxFrame)).Wait(ctx); !errors.Is(err, ErrTooBig) {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendFrame(nil, [][]byte{[]byte("a"), []byte("bc")})[8:])
	f.Add([]byte{0, 0, 0, 1, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, p []byte) {
		recs, err := decodeBatch(p)
		if err != nil {
			return
		}
		// A decoded batch re-encodes to the same payload.
		if got := appendFrame(nil, recs)[8:]; !bytes.Equal(got, p) {
			t.Fatalf("round trip: %x != %x", got, p)
		}
	})
}

func TestReadRecordAndRetain(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	retained := map[uint32]bool{}
	var mu sync.Mutex
	opts := Options{SegmentBytes: 4096, CheckpointBytes: 8192, Retain: func(seg uint32) bool { mu.Lock(); defer mu.Unlock(); return retained[seg] }}
	l := open(t, vfs.OS{}, dir, o, opts)
	var keep Loc
	got := make(chan []Loc, 1)
	l.SubmitFunc([][]byte{[]byte("first"), []byte("keep me")}, func(locs []Loc) {
		mu.Lock()
		retained[locs[1].Seg] = true
		mu.Unlock()
		got <- locs
	}).Wait(ctx)
	keep = (<-got)[1]
	for i := 0; i < 300; i++ { // enough to roll segments and checkpoint
		commit(l, o, fmt.Sprintf("filler-%03d-%s", i, strings.Repeat("z", 60)))
	}
	if l.Stats().Checkpoints == 0 {
		t.Fatal("no checkpoint")
	}
	rec, err := l.ReadRecord(keep)
	if err != nil || string(rec) != "keep me" {
		t.Fatalf("read back %q, %v", rec, err)
	}
	l.Close()
	// After reopen the retained segment is still there to read.
	o2 := &owner{}
	l2 := open(t, vfs.OS{}, dir, o2, opts)
	if rec, err := l2.ReadRecord(keep); err != nil || string(rec) != "keep me" {
		t.Fatalf("after reopen: %q, %v", rec, err)
	}
	// Released, it is unlinked at once (it is older than the checkpoint).
	mu.Lock()
	delete(retained, keep.Seg)
	mu.Unlock()
	l2.Release(keep.Seg)
	if _, err := l2.ReadRecord(keep); err == nil {
		t.Fatal("released segment still readable")
	}
	if _, err := os.Stat(filepath.Join(dir, segName(uint64(keep.Seg)))); !os.IsNotExist(err) {
		t.Fatalf("released segment still on disk: %v", err)
	}
	l2.Close()
}

func TestReadRecordDetectsCorruption(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	l := open(t, vfs.OS{}, dir, o, Options{})
	defer l.Close()
	got := make(chan []Loc, 1)
	l.SubmitFunc([][]byte{[]byte("payload-payload-payload")}, func(locs []Loc) { got <- locs }).Wait(ctx)
	loc := (<-got)[0]
	// Push it out of the cache of recent frames, so it is read from disk.
	big := make([]byte, 1<<20)
	for i := 0; i < 10; i++ {
		l.SubmitFunc([][]byte{big}, func([]Loc) {}).Wait(ctx)
	}
	// A bit rots on disk under the running store.
	f, err := os.OpenFile(filepath.Join(dir, segName(uint64(loc.Seg))), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, int64(loc.Off)+14)
	b[0] ^= 0x08
	f.WriteAt(b, int64(loc.Off)+14)
	f.Close()
	if rec, err := l.ReadRecord(loc); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped bit served: %q %v", rec, err)
	}
}

// TestPowerLoss runs the store on the in-memory file system and "pulls the
// plug" (keeping only what was fsynced) at every point of a run: with
// SyncAlways every acknowledged record survives; with SyncNone recovery
// still succeeds on whatever prefix survived.
func TestPowerLoss(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncNone} {
		mem := vfs.NewMem()
		o := &owner{}
		l := open(t, mem, "/data", o, Options{Sync: mode, SegmentBytes: 2048, CheckpointBytes: 4096})
		var acked []string
		for i := 0; i < 200; i++ {
			rec := fmt.Sprintf("rec-%03d-%s", i, strings.Repeat("p", 30))
			if err := commit(l, o, rec); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, rec)
			if i%17 != 0 {
				continue
			}
			crashed := mem.Crash()
			o2 := &owner{}
			l2 := open(t, crashed, "/data", o2, Options{Sync: mode, SegmentBytes: 2048, CheckpointBytes: 4096})
			l2.Close()
			got := map[string]bool{}
			for _, r := range o2.recs {
				got[r] = true
			}
			if mode == SyncAlways {
				for _, a := range acked {
					if !got[a] {
						t.Fatalf("after power loss at %d: acknowledged %q lost (recovered %d)", i, a, len(o2.recs))
					}
				}
			}
		}
		l.Close()
	}
}

// TestPreallocatedSegments: the writer rolls into segments prepared full of
// zeros; recovery reads the zeroed tail as the end of the log, and data
// after the zeros as a torn tail.
func TestPreallocatedSegments(t *testing.T) {
	dir := t.TempDir()
	o := &owner{}
	const segBytes = 64 << 10
	opts := Options{SegmentBytes: segBytes, CheckpointBytes: 1 << 30, Preallocate: true}
	l := open(t, vfs.OS{}, dir, o, opts)
	active := func() (string, int64) {
		names, _ := os.ReadDir(dir)
		last := ""
		for _, n := range names {
			if strings.HasPrefix(n.Name(), "log-") {
				last = n.Name()
			}
		}
		fi, err := os.Stat(filepath.Join(dir, last))
		if err != nil {
			t.Fatal(err)
		}
		return last, fi.Size()
	}
	n := 0
	for deadline := time.Now().Add(10 * time.Second); ; n++ {
		if err := commit(l, o, fmt.Sprintf("r%04d-%s", n, strings.Repeat("p", 500))); err != nil {
			t.Fatal(err)
		}
		if _, size := active(); size == segBytes && n > 200 {
			break // rolled into a prepared segment
		}
		if time.Now().After(deadline) {
			t.Fatal("never rolled into a prepared segment")
		}
		time.Sleep(time.Millisecond)
	}
	n++
	l.Close()
	name, _ := active()
	// Every closed segment lost its zeros when the writer left it.
	names, _ := os.ReadDir(dir)
	for _, e := range names {
		if strings.HasPrefix(e.Name(), "log-") && e.Name() != name {
			fi, _ := e.Info()
			data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if fi.Size() == segBytes || (len(data) >= 8 && bytes.Equal(data[len(data)-8:], make([]byte, 8))) {
				t.Fatalf("%s kept a zeroed tail (%d bytes)", e.Name(), fi.Size())
			}
		}
	}
	seg := filepath.Join(dir, name)
	data, _ := os.ReadFile(seg) // before recovery cuts the zeros
	var clean bytes.Buffer
	o2 := &owner{}
	l2 := open(t, vfs.OS{}, dir, o2, Options{SegmentBytes: segBytes, Logger: slog.New(slog.NewTextHandler(&clean, nil))})
	l2.Close()
	if len(o2.recs) != n || strings.Contains(clean.String(), "torn") {
		t.Fatalf("recovered %d records, want %d; log: %s", len(o2.recs), n, clean.String())
	}
	// Something other than zeros after the zeros is a torn tail: cut, not
	// served.
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	junk := appendFrame(nil, [][]byte{[]byte("never acknowledged")})
	if len(data)-end < len(junk)+16 {
		t.Fatalf("the active segment has %d bytes of zeros left, too few to test", len(data)-end)
	}
	copy(data[end+(len(data)-end-len(junk))/2:], junk) // well inside the zeros
	os.WriteFile(seg, data, 0o644)
	var logs bytes.Buffer
	o3 := &owner{}
	l3 := open(t, vfs.OS{}, dir, o3, Options{SegmentBytes: segBytes, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	l3.Close()
	if len(o3.recs) != n || !strings.Contains(logs.String(), "data after the zeroed tail") {
		t.Fatalf("recovered %d of %d records; log: %s", len(o3.recs), n, logs.String())
	}
}

func segmentFiles(t *testing.T, fs vfs.FS, dir string) int {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, ".seg") {
			n++
		}
	}
	return n
}

// TestFullDisk: on a disk that fills up the alarm rises before writes
// fail; writes then fail cleanly; a checkpoint that cannot be written is
// retried without leaving a segment file per try; and once space is back
// writes and checkpoints work again, the alarm clears, and everything
// acknowledged is there after a power loss.
func TestFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(512 << 10)
	o := &owner{}
	opts := Options{SegmentBytes: 32 << 10, CheckpointBytes: 64 << 10, Reserve: 96 << 10}
	l := open(t, mem, "/d", o, opts)
	rec := strings.Repeat("x", 1000)
	alarmAt, failAt := -1, -1
	var acked []string
	for i := 0; failAt < 0; i++ {
		r := fmt.Sprint(i, rec)
		err := commit(l, o, r)
		if err == nil {
			acked = append(acked, r)
		} else if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("write %d: %v, want ErrNoSpace", i, err)
		} else {
			failAt = i
		}
		if alarmAt < 0 && l.Alarm().Alarm {
			alarmAt = i
		}
		if i > 100000 {
			t.Fatal("the disk never filled")
		}
	}
	if alarmAt < 0 || alarmAt >= failAt {
		t.Fatalf("the alarm rose at write %d, writes failed from %d: it must rise first", alarmAt, failAt)
	}
	if d := l.Alarm(); d.Free >= d.Reserve {
		t.Fatalf("alarm figures %+v: free must be below the reserve", d)
	}
	// Make room for small writes but not for a checkpoint (the owner's
	// snapshot holds every record), and try checkpoints over and over.
	mem.SetCapacity(mem.Used() + 8<<10)
	before := segmentFiles(t, mem, "/d")
	for i := 0; i < 20; i++ {
		if err := l.Checkpoint(ctx); err == nil {
			t.Fatal("a checkpoint larger than the free space succeeded")
		}
		r := fmt.Sprint("small", i)
		if err := commit(l, o, r); err == nil {
			acked = append(acked, r)
		}
	}
	if after := segmentFiles(t, mem, "/d"); after > before+1 {
		t.Fatalf("failed checkpoints left %d segment files, %d before: one more per try", after, before)
	}
	// Space comes back: writes, a checkpoint, and the alarm clears.
	mem.SetCapacity(8 << 20)
	for i := 0; i < 20; i++ {
		r := fmt.Sprint("after", i)
		if err := commit(l, o, r); err != nil {
			t.Fatalf("write after space came back: %v", err)
		}
		acked = append(acked, r)
	}
	if err := l.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint after space came back: %v", err)
	}
	if d := l.Alarm(); d.Alarm {
		t.Fatalf("the alarm stayed raised with space back: %+v", d)
	}
	l.Close()
	o2 := &owner{}
	l2 := open(t, mem.Crash(), "/d", o2, opts)
	defer l2.Close()
	have := map[string]bool{}
	for _, r := range o2.recs {
		have[r] = true
	}
	for _, r := range acked {
		if !have[r] {
			t.Fatalf("acknowledged record %.20q lost", r)
		}
	}
}
