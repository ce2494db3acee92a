package broker_test

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

// restartRig is a fault rig (a disk broker on an in-memory file system)
// with tiny segments and checkpoints, so that a few hundred messages span
// many segments, the replay floor moves and segments are unlinked.
type restartRig struct{ *faultRig }

func newRestartRig(t *testing.T) *restartRig {
	return &restartRig{newFaultRig(t, broker.Config{SegmentBytes: 64 << 10, CheckpointBytes: 128 << 10, CheckReleases: true})}
}

func (r *restartRig) restart() {
	r.t.Helper()
	r.b.Close()
	r.open()
}

// sendBodies sends n numbered 1 KiB messages to q and returns their bodies.
func (r *restartRig) sendBodies(q string, from, n int) []string {
	r.t.Helper()
	pad := strings.Repeat("x", 1000)
	var out []string
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("%s-%06d-%s", q, i, pad)
		if _, err := r.b.Send(ctx, q, st.SendInput{Body: body}); err != nil {
			r.t.Fatalf("send %d: %v", i, err)
		}
		out = append(out, body)
	}
	return out
}

// drain receives and deletes n messages of q and returns their bodies.
func (r *restartRig) drain(q string, n int) map[string]bool {
	r.t.Helper()
	gone := map[string]bool{}
	for len(gone) < n {
		ms, err := r.b.Receive(ctx, q, st.ReceiveInput{MaxMessages: min(10, n-len(gone)), VisibilityTimeout: ptr(3600)})
		if err != nil || len(ms) == 0 {
			r.t.Fatalf("receive after %d: %v (%d)", len(gone), err, len(ms))
		}
		for _, m := range ms {
			if err := r.b.Delete(ctx, q, m.ReceiptHandle); err != nil {
				r.t.Fatalf("delete: %v", err)
			}
			gone[m.Body] = true
		}
	}
	return gone
}

// expect receives everything in q and compares it with want.
func (r *restartRig) expect(q string, want []string) {
	r.t.Helper()
	got := bodiesOf(r.t, r.b, q)
	sort.Strings(want)
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	lost := 0
	for _, w := range want {
		if !have[w] {
			lost++
		}
	}
	if lost > 0 || len(got) != len(want) {
		r.t.Fatalf("queue %s: %d of %d live messages lost, %d received (store: %+v)", q, lost, len(want), len(got), r.b.StoreStats())
	}
	if s := r.b.StoreStats(); s.BadReleases != 0 || s.Unreadable != 0 {
		r.t.Fatalf("%d releases of bodies not kept (each could have lost a message), %d unreadable", s.BadReleases, s.Unreadable)
	}
}

func without(all []string, gone map[string]bool) []string {
	var out []string
	for _, b := range all {
		if !gone[b] {
			out = append(out, b)
		}
	}
	return out
}

// TestRestartDrainRestart: messages sent before a restart, half of them
// drained after it (which frees segments), are all there after another
// restart. Replay's own deletes must not release bodies that the restarted
// store was never told to keep.
func TestRestartDrainRestart(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) {
			r := newRestartRig(t)
			if _, err := r.b.CreateQueue(ctx, "q", nil, nil); err != nil {
				t.Fatal(err)
			}
			all := r.sendBodies("q", 0, 400)
			if snapshot {
				if err := r.b.Snapshot(ctx); err != nil {
					t.Fatal(err)
				}
			}
			gone := r.drain("q", 220)
			r.restart()
			gone2 := r.drain("q", 60)
			all = append(all, r.sendBodies("q", 400, 40)...)
			r.restart()
			r.clk.Advance(2 * time.Hour)
			for b := range gone2 {
				gone[b] = true
			}
			r.expect("q", without(all, gone))
		})
	}
}

// TestUnreadableBodiesAreCounted: a data directory that lost a segment
// holding live bodies (a disk fault, a careless operator). Verify finds
// every message it cannot read back; a start counts them per queue and in
// the store's figures, deletes them durably, and serves the rest.
func TestUnreadableBodiesAreCounted(t *testing.T) {
	r := newRestartRig(t)
	if _, err := r.b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	all := r.sendBodies("q", 0, 300)
	if err := r.b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	r.b.Close()
	rep, err := broker.Verify(r.cfg)
	if err != nil || !rep.Healthy() || len(rep.Queues) != 1 || rep.Queues[0].Messages != 300 {
		t.Fatalf("verify of a healthy directory: %+v %v", rep, err)
	}
	var segs []string
	names, _ := r.fault.ReadDir(r.cfg.Dir)
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			segs = append(segs, n)
		}
	}
	sort.Strings(segs)
	if err := r.fault.Remove(path.Join(r.cfg.Dir, segs[1])); err != nil { // the second: all bodies
		t.Fatal(err)
	}
	rep, err = broker.Verify(r.cfg)
	lost := rep.Unreadable()
	if err != nil || rep.Healthy() || lost == 0 || lost == 300 {
		t.Fatalf("verify after a segment went: %+v %v", rep, err)
	}
	r.open()
	if s := r.b.StoreStats(); s.Unreadable != int64(lost) {
		t.Fatalf("a start counted %d unreadable messages, verify %d", s.Unreadable, lost)
	}
	if qs := r.b.Stats(); len(qs) != 1 || qs[0].Unreadable != int64(lost) {
		t.Fatalf("queue figures: %+v", qs)
	}
	if got := len(bodiesOf(t, r.b, "q")); got != len(all)-lost {
		t.Fatalf("received %d, want the %d readable", got, len(all)-lost)
	}
	r.restart()
	if s := r.b.StoreStats(); s.Unreadable != 0 {
		t.Fatalf("the unreadable messages were not deleted: %d again at the next start", s.Unreadable)
	}
}

// TestDeletedNameSurvivesRestart: a queue's name may not be used again
// within 60 seconds of its deletion, also after a restart and after a
// snapshot of the catalog (which keeps the name among its records); then
// it may.
func TestDeletedNameSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() *broker.Broker {
		b, err := broker.Open(broker.Config{Dir: dir, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	for _, q := range []string{"gone", "kept"} {
		if _, err := b.CreateQueue(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeleteQueue(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	b.Close()
	b = open()
	if _, err := b.CreateQueue(ctx, "gone", nil, nil); code(err) != st.CodeQueueDeletedRecently {
		t.Fatalf("create 20 s after the deletion, after a restart: %v, want QueueDeletedRecently", err)
	}
	if err := b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	b.Close()
	b = open()
	defer func() { b.Close() }()
	if _, err := b.CreateQueue(ctx, "gone", nil, nil); code(err) != st.CodeQueueDeletedRecently {
		t.Fatalf("create 40 s after the deletion, after a snapshot and a restart: %v, want QueueDeletedRecently", err)
	}
	if _, err := b.GetQueue("kept"); err != nil {
		t.Fatalf("the other queue after the restarts: %v", err)
	}
	clk.Advance(21 * time.Second)
	if _, err := b.CreateQueue(ctx, "gone", nil, nil); err != nil {
		t.Fatalf("create 61 s after the deletion: %v", err)
	}
}
