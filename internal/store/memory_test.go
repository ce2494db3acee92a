package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/storetest"
)

var ctx = context.Background()

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) *storetest.Harness {
		m := store.NewMemory()
		h := &storetest.Harness{Store: m}
		h.Reopen = func() store.Store {
			m.Close()
			m = m.Reopen()
			h.Store = m
			return m
		}
		h.Fail = func(on bool) {
			if on {
				m.FailAppends(errors.New("injected: no space"))
			} else {
				m.FailAppends(nil)
			}
		}
		return h
	})
}

// TestMemoryWantsSnapshotByWeight: a partition is wanted for a snapshot
// once the records after its snapshot are a few thousand and outweigh it
// in bytes; a large snapshot of few records (a backlog: many messages a
// record) is not rewritten every few thousand small appends.
func TestMemoryWantsSnapshotByWeight(t *testing.T) {
	m := store.NewMemory()
	const p = store.PartitionID(1)
	wait := func(f store.Future) uint64 {
		t.Helper()
		if err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return f.Last()
	}
	big := make([]byte, 64<<10)
	snap := []store.Rec{{Data: big}, {Data: big}, {Data: big}, {Data: big}} // 256 KiB in 4 records
	last := wait(m.Snapshot(p, 0, slices.Values(snap)))
	small := make([]byte, 50)
	appendN := func(n int) {
		for range n {
			last = wait(m.Append(p, last, []store.Rec{{Data: small}}))
		}
	}
	appendN(5000) // 250 KB: more records than the threshold, fewer bytes than the snapshot
	if w := m.Wanted(); len(w) != 0 {
		t.Fatalf("wanted %v after 5,000 small records against a 256 KiB snapshot", w)
	}
	appendN(300) // now past the snapshot's bytes
	if w := m.Wanted(); !slices.Equal(w, []store.PartitionID{p}) {
		t.Fatalf("wanted %v, want partition %d", w, p)
	}
	last = wait(m.Snapshot(p, last, slices.Values(snap)))
	if w := m.Wanted(); len(w) != 0 {
		t.Fatalf("wanted %v just after a snapshot", w)
	}
	// Few records do not make a snapshot wanted, however heavy.
	m2 := store.NewMemory()
	wait(m2.Append(p, 0, []store.Rec{{Data: big}, {Data: big}}))
	if w := m2.Wanted(); len(w) != 0 {
		t.Fatalf("wanted %v after two records", w)
	}
}
