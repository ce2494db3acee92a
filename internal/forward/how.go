package forward

import (
	"errors"
	"time"
)

// How is what a forwarding node may do with a request while it looks for
// the node that serves its partition.
type How struct {
	// Idempotent: doing the request twice does what doing it once does
	// (receives, deletes, reads), so it may be sent again to the next
	// owner when the node it went to stops answering.
	Idempotent bool
	// OwnerWait is how long from the call the request may wait for a
	// node that serves its partition when the owner the leases name is
	// silent or gone, before it is answered with an error a client
	// retries; at least 500 ms (MinOwnerWait) from when it found the owner silent or
	// gone. A long poll may wait its wait time (its client waits that
	// long anyway), and is served by the new owner if there is one by
	// then.
	OwnerWait time.Duration
}

// NotOwnerHeader marks the answer of a node to a request forwarded to it
// for a partition it does not serve: nothing was done, and the forwarding
// node sends the request where the partition is now.
const NotOwnerHeader = "Sluice-Not-Owner"

var (
	// ErrOwnerLost: the node a request was forwarded to stopped serving
	// requests (it died, or this node lost its routes to it) before it
	// answered. The request may or may not have taken effect.
	ErrOwnerLost = errors.New("sluice: the node serving the request went away before it answered; the request may or may not have taken effect")
	// ErrOwnerSilent: the node that owns the request's queue does not
	// answer (its machine or its network is down, or it is cut off from
	// this node) and no other node serves the queue yet. When the request
	// had been sent to it, it may or may not have taken effect.
	ErrOwnerSilent = errors.New("sluice: the node that owns the queue does not answer")
	// ErrCutOff: this node cannot reach any other node of its cluster, so
	// it serves no queue (it could not write, nor know who owns what)
	// until it can again.
	ErrCutOff = errors.New("sluice: this node cannot reach the other nodes of its cluster")
)
