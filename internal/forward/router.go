package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/liveness"
	"github.com/sluicemq/sluice/internal/store"
)

// Owners names the node that serves a partition: Owner as the forwarding
// node's view of the leases has it (it may lag by seconds after a node
// died), Holder as the lease bucket itself has it (a request to the
// bucket's leader, which answers nothing while it has none).
type Owners interface {
	Owner(p store.PartitionID) (node string, ok bool)
	Holder(ctx context.Context, p store.PartitionID) (node string, ok bool, err error)
}

// Watcher says whether another node answers (a liveness.Tracker): its
// state now, and a channel closed when that changes.
type Watcher interface {
	Watch(node string) (liveness.State, <-chan struct{})
}

// A Router forwards requests to the node that serves their partition, and
// looks for the next one when that node stops answering: the retry loop
// around Do. Its fields are set before its first use.
type Router struct {
	Conn *nats.Conn
	Live Watcher
	// Subject is where node serves the requests of service for
	// partition p.
	Subject func(node, service string, p store.PartitionID) string
	Clock   clock.Clock // nil: the system clock

	counts struct{ forwarded, resent, lost, silent atomic.Uint64 }
}

// Counts are a Router's figures since it started.
type Counts struct {
	Forwarded uint64 // requests forwarded
	Resent    uint64 // sends of a request again, to another node or the same
	// Lost counts requests whose node went away before it answered
	// (ErrOwnerLost): sent again when idempotent.
	Lost uint64
	// Silent counts requests whose node went silent before it answered,
	// or that ended ErrOwnerSilent because their partition's owner was
	// silent or gone and no other served it in time.
	Silent uint64
}

// Counts returns the Router's figures.
func (rt *Router) Counts() Counts {
	return Counts{Forwarded: rt.counts.forwarded.Load(), Resent: rt.counts.resent.Load(),
		Lost: rt.counts.lost.Load(), Silent: rt.counts.silent.Load()}
}

// MinOwnerWait is how long at least a request whose partition's owner is
// silent or gone waits for the lease bucket to name another (that serves
// it) before it ends ErrOwnerSilent (see How.OwnerWait). With the second
// or so the Watcher takes to find a node silent it keeps such a request's
// answer within 2 s (750 ms took up to 2.03 s on a loaded machine).
const MinOwnerWait = 500 * time.Millisecond

// Forward sends a request (its body read already) for service to the node
// that owns partition p, as owners names it, and returns its answer. While
// the partition is between owners (no node holds it, or the node named
// answers that it does not serve it, or is gone), it waits and sends again
// to the holder the lease bucket itself names, until ctx ends: then the
// error wraps ErrNoOwner.
//
// A node that does not answer does not hold a request up for long (the
// Watcher says so): a request is not sent to a node known to be silent or
// gone, and one that waits on a node that turns silent or gone stops
// waiting. An idempotent request (how.Idempotent) is then sent to the
// partition's next owner; any other one ends with ErrOwnerLost (gone) or
// ErrOwnerSilent (silent) rather than waiting out ctx for an answer that
// may never come. While the bucket still names a silent or gone owner, a
// request waits for another (how.OwnerWait, at least MinOwnerWait), then
// ends with an error wrapping ErrOwnerSilent (it was not sent: nothing was
// done).
func (rt *Router) Forward(ctx context.Context, owners Owners, p store.PartitionID, service string, r *http.Request, body []byte, how How) (*Response, error) {
	clk := rt.clock()
	start := clk.Now()
	// giveUpAt is when a request whose owner is silent or gone, found so
	// now, stops waiting for another.
	giveUpAt := func() time.Time {
		now := clk.Now()
		if at := start.Add(how.OwnerWait); at.After(now.Add(MinOwnerWait)) {
			return at
		}
		return now.Add(MinOwnerWait)
	}
	var why error // what the last attempt found, once one failed
	var giveUp time.Time
	backoff := 10 * time.Millisecond
	node, ok := owners.Owner(p)
	rt.counts.forwarded.Add(1)
	for sent := false; ; {
		if ok {
			state, changed := rt.Live.Watch(node)
			if state != liveness.Alive {
				why = fmt.Errorf("%w (node %s is %s, partition %d): %w", ErrOwnerSilent, node, state, p, ErrNoOwner)
				if giveUp.IsZero() {
					giveUp = giveUpAt()
				}
			} else {
				if sent {
					rt.counts.resent.Add(1)
				}
				sent = true
				resp, err := rt.watched(ctx, node, rt.Subject(node, service, p), r, body, changed)
				switch {
				case err == nil && resp.Header.Get(NotOwnerHeader) == "":
					return resp, nil
				case err == nil:
					why = fmt.Errorf("%w: node %s does not serve partition %d", ErrNoOwner, node, p)
				case errors.Is(err, ErrNoOwner):
					why = fmt.Errorf("%w: node %s", err, node) // it is gone, or not started
				case (errors.Is(err, ErrOwnerLost) || errors.Is(err, ErrOwnerSilent)) && how.Idempotent:
					if errors.Is(err, ErrOwnerLost) {
						rt.counts.lost.Add(1)
					}
					why = fmt.Errorf("%w (node %s, partition %d)", err, node, p)
					giveUp = giveUpAt()
				case errors.Is(err, ErrOwnerLost):
					rt.counts.lost.Add(1)
					return nil, fmt.Errorf("%w (node %s, partition %d)", err, node, p)
				case errors.Is(err, ErrOwnerSilent):
					rt.counts.silent.Add(1)
					return nil, fmt.Errorf("%w (node %s, partition %d); the request may or may not have taken effect", err, node, p)
				default:
					return nil, err
				}
			}
		}
		if !giveUp.IsZero() && clk.Now().After(giveUp) {
			if errors.Is(why, ErrOwnerSilent) {
				rt.counts.silent.Add(1)
			}
			return nil, why
		}
		nap := backoff
		if !giveUp.IsZero() {
			nap = min(nap, max(giveUp.Sub(clk.Now()), 0))
		}
		if !clock.Sleep(ctx, clk, nap) {
			if why == nil {
				why = fmt.Errorf("%w: no node holds partition %d", ErrNoOwner, p)
			}
			return nil, why
		}
		backoff = min(2*backoff, 250*time.Millisecond)
		// The view named no node that serves p: ask the bucket, which the
		// view may lag by seconds after a node died. Not past giveUp: a
		// bucket whose leader went silent answers nothing until it has a
		// new one.
		hctx, hcancel := ctx, context.CancelFunc(func() {})
		if !giveUp.IsZero() {
			hctx, hcancel = context.WithDeadline(ctx, giveUp)
		}
		var err error
		if node, ok, err = owners.Holder(hctx, p); err != nil {
			node, ok = owners.Owner(p)
		}
		hcancel()
	}
}

// watched is Do on subject (node's front), except that it stops waiting
// when node's liveness changes (changed closes) to silent (ErrOwnerSilent)
// or gone (ErrOwnerLost): the answer may never come.
func (rt *Router) watched(ctx context.Context, node, subject string, r *http.Request, body []byte, changed <-chan struct{}) (*Response, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		for {
			select {
			case <-actx.Done():
				return
			case <-changed:
			}
			var state liveness.State
			state, changed = rt.Live.Watch(node)
			switch state {
			case liveness.Gone:
				cancel(ErrOwnerLost)
				return
			case liveness.Silent:
				cancel(ErrOwnerSilent)
				return
			}
		}
	}()
	resp, err := Do(actx, rt.Conn, subject, r, body)
	if err != nil && ctx.Err() == nil {
		if cause := context.Cause(actx); errors.Is(cause, ErrOwnerLost) || errors.Is(cause, ErrOwnerSilent) {
			return nil, cause
		}
	}
	return resp, err
}

func (rt *Router) clock() clock.Clock {
	if rt.Clock == nil {
		return clock.Real{}
	}
	return rt.Clock
}
