package segread

import (
	"testing"

	"github.com/sluicemq/sluice/internal/store/disk/format"
)

func frame(n int) []format.Record {
	return []format.Record{{Kind: format.KindKeep, Data: make([]byte, n)}}
}

// TestRecent: frames are found by their key until the bytes they hold
// push them out (oldest first) or their segment goes; one over a quarter
// of the bound is not kept.
func TestRecentFrames(t *testing.T) {
	var r recentFrames
	const size = recentBytes / 8
	for i := range 10 {
		r.put(Key{Seg: 1 + uint32(i)/5, Off: uint32(i) * 100}, frame(size))
	}
	for i := range 10 {
		k := Key{Seg: 1 + uint32(i)/5, Off: uint32(i) * 100}
		if _, ok := r.get(k); ok != (i >= 2) {
			t.Fatalf("frame %d kept: %v (8 of 10 fit)", i, ok)
		}
	}
	if _, ok := r.get(Key{Seg: 2, Off: 550}); ok {
		t.Fatal("a frame never put was found")
	}
	r.dropSegment(1)
	if _, ok := r.get(Key{Seg: 1, Off: 400}); ok {
		t.Fatal("a dropped segment's frame was found")
	}
	if recs, ok := r.get(Key{Seg: 2, Off: 500}); !ok || len(recs[0].Data) != size {
		t.Fatal("another segment's frame went with the dropped one")
	}
	r.put(Key{Seg: 3}, frame(recentBytes/4+1))
	if _, ok := r.get(Key{Seg: 3}); ok {
		t.Fatal("an outsized frame was kept")
	}
	r.put(Key{Seg: 1}, frame(1)) // out of order: starts again
	if _, ok := r.get(Key{Seg: 2, Off: 500}); ok {
		t.Fatal("frames before an out-of-order one were kept")
	}
	if _, ok := r.get(Key{Seg: 1}); !ok {
		t.Fatal("the out-of-order frame was not kept")
	}
}

// TestLastRead: the last readCacheFrames frames are kept within
// readCacheBytes, the oldest going first.
func TestLastReadFrames(t *testing.T) {
	var c readCache
	for i := range readCacheFrames + 3 {
		c.put(Key{Seg: 1, Off: uint32(i)}, frame(1), 1)
	}
	for i := range readCacheFrames + 3 {
		if _, ok := c.get(Key{Seg: 1, Off: uint32(i)}); ok != (i >= 3) {
			t.Fatalf("frame %d kept: %v", i, ok)
		}
	}
	const big = readCacheBytes / 4
	for i := range 5 {
		c.put(Key{Seg: 2, Off: uint32(i)}, frame(1), big)
	}
	if _, ok := c.get(Key{Seg: 2, Off: 0}); ok {
		t.Fatal("the byte bound was not kept")
	}
	for i := 1; i < 5; i++ {
		if _, ok := c.get(Key{Seg: 2, Off: uint32(i)}); !ok {
			t.Fatalf("frame %d of 4 that fit was let go", i)
		}
	}
	c.put(Key{Seg: 3}, frame(1), big+1)
	if _, ok := c.get(Key{Seg: 3}); ok {
		t.Fatal("an outsized frame was kept")
	}
	c.dropSegment(2)
	for i := range 5 {
		if _, ok := c.get(Key{Seg: 2, Off: uint32(i)}); ok {
			t.Fatal("a dropped segment's frame was found")
		}
	}
}
