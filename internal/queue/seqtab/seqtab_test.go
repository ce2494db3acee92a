package seqtab

import (
	"math/rand"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// item is a value the size of a small queue entry.
type item struct {
	seq  uint64
	sent int64
	pad  [5]int64
	gone bool
}

func (i *item) Key() uint64 { return i.seq }
func (i *item) Gone() bool  { return i.gone }
func (i *item) MarkGone()   { i.gone = true }

// TestTableAgainstMap drives the table with random adds (mostly in
// sequence order, some behind), removals and lookups, and checks it
// against a map.
func TestTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var tb Table[item, *item]
	ref := map[uint64]*item{}
	var seq uint64
	var ptrs []*item // values handed out: must keep their sequence
	for step := 0; step < 200000; step++ {
		switch op := rng.Intn(10); {
		case op < 4:
			seq += 1 + uint64(rng.Intn(3))
			s := seq
			if rng.Intn(50) == 0 && seq > 100 {
				s = seq - uint64(rng.Intn(100)) // behind: recovery, a put-back
			}
			if _, ok := ref[s]; ok {
				continue
			}
			p := tb.Add(&item{seq: s, sent: int64(s)})
			ref[s] = p
			ptrs = append(ptrs, p)
		case op < 8 && len(ref) > 0:
			// remove a random live one (often the oldest, as consumers do)
			var s uint64
			if rng.Intn(2) == 0 {
				s = seq - uint64(rng.Intn(int(min(seq, 500))))
			} else if m := tb.Oldest(); m != nil {
				s = m.seq
			}
			if m, ok := ref[s]; ok {
				tb.Del(m)
				delete(ref, s)
			}
		default:
			s := uint64(rng.Int63n(int64(seq + 2)))
			got, ok := tb.Get(s)
			want, wok := ref[s]
			if ok != wok || ok && got != want {
				t.Fatalf("step %d: Get(%d) = %v %v, want %v %v", step, s, got, ok, want, wok)
			}
			if m := tb.From(s); m != nil && (m.seq < s || m.gone) {
				t.Fatalf("step %d: From(%d) = %d (gone %v)", step, s, m.seq, m.gone)
			}
		}
		if tb.Len() != len(ref) {
			t.Fatalf("step %d: Len %d, want %d", step, tb.Len(), len(ref))
		}
	}
	var all []uint64
	tb.Each(func(m *item) bool { all = append(all, m.seq); return true })
	if !slices.IsSorted(all) || len(all) != len(ref) {
		t.Fatalf("Each: %d values (sorted %v), want %d", len(all), slices.IsSorted(all), len(ref))
	}
	odd := tb.Odd()
	if len(odd) == 0 || !slices.IsSortedFunc(odd, func(a, b *item) int { return int(a.seq) - int(b.seq) }) {
		t.Fatalf("Odd: %d values, sorted %v", len(odd), slices.IsSortedFunc(odd, func(a, b *item) int { return int(a.seq) - int(b.seq) }))
	}
	for _, p := range ptrs {
		if live := ref[p.seq] == p; live != !p.gone {
			t.Fatalf("value %d: gone %v, live %v", p.seq, p.gone, live)
		}
	}
}

// TestChunksGoAway: values pass through a table while the first stays;
// the emptied chunks behind it are let go.
func TestChunksGoAway(t *testing.T) {
	var tb Table[item, *item]
	tb.Add(&item{seq: 1})
	for s := uint64(2); s < 200000; s++ {
		tb.Del(tb.Add(&item{seq: s}))
	}
	if live, listed := tb.Chunks(); live > 2 || listed > 64 {
		t.Fatalf("%d live chunks, %d in the list", live, listed)
	}
	if m := tb.Oldest(); m == nil || m.seq != 1 || tb.Len() != 1 {
		t.Fatalf("oldest %v, len %d", m, tb.Len())
	}
}
