// Package intake owns what the SQS port admits before an action runs: the
// bound on one request body (MaxRequestBytes), the bound on the bodies
// held at once by every request in flight (a Budget, and each request's
// Grant of it), and reading a body within its grant. Its refusals are SQS
// errors (RequestEntityTooLarge, a retryable ServiceUnavailable,
// MalformedInput); the server answers them in the request's protocol.
//
// It must not look inside a body: authentication (whose header part is
// checked before a body is admitted) and parsing, with its own bounds,
// are the server's and wire's.
package intake

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"

	st "github.com/sluicemq/sluice/sluicetype"
)

// DefaultMaxInflightBytes is the default bound on request bodies held at
// once (the SQS server's MaxInflightBytes): room for nine requests of the
// largest size, or hundreds of ordinary ones.
const DefaultMaxInflightBytes = 48 << 20

// admitWait is how long a request waits for room in the budget before it
// is refused as busy: long enough to ride out a burst, short enough that
// the client's retry (with back-off) does the waiting.
const admitWait = 2 * time.Second

// Budget bounds the bytes of request bodies held by requests in flight, so
// no number of parallel large requests can take the server's memory.
type Budget struct {
	sem *semaphore.Weighted
	max int64
}

// NewBudget returns a budget of max bytes (at least MaxRequestBytes, or
// the largest body can never be admitted).
func NewBudget(max int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(max), max: max}
}

// Grant is one request's share of the budget; Done gives it back.
type Grant struct {
	b *Budget
	n int64
}

// admit reserves room for a body of the declared length (-1: unknown; the
// grant then starts small and grows as the body arrives).
func (b *Budget) admit(ctx context.Context, declared int64) (*Grant, error) {
	n := declared + 1 // the read that sees the end
	if declared < 0 {
		n = 64 << 10
	}
	// Never more than the whole budget: a body of the largest size, with a
	// budget of exactly that, must get in once the budget is free.
	n = min(n, b.max)
	if b.sem.TryAcquire(n) {
		// Room, and no one waiting before it (TryAcquire keeps the
		// semaphore's order): the usual case, without a timer and a
		// context for the wait.
		return &Grant{b: b, n: n}, nil
	}
	wait, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	if err := b.sem.Acquire(wait, n); err != nil {
		if ctx.Err() != nil {
			// Not the budget: the request ended while it waited (the
			// client went away, or the server is shutting down).
			return nil, &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
				Message: "The request ended before its body was read (the connection closed, or the server is shutting down). Retry."}
		}
		return nil, b.busy()
	}
	return &Grant{b: b, n: n}, nil
}

// grow raises the grant to n bytes, refusing at once when the budget has
// no room (a body of unknown length that turns out large).
func (g *Grant) grow(n int64) error {
	if g == nil || n <= g.n {
		return nil
	}
	if !g.b.sem.TryAcquire(n - g.n) {
		return g.b.busy()
	}
	g.n = n
	return nil
}

// Done releases the grant; a nil grant (a request refused before it was
// admitted) is fine, and so is a second Done.
func (g *Grant) Done() {
	if g != nil && g.n > 0 {
		g.b.sem.Release(g.n)
		g.n = 0
	}
}

func (b *Budget) busy() error {
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
		Message: fmt.Sprintf("The server is holding as many request bodies as it allows (%d MiB in flight). Retry shortly.", b.max>>20)}
}
