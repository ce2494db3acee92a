package partition

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
)

// A hand-over retried under the same key (its answer was lost, or its
// source could not delete its copy) is entered once, also after a
// snapshot and a takeover of the destination; after the deduplication
// window a key enters again; other keys are other messages.
func TestEnterOnce(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := testHost(t, s, clk)
	dst := New(h, 2, record.QueueMeta{ID: 2, Name: "dlq", Attrs: map[string]string{}})
	if err := dst.Create(); err != nil {
		t.Fatal(err)
	}
	enter := func(o *Owner, key, body string) {
		t.Helper()
		m := &record.Msg{Sent: clk.Now().UnixMilli()}
		if err := o.Enter(ctx, key, m, &record.Payload{ID: "id-" + key, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(o *Owner) int {
		t.Helper()
		n := receiveAll(t, o)
		clk.Advance(31 * time.Second) // visible again
		return n
	}
	enter(dst, "1/5", "a")
	enter(dst, "1/5", "a")
	enter(dst, "1/6", "b")
	if n := count(dst); n != 2 {
		t.Fatalf("two hand-overs, one retried: %d messages, want 2", n)
	}
	if err := dst.Snapshot(); err != nil {
		t.Fatal(err)
	}
	enter(dst, "1/6", "b")
	// A new owner rebuilt from the snapshot and what followed remembers.
	nd, _, err := Acquire(h, 2, clk.Now(), "n2", 1)
	if err != nil {
		t.Fatal(err)
	}
	nd.Start()
	enter(nd, "1/5", "a")
	enter(nd, "1/6", "b")
	if n := count(nd); n != 2 {
		t.Fatalf("after a snapshot and a takeover: %d messages, want 2", n)
	}
	// Past the window the key is forgotten: a hand-over that comes so late
	// is a new one.
	clk.Advance(6 * time.Minute)
	enter(nd, "1/5", "a")
	if n := count(nd); n != 3 {
		t.Fatalf("past the window: %d messages, want 3", n)
	}
}
