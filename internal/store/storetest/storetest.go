// Package storetest is the conformance suite of the store seam: every
// store (memory, disk, and later JetStream) runs it from its own tests.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
)

// Harness is a store under test and what the suite may do to it.
type Harness struct {
	Store store.Store
	// Reopen closes the store and opens it again on what it made durable
	// (a restart), returning the new one. Required.
	Reopen func() store.Store
	// Crash, when not nil, opens the store again on what a power loss at
	// this moment would leave (the old one is abandoned).
	Crash func() store.Store
	// Fail, when not nil, makes every write fail (true) or work (false).
	Fail func(on bool)
	// Second, when not nil, opens another store on the same data while
	// this one is open (a second node of a replicated store).
	Second func() store.Store
}

var ctx = context.Background()

// Run runs the suite; open returns a fresh, empty store each time.
func Run(t *testing.T, open func(t *testing.T) *Harness) {
	t.Run("PositionsAndFencing", func(t *testing.T) { positionsAndFencing(t, open(t)) })
	t.Run("PipelinedAppends", func(t *testing.T) { pipelined(t, open(t)) })
	t.Run("FailedAppendLeavesPartition", func(t *testing.T) { failedAppend(t, open(t)) })
	t.Run("ReplayAfterReopen", func(t *testing.T) { replayAfterReopen(t, open(t)) })
	t.Run("SnapshotReplacesHistory", func(t *testing.T) { snapshotReplaces(t, open(t)) })
	t.Run("KeptRecordsOutliveSnapshots", func(t *testing.T) { keptOutlive(t, open(t)) })
	t.Run("ReadChecksItsRecord", func(t *testing.T) { readChecks(t, open(t)) })
	t.Run("Drop", func(t *testing.T) { drop(t, open(t)) })
	t.Run("ReplayPartitionFrom", func(t *testing.T) { replayFrom(t, open(t)) })
	t.Run("ConcurrentPartitions", func(t *testing.T) { concurrent(t, open(t)) })
	t.Run("SpaceFollowsLiveData", func(t *testing.T) { spaceFollowsLive(t, open(t)) })
	t.Run("CrashKeepsAcknowledged", func(t *testing.T) { crash(t, open(t)) })
	t.Run("AppendIsWholeAfterCrash", func(t *testing.T) { crashWhole(t, open(t)) })
	t.Run("ReleaseOnlyWhatIsKept", func(t *testing.T) { releaseOnlyKept(t, open(t)) })
	t.Run("LastPositions", func(t *testing.T) { lastPositions(t, open(t)) })
	t.Run("BigAppendsWholeOrRefused", func(t *testing.T) { bigAppends(t, open(t)) })
	t.Run("AcquireFencesFormerWriter", func(t *testing.T) { acquire(t, h2(t, open)) })
	t.Run("LeaveForgetsAndStops", func(t *testing.T) { leave(t, h2(t, open)) })
}

// leave: a writer that leaves a partition to another writer keeps nothing
// of it (Stats count no kept record of it) and writes nothing more to it
// until it acquires it again with ReplayPartition, which the records
// survive.
func leave(t *testing.T, h *Harness) {
	a := h.Store
	defer func() { a.Close() }()
	mustAppend(t, a, 1, 0, "a1", "a2")
	mustAppend(t, a, 2, 0, "other")
	if n := a.Stats().KeptRecords; n != 3 {
		t.Fatalf("%d kept records before Leave, want 3", n)
	}
	a.Leave(1)
	if n := a.Stats().KeptRecords; n != 1 {
		t.Fatalf("%d kept records after leaving partition 1, want 1 (partition 2's)", n)
	}
	if err := a.Append(1, 2, recs(false, "after")).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("an append after Leave: %v, want ErrFenced", err)
	}
	b := h.Second()
	defer func() { b.Close() }()
	var last uint64
	if err := b.ReplayPartition(1, 0, func(e store.Entry) error { last = e.Pos; return nil }); err != nil || last != 2 {
		t.Fatalf("the next writer replayed up to %d, %v; want 2", last, err)
	}
	mustAppend(t, b, 1, last, "b1")
	b.Leave(1)
	var got []string
	if err := a.ReplayPartition(1, 0, func(e store.Entry) error {
		got = append(got, string(e.Data))
		last = e.Pos
		return nil
	}); err != nil || !equal(got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("acquired again, partition 1 holds %q, %v", got, err)
	}
	mustAppend(t, a, 1, last, "a3")
}

// h2 is a harness whose Second opens another store on the same data; a
// store that cannot have two writers on its data skips the test.
func h2(t *testing.T, open func(t *testing.T) *Harness) *Harness {
	h := open(t)
	if h.Second == nil {
		h.Store.Close()
		t.Skip("this store has one writer per data set")
	}
	return h
}

// lastPositions: a future reports the partition's last position once
// durable, for appends and snapshots alike.
func lastPositions(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	f := s.Append(1, 0, recs(true, "a", "b", "c"))
	if err := f.Wait(ctx); err != nil || f.Last() != 3 {
		t.Fatalf("an append of 3 at 0: last %d, err %v; want 3", f.Last(), err)
	}
	f = s.Snapshot(1, 3, slices.Values(recs(false, "s1", "s2")))
	if err := f.Wait(ctx); err != nil || f.Last() != 5 {
		t.Fatalf("a snapshot of 2 at 3: last %d, err %v; want 5", f.Last(), err)
	}
	f = s.Append(1, 5, recs(false, "d"))
	if err := f.Wait(ctx); err != nil || f.Last() != 6 {
		t.Fatalf("an append of 1 at 5: last %d, err %v; want 6", f.Last(), err)
	}
}

// bigAppends: an append of many records, or of one record larger than a
// store's message limit, is written whole or refused whole (ErrTooBig),
// never half; the partition goes on after a refusal.
func bigAppends(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	many := make([]string, 2500)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
	}
	big := string(bytes.Repeat([]byte("B"), 2<<20+17))
	last := uint64(0)
	for _, batch := range [][]string{many, {"x", big, "y"}} {
		f := s.Append(1, last, recs(true, batch...))
		err := f.Wait(ctx)
		switch {
		case err == nil:
			last += uint64(len(batch))
			if f.Last() != last {
				t.Fatalf("an append of %d records ends at %d, want %d", len(batch), f.Last(), last)
			}
			hs := f.Hints()
			for i := range batch {
				got, err := s.Read(1, last-uint64(len(batch))+1+uint64(i), hs[i])
				if err != nil || string(got) != batch[i] {
					t.Fatalf("record %d of an append of %d: %d bytes, %v", i, len(batch), len(got), err)
				}
			}
		case errors.Is(err, store.ErrTooBig):
			t.Logf("an append of %d records was refused: %v", len(batch), err)
		default:
			t.Fatalf("an append of %d records: %v", len(batch), err)
		}
	}
	mustAppend(t, s, 1, last, "after")
	s = h.Reopen()
	defer func() { s.Close() }()
	if n := len(replayAll(t, s).data(1)); uint64(n) != last+1 {
		t.Fatalf("replayed %d records after big appends, want %d", n, last+1)
	}
}

// acquire: a second store on the same data takes a partition over with
// ReplayPartition and appends; the first one's next append is fenced, and
// the log holds exactly the second's records after the takeover.
func acquire(t *testing.T, h *Harness) {
	a := h.Store
	defer func() { a.Close() }()
	mustAppend(t, a, 1, 0, "a1", "a2")
	b := h.Second()
	defer func() { b.Close() }()
	var got []string
	last := uint64(0)
	if err := b.ReplayPartition(1, 0, func(e store.Entry) error {
		got = append(got, string(e.Data))
		last = e.Pos
		return nil
	}); err != nil || !equal(got, []string{"a1", "a2"}) {
		t.Fatalf("the new writer replayed %q, %v", got, err)
	}
	mustAppend(t, b, 1, last, "epoch-b")
	// The former writer still thinks the partition ends at 2.
	if err := a.Append(1, 2, recs(false, "stale")).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the former writer's append after a takeover: %v, want ErrFenced", err)
	}
	mustAppend(t, b, 1, 3, "b1")
	if err := a.Drop(1, 2).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the former writer's drop after a takeover: %v, want ErrFenced", err)
	}
	got = nil
	if err := b.ReplayPartition(1, 0, func(e store.Entry) error {
		got = append(got, string(e.Data))
		return nil
	}); err != nil || !equal(got, []string{"a1", "a2", "epoch-b", "b1"}) {
		t.Fatalf("after the takeover the partition holds %q, %v", got, err)
	}
}

func recs(keep bool, data ...string) []store.Rec {
	out := make([]store.Rec, len(data))
	for i, d := range data {
		out[i] = store.Rec{Data: []byte(d), Keep: keep}
	}
	return out
}

func mustAppend(t *testing.T, s store.Store, p store.PartitionID, prev uint64, data ...string) []store.Hint {
	t.Helper()
	f := s.Append(p, prev, recs(true, data...))
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("append to %d after %d: %v", p, prev, err)
	}
	h := f.Hints()
	if len(h) != len(data) {
		t.Fatalf("append returned %d hints for %d records", len(h), len(data))
	}
	return h
}

// replayed is what Replay handed over, per partition, in order.
type replayed map[store.PartitionID][]store.Entry

func replayAll(t *testing.T, s store.Store) replayed {
	t.Helper()
	out := replayed{}
	err := s.Replay(func(e store.Entry) error {
		e.Data = append([]byte(nil), e.Data...)
		if e.Reset {
			out[e.P] = nil
		}
		out[e.P] = append(out[e.P], e)
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	s.Recovered() // this owner keeps nothing
	return out
}

// data lists the data of the non-moved entries.
func (r replayed) data(p store.PartitionID) []string {
	var out []string
	for _, e := range r[p] {
		if !e.Moved {
			out = append(out, string(e.Data))
		}
	}
	return out
}

func (r replayed) positions(p store.PartitionID) []uint64 {
	var out []uint64
	for _, e := range r[p] {
		if !e.Moved {
			out = append(out, e.Pos)
		}
	}
	return out
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func positionsAndFencing(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	mustAppend(t, s, 1, 0, "a", "b")
	if err := s.Append(1, 0, recs(false, "x")).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("append after 0 to a partition ending at 2: %v, want ErrFenced", err)
	}
	if err := s.Append(1, 5, recs(false, "x")).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("append after 5 to a partition ending at 2: %v, want ErrFenced", err)
	}
	mustAppend(t, s, 1, 2, "c")
	mustAppend(t, s, 2, 0, "other")
	s = h.Reopen()
	r := replayAll(t, s)
	if got := r.data(1); !equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("partition 1 replayed %q", got)
	}
	if got := r.positions(1); !equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("partition 1 positions %v", got)
	}
	if err := s.Append(1, 2, recs(false, "x")).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("after a reopen, append after 2 to a partition ending at 3: %v, want ErrFenced", err)
	}
	mustAppend(t, s, 1, 3, "d")
}

func pipelined(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	var fs []store.Future
	for i := 0; i < 100; i++ {
		fs = append(fs, s.Append(7, uint64(2*i), recs(i%2 == 0, fmt.Sprint(i, "a"), fmt.Sprint(i, "b"))))
	}
	for i, f := range fs {
		if err := f.Wait(ctx); err != nil {
			t.Fatalf("pipelined append %d: %v", i, err)
		}
	}
	s = h.Reopen()
	r := replayAll(t, s)
	if n := len(r.data(7)); n != 200 {
		t.Fatalf("replayed %d of 200 pipelined records", n)
	}
	for i, p := range r.positions(7) {
		if p != uint64(i+1) {
			t.Fatalf("position %d at index %d", p, i)
		}
	}
}

func failedAppend(t *testing.T, h *Harness) {
	if h.Fail == nil {
		t.Skip("this store cannot inject write failures")
	}
	s := h.Store
	defer func() { s.Close() }()
	mustAppend(t, s, 3, 0, "a", "b")
	h.Fail(true)
	f1 := s.Append(3, 2, recs(true, "lost1"))
	err1 := f1.Wait(ctx)
	h.Fail(false)
	f2 := s.Append(3, 3, recs(true, "lost2")) // pipelined behind the failure
	err2 := f2.Wait(ctx)
	if err1 == nil {
		t.Fatal("an append on a failing disk succeeded")
	}
	if !errors.Is(err2, store.ErrFenced) {
		t.Fatalf("the append behind a failed one: %v, want ErrFenced", err2)
	}
	mustAppend(t, s, 3, 2, "c")
	s = h.Reopen()
	if got := replayAll(t, s).data(3); !equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after a failed append, replayed %q", got)
	}
}

func replayAfterReopen(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	want := map[store.PartitionID][]string{}
	last := map[store.PartitionID]uint64{}
	for i := 0; i < 300; i++ {
		p := store.PartitionID(1 + i%5)
		d := fmt.Sprintf("p%d-%d", p, i)
		mustAppend(t, s, p, last[p], d)
		last[p]++
		want[p] = append(want[p], d)
	}
	s = h.Reopen()
	r := replayAll(t, s)
	for p, w := range want {
		if got := r.data(p); !equal(got, w) {
			t.Fatalf("partition %d replayed %d records, want %d", p, len(got), len(w))
		}
	}
	s = h.Reopen() // replay again: replay changes nothing
	if got := replayAll(t, s).data(3); !equal(got, want[3]) {
		t.Fatal("a second reopen replays something else")
	}
}

func snapshotReplaces(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	mustAppend(t, s, 1, 0, "a", "b", "c")
	mustAppend(t, s, 2, 0, "x")
	if err := s.Snapshot(1, 3, slices.Values(recs(false, "state1", "state2"))).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, 1, 5, "d")
	if err := s.Snapshot(1, 0, slices.Values(recs(false, "stale"))).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a snapshot after the wrong position: %v, want ErrFenced", err)
	}
	s = h.Reopen()
	r := replayAll(t, s)
	if got := r.data(1); !equal(got, []string{"state1", "state2", "d"}) {
		t.Fatalf("after a snapshot, replayed %q", got)
	}
	es := r[1]
	if !es[0].Reset || !es[0].Snapshot || !es[1].Snapshot || es[1].Reset || es[2].Snapshot {
		t.Fatalf("snapshot flags wrong: %+v", es)
	}
	if got := r.positions(1); !equal(got, []uint64{4, 5, 6}) {
		t.Fatalf("positions %v, want 4 5 6", got)
	}
	if got := r.data(2); !equal(got, []string{"x"}) {
		t.Fatalf("another partition's records changed: %q", got)
	}
	// A second snapshot replaces the first. Its records are consumed
	// before Snapshot returns: the owner makes them under its lock.
	taken := 0
	seq := func(yield func(store.Rec) bool) {
		for _, r := range recs(false, "newer") {
			taken++
			if !yield(r) {
				return
			}
		}
	}
	f := s.Snapshot(1, 6, seq)
	if taken != 1 {
		t.Fatalf("Snapshot returned having taken %d of 1 records", taken)
	}
	if err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen()
	if got := replayAll(t, s).data(1); !equal(got, []string{"newer"}) {
		t.Fatalf("after a second snapshot, replayed %q", got)
	}
}

func keptOutlive(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	hints := mustAppend(t, s, 1, 0, "body1", "body2", "body3")
	if err := s.Snapshot(1, 3, slices.Values(recs(false, "index"))).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"body1", "body2", "body3"} {
		got, err := s.Read(1, uint64(i+1), hints[i])
		if err != nil || string(got) != want {
			t.Fatalf("read of a kept record after a snapshot: %q %v", got, err)
		}
	}
	s.Release(1, 2, hints[1])
	s = h.Reopen()
	if err := s.Replay(func(store.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if err := s.Keep(1, uint64(i+1), hints[i]); err != nil {
			t.Fatalf("keep after a reopen: %v", err)
		}
	}
	s.Recovered()
	for _, i := range []int{0, 2} {
		if got, err := s.Read(1, uint64(i+1), hints[i]); err != nil || string(got) != fmt.Sprint("body", i+1) {
			t.Fatalf("read of a kept record after a reopen: %q %v", got, err)
		}
	}
}

func readChecks(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	ha := mustAppend(t, s, 1, 0, "one", "two")
	hb := mustAppend(t, s, 2, 0, "other")
	if got, err := s.Read(1, 2, ha[1]); err != nil || string(got) != "two" {
		t.Fatalf("read: %q %v", got, err)
	}
	// A hint of another record never yields that record as this one.
	if got, err := s.Read(1, 1, hb[0]); err == nil && string(got) != "one" {
		t.Fatalf("read of (1, 1) with another record's hint returned %q", got)
	}
	if got, err := s.Read(1, 9, ha[0]); err == nil {
		t.Fatalf("read of a position never written returned %q", got)
	}
}

func drop(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	hs := mustAppend(t, s, 4, 0, "a", "b")
	mustAppend(t, s, 5, 0, "keep")
	if ps, err := s.Partitions(); err != nil || !equal(ps, []store.PartitionID{4, 5}) {
		t.Fatalf("partitions before the drop: %v %v, want [4 5]", ps, err)
	}
	// A drop is fenced like an append: a stale owner's drop fails.
	if err := s.Drop(4, 1).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a drop at position 1 of a partition ending at 2: %v, want ErrFenced", err)
	}
	if err := s.Drop(4, 2).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.Partitions(); err != nil || !equal(ps, []store.PartitionID{5}) {
		t.Fatalf("partitions after the drop: %v %v, want [5]", ps, err)
	}
	// A write after the drop, by a writer that does not know of it, is
	// fenced: it neither brings the partition back nor keeps its space.
	if err := s.Append(4, 2, recs(true, "late")).Wait(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("an append after the drop: %v, want ErrFenced", err)
	}
	if ps, err := s.Partitions(); err != nil || !equal(ps, []store.PartitionID{5}) {
		t.Fatalf("partitions after a late append to a dropped one: %v %v, want [5]", ps, err)
	}
	s = h.Reopen()
	r := replayAll(t, s)
	if ps, err := s.Partitions(); err != nil || !equal(ps, []store.PartitionID{5}) {
		t.Fatalf("partitions after the drop and a reopen: %v %v, want [5]", ps, err)
	}
	if len(r.data(4)) != 0 {
		t.Fatalf("a dropped partition replayed %q", r.data(4))
	}
	if got := r.data(5); !equal(got, []string{"keep"}) {
		t.Fatalf("another partition after a drop: %q", got)
	}
	if got, err := s.Read(4, 1, hs[0]); err == nil {
		t.Fatalf("read from a dropped partition returned %q", got)
	}
}

func replayFrom(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	mustAppend(t, s, 1, 0, "a", "b", "c", "d")
	mustAppend(t, s, 2, 0, "x", "y")
	var got []string
	err := s.ReplayPartition(1, 3, func(e store.Entry) error {
		if e.P != 1 {
			return fmt.Errorf("entry of partition %d", e.P)
		}
		got = append(got, string(e.Data))
		return nil
	})
	if err != nil || !equal(got, []string{"c", "d"}) {
		t.Fatalf("replay of partition 1 from 3: %q %v", got, err)
	}
}

func concurrent(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(p store.PartitionID) {
			defer wg.Done()
			var fs []store.Future
			for i := 0; i < 100; i++ {
				fs = append(fs, s.Append(p, uint64(i), recs(i%3 == 0, fmt.Sprint(p, "-", i))))
				if i%10 == 9 {
					for _, f := range fs {
						if err := f.Wait(ctx); err != nil {
							errs <- err
							return
						}
					}
					fs = nil
				}
			}
		}(store.PartitionID(10 + g))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s = h.Reopen()
	r := replayAll(t, s)
	for g := 0; g < 8; g++ {
		p := store.PartitionID(10 + g)
		d := r.data(p)
		if len(d) != 100 {
			t.Fatalf("partition %d replayed %d of 100", p, len(d))
		}
		for i, x := range d {
			if x != fmt.Sprint(p, "-", i) {
				t.Fatalf("partition %d record %d is %q", p, i, x)
			}
		}
	}
}

// spaceFollowsLiveData: after many kept records are released and their
// partitions snapshotted, the store holds about what is live, not what
// passed through.
func spaceFollowsLive(t *testing.T, h *Harness) {
	s := h.Store
	defer func() { s.Close() }()
	body := string(bytes.Repeat([]byte("b"), 4000))
	type live struct {
		pos  uint64
		hint store.Hint
	}
	var last uint64
	var kept []live
	for round := 0; round < 40; round++ {
		var batch []string
		for i := 0; i < 50; i++ {
			batch = append(batch, body)
		}
		hs := mustAppend(t, s, 1, last, batch...)
		for i := range hs {
			kept = append(kept, live{last + 1 + uint64(i), hs[i]})
		}
		last += uint64(len(hs))
		// Release all but the newest few, then snapshot.
		for len(kept) > 5 {
			s.Release(1, kept[0].pos, kept[0].hint)
			kept = kept[1:]
		}
		if err := s.Snapshot(1, last, slices.Values(recs(false, "state"))).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		last++
	}
	st := s.Stats()
	if st.KeptRecords > 5 {
		t.Fatalf("%d records kept, want at most the 5 live ones", st.KeptRecords)
	}
	// 2,000 records of 4 KB passed through: 8 MB. What stays must be far less.
	if st.DiskBytes > 4<<20 || st.LogBytes > 4<<20 {
		t.Fatalf("after 8 MB passed and 20 KB stayed live: %d bytes of files, %d of log to replay", st.DiskBytes, st.LogBytes)
	}
	for _, k := range kept {
		if got, err := s.Read(1, k.pos, k.hint); err != nil || string(got) != body {
			t.Fatalf("live record %d unreadable: %v", k.pos, err)
		}
	}
}

func crash(t *testing.T, h *Harness) {
	if h.Crash == nil {
		t.Skip("this store has no power to lose")
	}
	s := h.Store
	var acked []string
	var last uint64
	for i := 0; i < 50; i++ {
		d := fmt.Sprint("r", i)
		mustAppend(t, s, 1, last, d)
		last++
		acked = append(acked, d)
		if i == 20 {
			if err := s.Snapshot(1, last, slices.Values(recs(false, "snap"))).Wait(ctx); err != nil {
				t.Fatal(err)
			}
			last++
			acked = []string{"snap"}
		}
	}
	s = h.Crash()
	defer func() { s.Close() }()
	got := replayAll(t, s).data(1)
	sort.Strings(got)
	sort.Strings(acked)
	if !equal(got, acked) {
		t.Fatalf("after a power loss replayed %d records, want the %d acknowledged", len(got), len(acked))
	}
}

// crashWhole: an append is atomic. After a power loss with appends of
// three records in flight, each is there whole or not at all, and those
// there are a prefix of the submitted ones (a queue writes a message and
// the mark of where it came from in one append: either alone would lose
// the message or send it twice).
func crashWhole(t *testing.T, h *Harness) {
	if h.Crash == nil {
		t.Skip("this store has no power to lose")
	}
	s := h.Store
	const n = 1000
	var fs []store.Future
	for i := 0; i < n; i++ {
		fs = append(fs, s.Append(1, uint64(3*i), recs(i%2 == 0, fmt.Sprint(i, "/a"), fmt.Sprint(i, "/b"), fmt.Sprint(i, "/c"))))
	}
	if err := fs[10].Wait(ctx); err != nil { // some durable, some maybe not
		t.Fatal(err)
	}
	s = h.Crash()
	defer func() { s.Close() }()
	got := replayAll(t, s).data(1)
	if len(got)%3 != 0 || len(got) < 3*11 {
		t.Fatalf("after a power loss replayed %d records of appends of 3 (%d were acknowledged)", len(got), 3*11)
	}
	t.Logf("%d of %d appends there after the power loss", len(got)/3, n)
	for i := 0; i < len(got)/3; i++ {
		for j, part := range []string{"a", "b", "c"} {
			if want := fmt.Sprint(i, "/", part); got[3*i+j] != want {
				t.Fatalf("record %d after a power loss is %q, want %q: an append was cut or reordered", 3*i+j, got[3*i+j], want)
			}
		}
	}
}

// releaseOnlyKept: the contract of Keep, Recovered and Release, with the
// bodies of two partitions spread over many files. After a reopen the
// store frees nothing until Recovered, not even when a partition is
// dropped (which moves the replay floor); a release of a record not kept
// since open, or a second release, is counted and frees nothing; every
// record kept stays readable.
func releaseOnlyKept(t *testing.T, h *Harness) {
	s := h.Store
	body := string(bytes.Repeat([]byte("k"), 2000))
	type rec struct {
		pos  uint64
		hint store.Hint
	}
	var ones, twos []rec
	var last1, last2 uint64
	for i := 0; i < 200; i++ { // 800 KB: many segments of a disk log
		h1 := mustAppend(t, s, 1, last1, fmt.Sprint(body, "/1/", i))
		last1++
		ones = append(ones, rec{last1, h1[0]})
		h2 := mustAppend(t, s, 2, last2, fmt.Sprint(body, "/2/", i))
		last2++
		twos = append(twos, rec{last2, h2[0]})
	}
	for p, last := range map[store.PartitionID]*uint64{1: &last1, 2: &last2} {
		if err := s.Snapshot(p, *last, slices.Values(recs(false, "state"))).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		*last++
	}
	// Partition 1 lets go of its first half (kept since open: fine).
	for _, r := range ones[:100] {
		s.Release(1, r.pos, r.hint)
	}
	if b := s.Stats().BadReleases; b != 0 {
		t.Fatalf("%d bad releases of records appended with Keep", b)
	}
	ones = ones[100:]

	s = h.Reopen()
	defer func() { s.Close() }()
	if err := s.Replay(func(store.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Partition 2 is dropped before partition 1 said what it keeps.
	if err := s.Drop(2, last2).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// A release of what was not kept since open (a replayed delete, say).
	s.Release(1, ones[0].pos, ones[0].hint)
	if b := s.Stats().BadReleases; b != 1 {
		t.Fatalf("a release of a record not kept since open: %d bad releases counted, want 1", b)
	}
	for _, r := range ones {
		if err := s.Keep(1, r.pos, r.hint); err != nil {
			t.Fatalf("keep of live record %d after a reopen and a drop: %v", r.pos, err)
		}
	}
	s.Recovered()
	read := func(r rec) error {
		got, err := s.Read(1, r.pos, r.hint)
		if err == nil && !strings.HasPrefix(string(got), body+"/1/") {
			err = fmt.Errorf("read %.20q", got)
		}
		return err
	}
	for _, r := range ones {
		if err := read(r); err != nil {
			t.Fatalf("live record %d after Recovered: %v", r.pos, err)
		}
	}
	// Released twice: the second is counted, and frees nothing.
	s.Release(1, ones[1].pos, ones[1].hint)
	s.Release(1, ones[1].pos, ones[1].hint)
	if b := s.Stats().BadReleases; b != 2 {
		t.Fatalf("a second release: %d bad releases counted, want 2", b)
	}
	for _, r := range ones[2:] {
		if err := read(r); err != nil {
			t.Fatalf("live record %d after a bad release: %v", r.pos, err)
		}
	}
}
