package disk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
)

// frameAt is one frame of a segment as written: where, and the records'
// data.
type frameAt struct {
	off, len int64
	data     []string
}

// framesOf reads a segment's frames.
func framesOf(t *testing.T, path string) []frameAt {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []frameAt
	_, bad, err := format.Scan(bytes.NewReader(b), func(off int64, flen int, recs []format.Record) error {
		f := frameAt{off: off, len: int64(flen)}
		for _, r := range recs {
			f.data = append(f.data, string(r.Data))
		}
		out = append(out, f)
		return nil
	})
	if err != nil || bad != "" {
		t.Fatalf("scan %s: %q %v", path, bad, err)
	}
	return out
}

// replayAll replays a log opened with opts and returns the records of
// partition 1 and the damage reported; Replay's error is returned.
func replayAll(t *testing.T, dir string, opts Options) (l *Log, recs []string, damage []store.Damage, err error) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	l, err = Open(vfs.OS{}, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	err = l.Replay(func(e store.Entry) error {
		if e.Damage != nil {
			damage = append(damage, *e.Damage)
			return nil
		}
		if e.P == 1 && !e.Moved {
			recs = append(recs, string(e.Data))
		}
		return nil
	})
	return l, recs, damage, err
}

// writeRecords writes n appends of partition 1, one a write (each its
// own group commit, so each begins with a sync mark), and closes the log.
func writeRecords(t *testing.T, dir string, n int, opts Options) []string {
	t.Helper()
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("record-%04d-%s", i, strings.Repeat("x", 40)))
		appendOne(t, l, 1, uint64(i), true, want[i])
	}
	l.Close()
	return want
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// recordFrames are the frames of a segment that hold partition 1's
// records (not sync marks or manifests).
func recordFrames(t *testing.T, path string) []frameAt {
	var out []frameAt
	for _, f := range framesOf(t, path) {
		if len(f.data) == 1 && strings.HasPrefix(f.data[0], "record-") {
			out = append(out, f)
		}
	}
	return out
}

// TestDamageIsNotATornTail: a flipped bit at 10%, 50% and 90% of the
// newest segment of a log closed cleanly (so with sync marks after it) is
// damage: Replay refuses, naming the segment and the frame's offset. A
// check reports it and changes nothing; a salvage hands over every other
// record, reports exactly the damaged frame's, writes over it, and the
// next start reads the log whole.
func TestDamageIsNotATornTail(t *testing.T) {
	for _, at := range []float64{0.1, 0.5, 0.9} {
		t.Run(fmt.Sprintf("at %.0f%%", at*100), func(t *testing.T) {
			dir := t.TempDir()
			want := writeRecords(t, dir, 200, Options{})
			seg := filepath.Join(dir, format.SegName(1))
			frames := recordFrames(t, seg)
			hit := frames[int(at*float64(len(frames)))]
			flipByte(t, seg, hit.off+hit.len-5)

			_, _, _, err := replayAll(t, dir, Options{})
			var de *store.DamageError
			if !errors.As(err, &de) || de.File != format.SegName(1) || de.Offset != hit.off || de.Length != hit.len {
				t.Fatalf("replay of a damaged log: %v, want damage at %d (%d bytes)", err, hit.off, hit.len)
			}
			if !strings.Contains(err.Error(), format.SegName(1)) || !strings.Contains(err.Error(), fmt.Sprint("offset ", hit.off)) {
				t.Fatalf("the error does not say where: %v", err)
			}

			before, _ := os.ReadFile(seg)
			l, recs, damage, err := replayAll(t, dir, Options{ReadOnly: true})
			l.Close()
			after, _ := os.ReadFile(seg)
			if err != nil || len(damage) != 1 || damage[0].Offset != hit.off || !bytes.Equal(before, after) {
				t.Fatalf("check: %v, damage %+v, file changed %v", err, damage, !bytes.Equal(before, after))
			}
			if len(recs) != len(want)-1 {
				t.Fatalf("check read %d records, want %d", len(recs), len(want)-1)
			}

			l, recs, damage, err = replayAll(t, dir, Options{Salvage: true})
			if err != nil {
				t.Fatalf("salvage: %v", err)
			}
			lost := slices.Index(want, hit.data[0])
			if len(damage) != 1 || len(damage[0].Records) != 1 || damage[0].Records[0].P != 1 || damage[0].Records[0].Pos != uint64(lost+1) {
				t.Fatalf("salvage reports %+v, want the record at position %d", damage, lost+1)
			}
			if !slices.Equal(recs, slices.Delete(slices.Clone(want), lost, lost+1)) {
				t.Fatalf("salvage replayed %d records, want every one but the damaged one", len(recs))
			}
			appendOne(t, l, 1, uint64(len(want)), false, "after the salvage")
			l.Close()

			_, recs, damage, err = replayAll(t, dir, Options{})
			if err != nil || len(damage) != 0 || len(recs) != len(want) || recs[len(recs)-1] != "after the salvage" {
				t.Fatalf("start after the salvage: %v, %d records, damage %v", err, len(recs), damage)
			}
			_, _, damage, err = replayAll(t, dir, Options{ReadOnly: true})
			if err != nil || len(damage) != 0 {
				t.Fatalf("check after the salvage: %v %v", err, damage)
			}
		})
	}
}

// TestTornWriteIsCut: frames after the log's last sync mark are a write a
// crash cut short, whatever survived of them (a page written, one before
// it not): the first bad one and everything after it is cut.
func TestTornWriteIsCut(t *testing.T) {
	dir := t.TempDir()
	want := writeRecords(t, dir, 20, Options{})
	seg := filepath.Join(dir, format.SegName(1))
	b, _ := os.ReadFile(seg)
	var tail []byte
	for i := range 3 {
		tail = format.AppendFrame(tail, []format.Record{{Kind: format.KindKeep, P: 1, Pos: uint64(21 + i), Data: []byte("unacknowledged")}})
	}
	tail[10] ^= 1 // the first frame of the write did not reach the disk whole; the others did
	if err := os.WriteFile(seg, append(b, tail...), 0o644); err != nil {
		t.Fatal(err)
	}
	l, recs, damage, err := replayAll(t, dir, Options{})
	if err != nil || len(damage) != 0 || !slices.Equal(recs, want) {
		t.Fatalf("torn write: %v, %d records, damage %v", err, len(recs), damage)
	}
	appendOne(t, l, 1, 20, false, "next")
	l.Close()
	if _, recs, _, err := replayAll(t, dir, Options{}); err != nil || len(recs) != 21 {
		t.Fatalf("after the cut: %v, %d records", err, len(recs))
	}
}

// TestDamagedLengthIsFoundPast: a flipped bit in a frame's length loses
// the frame's own length; the frames after it are found again.
func TestDamagedLengthIsFoundPast(t *testing.T) {
	dir := t.TempDir()
	want := writeRecords(t, dir, 100, Options{})
	seg := filepath.Join(dir, format.SegName(1))
	hit := recordFrames(t, seg)[40]
	flipByte(t, seg, hit.off+2) // the length's third byte: the frame claims 1 MiB more
	if _, _, _, err := replayAll(t, dir, Options{}); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("replay: %v", err)
	}
	_, recs, damage, err := replayAll(t, dir, Options{Salvage: true})
	if err != nil || len(damage) != 1 || damage[0].Offset != hit.off || damage[0].Length != hit.len || len(recs) != len(want)-1 {
		t.Fatalf("salvage: %v, damage %+v, %d records", err, damage, len(recs))
	}
}

// TestDamageInAnOlderSegment is damage wherever it is: below the floor
// (which a start does not read) a check and a salvage find it, and a
// salvage makes the bodies there unkeepable.
func TestDamageBelowTheFloor(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1 << 10}
	l, _ := openLog(t, vfs.OS{}, dir, opts)
	h := appendOne(t, l, 1, 0, true, "a body below the floor")
	for i := range 60 {
		appendOne(t, l, 2, uint64(i), false, strings.Repeat("z", 60))
	}
	// Partition 2's snapshot moves the floor past partition 1's body.
	if err := l.Snapshot(1, 1, slices.Values([]store.Rec{{Data: []byte("state of 1")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Snapshot(2, 60, slices.Values([]store.Rec{{Data: []byte("state of 2")}})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l.man.Floor <= uint64(h.A) {
		t.Fatalf("floor %d, body in segment %d: the test does not reach the case", l.man.Floor, h.A)
	}
	flipByte(t, filepath.Join(dir, format.SegName(uint64(h.A))), int64(h.B)+int64(h.C)-3)

	l, _, damage, err := replayAll(t, dir, Options{})
	if err != nil || len(damage) != 0 {
		t.Fatalf("a start reads below the floor: %v %v", err, damage)
	}
	l.Close()
	_, _, damage, err = replayAll(t, dir, Options{ReadOnly: true})
	if err != nil || len(damage) != 1 || damage[0].Offset != int64(h.B) {
		t.Fatalf("check: %v %+v", err, damage)
	}
	l, _, damage, err = replayAll(t, dir, Options{Salvage: true})
	if err != nil || len(damage) != 1 {
		t.Fatalf("salvage: %v %+v", err, damage)
	}
	if err := l.Keep(1, 1, h); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("keep of a body in a salvaged stretch: %v", err)
	}
}

// TestDamagedSnapshotFile: a snapshot file that fails its checksum is
// damage: refused, reported by a check, and salvaged (its records lost,
// the file kept aside).
func TestDamagedSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	l, _ := openLog(t, vfs.OS{}, dir, Options{})
	big := strings.Repeat("s", 1<<20)
	var snap []store.Rec
	for range 6 {
		snap = append(snap, store.Rec{Data: []byte(big)})
	}
	if err := l.Snapshot(1, 0, slices.Values(snap)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	appendOne(t, l, 1, 6, false, "after the snapshot")
	l.Close()
	name := format.SnapFileName(1, 1)
	flipByte(t, filepath.Join(dir, name), 3<<20)
	var de *store.DamageError
	if _, _, _, err := replayAll(t, dir, Options{}); !errors.As(err, &de) || de.File != name {
		t.Fatalf("replay: %v", err)
	}
	_, _, damage, err := replayAll(t, dir, Options{ReadOnly: true})
	if err != nil || len(damage) != 1 || damage[0].File != name || len(damage[0].Records) != 6 {
		t.Fatalf("check: %v %+v", err, damage)
	}
	l, recs, _, err := replayAll(t, dir, Options{Salvage: true})
	if err != nil || !slices.Equal(recs, []string{"after the snapshot"}) {
		t.Fatalf("salvage: %v %d", err, len(recs))
	}
	l.Close()
	if _, err := os.Stat(filepath.Join(dir, name+".damaged")); err != nil {
		t.Fatalf("the damaged file is not kept aside: %v", err)
	}
	if _, recs, damage, err := replayAll(t, dir, Options{}); err != nil || len(damage) != 0 || !slices.Equal(recs, []string{"after the snapshot"}) {
		t.Fatalf("start after the salvage: %v %v %d", err, damage, len(recs))
	}
}

// TestCheckWritesNothing: a check cuts no torn tail and removes no file.
func TestCheckWritesNothing(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 10, Options{})
	seg := filepath.Join(dir, format.SegName(1))
	b, _ := os.ReadFile(seg)
	torn := append(bytes.Clone(b), 0, 0, 0, 40, 1, 2)
	os.WriteFile(seg, torn, 0o644)
	tmp := filepath.Join(dir, "next-segment.tmp")
	os.WriteFile(tmp, []byte("zeros"), 0o644)
	l, recs, damage, err := replayAll(t, dir, Options{ReadOnly: true})
	if err != nil || len(recs) != 10 || len(damage) != 0 {
		t.Fatalf("check: %v %d %v", err, len(recs), damage)
	}
	if err := l.Append(1, 10, []store.Rec{{Data: []byte("x")}}).Wait(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a read-only log took an append: %v", err)
	}
	l.Recovered()
	l.Close()
	after, _ := os.ReadFile(seg)
	if !bytes.Equal(after, torn) {
		t.Fatal("the check changed the segment")
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatal("the check removed a temporary file")
	}
}

// TestSyncMarks: a log ends with a sync mark after a clean close, and a
// close with nothing written since adds none.
func TestSyncMarks(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 3, Options{})
	seg := filepath.Join(dir, format.SegName(1))
	size := func() int64 { fi, _ := os.Stat(seg); return fi.Size() }
	n := size()
	marks := 0
	b, _ := os.ReadFile(seg)
	format.Scan(bytes.NewReader(b), func(off int64, flen int, recs []format.Record) error {
		if format.IsSyncMark(recs) {
			marks++
		}
		if off+int64(flen) == int64(len(b)) && !format.IsSyncMark(recs) {
			t.Fatal("the log does not end with a sync mark")
		}
		return nil
	})
	// Three appends, each its own write after the last was durable: each
	// begins with one, and the close adds one.
	if marks != 4 {
		t.Fatalf("%d sync marks, want 4", marks)
	}
	for range 2 {
		l, _ := openLog(t, vfs.OS{}, dir, Options{})
		l.Close()
	}
	if size() != n {
		t.Fatalf("closes without writes grew the log from %d to %d bytes", n, size())
	}
}

// TestLostFrame: a lost-stretch frame fills exactly the size it is given.
func TestLostFrame(t *testing.T) {
	for size := format.MinFrame; size < 70000; size += 1 + size/50 {
		f, ok := format.LostFrame(size, format.LostNote{At: 1, Length: int64(size), Reason: "checksum mismatch"})
		if size > format.MinFrame && size < 16 {
			if ok {
				t.Fatalf("a lost frame of %d bytes", size)
			}
			continue
		}
		if !ok || len(f) != size || !format.Intact(f) {
			t.Fatalf("size %d: ok %v, %d bytes", size, ok, len(f))
		}
	}
}
