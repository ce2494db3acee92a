package partition

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// gate is the disk log with one append held back: after arm, the next
// append waits (it reaches the log only as a failure, when the test says).
type gate struct {
	*disk.Log
	mu      sync.Mutex
	armed   bool
	held    *store.Pending
	prev    uint64
	arrived chan struct{}
}

func (g *gate) arm() {
	g.mu.Lock()
	g.armed, g.arrived = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) Append(p store.PartitionID, prev uint64, recs []store.Rec) store.Future {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		return g.Log.Append(p, prev, recs)
	}
	g.armed, g.held, g.prev = false, store.NewPending(), prev
	close(g.arrived)
	return g.held
}

// fail ends the held append as a full disk would.
func (g *gate) fail() {
	g.held.Resolve(nil, 0, &store.AppendError{Err: store.ErrNoSpace, P: 1, Last: g.prev})
}

// compactOwner answers compaction for one owner.
type compactOwner struct{ o *Owner }

func (c compactOwner) Live(_ store.PartitionID, pos uint64, h store.Hint) bool {
	return c.o.BodyAt(pos, h)
}
func (c compactOwner) Moved(_ store.PartitionID, pos uint64, old, new store.Hint) bool {
	return c.o.BodyMoved(pos, old, new)
}

// TestRevertKeepsTheBodyWhereCompactionMovedIt: a receive's write fails
// after compaction moved the message's body; the receive is undone, and
// the message must keep the body's new place (its old one was released
// and its segment unlinked), not the place its copy from before the
// receive says.
func TestRevertKeepsTheBodyWhereCompactionMovedIt(t *testing.T) {
	l, err := disk.Open(vfs.OS{}, t.TempDir(), disk.Options{SegmentBytes: 16 << 10, CheckReleases: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := &gate{Log: l}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := ownerOn(t, g, clk) // replays the (empty) log and creates the queue
	l.Recovered()
	ctx := context.Background()
	pad := strings.Repeat("p", 1000)
	target := "target-" + pad
	bodies := []st.SendInput{{Body: target}}
	for i := range 59 {
		bodies = append(bodies, st.SendInput{Body: fmt.Sprintf("filler-%02d-%s", i, pad)})
	}
	for _, in := range bodies {
		if _, _, err := o.Send(ctx, []st.SendInput{in}, false); err != nil {
			t.Fatal(err)
		}
	}
	// Every filler goes; the target is made visible again: its segment is
	// mostly dead.
	hour := 3600
	var targetHandle string
	for got := 0; got < len(bodies); {
		ms, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: &hour})
		if err != nil || len(ms) == 0 {
			t.Fatalf("receive after %d: %v", got, err)
		}
		for _, m := range ms {
			got++
			if m.Body == target {
				targetHandle = m.ReceiptHandle
				continue
			}
			if errs, err := o.Delete(ctx, []string{m.ReceiptHandle}); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
		}
	}
	if errs, err := o.ChangeVisibility(ctx, []st.VisibilityChange{{ReceiptHandle: targetHandle}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if err := o.Snapshot(); err != nil { // the floor moves past the target's segment
		t.Fatal(err)
	}

	g.arm()
	done := make(chan error, 1)
	go func() {
		_, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 1, VisibilityTimeout: &hour})
		done <- err
	}()
	<-g.arrived // the receive is made, its record not written
	if n := l.Compact(1<<20, compactOwner{o}); n == 0 {
		t.Fatal("compaction moved nothing")
	}
	g.fail()
	if err := <-done; err == nil {
		t.Fatal("a receive whose record failed succeeded")
	}
	ms, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 1, VisibilityTimeout: &hour})
	if err != nil || len(ms) != 1 || ms[0].Body != target {
		t.Fatalf("after the undone receive: %d messages, %v (store: %+v)", len(ms), err, l.Stats())
	}
	if errs, err := o.Delete(ctx, []string{ms[0].ReceiptHandle}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if s := l.Stats(); s.BadReleases != 0 || s.KeptRecords != 0 {
		t.Fatalf("after the last delete: %d bad releases, %d bodies kept", s.BadReleases, s.KeptRecords)
	}
}
