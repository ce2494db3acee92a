package jsstore

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
)

// joined reassembles the records an encoder wrote, from its frames alone,
// as Read does through the hints.
func joined(t *testing.T, p store.PartitionID, frames [][]byte, locs []recLoc) [][]byte {
	t.Helper()
	decoded := make([][]entry, len(frames))
	for i, f := range frames {
		fp, es, err := decodeFrame(f)
		if err != nil || fp != p {
			t.Fatalf("frame %d: partition %d, %v", i, fp, err)
		}
		decoded[i] = es
	}
	var out [][]byte
	for _, l := range locs {
		e := decoded[l.msg][l.idx]
		data := bytes.Clone(e.data)
		for j := 1; j < int(l.chunks); j++ {
			c := decoded[l.msg+j][0]
			if !c.cont() || c.pos != e.pos || !decoded[l.msg+j-1][len(decoded[l.msg+j-1])-1].more() {
				t.Fatalf("record %d: message %d does not continue it", e.pos, l.msg+j)
			}
			data = append(data, c.data...)
		}
		if last := decoded[l.msg+int(l.chunks)-1]; l.chunks > 1 && last[0].more() || l.chunks == 1 && e.more() {
			t.Fatalf("record %d: more flag on its last piece", e.pos)
		}
		out = append(out, data)
	}
	return out
}

func TestFrameRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 100 {
		limit := 16<<10 + rng.IntN(64<<10)
		enc := newEncoder(store.PartitionID(round), limit)
		var want [][]byte
		for i := range 1 + rng.IntN(40) {
			n := rng.IntN(200)
			switch rng.IntN(6) {
			case 0:
				n = rng.IntN(4 * limit) // spans messages
			case 1:
				n = limit - rng.IntN(64) // about a message
			}
			d := bytes.Repeat([]byte{byte(i), byte(rng.Uint32()), 0x5a}, n/3+1)[:n]
			want = append(want, d)
			enc.add(kindKeep, uint64(i+1), d)
		}
		frames := enc.finish()
		for i, f := range frames {
			if len(f) > limit {
				t.Fatalf("round %d: frame %d of %d bytes, limit %d", round, i, len(f), limit)
			}
		}
		got := joined(t, store.PartitionID(round), frames, enc.locs)
		if len(got) != len(want) {
			t.Fatalf("round %d: %d records, want %d", round, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d: record %d: %d bytes, want %d", round, i, len(got[i]), len(want[i]))
			}
			if len(want[i])+maxEntryHead+frameHead+frameTrailer <= limit && enc.locs[i].chunks != 1 {
				t.Fatalf("round %d: a record of %d bytes that fits a message is split", round, len(want[i]))
			}
		}
	}
}

func TestFrameRejectsDamage(t *testing.T) {
	enc := newEncoder(7, 32<<10)
	enc.add(kindRec, 1, []byte("hello"))
	enc.add(kindKeep, 2, []byte("world"))
	f := enc.finish()[0]
	if _, es, err := decodeFrame(f); err != nil || len(es) != 2 || string(es[1].data) != "world" || es[1].pos != 2 {
		t.Fatalf("decode: %v %+v", err, es)
	}
	for i := range f {
		bad := bytes.Clone(f)
		bad[i] ^= 0x40
		if _, _, err := decodeFrame(bad); err == nil {
			t.Fatalf("a frame with byte %d flipped decoded", i)
		}
	}
	for n := range len(f) {
		if _, _, err := decodeFrame(f[:n]); err == nil {
			t.Fatalf("a frame cut to %d bytes decoded", n)
		}
	}
}

func TestEmptySnapshotIsOneMessage(t *testing.T) {
	enc := newEncoder(1, 32<<10)
	enc.empty()
	fs := enc.finish()
	if len(fs) != 1 {
		t.Fatalf("%d frames", len(fs))
	}
	if _, es, err := decodeFrame(fs[0]); err != nil || len(es) != 0 {
		t.Fatalf("%v %v", es, err)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	enc := newEncoder(3, 32<<10)
	enc.add(kindSnapFirst, 9, []byte("snap"))
	enc.add(kindMoved, 2, nil)
	f.Add(enc.finish()[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, es, err := decodeFrame(b)
		if err != nil {
			return
		}
		for _, e := range es {
			if e.base() < kindRec || e.base() > kindDrop {
				t.Fatalf("kind %#x decoded", e.kind)
			}
		}
	})
}
