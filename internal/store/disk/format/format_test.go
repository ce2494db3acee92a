package format

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGolden pins the bytes: logs written by earlier releases must open,
// so any change here is a format change (recorded from the code before it
// moved into this package).
func TestGolden(t *testing.T) {
	frame := AppendFrame(nil, []Record{
		{Kind: KindKeep, P: 3, Pos: 9, Data: []byte("body")},
		{Kind: KindSnapFirst, P: 300, Pos: 1 << 20, Data: []byte("")},
		{Kind: KindMoved, P: 1, Pos: 2, Data: []byte("xy")},
	})
	var snap bytes.Buffer
	if err := WriteSnapFile(&snap, []store.Rec{{Data: []byte("one")}, {Data: []byte("")}, {Data: []byte("three")}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"frame", frame, "00000019351723af0000000301030904626f647903ac0280804000050102027879"},
		{"manifest", AppendManifest(nil, Manifest{Floor: 7, Dropped: []store.PartitionID{2, 200}}), "0000000d2a4399f30000000106000005070202c801"},
		{"snapshot pointer", AppendFrame(nil, []Record{{Kind: KindSnapFile, P: 4, Pos: 11, Data: SnapFileData(200)}}), "0000000a69cc91f00000000104040b02c801"},
		{"snapshot file", snap.Bytes(), "036f6e6500057468726565c3ac0d76000000000000000b"},
	}
	for _, c := range cases {
		if h := hex.EncodeToString(c.got); h != c.want {
			t.Errorf("%s: %s, want %s", c.name, h, c.want)
		}
	}
	if got := SegName(12) + " " + SnapFileName(5, 77); got != "log-0000000000000012.seg snap-5-77.snap" {
		t.Errorf("names: %s", got)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	recs := []Record{{Kind: KindRec, P: 1, Pos: 1, Data: []byte("a")}, {Kind: KindManifest, Data: []byte{}}}
	f := AppendFrame([]byte("prefix"), recs)[len("prefix"):]
	if !Intact(f) {
		t.Fatal("a frame just encoded is not intact")
	}
	got, err := DecodeFrame(f[FrameHeader:])
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded %+v %v, want %+v", got, err, recs)
	}
	for i := range f {
		bad := bytes.Clone(f)
		bad[i] ^= 0x10
		if Intact(bad) {
			t.Fatalf("a flipped bit at byte %d is not caught", i)
		}
	}
	if Intact(f[:len(f)-1]) {
		t.Fatal("a frame cut short is intact")
	}
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []Manifest{{Floor: 1}, {Floor: 1 << 40, Dropped: []store.PartitionID{0, 7, 1 << 31}}} {
		got, err := DecodeManifest(m.Encode())
		if err != nil || got.Floor != m.Floor || !reflect.DeepEqual(got.Dropped, m.Dropped) {
			t.Fatalf("decoded %+v %v, want %+v", got, err, m)
		}
	}
	for _, b := range [][]byte{nil, {1}, {1, 5, 1}} {
		if _, err := DecodeManifest(b); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%x decoded: %v", b, err)
		}
	}
}

func TestSnapFile(t *testing.T) {
	recs := []store.Rec{{Data: bytes.Repeat([]byte{1}, 3<<20)}, {Data: nil}, {Data: []byte("last")}}
	var buf bytes.Buffer
	if err := WriteSnapFile(&buf, recs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapFile(bytes.NewReader(buf.Bytes()))
	if err != nil || len(got) != len(recs) {
		t.Fatalf("read %d records, %v", len(got), err)
	}
	for i := range recs {
		if !bytes.Equal(got[i], recs[i].Data) {
			t.Fatalf("record %d differs", i)
		}
	}
	b := buf.Bytes()
	for _, bad := range [][]byte{b[:5], b[:len(b)-1], append(bytes.Clone(b[:len(b)-13]), b[len(b)-12:]...)} {
		if _, err := ReadSnapFile(bytes.NewReader(bad)); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("a damaged snapshot file read: %v", err)
		}
	}
	flipped := bytes.Clone(b)
	flipped[1<<20] ^= 1
	if _, err := ReadSnapFile(bytes.NewReader(flipped)); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a flipped bit read: %v", err)
	}
}

// TestScan: a segment is read up to its end, its zeroed tail, or its
// first bad frame, which Scan says what is wrong with.
func TestScan(t *testing.T) {
	var seg []byte
	var offs []int64
	for i := range 3 {
		offs = append(offs, int64(len(seg)))
		seg = AppendFrame(seg, []Record{{Kind: KindRec, P: 1, Pos: uint64(i + 1), Data: []byte("record")}})
	}
	end := int64(len(seg))
	next := AppendFrame(nil, []Record{{Kind: KindRec, P: 1, Pos: 4, Data: []byte("torn")}})
	zeros := make([]byte, 100)
	flip := bytes.Clone(seg)
	flip[offs[2]+FrameHeader+6] ^= 1
	cases := []struct {
		name string
		seg  []byte
		end  int64
		bad  string
	}{
		{"whole", seg, end, ""},
		{"zeroed tail", append(bytes.Clone(seg), zeros...), end, ""},
		{"data after the zeros", append(append(bytes.Clone(seg), zeros...), next...), end, "data after the zeroed tail"},
		{"torn header", append(bytes.Clone(seg), next[:5]...), end, "truncated frame header"},
		{"torn frame", append(bytes.Clone(seg), next[:len(next)-1]...), end, "truncated frame"},
		{"flipped bit", flip, offs[2], "checksum mismatch"},
		{"huge length", append(bytes.Clone(seg), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), end, "frame length out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var seen []int64
			got, bad, err := Scan(bytes.NewReader(c.seg), func(off int64, flen int, recs []Record) error {
				if len(recs) != 1 || string(recs[0].Data) != "record" || off+int64(flen) > c.end {
					t.Fatalf("frame at %d (%d bytes): %+v", off, flen, recs)
				}
				seen = append(seen, off)
				return nil
			})
			if err != nil || got != c.end || bad != c.bad {
				t.Fatalf("stopped at %d (%q, %v), want %d (%q)", got, bad, err, c.end, c.bad)
			}
			if len(seen) == 0 || seen[len(seen)-1] >= c.end {
				t.Fatalf("frames read: %v", seen)
			}
		})
	}
	stop := errors.New("stop")
	got, bad, err := Scan(bytes.NewReader(seg), func(off int64, _ int, _ []Record) error {
		if off == offs[1] {
			return stop
		}
		return nil
	})
	if got != offs[1] || bad != "" || err != stop {
		t.Fatalf("fn's error: stopped at %d (%q, %v), want %d", got, bad, err, offs[1])
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, []Record{{Kind: KindKeep, P: 3, Pos: 9, Data: []byte("a")}, {Kind: KindSnap, P: 1, Pos: 2, Data: []byte("bc")}})[FrameHeader:])
	f.Add([]byte{0, 0, 0, 1, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, p []byte) {
		recs, err := DecodeFrame(p)
		if err != nil {
			return
		}
		if got := AppendFrame(nil, recs)[FrameHeader:]; !bytes.Equal(got, p) {
			// Varints may be encoded longer than needed; the decoded
			// records must at least re-decode the same.
			again, err := DecodeFrame(got)
			if err != nil || len(again) != len(recs) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}

// TestSyncMark: a sync mark is a manifest with a flags field after its
// partitions, which a release before it ignores (it decodes the manifest
// the same, as the golden bytes of the manifest above show).
func TestSyncMark(t *testing.T) {
	m := Manifest{Floor: 7, Dropped: []store.PartitionID{2, 200}, Synced: true}
	f := AppendManifest(nil, m)
	if h := hex.EncodeToString(f); h != "0000000ef8077a120000000106000006070202c80101" {
		t.Errorf("sync mark: %s", h)
	}
	recs, err := DecodeFrame(f[FrameHeader:])
	if err != nil || !IsSyncMark(recs) {
		t.Fatalf("not a sync mark: %v", err)
	}
	got, err := DecodeManifest(recs[0].Data)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v %v", got, err)
	}
	if IsSyncMark([]Record{{Kind: KindManifest, Data: Manifest{Floor: 7}.Encode()}}) {
		t.Fatal("a manifest is taken for a sync mark")
	}
}

// TestResync: after a bad frame, the next intact one is found whether the
// damage is inside the frame or in its length.
func TestResync(t *testing.T) {
	var seg []byte
	var offs []int64
	for i := range 20 {
		offs = append(offs, int64(len(seg)))
		seg = AppendFrame(seg, []Record{{Kind: KindKeep, P: 1, Pos: uint64(i + 1), Data: bytes.Repeat([]byte{byte('a' + i)}, 30+i)}})
	}
	end := int64(len(seg))
	for _, c := range []struct {
		name string
		at   int64 // the byte flipped, from frame 7's start
	}{{"payload", 20}, {"checksum", 5}, {"length", 2}, {"length's low byte", 3}} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(seg)
			b[offs[7]+c.at] ^= 0x40
			if _, _, ok := FrameAt(bytes.NewReader(b), offs[7], end); ok {
				t.Fatal("the damaged frame is intact")
			}
			next, ok, err := Resync(bytes.NewReader(b), offs[7], end)
			if err != nil || !ok || next != offs[8] {
				t.Fatalf("resync: %d %v %v, want %d", next, ok, err, offs[8])
			}
		})
	}
	b := bytes.Clone(seg)
	b[offs[19]+20] ^= 1
	if _, ok, _ := Resync(bytes.NewReader(b), offs[19], end); ok {
		t.Fatal("resync past the last frame found one")
	}
}
