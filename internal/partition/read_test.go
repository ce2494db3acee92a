package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// flakyReads is a store whose reads fail with err while it is set.
type flakyReads struct {
	store.Store
	mu  sync.Mutex
	err error
}

func (f *flakyReads) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *flakyReads) Read(p store.PartitionID, pos uint64, h store.Hint) ([]byte, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.Store.Read(p, pos, h)
}

// A body the store cannot read now (a replicated store between leaders, a
// timeout) is not served and not dropped: the message is visible again at
// once and delivered once the store reads again. Only a body the store
// says is gone or damaged (ErrNotFound, ErrCorrupt) is dropped.
func TestUnreadableNowIsKept(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &flakyReads{Store: store.NewMemory()}
	o := ownerOn(t, s, clk)
	for _, b := range []string{"a", "b"} {
		if _, _, err := o.Send(context.Background(), []st.SendInput{{Body: b}}, false); err != nil {
			t.Fatal(err)
		}
	}
	s.set(errors.New("nats: timeout"))
	if got := receiveBodies(t, o); len(got) != 0 {
		t.Fatalf("received %q while the store cannot read", got)
	}
	s.set(nil)
	if got := receiveBodies(t, o); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("once the store reads again, received %q, want [a b] at once", got)
	}
	if n := o.Stats(func(string) string { return "" }).Unreadable; n != 0 {
		t.Fatalf("%d messages counted unreadable", n)
	}
	// Gone for good: dropped and counted.
	clk.Advance(time.Minute)
	s.set(fmt.Errorf("%w: purged", store.ErrNotFound))
	if got := receiveBodies(t, o); len(got) != 0 {
		t.Fatalf("received %q of bodies that are gone", got)
	}
	s.set(nil)
	clk.Advance(time.Hour)
	if got := receiveBodies(t, o); len(got) != 0 {
		t.Fatalf("received %q: messages whose bodies are gone came back", got)
	}
	if n := o.Stats(func(string) string { return "" }).Unreadable; n != 2 {
		t.Fatalf("%d messages counted unreadable, want 2", n)
	}
}
