package sqs

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"

	st "github.com/sluicemq/sluice/sluicetype"
)

// DefaultMaxInflightBytes is the default bound on request bodies held at
// once (ServerConfig.MaxInflightBytes): room for nine requests of the
// largest size, or hundreds of ordinary ones.
const DefaultMaxInflightBytes = 48 << 20

// maxQueryParams bounds the parameters of a Query request. The largest
// valid request (a batch of ten with ten attributes each) has about 500.
const maxQueryParams = 4096

// admitWait is how long a request waits for room in the budget before it
// is refused as busy: long enough to ride out a burst, short enough that
// the client's retry (with back-off) does the waiting.
const admitWait = 2 * time.Second

// budget bounds the bytes of request bodies held by requests in flight, so
// no number of parallel large requests can take the server's memory.
type budget struct {
	sem *semaphore.Weighted
	max int64
}

func newBudget(max int64) *budget {
	return &budget{sem: semaphore.NewWeighted(max), max: max}
}

// grant is one request's share of the budget; done gives it back.
type grant struct {
	b *budget
	n int64
}

// admit reserves room for a body of the declared length (-1: unknown; the
// grant then starts small and grows as the body arrives).
func (b *budget) admit(ctx context.Context, declared int64) (*grant, error) {
	n := declared + 1 // the read that sees the end
	if declared < 0 {
		n = 64 << 10
	}
	ctx, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, b.busy()
	}
	return &grant{b: b, n: n}, nil
}

// grow raises the grant to n bytes, refusing at once when the budget has
// no room (a body of unknown length that turns out large).
func (g *grant) grow(n int64) error {
	if g == nil || n <= g.n {
		return nil
	}
	if !g.b.sem.TryAcquire(n - g.n) {
		return g.b.busy()
	}
	g.n = n
	return nil
}

// done releases the grant; a nil grant (a request refused before it was
// admitted) is fine.
func (g *grant) done() {
	if g != nil && g.n > 0 {
		g.b.sem.Release(g.n)
		g.n = 0
	}
}

func (b *budget) busy() error {
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
		Message: fmt.Sprintf("The server is holding as many request bodies as it allows (%d MiB in flight). Retry shortly.", b.max>>20)}
}
