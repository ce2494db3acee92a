package intake

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	st "github.com/sluicemq/sluice/sluicetype"
)

// busy reports whether err is the budget's refusal: a retryable
// ServiceUnavailable.
func busy(err error) bool {
	var e *st.Error
	return errors.As(err, &e) && e.Code == st.CodeServiceUnavailable && e.RetryAfter == time.Second
}

// TestBudget: a grant holds its room until Done; a request that finds no
// room waits admitWait for it, then is refused as busy; one that waits
// gets in as soon as room is freed; a growing grant is refused at once
// when there is no room; Done is safe on nil and twice.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 1 << 20
		b := NewBudget(max)
		all, err := b.admit(t.Context(), max-1) // +1: the read that sees the end
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := b.admit(t.Context(), 0); !busy(err) {
			t.Fatalf("admitted with no room: %v", err)
		}
		if waited := time.Since(start); waited != admitWait {
			t.Fatalf("refused after %v, want %v", waited, admitWait)
		}

		admitted := make(chan *Grant)
		go func() {
			g, err := b.admit(t.Context(), 99)
			if err != nil {
				t.Error(err)
			}
			admitted <- g
		}()
		synctest.Wait() // the request waits for room
		all.Done()
		all.Done()
		g := <-admitted
		if g.n != 100 {
			t.Fatalf("granted %d bytes, want 100", g.n)
		}

		// A body of unknown length starts small and grows while there is room.
		u, err := b.admit(t.Context(), -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.grow(max - 100); err != nil {
			t.Fatal(err)
		}
		if err := u.grow(max - 99); !busy(err) {
			t.Fatalf("grew past the budget: %v", err)
		}
		if err := u.grow(64); err != nil || u.n != max-100 {
			t.Fatalf("a smaller size: %v, %d bytes held", err, u.n)
		}
		u.Done()
		g.Done()
		var none *Grant
		none.Done()
		if err := none.grow(1 << 30); err != nil {
			t.Fatalf("a nil grant (no budget) grows freely: %v", err)
		}
		if !b.sem.TryAcquire(max) {
			t.Fatal("room not given back")
		}
		b.sem.Release(max)

		// A body of the budget's whole size gets in (it asks for no more
		// than the budget, though the read that sees the end wants a byte
		// over).
		whole, err := b.admit(t.Context(), max)
		if err != nil {
			t.Fatalf("a body the size of the whole budget: %v", err)
		}
		whole.Done()
	})
}
