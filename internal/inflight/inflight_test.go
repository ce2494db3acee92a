package inflight

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
)

// Appends settle in submission order, none before the one ahead of it;
// the first failure of an epoch is told apart from the failures behind it.
func TestSettleInOrder(t *testing.T) {
	var ws Writes[string]
	a, b, c := store.NewPending(), store.NewPending(), store.NewPending()
	ws.Add(&Write[string]{F: a, Prev: 0, Of: "a"})
	ws.Add(&Write[string]{F: b, Prev: 1, Of: "b"})
	ws.Add(&Write[string]{F: c, Prev: 2, Of: "c"})
	var got []string
	settle := func() {
		ws.Settle(func(w *Write[string]) { got = append(got, w.Of+" durable") },
			func(w *Write[string], err error, first bool) {
				got = append(got, w.Of+map[bool]string{true: " failed first", false: " failed"}[first])
			})
	}
	b.Resolve(nil, 2, nil)
	settle()
	if len(got) != 0 || ws.Len() != 3 {
		t.Fatalf("settled past an append under way: %v (%d left)", got, ws.Len())
	}
	a.Resolve(nil, 1, nil)
	settle()
	boom := errors.New("boom")
	c.Resolve(nil, 0, boom)
	ws.Add(&Write[string]{F: store.Failed(boom), Prev: 3, Of: "d"})
	settle()
	ws.Add(&Write[string]{F: store.Failed(boom), Prev: 2, Of: "e"}) // after the reset: a new epoch
	settle()
	want := []string{"a durable", "b durable", "c failed first", "d failed", "e failed first"}
	if !slices.Equal(got, want) || ws.Len() != 0 || ws.Newest() != nil {
		t.Fatalf("settled %v, want %v (%d left)", got, want, ws.Len())
	}
	if Reset(boom, 7) != 7 {
		t.Fatal("a failure without the store's end resets to where the append started")
	}
}

// WaitAll lets the lock go while appends finish and returns once none is
// in flight.
func TestWaitAll(t *testing.T) {
	var mu sync.Mutex
	var ws Writes[int]
	ps := []*store.Pending{store.NewPending(), store.NewPending()}
	mu.Lock()
	for i, p := range ps {
		ws.Add(&Write[int]{F: p, Prev: uint64(i), Of: i})
	}
	go func() {
		mu.Lock() // WaitAll let it go
		for i, p := range ps {
			p.Resolve(nil, uint64(i+1), nil)
		}
		mu.Unlock()
	}()
	n := 0
	ws.WaitAll(&mu, func() { ws.Settle(func(*Write[int]) { n++ }, func(*Write[int], error, bool) { t.Error("failed") }) })
	mu.Unlock()
	if n != 2 || ws.Len() != 0 {
		t.Fatalf("%d settled, %d left", n, ws.Len())
	}
}
