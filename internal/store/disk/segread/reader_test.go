package segread

import (
	"errors"
	"os"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
)

// segment writes frames of one record each to segment seg in mem and
// returns their keys and sizes.
func segment(t *testing.T, mem vfs.FS, seg uint32, data ...string) ([]Key, []uint32) {
	t.Helper()
	var buf []byte
	var keys []Key
	var sizes []uint32
	for i, d := range data {
		off := len(buf)
		buf = format.AppendFrame(buf, []format.Record{{Kind: format.KindKeep, P: 1, Pos: uint64(i + 1), Data: []byte(d)}})
		keys = append(keys, Key{Seg: seg, Off: uint32(off)})
		sizes = append(sizes, uint32(len(buf)-off))
	}
	f, err := mem.OpenFile("/d/"+format.SegName(uint64(seg)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	return keys, sizes
}

func TestFrame(t *testing.T) {
	mem := vfs.NewMem()
	keys, sizes := segment(t, mem, 1, "one", "two")
	r := NewReader(mem, "/d")
	defer r.Close()
	for i, want := range []string{"one", "two"} {
		recs, err := r.Frame(keys[i], sizes[i], 0)
		if err != nil || string(recs[0].Data) != want {
			t.Fatalf("frame %d: %v %v", i, recs, err)
		}
	}
	cases := []struct {
		name string
		k    Key
		size uint32
		rec  uint32
		want error
	}{
		{"no segment 0", Key{Seg: 0}, sizes[0], 0, store.ErrNotFound},
		{"too small", keys[0], format.MinFrame - 1, 0, store.ErrNotFound},
		{"too large", keys[0], format.MaxFrame + format.FrameHeader + 1, 0, store.ErrNotFound},
		{"missing segment", Key{Seg: 9}, sizes[0], 0, store.ErrNotFound},
		{"wrong length", keys[1], sizes[1] - 1, 0, store.ErrCorrupt},
		{"wrong offset", Key{Seg: 1, Off: 1}, sizes[0], 0, store.ErrCorrupt},
		{"no such record", keys[1], sizes[1], 1, store.ErrCorrupt},
	}
	for _, c := range cases {
		r := NewReader(mem, "/d") // nothing kept
		defer r.Close()
		if _, err := r.Frame(c.k, c.size, c.rec); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestKeptFrames: frames written are read from memory, frames read once
// are read again from memory, and neither outlives Forget.
func TestKeptFrames(t *testing.T) {
	mem := vfs.NewMem()
	keys, sizes := segment(t, mem, 1, "on disk")
	r := NewReader(mem, "/d")
	defer r.Close()
	written := Key{Seg: 2, Off: 100} // no such file: only memory has it
	r.Written(written, []format.Record{{Kind: format.KindKeep, P: 1, Pos: 5, Data: []byte("in memory")}})
	if recs, err := r.Frame(written, 64, 0); err != nil || string(recs[0].Data) != "in memory" {
		t.Fatalf("a frame just written: %v %v", recs, err)
	}
	if _, err := r.Frame(keys[0], sizes[0], 0); err != nil {
		t.Fatal(err)
	}
	if err := mem.Remove("/d/" + format.SegName(1)); err != nil {
		t.Fatal(err)
	}
	if recs, err := r.Frame(keys[0], sizes[0], 0); err != nil || string(recs[0].Data) != "on disk" {
		t.Fatalf("a frame read before: %v %v", recs, err)
	}
	r.Forget(1)
	r.Forget(2)
	for _, k := range []Key{written, keys[0]} {
		if _, err := r.Frame(k, sizes[0], 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a forgotten segment's frame at %+v: %v", k, err)
		}
	}
}

// TestDamagedRead: a frame damaged on the way (one read) is read again and
// served; one damaged for good is refused as corrupt.
func TestDamagedRead(t *testing.T) {
	mem := vfs.NewMem()
	keys, sizes := segment(t, mem, 1, "a body worth reading twice")
	fault := vfs.NewFault(mem)
	fault.Set(vfs.Faults{FlipReads: 1})
	r := NewReader(fault, "/d")
	defer r.Close()
	if recs, err := r.Frame(keys[0], sizes[0], 0); err != nil || string(recs[0].Data) != "a body worth reading twice" {
		t.Fatalf("a read damaged once: %v %v", recs, err)
	}
	fault.Set(vfs.Faults{FlipReadBit: true})
	r2 := NewReader(fault, "/d")
	defer r2.Close()
	if _, err := r2.Frame(keys[0], sizes[0], 0); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a read damaged every time: %v", err)
	}
}
