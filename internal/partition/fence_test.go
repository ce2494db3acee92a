package partition

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// takeOver plays a second node that acquires partition p of s: it
// replays p, writes its epoch record at the end, and returns the
// partition's new last position.
func takeOver(t *testing.T, s store.Store, p store.PartitionID, node string) uint64 {
	t.Helper()
	var last uint64
	if err := s.ReplayPartition(p, 0, func(e store.Entry) error {
		last = max(last, e.Pos)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := &record.Record{Type: record.Epoch, Node: node, Term: 2}
	f := s.Append(p, last, []store.Rec{{Data: record.Encode(r)}})
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f.Last()
}

// A fenced owner stops: once another writer has taken its partition over,
// its next append fails, it serves nothing more (its long polls return,
// its requests get NotOwner), it writes nothing after the new owner's
// records, it releases nothing, and it tells its host.
func TestFencedOwnerStops(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := testHost(t, s, clk)
	told := make(chan *Owner, 1)
	h.Fenced = func(o *Owner) { told <- o }
	o := New(h, 1, record.QueueMeta{ID: 1, Name: "q", Attrs: map[string]string{}})
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, _, err := o.Send(ctx, []st.SendInput{{Body: fmt.Sprint("m", i)}}, false); err != nil {
			t.Fatal(err)
		}
	}
	// Every message in flight, whose bodies the old owner must not
	// release; then a long poll waits on the empty queue.
	vis := 30
	got, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: &vis})
	if err != nil || len(got) != 5 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	polled := make(chan error, 1)
	go func() {
		wait := 20
		_, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 10, WaitTimeSeconds: &wait, VisibilityTimeout: &vis})
		polled <- err
	}()
	waitPollers(t, o, 1)
	newLast := takeOver(t, s, 1, "n2")
	keptBefore := s.Stats().KeptRecords

	// The old owner's next write is fenced: the request fails and it stops.
	_, _, err = o.Send(ctx, []st.SendInput{{Body: "late"}}, false)
	if err == nil {
		t.Fatal("a send of an owner fenced off by a new one succeeded")
	}
	select {
	case f := <-told:
		if f != o {
			t.Fatal("the host was told of another owner")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the host was not told that its owner was fenced")
	}
	if o.Serving() {
		t.Fatal("a fenced owner still serves")
	}
	select {
	case err := <-polled:
		if !errors.Is(err, ErrNotOwner) {
			t.Fatalf("a long poll of a fenced owner ended with %v, want NotOwner", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a long poll of a fenced owner did not return")
	}
	// Every request now fails with NotOwner, and nothing is written.
	if _, _, err := o.Send(ctx, []st.SendInput{{Body: "later"}}, false); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a send after the fence: %v, want NotOwner", err)
	}
	if errs, err := o.Delete(ctx, []string{got[0].ReceiptHandle}); err == nil && (len(errs) == 0 || errs[0] == nil) {
		t.Fatal("a delete of a fenced owner succeeded")
	}
	if err := o.Purge(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a purge after the fence: %v, want NotOwner", err)
	}
	if err := o.Snapshot(); err != nil {
		t.Fatalf("a snapshot of a fenced owner: %v (it writes nothing, and is no error)", err)
	}
	// Its visibility timeout passes: the message it delivered must not be
	// released by the old owner either.
	clk.Advance(time.Minute)
	o.Maintain()
	if last, owned := o.Deleted(); owned {
		t.Fatalf("a fenced owner's delete said it owned the partition (last %d)", last)
	}
	var tail uint64
	if err := s.ReplayPartition(1, 0, func(e store.Entry) error {
		tail = max(tail, e.Pos)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if tail != newLast {
		t.Fatalf("the partition ends at %d after the fence, want %d (the new owner's epoch): the old owner wrote after it", tail, newLast)
	}
	if k := s.Stats().KeptRecords; k != keptBefore {
		t.Fatalf("the fenced owner released bodies: %d kept, %d before", k, keptBefore)
	}
	if b := s.Stats().BadReleases; b != 0 {
		t.Fatalf("%d bad releases", b)
	}
}

// Acquire rebuilds a partition from its records alone, claims it with an
// epoch record, and serves; the owner it took over from is fenced.
func TestAcquireTakesOver(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := testHost(t, s, clk)
	a := New(h, 3, record.QueueMeta{ID: 3, Name: "orders", Attrs: map[string]string{"VisibilityTimeout": "40"}})
	if err := a.Create(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, _, err := a.Send(ctx, []st.SendInput{{Body: fmt.Sprint("m", i)}}, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Snapshot(); err != nil {
		t.Fatal(err)
	}
	got, err := a.Receive(ctx, st.ReceiveInput{MaxMessages: 5})
	if err != nil || len(got) != 5 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	if errs, err := a.Delete(ctx, []string{got[0].ReceiptHandle}); err != nil || errs[0] != nil {
		t.Fatalf("delete: %v %v", err, errs)
	}

	b, missing, err := Acquire(h, 3, clk.Now(), "n2", 7)
	if err != nil || missing != 0 {
		t.Fatalf("acquire: %v (%d missing)", err, missing)
	}
	b.Start()
	if name := b.Meta().Name; name != "orders" || b.Config().Queue.VisibilityTimeout != 40*time.Second {
		t.Fatalf("the new owner rebuilt queue %q with %v", name, b.Config().Queue.VisibilityTimeout)
	}
	// The old owner is fenced on its next write.
	if _, _, err := a.Send(ctx, []st.SendInput{{Body: "stale"}}, false); err == nil {
		t.Fatal("the former owner's send succeeded after a takeover")
	}
	// The new one holds 19 messages: 15 ready, 4 in flight (their
	// handles work with the new owner).
	if errs, err := b.Delete(ctx, []string{got[1].ReceiptHandle}); err != nil || errs[0] != nil {
		t.Fatalf("a delete of a handle the former owner gave: %v %v", err, errs)
	}
	if seen := receiveAll(t, b); seen != 15 {
		t.Fatalf("the new owner delivered %d ready messages, want 15", seen)
	}
	// Past the visibility timeout every message not deleted comes back:
	// 3 the former owner delivered and 15 the new one did.
	clk.Advance(41 * time.Second)
	if back := receiveAll(t, b); back != 18 {
		t.Fatalf("after the visibility timeout %d messages came back, want 18", back)
	}
}

// receiveAll receives from o until it answers empty, and returns how many
// messages it received.
func receiveAll(t *testing.T, o *Owner) int {
	t.Helper()
	n := 0
	for {
		ms, err := o.Receive(context.Background(), st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return n
		}
		n += len(ms)
	}
}

// TestWriteErrorSaysWhatHappened: a fenced append (another owner took
// the queue: nothing written) is "not the owner", retryable and sent on
// to the new owner; an append whose outcome is unknown is retryable but
// not "not the owner" (it may be in the queue: a forwarding node must not
// send it again by itself); a failed disk is an internal error.
func TestWriteErrorSaysWhatHappened(t *testing.T) {
	fenced := &store.AppendError{Err: store.ErrFenced, P: 3, Last: 9}
	unknown := &store.AppendError{Err: fmt.Errorf("%w (%w): partition 3", store.ErrOutcomeUnknown, store.ErrFenced), P: 3, Last: 9}
	for _, c := range []struct {
		name     string
		err      error
		code     st.Code
		notOwner bool
	}{
		{"fenced", fenced, st.CodeServiceUnavailable, true},
		{"outcome unknown", unknown, st.CodeServiceUnavailable, false},
		{"closed", store.ErrClosed, st.CodeServiceUnavailable, false},
		{"no space", &store.AppendError{Err: store.ErrNoSpace}, st.CodeInternal, false},
		{"disk", &store.AppendError{Err: errors.New("write: input/output error")}, st.CodeInternal, false},
	} {
		err := WriteError(c.err)
		if st.CodeOf(err) != c.code || errors.Is(err, ErrNotOwner) != c.notOwner {
			t.Errorf("%s: %v (code %s, not the owner %v), want %s, not the owner %v", c.name, err, st.CodeOf(err), errors.Is(err, ErrNotOwner), c.code, c.notOwner)
		}
	}
}

// lateWrite is a store whose next ReplayPartition is followed, once, by
// late(): a write that lands after a takeover's replay read the
// partition's end, as a former owner's write in doubt can.
type lateWrite struct {
	store.Store
	late    func()
	replays int
}

func (s *lateWrite) ReplayPartition(p store.PartitionID, from uint64, fn func(store.Entry) error) error {
	err := s.Store.ReplayPartition(p, from, fn)
	if s.replays++; s.replays == 1 && s.late != nil {
		s.late()
	}
	return err
}

// A takeover whose epoch record is fenced by a write that landed after
// its replay replays again and claims after it, without giving the
// partition up: the late message is there. A write that landed is a newer
// owner's epoch record instead: the takeover does not claim over it.
func TestAcquireReplaysAgainAfterALateWrite(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := &lateWrite{Store: store.NewMemory()}
	h := testHost(t, s, clk)
	a := New(h, 4, record.QueueMeta{ID: 4, Name: "q", Attrs: map[string]string{}})
	if err := a.Create(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Send(ctx, []st.SendInput{{Body: "early"}}, false); err != nil {
		t.Fatal(err)
	}
	s.late = func() {
		if _, _, err := a.Send(ctx, []st.SendInput{{Body: "late"}}, false); err != nil {
			t.Errorf("the former owner's late send: %v", err)
		}
	}
	b, _, err := Acquire(h, 4, clk.Now(), "n2", 7)
	if err != nil {
		t.Fatalf("acquire after a late write: %v", err)
	}
	b.Start()
	if s.replays != 2 {
		t.Fatalf("%d replays, want 2 (the second after the fenced claim)", s.replays)
	}
	bodies := map[string]bool{}
	for {
		ms, err := b.Receive(ctx, st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			bodies[m.Body] = true
		}
	}
	if !bodies["early"] || !bodies["late"] || len(bodies) != 2 {
		t.Fatalf("the new owner holds %v, want early and late", bodies)
	}
	if _, _, err := a.Send(ctx, []st.SendInput{{Body: "stale"}}, false); err == nil {
		t.Fatal("the former owner's send succeeded after the takeover")
	}

	// The late write is a newer owner's claim (term 9 > 8).
	s2 := &lateWrite{Store: store.NewMemory()}
	h2 := testHost(t, s2, clk)
	c := New(h2, 5, record.QueueMeta{ID: 5, Name: "r", Attrs: map[string]string{}})
	if err := c.Create(); err != nil {
		t.Fatal(err)
	}
	var newer uint64
	s2.late = func() {
		var last uint64
		if err := s2.Store.ReplayPartition(5, 0, func(e store.Entry) error { last = max(last, e.Pos); return nil }); err != nil {
			t.Error(err)
			return
		}
		f := s2.Store.Append(5, last, []store.Rec{{Data: record.Encode(&record.Record{Type: record.Epoch, Node: "n3", Term: 9})}})
		if err := f.Wait(ctx); err != nil {
			t.Error(err)
		}
		newer = f.Last()
	}
	if _, _, err := Acquire(h2, 5, clk.Now(), "n2", 8); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("acquire after a newer owner's claim: %v, want NotOwner", err)
	}
	var tail uint64
	if err := s2.Store.ReplayPartition(5, 0, func(e store.Entry) error { tail = max(tail, e.Pos); return nil }); err != nil {
		t.Fatal(err)
	}
	if tail != newer {
		t.Fatalf("the partition ends at %d, want %d (the newer owner's epoch): the takeover claimed over it", tail, newer)
	}
}
