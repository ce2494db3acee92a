package sluice

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/forward"
)

// Liveness of the other nodes, as this one sees them: whether each still
// answers. A node whose machine dies, or whose network does, closes no
// connection: NATS keeps its routes and its subscriptions for as long as
// its own pings allow, and a request sent to it meets silence, not a
// refusal. So every node pings the nodes it forwards requests to, and the
// other members, every pingEvery (forward.Ping on the node's front, which
// its subscription answers without a handler): a node that answered no
// ping for silentAfter is silent, one that nobody serves (NATS answers no
// responders, twice in a row) is gone. A request forwarded to a node that
// is silent or gone stops waiting for it (Forward), and a node that finds
// every other member silent or gone for cutOffAfter is cut off (CutOff)
// and stops answering for queues.
const (
	// pingEvery is how often each node is pinged; a ping not answered
	// within it counts as unanswered.
	pingEvery = 250 * time.Millisecond
	// silentAfter is how long a node answers no ping before it is silent.
	// Under it, a node is busy, not lost: its front answers pings from its
	// subscription's delivery loop, which no request holds up.
	silentAfter = time.Second
	// ownerWait is how long a request whose partition's owner is silent or
	// gone waits for the lease bucket to name another (that serves it)
	// before it is answered ServiceUnavailable.
	ownerWait = 750 * time.Millisecond
	// cutOffAfter is how long every other member must have answered no
	// ping before this node counts itself cut off: longer than
	// silentAfter, so that a stall of this node's own (a loaded machine)
	// does not make it refuse everything.
	cutOffAfter = 3 * time.Second
	// forgetAfter is how long a node that is no member, and that no
	// request waited on, is still pinged.
	forgetAfter = 30 * time.Second
	// livenessService is the service whose front is pinged.
	livenessService = "sqs"
)

// peerState says whether a node answers.
type peerState uint8

const (
	peerAlive  peerState = iota // answers pings, or has not been pinged long enough to say
	peerSilent                  // answered no ping for silentAfter: its machine or network is down
	peerGone                    // nobody serves its front: it stopped, or this node's routes to it are down
)

func (s peerState) String() string {
	return [...]string{"alive", "silent", "gone"}[s]
}

// liveness pings the other nodes and keeps what it found.
type liveness struct {
	c      *clusterNode
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	peers map[string]*peer // by node name
	since time.Time        // tracking began: no node is silent before silentAfter
}

// peer is one node being pinged; its fields are guarded by liveness.mu.
type peer struct {
	node     string
	state    peerState
	answered time.Time     // the last ping answered (or when pinging began)
	missed   int           // pings in a row that nobody served
	changed  chan struct{} // closed when the state changes; replaced then
	member   bool          // in the members' view at the last look
	wanted   time.Time     // a request last asked about it
	stop     chan struct{} // closed when it is no longer pinged
}

func newLiveness(c *clusterNode) *liveness {
	l := &liveness{c: c, peers: map[string]*peer{}, since: time.Now()}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// start keeps the set of members pinged until close.
func (l *liveness) start() {
	l.wg.Go(func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			l.refresh()
			select {
			case <-l.ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// close stops every ping and waits for them.
func (l *liveness) close() {
	l.cancel()
	l.wg.Wait()
}

// refresh pings the members of the view (others than this node), and
// stops pinging the nodes that are neither members nor wanted.
func (l *liveness) refresh() {
	m := l.c.m.Load()
	if m == nil || !l.c.serves(livenessService) {
		return
	}
	members := m.Members()
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, node := range members {
		if node != l.c.cfg.Node {
			l.peerLocked(node).member = true
		}
	}
	for name, p := range l.peers {
		p.member = slices.Contains(members, name)
		if !p.member && now.Sub(p.wanted) > forgetAfter {
			close(p.stop)
			delete(l.peers, name)
		}
	}
}

// peerLocked is node's peer, pinged from now on if it was not.
func (l *liveness) peerLocked(node string) *peer {
	p := l.peers[node]
	if p == nil {
		p = &peer{node: node, answered: time.Now(), changed: make(chan struct{}), stop: make(chan struct{})}
		l.peers[node] = p
		if l.ctx.Err() == nil {
			l.wg.Go(func() { l.ping(p) })
		}
	}
	return p
}

// watch is what is known of node now, and a channel closed when that
// changes; node is pinged from now on if it was not.
func (l *liveness) watch(node string) (peerState, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peerLocked(node)
	p.wanted = time.Now()
	return p.state, p.changed
}

// state is what is known of node now (alive when it is not pinged).
func (l *liveness) state(node string) peerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.peers[node]; p != nil {
		return p.state
	}
	return peerAlive
}

// isolated reports whether this node is cut off from the others: there
// are other members, and none of them has answered a ping for
// cutOffAfter (each is silent or gone).
func (l *liveness) isolated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.peers {
		if !p.member {
			continue
		}
		if p.state == peerAlive || time.Since(p.answered) < cutOffAfter {
			return false
		}
		n++
	}
	return n > 0
}

// ping pings p every pingEvery until it is no longer wanted.
func (l *liveness) ping(p *peer) {
	subject := l.c.nodeSubject(p.node, livenessService, "0")
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(l.ctx, pingEvery)
		err := forward.Ping(ctx, l.c.nc, subject)
		cancel()
		if l.ctx.Err() != nil {
			return
		}
		l.note(p, err)
		select {
		case <-l.ctx.Done():
			return
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// note records a ping's outcome and moves p's state.
func (l *liveness) note(p *peer, err error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	next := p.state
	switch {
	case err == nil, errors.Is(err, forward.ErrBadReply):
		// Answered (a node from before pings answers them as malformed
		// requests: it is there all the same).
		p.answered, p.missed, next = now, 0, peerAlive
	case errors.Is(err, forward.ErrNoOwner):
		if p.missed++; p.missed >= 2 {
			next = peerGone // twice: a node that stops answers what it holds in between
		}
	default:
		// No answer in time: busy, or lost. Silent once long enough.
		p.missed = 0
		if now.Sub(p.answered) >= silentAfter && now.Sub(l.since) >= silentAfter {
			next = peerSilent
		}
	}
	if next == p.state {
		return
	}
	l.c.log.Info("a node's liveness changed", "peer", p.node, "from", p.state, "to", next,
		"last_answer", now.Sub(p.answered).Round(time.Millisecond))
	p.state = next
	close(p.changed)
	p.changed = make(chan struct{})
}
