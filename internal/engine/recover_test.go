package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

var ctx = context.Background()

// noDrop is the disk log with Drop cut off: a queue's deletion stops
// after the catalog's drop, as a crash between the two leaves it.
type noDrop struct{ *disk.Log }

func (noDrop) Drop(store.PartitionID, uint64) store.Future { return store.Failed(store.ErrClosed) }

type rig struct {
	t   *testing.T
	dir string
	clk *clock.Fake
	e   *Engine
}

func (r *rig) open(wrap func(*disk.Log) store.Store) {
	r.t.Helper()
	l, err := disk.Open(vfs.OS{}, r.dir, disk.Options{SegmentBytes: 64 << 10, SnapshotBytes: 128 << 10, CheckReleases: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		r.t.Fatal(err)
	}
	var s store.Store = l
	if wrap != nil {
		s = wrap(l)
	}
	e, err := Open(Config{Store: s, Region: "us-east-1", AccountID: "000000000000", MaxQueues: 100, Clock: r.clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		r.t.Fatal(err)
	}
	r.e = e
}

func (r *rig) send(q string, from, n int) []string {
	r.t.Helper()
	o, err := r.e.Queue(q)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("%s-%05d-%s", q, i, strings.Repeat("x", 1000))
		if _, _, err := o.Send(ctx, []st.SendInput{{Body: body}}, false); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}

// drain receives and deletes n messages of q and returns their bodies.
func (r *rig) drain(q string, n int) map[string]bool {
	r.t.Helper()
	o, _ := r.e.Queue(q)
	gone := map[string]bool{}
	for len(gone) < n {
		vis := 3600
		ms, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: min(10, n-len(gone)), VisibilityTimeout: &vis})
		if err != nil || len(ms) == 0 {
			r.t.Fatalf("receive after %d: %v (%d)", len(gone), err, len(ms))
		}
		for _, m := range ms {
			if errs, err := o.Delete(ctx, []string{m.ReceiptHandle}); err != nil || errs[0] != nil {
				r.t.Fatal(err, errs)
			}
			gone[m.Body] = true
		}
	}
	return gone
}

// TestRecoveryDropsOrphansAfterKeeping: a queue whose deletion was cut
// short (the catalog says it is gone, its partition is still in the log)
// is dropped at recovery, but only after every live queue has told the
// store which bodies it keeps: the drop moves the replay floor, and a
// sweep before the keeps would unlink segments that the live messages of
// other queues still need.
func TestRecoveryDropsOrphansAfterKeeping(t *testing.T) {
	r := &rig{t: t, dir: t.TempDir(), clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	r.open(nil)
	for _, q := range []string{"a", "z"} {
		if _, err := r.e.CreateQueue(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved, so that both queues' bodies share segments; "a" (the
	// orphan to be) comes first, so that its drop happens before "z" is
	// recovered.
	var live []string
	for i := 0; i < 20; i++ {
		r.send("a", i*20, 20)
		live = append(live, r.send("z", i*20, 20)...)
	}
	if err := r.e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	gone := r.drain("z", 100)
	r.e.Close()
	r.open(func(l *disk.Log) store.Store { return noDrop{l} })
	if err := r.e.DeleteQueue(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	r.e.Close()
	r.open(nil) // a is an orphan: dropped here
	r.e.Close()
	r.open(nil)
	defer r.e.Close()
	r.clk.Advance(2 * time.Hour)
	o, err := r.e.Queue("z")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, b := range live {
		if !gone[b] {
			want++
		}
	}
	got := 0
	for {
		vis := 3600
		ms, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: &vis})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if gone[m.Body] {
				t.Fatalf("deleted message back: %.12s", m.Body)
			}
			got++
		}
	}
	if got != want {
		t.Fatalf("queue z: %d of %d live messages came back (store: %+v)", got, want, r.e.StoreStats())
	}
	if _, err := r.e.Queue("a"); err == nil {
		t.Fatal("queue a is back")
	}
	if s := r.e.StoreStats(); s.BadReleases != 0 || s.Unreadable != 0 {
		t.Fatalf("%d bad releases, %d unreadable", s.BadReleases, s.Unreadable)
	}
}
