package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/store/storetest"
	"github.com/sluicemq/sluice/internal/vfs"
)

var ctx = context.Background()

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// replayed is what a replay handed over, per partition, in order (a Reset
// starts a partition afresh, as an owner does).
type replayed map[store.PartitionID][]store.Entry

func (r replayed) data(p store.PartitionID) []string {
	var out []string
	for _, e := range r[p] {
		if !e.Moved {
			out = append(out, string(e.Data))
		}
	}
	return out
}

// openLog opens and replays a log.
func openLog(t *testing.T, fs vfs.FS, dir string, opts Options) (*Log, replayed) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	l, err := Open(fs, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // Close is idempotent; tests may close earlier
	r := replayed{}
	err = l.Replay(func(e store.Entry) error {
		e.Data = append([]byte(nil), e.Data...)
		if e.Reset {
			r[e.P] = nil
		}
		r[e.P] = append(r[e.P], e)
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	l.Recovered() // as an owner does once it kept what it needs
	return l, r
}

func appendOne(t *testing.T, l *Log, p store.PartitionID, prev uint64, keep bool, data string) store.Hint {
	t.Helper()
	f := l.Append(p, prev, []store.Rec{{Data: []byte(data), Keep: keep}})
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("append: %v", err)
	}
	return f.Hints()[0]
}

func TestConformance(t *testing.T) {
	t.Run("os", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) *storetest.Harness {
			dir := t.TempDir()
			fault := vfs.NewFault(vfs.OS{})
			opts := Options{SegmentBytes: 64 << 10, SnapshotBytes: 128 << 10, Logger: quiet(), CheckReleases: true}
			l, _ := openLog(t, fault, dir, opts)
			h := &storetest.Harness{Store: l}
			h.Reopen = func() store.Store {
				h.Store.Close()
				l2, err := Open(fault, dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				h.Store = l2
				return l2
			}
			h.Fail = func(on bool) { fault.Set(vfs.Faults{NoSpace: on}) }
			t.Cleanup(func() { h.Store.Close() })
			return h
		})
	})
	t.Run("power-loss", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) *storetest.Harness {
			mem := vfs.NewMem()
			opts := Options{SegmentBytes: 64 << 10, SnapshotBytes: 128 << 10, Logger: quiet(), CheckReleases: true}
			l, _ := openLog(t, mem, "/d", opts)
			h := &storetest.Harness{Store: l}
			h.Reopen = func() store.Store {
				h.Store.Close()
				l2, err := Open(mem, "/d", opts)
				if err != nil {
					t.Fatal(err)
				}
				h.Store = l2
				return l2
			}
			h.Crash = func() store.Store {
				crashed := mem.Crash()
				h.Store.Close() // writes only to mem, which the crash copied
				mem = crashed
				l2, err := Open(mem, "/d", opts)
				if err != nil {
					t.Fatal(err)
				}
				h.Store = l2
				return l2
			}
			t.Cleanup(func() { h.Store.Close() })
			return h
		})
	})
}

// TestHistoryGoesAway: records come and go and partitions are snapshotted
// when Wanted says so: disk use and replay follow what is live.
func TestHistoryGoesAway(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, SnapshotBytes: 32 << 10}
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	last := map[store.PartitionID]uint64{}
	type live struct {
		pos uint64
		h   store.Hint
	}
	var kept []live
	for i := 0; i < 3000; i++ {
		p := store.PartitionID(1 + i%3)
		h := appendOne(t, l, p, last[p], p == 1, fmt.Sprintf("rec-%05d-%s", i, strings.Repeat("x", 100)))
		last[p]++
		if p == 1 {
			kept = append(kept, live{last[p], h})
			if len(kept) > 10 {
				l.Release(1, kept[0].pos, kept[0].h)
				kept = kept[1:]
			}
		}
		for _, w := range l.Wanted() {
			if err := l.Snapshot(w, last[w], slices.Values([]store.Rec{{Data: []byte(fmt.Sprint("state of ", w))}})).Wait(ctx); err != nil {
				t.Fatal(err)
			}
			last[w]++
		}
	}
	st := l.Stats()
	if st.Snapshots == 0 {
		t.Fatal("no snapshot was wanted")
	}
	l.Close()
	var total int64
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		fi, _ := n.Info()
		total += fi.Size()
	}
	// 3000 records of ~110 bytes (330 KB) passed through.
	if total > 96<<10 {
		t.Fatalf("disk use %d bytes after 330 KB passed ( %d files)", total, len(names))
	}
	l2, r := openLog(t, vfs.OS{}, dir, opts)
	defer l2.Close()
	n := 0
	for _, es := range r {
		n += len(es)
	}
	if n > 1000 {
		t.Fatalf("recovery replayed %d records: it follows history", n)
	}
	for _, k := range kept {
		if _, err := l2.Read(1, k.pos, k.h); err != nil {
			t.Fatalf("live record %d lost: %v", k.pos, err)
		}
	}
}

func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLog(t, vfs.OS{}, dir, Options{})
	for i := 0; i < 5; i++ {
		appendOne(t, l, 1, uint64(i), false, fmt.Sprint("r", i))
	}
	l.Close()
	seg := filepath.Join(dir, format.SegName(1))
	data, _ := os.ReadFile(seg)
	half := format.AppendFrame(nil, []format.Record{{Kind: format.KindRec, P: 1, Pos: 6, Data: []byte("never acknowledged")}})
	os.WriteFile(seg, append(data, half[:len(half)/2]...), 0o644)
	var logs bytes.Buffer
	l2, r := openLog(t, vfs.OS{}, dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if len(r.data(1)) != 5 {
		t.Fatalf("recovered %v", r.data(1))
	}
	if !strings.Contains(logs.String(), "torn tail") {
		t.Fatalf("no log line for the cut: %s", logs.String())
	}
	appendOne(t, l2, 1, 5, false, "after")
	l2.Close()
	l3, r3 := openLog(t, vfs.OS{}, dir, Options{})
	l3.Close()
	if got := r3.data(1); len(got) != 6 || got[5] != "after" {
		t.Fatalf("after cut and append: %v", got)
	}
}

func TestBitFlipInOldSegmentIsAnError(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLog(t, vfs.OS{}, dir, Options{SegmentBytes: 256})
	for i := 0; i < 40; i++ {
		appendOne(t, l, 1, uint64(i), false, fmt.Sprintf("record-%02d-%s", i, strings.Repeat("y", 40)))
	}
	l.Close()
	seg := filepath.Join(dir, format.SegName(2))
	data, _ := os.ReadFile(seg)
	data[len(data)-3] ^= 0x01
	os.WriteFile(seg, data, 0o644)
	l2, err := Open(vfs.OS{}, dir, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var de *store.DamageError
	if err := l2.Replay(func(store.Entry) error { return nil }); !errors.As(err, &de) || !errors.Is(err, store.ErrDamaged) || de.File != format.SegName(2) {
		t.Fatalf("corrupt middle segment: got %v", err)
	}
}

func TestBitFlipIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLog(t, vfs.OS{}, dir, Options{})
	h := appendOne(t, l, 1, 0, true, "payload-payload-payload")
	// Push it out of the cache of recent frames, so it is read from disk.
	big := make([]byte, 1<<20)
	for i := 0; i < 10; i++ {
		appendOne(t, l, 2, uint64(i), true, string(big))
	}
	f, err := os.OpenFile(filepath.Join(dir, format.SegName(uint64(h.A))), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, int64(h.B)+int64(h.C)-3)
	b[0] ^= 0x08
	f.WriteAt(b, int64(h.B)+int64(h.C)-3)
	f.Close()
	if rec, err := l.Read(1, 1, h); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("flipped bit served: %q %v", rec, err)
	}
	l.Close()
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name   string
		faults vfs.Faults
		want   error
	}{
		{"enospc", vfs.Faults{NoSpace: true}, store.ErrNoSpace},
		{"fsync error", vfs.Faults{SyncError: true}, nil},
		{"short write", vfs.Faults{ShortWrite: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := vfs.NewFault(vfs.OS{})
			l, _ := openLog(t, fs, dir, Options{})
			for i := 0; i < 3; i++ {
				appendOne(t, l, 1, uint64(i), false, fmt.Sprint("before", i))
			}
			fs.Set(tc.faults)
			err := l.Append(1, 3, []store.Rec{{Data: []byte("during")}}).Wait(ctx)
			if err == nil {
				t.Fatal("write under fault acknowledged")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if last, ok := store.LastPosition(err); !ok || last != 3 {
				t.Fatalf("the failure reports the partition's end as %d (%v), want 3", last, ok)
			}
			fs.Set(vfs.Faults{})
			appendOne(t, l, 1, 3, false, "after")
			l.Close()
			_, r := openLog(t, vfs.OS{}, dir, Options{})
			want := []string{"before0", "before1", "before2", "after"}
			if strings.Join(r.data(1), ",") != strings.Join(want, ",") {
				t.Fatalf("recovered %v, want %v", r.data(1), want)
			}
		})
	}
}

func TestRecordTooLarge(t *testing.T) {
	l, _ := openLog(t, vfs.OS{}, t.TempDir(), Options{})
	defer l.Close()
	if err := l.Append(1, 0, []store.Rec{{Data: make([]byte, format.MaxFrame)}}).Wait(ctx); !errors.Is(err, store.ErrTooBig) {
		t.Fatalf("got %v", err)
	}
}

// TestSnapshotFileStopsAtFullDisk: a large snapshot is written to its
// file as its records come; when the disk fills midway the log stops
// taking them (the producer is told to stop), the snapshot fails with
// ErrNoSpace, its temporary file goes, and the partition keeps the state
// it had.
func TestSnapshotFileStopsAtFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	l, _ := openLog(t, mem, "/d", Options{SegmentBytes: 1 << 20})
	appendOne(t, l, 1, 0, false, "before")
	mem.SetCapacity(mem.Used() + 3<<20)
	yielded := 0
	recs := func(yield func(store.Rec) bool) {
		for i := 0; i < 100; i++ {
			yielded++
			if !yield(store.Rec{Data: bytes.Repeat([]byte{byte(i)}, 64<<10)}) {
				return
			}
		}
	}
	if err := l.Snapshot(1, 1, recs).Wait(ctx); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("snapshot on a full disk: %v", err)
	}
	if yielded >= 100 {
		t.Fatalf("the log took all %d records after the disk filled", yielded)
	}
	names, _ := mem.ReadDir("/d")
	for _, n := range names {
		if strings.HasPrefix(n, "snap-") {
			t.Fatalf("a failed snapshot left %s", n)
		}
	}
	mem.SetCapacity(0)
	l.Close()
	_, r := openLog(t, mem, "/d", Options{SegmentBytes: 1 << 20})
	if got := r.data(1); len(got) != 1 || got[0] != "before" {
		t.Fatalf("after the failed snapshot the partition replays %q", got)
	}
}

// TestLargeSnapshot: a snapshot too large for a frame goes to a file of its
// own; it is replayed whole, survives a power loss, and goes once a newer
// snapshot replaces it.
func TestLargeSnapshot(t *testing.T) {
	mem := vfs.NewMem()
	l, _ := openLog(t, mem, "/d", Options{SegmentBytes: 1 << 20})
	appendOne(t, l, 1, 0, false, "before")
	var recs []store.Rec
	for i := 0; i < 100; i++ {
		recs = append(recs, store.Rec{Data: bytes.Repeat([]byte{byte(i)}, 64<<10)})
	}
	if err := l.Snapshot(1, 1, slices.Values(recs)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	appendOne(t, l, 1, 101, false, "after")
	crashed := mem.Crash()
	l.Close()
	l2, r := openLog(t, crashed, "/d", Options{SegmentBytes: 1 << 20})
	got := r.data(1)
	if len(got) != 101 || got[100] != "after" || len(got[99]) != 64<<10 || got[99][0] != 99 || !r[1][0].Reset {
		t.Fatalf("replayed %d records of a large snapshot", len(got))
	}
	if err := l2.Snapshot(1, 102, slices.Values([]store.Rec{{Data: []byte("small")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	l2.Wanted() // sweeps what no replay reads
	names, _ := crashed.ReadDir("/d")
	for _, n := range names {
		if strings.HasPrefix(n, "snap-") {
			t.Fatalf("a replaced snapshot file stayed: %s (%v)", n, names)
		}
	}
	l2.Close()
}

// liveOwner is an owner of kept records for compaction tests.
type liveOwner struct {
	mu    sync.Mutex
	hints map[uint64]store.Hint // live position -> where it is
	moved int
}

func (o *liveOwner) Live(p store.PartitionID, pos uint64, h store.Hint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.hints[pos]
	return ok && cur == h
}

func (o *liveOwner) Moved(p store.PartitionID, pos uint64, old, new store.Hint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.hints[pos]; ok && cur == old {
		o.hints[pos] = new
		o.moved++
		return true
	}
	return false
}

// TestCompactionFramesAreSmall: compaction writes its copies in frames of
// at most moveFrameBytes, since every read of a moved body reads its whole
// frame (one 16 MiB frame made each receive from a backlog read 16 MiB).
func TestCompactionFramesAreSmall(t *testing.T) {
	l, _ := openLog(t, vfs.OS{}, t.TempDir(), Options{SegmentBytes: 1 << 20})
	o := &liveOwner{hints: map[uint64]store.Hint{}}
	var last uint64
	for i := 0; i < 4000; i++ {
		last++
		o.hints[last] = appendOne(t, l, 1, last-1, true, fmt.Sprintf("body-%04d-%s", i, strings.Repeat("b", 1000)))
	}
	for pos, h := range o.hints {
		if pos%5 > 1 { // keep two in five: every old segment is less than half live
			l.Release(1, pos, h)
			delete(o.hints, pos)
		}
	}
	if err := l.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("index")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := l.Compact(16<<20, o); n < 512<<10 {
		t.Fatalf("compaction copied %d bytes; the test needs several frames' worth", n)
	}
	frames := map[[2]uint32]bool{}
	for pos, h := range o.hints {
		if h.C > 300<<10 { // 256 KiB of records and their framing

			t.Fatalf("record %d was moved into a frame of %d bytes", pos, h.C)
		}
		frames[[2]uint32{h.A, h.B}] = true
		if got, err := l.Read(1, pos, h); err != nil || !strings.HasPrefix(string(got), fmt.Sprintf("body-%04d", pos-1)) {
			t.Fatalf("moved record %d: %.20q %v", pos, got, err)
		}
	}
	if len(frames) < 3 {
		t.Fatalf("%d moved records in %d frames", len(o.hints), len(frames))
	}
}

// TestCompaction: a mostly dead old segment's kept records are copied
// forward, the segment goes, and the copies are found after a reopen.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 16 << 10}
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	o := &liveOwner{hints: map[uint64]store.Hint{}}
	var last uint64
	for i := 0; i < 100; i++ {
		h := appendOne(t, l, 1, last, true, fmt.Sprintf("body-%03d-%s", i, strings.Repeat("b", 500)))
		last++
		o.hints[last] = h
	}
	// Keep one in ten; snapshot, so the old segments are only kept.
	for pos, h := range o.hints {
		if pos%10 != 0 {
			l.Release(1, pos, h)
			delete(o.hints, pos)
		}
	}
	if err := l.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("index")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	last++
	before := l.Stats().Segments
	old := 0 // live records in segments below the floor
	for _, h := range o.hints {
		if uint64(h.A) < l.man.Floor {
			old++
		}
	}
	if n := l.Compact(1<<20, o); n == 0 || o.moved != old || old < 5 {
		t.Fatalf("compaction copied %d bytes, moved %d records; want the %d live ones below the floor", n, o.moved, old)
	}
	if after := l.Stats().Segments; after >= before {
		t.Fatalf("segments %d before compaction, %d after", before, after)
	}
	for pos, h := range o.hints {
		if got, err := l.Read(1, pos, h); err != nil || !strings.HasPrefix(string(got), fmt.Sprintf("body-%03d", pos-1)) {
			t.Fatalf("moved record %d: %q %v", pos, got, err)
		}
	}
	l.Close()
	l2, r := openLog(t, vfs.OS{}, dir, opts)
	defer l2.Close()
	moved := map[uint64]store.Hint{}
	for _, e := range r[1] {
		if e.Moved {
			moved[e.Pos] = e.Hint
		}
	}
	for pos, h := range o.hints {
		if mh, ok := moved[pos]; (ok || uint64(h.A) < l.man.Floor) && mh != h {
			t.Fatalf("replay did not tell where %d moved (%+v, want %+v)", pos, moved[pos], h)
		}
		l2.Keep(1, pos, h)
		if _, err := l2.Read(1, pos, h); err != nil {
			t.Fatalf("after a reopen: %v", err)
		}
	}
}

// TestMoveAfterDropBringsNothingBack: compaction may copy a body of a
// partition forward just after the partition was dropped (it chose the
// body before). Once the drop is older than the floor the manifest no
// longer names the partition: replay must not take the copy for a live
// partition, which no one would snapshot or drop again, so that it held
// the floor, and the disk, for good.
func TestMoveAfterDropBringsNothingBack(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 16 << 10, Logger: quiet()}
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	o := &liveOwner{hints: map[uint64]store.Hint{}}
	var last uint64
	for i := 0; i < 100; i++ {
		o.hints[last+1] = appendOne(t, l, 1, last, true, fmt.Sprintf("body-%03d-%s", i, strings.Repeat("b", 500)))
		last++
	}
	for pos, h := range o.hints {
		if pos%10 != 0 {
			l.Release(1, pos, h)
			delete(o.hints, pos)
		}
	}
	if err := l.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("index")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Drop(1, last+1).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	dropSeg := l.active
	// Partition 2 fills the segment of the drop; partition 3 starts in a
	// later one and holds the floor there, below the copies.
	var last2, last3 uint64
	for l.active == dropSeg {
		appendOne(t, l, 2, last2, false, strings.Repeat("x", 500))
		last2++
	}
	appendOne(t, l, 3, last3, false, "three")
	last3++
	if l.Compact(1<<20, o); o.moved == 0 {
		t.Fatal("compaction moved nothing of the dropped partition")
	}
	snapshot := func(p store.PartitionID, last *uint64) {
		t.Helper()
		if err := l.Snapshot(p, *last, slices.Values([]store.Rec{{Data: []byte("index")}})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		*last++
	}
	snapshot(2, &last2)
	if len(l.man.Dropped) != 0 || l.man.Floor > uint64(l.active) {
		t.Fatalf("the manifest names dropped partitions %v, floor %d: the test does not reach the case", l.man.Dropped, l.man.Floor)
	}
	l.Close()
	l, r := openLog(t, vfs.OS{}, dir, opts)
	if len(r[1]) != 0 {
		t.Fatalf("replay handed over %d records of the dropped partition", len(r[1]))
	}
	if ps, err := l.Partitions(); err != nil || !slices.Equal(ps, []store.PartitionID{2, 3}) {
		t.Fatalf("partitions after the reopen: %v %v, want [2 3]", ps, err)
	}
	l.Recovered()
	snapshot(2, &last2)
	snapshot(3, &last3)
	if floor, active := l.man.Floor, uint64(l.active); floor != active {
		t.Fatalf("after a snapshot of every partition the floor is segment %d, the active one %d", floor, active)
	}
}

// TestCompactionAfterRestart: a segment below the floor that a restart
// found (replay does not read it, so how many records were written in it
// is unknown) is still compacted once mostly dead: disk use follows live
// data across restarts too.
func TestCompactionAfterRestart(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 16 << 10, Logger: quiet(), CheckReleases: true}
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	o := &liveOwner{hints: map[uint64]store.Hint{}}
	var last uint64
	for i := 0; i < 100; i++ {
		h := appendOne(t, l, 1, last, true, fmt.Sprintf("body-%03d-%s", i, strings.Repeat("b", 500)))
		last++
		o.hints[last] = h
	}
	if err := l.Snapshot(1, last, slices.Values([]store.Rec{{Data: []byte("index")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, err := Open(vfs.OS{}, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Replay(func(store.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for pos, h := range o.hints {
		if err := l.Keep(1, pos, h); err != nil {
			t.Fatal(err)
		}
	}
	l.Recovered()
	// Now nine in ten go.
	for pos, h := range o.hints {
		if pos%10 != 0 {
			l.Release(1, pos, h)
			delete(o.hints, pos)
		}
	}
	before := l.Stats().Segments
	for range 5 { // a few rounds: the first ones may only count what is in the old segments
		l.Compact(1<<20, o)
	}
	if o.moved < 5 {
		t.Fatalf("compaction after a restart moved %d records", o.moved)
	}
	if after := l.Stats().Segments; after >= before {
		t.Fatalf("segments %d before compaction, %d after", before, after)
	}
	for pos, h := range o.hints {
		if got, err := l.Read(1, pos, h); err != nil || !strings.HasPrefix(string(got), fmt.Sprintf("body-%03d", pos-1)) {
			t.Fatalf("record %d: %.20q %v", pos, got, err)
		}
	}
	if b := l.Stats().BadReleases; b != 0 {
		t.Fatalf("%d bad releases", b)
	}
}

// TestFullDisk: on a disk that fills up the alarm rises before writes
// fail; writes then fail cleanly without leaving files behind; once space
// is back writes work, the alarm clears, and everything acknowledged is
// there after a power loss.
func TestFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(512 << 10)
	opts := Options{SegmentBytes: 32 << 10, SnapshotBytes: 64 << 10, Reserve: 96 << 10}
	l, _ := openLog(t, mem, "/d", opts)
	rec := strings.Repeat("x", 1000)
	alarmAt, failAt := -1, -1
	var acked []string
	var last uint64
	for i := 0; failAt < 0; i++ {
		r := fmt.Sprint(i, rec)
		err := l.Append(1, last, []store.Rec{{Data: []byte(r), Keep: true}}).Wait(ctx)
		if err == nil {
			acked = append(acked, r)
			last++
		} else if !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("write %d: %v, want ErrNoSpace", i, err)
		} else {
			failAt = i
		}
		if alarmAt < 0 && l.Disk().Alarm {
			alarmAt = i
		}
		if i > 100000 {
			t.Fatal("the disk never filled")
		}
	}
	if alarmAt < 0 || alarmAt >= failAt {
		t.Fatalf("the alarm rose at write %d, writes failed from %d: it must rise first", alarmAt, failAt)
	}
	if d := l.Disk(); d.Free >= d.Reserve {
		t.Fatalf("alarm figures %+v: free must be below the reserve", d)
	}
	files := len(must(mem.ReadDir("/d")))
	for i := 0; i < 50; i++ {
		if err := l.Append(1, last, []store.Rec{{Data: []byte(rec)}}).Wait(ctx); err == nil {
			t.Fatal("a write succeeded on a full disk")
		}
	}
	if n := len(must(mem.ReadDir("/d"))); n > files+1 {
		t.Fatalf("failed writes left %d files, %d before", n, files)
	}
	mem.SetCapacity(8 << 20)
	for i := 0; i < 20; i++ {
		r := fmt.Sprint("after", i)
		if err := l.Append(1, last, []store.Rec{{Data: []byte(r)}}).Wait(ctx); err != nil {
			t.Fatalf("write after space came back: %v", err)
		}
		last++
		acked = append(acked, r)
	}
	if d := l.Disk(); d.Alarm {
		t.Fatalf("the alarm stayed raised with space back: %+v", d)
	}
	crashed := mem.Crash()
	l.Close()
	l2, r := openLog(t, crashed, "/d", opts)
	defer l2.Close()
	have := map[string]bool{}
	for _, d := range r.data(1) {
		have[d] = true
	}
	for _, a := range acked {
		if !have[a] {
			t.Fatalf("acknowledged record %.20q lost", a)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPreallocatedSegments: the writer rolls into segments prepared full of
// zeros; recovery reads the zeroed tail as the end of the log, and data
// after the zeros as a torn tail.
func TestPreallocatedSegments(t *testing.T) {
	dir := t.TempDir()
	const segBytes = 64 << 10
	opts := Options{SegmentBytes: segBytes, Preallocate: true}
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	n := 0
	add := func() {
		appendOne(t, l, 1, uint64(n), false, fmt.Sprintf("r%04d-%s", n, strings.Repeat("p", 500)))
		n++
	}
	for l.off < segBytes/4 {
		add() // the store starts preparing the next segment
	}
	l.prep.Wait()
	for l.seg < 2 {
		add()
	}
	if !l.prealloc {
		t.Fatal("did not roll into the prepared segment")
	}
	add()
	l.Close()
	name := format.SegName(l.seg)
	if fi, err := os.Stat(filepath.Join(dir, format.SegName(1))); err != nil || fi.Size() >= segBytes {
		t.Fatalf("the closed segment kept its zeros: %v %v", fi.Size(), err)
	}
	seg := filepath.Join(dir, name)
	data, _ := os.ReadFile(seg)
	if len(data) != segBytes {
		t.Fatalf("the active segment is %d bytes, want the prepared %d", len(data), segBytes)
	}
	var clean bytes.Buffer
	l2, r := openLog(t, vfs.OS{}, dir, Options{SegmentBytes: segBytes, Logger: slog.New(slog.NewTextHandler(&clean, nil))})
	l2.Close()
	if len(r.data(1)) != n || strings.Contains(clean.String(), "torn") {
		t.Fatalf("recovered %d records, want %d; log: %s", len(r.data(1)), n, clean.String())
	}
	// Something other than zeros after the zeros is a torn tail.
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	junk := format.AppendFrame(nil, []format.Record{{Kind: format.KindRec, P: 1, Pos: uint64(n + 1), Data: []byte("never acknowledged")}})
	copy(data[end+(len(data)-end-len(junk))/2:], junk)
	os.WriteFile(seg, data, 0o644)
	var logs bytes.Buffer
	l3, r3 := openLog(t, vfs.OS{}, dir, Options{SegmentBytes: segBytes, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	l3.Close()
	if len(r3.data(1)) != n || !strings.Contains(logs.String(), "data after the zeroed tail") {
		t.Fatalf("recovered %d of %d records; log: %s", len(r3.data(1)), n, logs.String())
	}
}

// A request that is already runnable when the writer wakes for another
// one joins that one's fsync instead of waiting for one of its own after
// it (letJoin). On one processor the order is the scheduler's: the first
// submitter wakes the writer and parks on its future; the second is
// runnable, and only the writer's yield lets it submit before the write.
// The scheduler looks at its global queue first now and then (one pick in
// 61), so a round may write the two apart; most must not.
func TestRunnableSubmittersShareTheCommit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l, _ := openLog(t, vfs.NewMem(), "/d", Options{Logger: quiet()})
	const rounds = 50
	var prev [2]uint64
	shared := 0
	for range rounds {
		before := l.Stats().Fsyncs
		done := make(chan error)
		go func() { // runnable, not yet running, when the writer wakes
			f := l.Append(2, prev[1], []store.Rec{{Data: []byte("second")}})
			done <- f.Wait(ctx)
		}()
		if err := l.Append(1, prev[0], []store.Rec{{Data: []byte("first")}}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		prev[0]++
		prev[1]++
		if l.Stats().Fsyncs-before == 1 {
			shared++
		}
	}
	if shared < rounds*4/5 {
		t.Fatalf("the two appends shared an fsync in %d of %d rounds, want most", shared, rounds)
	}
	t.Logf("shared an fsync in %d of %d rounds", shared, rounds)
}
