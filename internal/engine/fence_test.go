package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// waitFor polls cond until it holds, or fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}

// TestFencedQueueIsTakenOverAgain: another writer takes a queue's
// partition over (replays it and writes its epoch record). The engine's
// owner is fenced on its next write and stops; the engine acquires the
// partition again (with the other writer's records), and the queue serves
// every message it had, across a restart too, with nothing released twice.
func TestFencedQueueIsTakenOverAgain(t *testing.T) {
	r := &rig{t: t, dir: t.TempDir(), clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	r.open(nil)
	if _, err := r.e.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, b := range r.send("q", 0, 120) {
		live[b] = true
	}
	for b := range r.drain("q", 20) {
		delete(live, b)
	}
	old, _ := r.e.Queue("q")
	p := old.Partition()
	var last uint64
	if err := r.e.st.ReplayPartition(p, 0, func(e store.Entry) error {
		last = max(last, e.Pos)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	epoch := record.Encode(&record.Record{Type: record.Epoch, Node: "intruder", Term: 1})
	if err := r.e.st.Append(p, last, []store.Rec{{Data: epoch}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The owner's next write is fenced.
	if _, _, err := old.Send(ctx, []st.SendInput{{Body: "fenced"}}, false); err == nil {
		t.Fatal("a send of a fenced owner succeeded")
	}
	waitFor(t, "the engine takes the partition over again", func() bool {
		o, err := r.e.Queue("q")
		return err == nil && o != old
	})
	if _, _, err := old.Send(ctx, []st.SendInput{{Body: "stale"}}, false); !errors.Is(err, partition.ErrNotOwner) {
		t.Fatalf("a send to the fenced owner: %v, want NotOwner", err)
	}
	for _, b := range r.send("q", 1000, 10) {
		live[b] = true
	}
	check := func(when string) {
		t.Helper()
		o, err := r.e.Queue("q")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for {
			vis := 1
			ms, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: &vis})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				if !live[m.Body] {
					t.Fatalf("%s: a message that is not live came back: %.12s", when, m.Body)
				}
				seen[m.Body] = true
			}
		}
		if len(seen) != len(live) {
			t.Fatalf("%s: %d of %d live messages served", when, len(seen), len(live))
		}
		r.clk.Advance(2 * time.Second)
	}
	check("after the takeover")
	for b := range r.drain("q", 30) {
		delete(live, b)
	}
	if s := r.e.StoreStats(); s.BadReleases != 0 || s.Unreadable != 0 {
		t.Fatalf("%d bad releases, %d unreadable", s.BadReleases, s.Unreadable)
	}
	r.e.Close()
	r.open(nil)
	defer r.e.Close()
	check("after a restart")
	if s := r.e.StoreStats(); s.BadReleases != 0 || s.Unreadable != 0 {
		t.Fatalf("%d bad releases, %d unreadable after a restart", s.BadReleases, s.Unreadable)
	}
}
