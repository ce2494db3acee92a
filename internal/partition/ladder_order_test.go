package partition

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TestLadderRecordsGoFirst: on a queue with a retry ladder, a visibility
// timeout that ran out since the queue last looked at its timers moves
// the message up the ladder at the next call, which writes that move and
// then its own records. The store takes a partition's appends in position
// order, so the move must be submitted first: the owner used to append
// the call's records first, found them fenced, and stopped serving
// (found by the simulator, internal/sim).
func TestLadderRecordsGoFirst(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := testHost(t, store.NewMemory(), clk)
	o, _ := ladderQueue(t, h, "a", "b")
	// Its visibility timeout runs out; nothing looks at the timers until
	// the next call (no maintenance runs here).
	clk.Advance(6 * time.Second)
	second, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 1})
	if err != nil || len(second) != 1 {
		t.Fatalf("the receive after the timeout: %v %v", second, err)
	}
	if !o.Serving() {
		t.Fatal("the owner stopped serving")
	}
	// The same for a delete after another timeout.
	clk.Advance(6 * time.Second)
	// (A message not received again since may still be deleted with the
	// handle, as in SQS.)
	if errs, err := o.Delete(ctx, []string{second[0].ReceiptHandle}); err != nil || errs[0] != nil {
		t.Fatalf("deleting a message whose visibility ran out: %v %v", err, errs)
	}
	if !o.Serving() {
		t.Fatal("the owner stopped serving after a delete")
	}
	if _, _, err := o.Send(ctx, []st.SendInput{{Body: "c"}}, false); err != nil {
		t.Fatalf("a send after: %v", err)
	}
}

// TestLadderClimbsAtRecoveryAreWritten: a visibility timeout that ran out
// while no owner looked (the broker was down, or the climb's record was
// lost with the power) moves the message up the retry ladder when the
// next owner recovers the queue. That climb takes a position in the
// partition, so its record must be written too, before the owner's own:
// recovery used to drop it, and the owner's first write (a takeover's
// epoch record, a single node's next call) was fenced at every start,
// the queue never served again (found by TestModel).
func TestLadderClimbsAtRecoveryAreWritten(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := testHost(t, store.NewMemory(), clk)
	a, _ := ladderQueue(t, h, "a")
	a.Relinquish()
	clk.Advance(6 * time.Second) // its visibility runs out; no owner looks

	// A takeover (a cluster's path): replay, recovery, the epoch record.
	b, _, err := Acquire(h, 1, clk.Now(), "n2", 1)
	if err != nil {
		t.Fatalf("a takeover after the visibility timeout ran out: %v", err)
	}
	b.Start()
	if _, _, err := b.Send(ctx, []st.SendInput{{Body: "b"}}, false); err != nil || !b.Serving() {
		t.Fatalf("a send after the takeover: %v (serving %v)", err, b.Serving())
	}
	got, err := b.Receive(ctx, st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptrInt(5)})
	if err != nil || len(got) != 2 {
		t.Fatalf("receive after the takeover: %v %v", got, err)
	}
	b.Relinquish()
	clk.Advance(6 * time.Second) // both fail again: "a" to level 2, "b" to 1

	// A single node's recovery: replay and Start, no epoch record.
	c := New(h, 1, record.QueueMeta{ID: 1})
	var last uint64
	if err := h.Store.ReplayPartition(1, 0, func(e store.Entry) error {
		last = max(last, e.Pos)
		return c.Replayed(clk.Now(), e)
	}); err != nil {
		t.Fatal(err)
	}
	c.Recovered(clk.Now(), last)
	c.Start()
	if _, _, err := c.Send(ctx, []st.SendInput{{Body: "c"}}, false); err != nil || !c.Serving() {
		t.Fatalf("a send after recovery: %v (serving %v)", err, c.Serving())
	}
	// The climbs are in the partition, in order: an owner replaying it
	// finds each message at its level.
	d, _, err := Acquire(h, 1, clk.Now(), "n3", 2)
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	clk.Advance(time.Minute)
	levels := map[string]int{}
	for _, m := range receiveAllMessages(t, d) {
		levels[m.Body] = m.RetryLevel
	}
	if want := map[string]int{"a": 2, "b": 1, "c": 0}; !maps.Equal(levels, want) {
		t.Fatalf("retry levels after recovery %v, want %v", levels, want)
	}
}

// receiveAllMessages receives from o until it answers empty.
func receiveAllMessages(t *testing.T, o *Owner) []st.Message {
	t.Helper()
	var out []st.Message
	for {
		ms, err := o.Receive(context.Background(), st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return out
		}
		out = append(out, ms...)
	}
}

// TestSnapshotWritesLadderRecords: a snapshot first applies the writes
// that finished meanwhile (another request's, about to take the lock
// again), and applying moves the queue's time on: a visibility timeout
// that ran out since the queue's last call takes its message up the retry
// ladder there, with a record at the next position. The snapshot used to
// be taken after the queue's last position with that record unwritten:
// the store fenced it and the owner stopped serving.
func TestSnapshotWritesLadderRecords(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := testHost(t, store.NewMemory(), clk)
	o, _ := ladderQueue(t, h, "a", "b")
	// A delete of "b" whose write is done, not yet applied: its request
	// has not taken the lock back.
	ms, _, err := o.Messages(0, 0, func(m *queue.Msg) bool { return m.State != queue.InFlight })
	if err != nil || len(ms) != 1 {
		t.Fatalf("messages: %v %v", ms, err)
	}
	o.lock()
	o.appendLocked([]*record.Record{o.q.DeleteRecord(ms[0].Seq, record.ByClient)}, true, nil)
	o.mu.Unlock()
	clk.Advance(6 * time.Second) // "a"'s visibility runs out; no call looks
	if err := o.Snapshot(); err != nil || !o.Serving() {
		t.Fatalf("snapshot: %v (serving %v)", err, o.Serving())
	}
	// The partition holds the climb: a new owner finds "a" on level 1.
	n, _, err := Acquire(h, 1, clk.Now(), "n2", 1)
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	got := receiveAllMessages(t, n)
	if len(got) != 1 || got[0].Body != "a" || got[0].RetryLevel != 1 || got[0].FailReason != "VisibilityTimeout" {
		t.Fatalf("after the snapshot, the new owner delivered %+v", got)
	}
}

// TestLadderFailureSurvivesAnUnwrittenClimb: a climb up the retry ladder
// is made at once and its record written after; when that write fails
// the climb stays (recovery would make the same one again from the
// delivery that timed out). A delivery of the message on its new level
// is recorded, and replayed on top of the delivery before, without the
// climb: the delivery's record states the message's failures, or they
// were lost at the next start (found by TestModel: the failure reason,
// count and first time of a message received again after a fault).
func TestLadderFailureSurvivesAnUnwrittenClimb(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mem := store.NewMemory()
	h := testHost(t, mem, clk)
	a, _ := ladderQueue(t, h, "a")
	clk.Advance(6 * time.Second)
	mem.FailAppends(errors.New("disk full"))
	a.Maintain() // climbs; its record is not written
	mem.FailAppends(nil)
	got, err := a.Receive(ctx, st.ReceiveInput{MaxMessages: 1, VisibilityTimeout: ptrInt(100)})
	if err != nil || len(got) != 1 || got[0].RetryLevel != 1 || got[0].Failures != 1 {
		t.Fatalf("receive on level 1: %+v %v", got, err)
	}
	want := got[0]
	a.Relinquish()

	b, _, err := Acquire(h, 1, clk.Now(), "n2", 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	ms, _, err := b.Messages(0, 0, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("messages after recovery: %v %v", ms, err)
	}
	m := ms[0]
	if f := m.Fail(); m.Level != 1 || f == nil || f.Reason != want.FailReason || f.Failures != int32(want.Failures) || f.First != want.FirstFailure.UnixMilli() {
		t.Fatalf("after recovery: level %d, failures %+v; delivered on level %d with %d failures (%s since %v)",
			m.Level, f, want.RetryLevel, want.Failures, want.FailReason, want.FirstFailure)
	}
}

// ladderQueue is an owner of a queue with a retry ladder (1s, 1m; a 5 s
// visibility timeout) on h, with bodies sent and the first of them
// received: in flight, on its way up the ladder once its visibility runs
// out.
func ladderQueue(t *testing.T, h *Host, bodies ...string) (*Owner, st.Message) {
	t.Helper()
	ctx := context.Background()
	o := New(h, 1, record.QueueMeta{ID: 1, Name: "q", Attrs: map[string]string{"RetryDelays": "1s,1m", "VisibilityTimeout": "5"}})
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	in := make([]st.SendInput, len(bodies))
	for i, b := range bodies {
		in[i] = st.SendInput{Body: b}
	}
	if _, _, err := o.Send(ctx, in, false); err != nil {
		t.Fatal(err)
	}
	got, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 1})
	if err != nil || len(got) != 1 || got[0].Body != bodies[0] {
		t.Fatalf("receive: %v %v", got, err)
	}
	return o, got[0]
}
