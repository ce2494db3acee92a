package partition

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/partition/waitlist"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// openWithQueue opens the owner of a queue over a memory store on a clock
// that stands still (long polls end only when woken).
func openWithQueue(t *testing.T, attrs map[string]string) *Owner {
	t.Helper()
	h := testHost(t, store.NewMemory(), clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	o := New(h, 1, record.QueueMeta{ID: 1, Name: "q", Attrs: attrs})
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	return o
}

// testHost is a host over s and clk with no other queue, closed when the
// test ends.
func testHost(t *testing.T, s store.Store, clk clock.Clock) *Host {
	closing := make(chan struct{})
	t.Cleanup(func() { close(closing) })
	h := &Host{Store: s, Clock: clk, Region: "us-east-1", AccountID: "000000000000", Rand: rand.Reader,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Closing: closing}
	h.Resolve = func(string) Destination { return nil }
	return h
}

// The long polls waiting on the queue, as the owner holds them.
func pollersOf(o *Owner) []*waitlist.Waiter {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waiting.Waiters()
}

// waitPollers waits until n long polls wait on the queue: the owner's
// cond is signalled whenever one parks or leaves.
func waitPollers(t *testing.T, o *Owner, n int) []*waitlist.Waiter {
	t.Helper()
	timedOut := false
	timer := time.AfterFunc(10*time.Second, func() {
		o.mu.Lock()
		timedOut = true
		o.cond.Broadcast()
		o.mu.Unlock()
	})
	defer timer.Stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.waiting.Len() != n && !timedOut {
		o.cond.Wait()
	}
	if o.waiting.Len() != n {
		t.Fatalf("%d long polls waiting, want %d", o.waiting.Len(), n)
	}
	return o.waiting.Waiters()
}

// A send wakes as many waiting long polls as it has messages, the longest
// waiting first; the others are not disturbed (they keep their place).
// A poll that gives up after it was woken passes the wake on.
func TestSendWakesOnlyWhatItNeeds(t *testing.T) {
	ctx := context.Background()
	b := openWithQueue(t, nil)
	type result struct {
		i    int
		msgs []st.Message
	}
	got := make(chan result, 8)
	cancels := make([]context.CancelFunc, 5)
	for i := range 5 {
		cctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		go func() {
			ms, _ := b.Receive(cctx, st.ReceiveInput{MaxMessages: 1, WaitTimeSeconds: ptrInt(20)})
			got <- result{i, ms}
		}()
		waitPollers(t, b, i+1) // one at a time: their order is known
	}
	before := pollersOf(b)

	if _, _, err := b.Send(ctx, []st.SendInput{{Body: "one"}}, false); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.i != 0 || len(r.msgs) != 1 {
		t.Fatalf("poll %d got %d messages, want the longest-waiting poll (0) to get the one", r.i, len(r.msgs))
	}
	if after := waitPollers(t, b, 4); !slices.Equal(after, before[1:]) {
		t.Fatal("the other long polls were woken too (their places changed)")
	}

	// Two messages, two polls.
	if _, _, err := b.Send(ctx, []st.SendInput{{Body: "a"}, {Body: "b"}}, true); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := <-got; len(r.msgs) != 1 || (r.i != 1 && r.i != 2) {
			t.Fatalf("poll %d got %d messages, want polls 1 and 2 to get one each", r.i, len(r.msgs))
		}
	}
	if after := waitPollers(t, b, 2); !slices.Equal(after, before[3:]) {
		t.Fatal("polls 3 and 4 were disturbed")
	}

	cancels[3]()
	cancels[4]()
	for range 2 {
		<-got
	}
	waitPollers(t, b, 0)

	// A poll woken for a message that gives up before taking it (its client
	// went away) passes the wake on: here a stand-in poll, woken by a send,
	// leaves; the real poll behind it must get the message, though the
	// clock stands still and nothing else is sent.
	qs := b
	qs.mu.Lock()
	standIn := qs.waiting.Park(-1)
	qs.mu.Unlock()
	go func() {
		ms, _ := b.Receive(ctx, st.ReceiveInput{MaxMessages: 1, WaitTimeSeconds: ptrInt(20)})
		got <- result{9, ms}
	}()
	waitPollers(t, b, 2)
	if _, _, err := b.Send(ctx, []st.SendInput{{Body: "c"}}, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-standIn.Woken():
	case <-time.After(5 * time.Second):
		t.Fatal("the send did not wake the longest-waiting poll")
	}
	qs.leave(standIn)
	select {
	case r := <-got:
		if len(r.msgs) != 1 {
			t.Fatalf("the poll behind got %d messages", len(r.msgs))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wake was not passed on: the message waits while a poll sleeps")
	}
}

func ptrInt(v int) *int { return &v }

// Polls bound to a partition cannot take every message: while one waits,
// a send wakes every poll, so that a message on another shard still
// finds the unbound poll behind it.
func TestBoundPollsDoNotSwallowWakes(t *testing.T) {
	ctx := context.Background()
	b := openWithQueue(t, map[string]string{"Partitions": "2", "PartitionsPerTenant": "1"})
	for part := range 2 {
		bctx, cancel := context.WithCancel(ctx)
		bound := make(chan []st.Message, 1)
		go func() {
			ms, _ := b.Receive(bctx, st.ReceiveInput{MaxMessages: 1, WaitTimeSeconds: ptrInt(20), Shard: ptrInt(part)})
			bound <- ms
		}()
		waitPollers(t, b, 1)
		free := make(chan []st.Message, 1)
		go func() {
			ms, _ := b.Receive(ctx, st.ReceiveInput{MaxMessages: 1, WaitTimeSeconds: ptrInt(20)})
			free <- ms
		}()
		waitPollers(t, b, 2)
		if _, _, err := b.Send(ctx, []st.SendInput{{Body: "x", GroupID: "tenant"}}, false); err != nil {
			t.Fatal(err)
		}
		select {
		case ms := <-bound:
			if len(ms) != 1 {
				t.Fatalf("bound poll woke with %d messages", len(ms))
			}
			cancel()
			// The free poll is still waiting: end it with a message.
			if _, _, err := b.Send(ctx, []st.SendInput{{Body: "y", GroupID: "tenant"}}, false); err != nil {
				t.Fatal(err)
			}
			<-free
			t.Logf("partition %d: the bound poll took it", part)
		case ms := <-free:
			if len(ms) != 1 {
				t.Fatalf("free poll woke with %d messages", len(ms))
			}
			cancel()
			<-bound
			t.Logf("partition %d: the free poll took it", part)
		case <-time.After(5 * time.Second):
			t.Fatalf("bound to partition %d: the message was not received", part)
		}
		waitPollers(t, b, 0)
	}
}
