package partition

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
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
	o := New(h, 1, record.QueueMeta{ID: 1, Name: "q", Attrs: map[string]string{"RetryDelays": "1s,1m", "VisibilityTimeout": "5"}})
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"a", "b"} {
		if _, _, err := o.Send(ctx, []st.SendInput{{Body: body}}, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	got, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %v %v", got, err)
	}
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
	if _, _, err := o.Send(ctx, []st.SendInput{{Body: "c"}}, nil, false); err != nil {
		t.Fatalf("a send after: %v", err)
	}
}
