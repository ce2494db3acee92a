package queue

import (
	"testing"
	"time"
)

// TestHistoryDoesNotStay: a million messages pass through a queue while
// the first stays in flight; the queue holds a chunk or two, not the
// history behind the stuck message.
func TestHistoryDoesNotStay(t *testing.T) {
	q := New(Config{VisibilityTimeout: time.Hour, Retention: 4 * 24 * time.Hour})
	now := time.Unix(1700000000, 0)
	send(t, q, now, "", 0)
	if d := q.ReceiveAll(now, 1, time.Hour); len(d) != 1 {
		t.Fatal("no first message")
	}
	for i := 0; i < 1000000; i++ {
		send(t, q, now, "", 0)
		d := q.ReceiveAll(now, 1, time.Hour)
		if len(d) != 1 {
			t.Fatalf("message %d: %v", i, d)
		}
		apply(t, q, now, q.DeleteRecord(d[0].Msg.Seq, 0))
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
			q.TakeEffects()
		}
	}
	if live, listed := q.t.Chunks(); live > 2 || listed > 64 {
		t.Fatalf("%d live chunks, %d in the list, after the history passed", live, listed)
	}
	if c := q.Counts(now); c.InFlight != 1 || c.Visible != 0 || c.OldestSent != 1700000000000 {
		t.Fatalf("counts %+v", c)
	}
}

// TestRetentionPassesInFlight: a message in flight does not hold back the
// retention of the messages sent after it.
func TestRetentionPassesInFlight(t *testing.T) {
	q := New(Config{VisibilityTimeout: time.Hour, Retention: time.Minute})
	now := time.Unix(1700000000, 0)
	for i := 0; i < 10; i++ {
		send(t, q, now, "", 0)
	}
	if d := q.ReceiveAll(now, 1, 10*time.Hour); len(d) != 1 || d[0].Msg.Seq != 1 {
		t.Fatalf("first receive: %v", d)
	}
	now = now.Add(2 * time.Minute)
	if c := q.Counts(now); c.Visible != 0 || c.InFlight != 1 {
		t.Fatalf("after retention: %+v", c)
	}
	if st := q.Stats(); st.DroppedRetention != 9 {
		t.Fatalf("dropped %d, want 9", st.DroppedRetention)
	}
}
