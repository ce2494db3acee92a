// Package liveness tells whether the other nodes of a cluster answer.
//
// A node whose machine dies, or whose network does, closes no
// connection: NATS keeps its routes and its subscriptions for as long as
// its own pings allow, and a request sent to it meets silence, not a
// refusal. A Tracker pings every other member (and every node a caller
// asked about) every Every: a node that answered no ping for SilentAfter
// is Silent, one that nobody serves (the ping found no listener, twice in
// a row) is Gone. Callers stop waiting on a node that turns Silent or
// Gone (Watch), and a node that finds every other member Silent or Gone
// for CutOffAfter is cut off (Isolated).
//
// The package does not know what a ping is: Config.Ping sends one.
package liveness

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ErrNobody is what Config.Ping returns when nobody serves the node (its
// process stopped, or the routes to it are down and known to be).
var ErrNobody = errors.New("liveness: nobody serves the node")

// State says whether a node answers.
type State uint8

const (
	Alive  State = iota // answers pings, or has not been pinged long enough to say
	Silent              // answered no ping for SilentAfter: its machine or network is down
	Gone                // nobody serves it: it stopped, or this node's routes to it are down
)

func (s State) String() string {
	return [...]string{"alive", "silent", "gone"}[s]
}

// Config is a Tracker's.
type Config struct {
	// Self is this node's name: never pinged.
	Self string
	// Members lists the cluster's members as this node sees them now
	// (this one may be among them); nil before it knows.
	Members func() []string
	// Active reports whether to ping now (the node serves what is
	// pinged); nil: always.
	Active func() bool
	// Ping pings node once within ctx: nil when it answered, ErrNobody
	// (wrapped) when nobody serves it, any other error when no answer
	// came.
	Ping func(ctx context.Context, node string) error
	// Every is how often each node is pinged; a ping not answered within
	// it counts as unanswered. Default 250 ms.
	Every time.Duration
	// SilentAfter is how long a node answers no ping before it is Silent.
	// Default 1 s.
	SilentAfter time.Duration
	// CutOffAfter is how long every other member must have answered no
	// ping before this node is Isolated: longer than SilentAfter, so that
	// a stall of this node's own (a loaded machine) does not cut it off.
	// Default 3 s.
	CutOffAfter time.Duration
	// ForgetAfter is how long a node that is no member, and that no
	// caller asked about, is still pinged. Default 30 s.
	ForgetAfter time.Duration
	// Logger receives the changes of state. Default: discarded.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Every <= 0 {
		c.Every = 250 * time.Millisecond
	}
	if c.SilentAfter <= 0 {
		c.SilentAfter = time.Second
	}
	if c.CutOffAfter <= 0 {
		c.CutOffAfter = 3 * time.Second
	}
	if c.ForgetAfter <= 0 {
		c.ForgetAfter = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Active == nil {
		c.Active = func() bool { return true }
	}
	if c.Members == nil {
		c.Members = func() []string { return nil }
	}
	return c
}

// Tracker pings the other nodes and keeps what it found.
type Tracker struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	peers map[string]*peer // by node name
	since time.Time        // tracking began: no node is Silent before SilentAfter
}

// peer is one node being pinged; its fields are guarded by Tracker.mu.
type peer struct {
	node     string
	state    State
	answered time.Time     // the last ping answered (or when pinging began)
	missed   int           // pings in a row that found nobody
	changed  chan struct{} // closed when the state changes; replaced then
	member   bool          // in the members' view at the last look
	wanted   time.Time     // a caller last asked about it
	stop     chan struct{} // closed when it is no longer pinged
}

// New returns a Tracker; Start starts its pings.
func New(cfg Config) *Tracker {
	t := &Tracker{cfg: cfg.withDefaults(), peers: map[string]*peer{}, since: time.Now()}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// Start keeps the members pinged until Close.
func (t *Tracker) Start() {
	t.wg.Go(func() {
		tick := time.NewTicker(t.cfg.Every)
		defer tick.Stop()
		for {
			t.refresh()
			select {
			case <-t.ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// Close stops every ping and waits for them.
func (t *Tracker) Close() {
	t.cancel()
	t.wg.Wait()
}

// refresh pings the members (others than this node), and stops pinging
// the nodes that are neither members nor wanted.
func (t *Tracker) refresh() {
	if !t.cfg.Active() {
		return
	}
	members := t.cfg.Members()
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, node := range members {
		if node != t.cfg.Self {
			t.peerLocked(node).member = true
		}
	}
	for name, p := range t.peers {
		p.member = slices.Contains(members, name)
		if !p.member && now.Sub(p.wanted) > t.cfg.ForgetAfter {
			close(p.stop)
			delete(t.peers, name)
		}
	}
}

// peerLocked is node's peer, pinged from now on if it was not.
func (t *Tracker) peerLocked(node string) *peer {
	p := t.peers[node]
	if p == nil {
		p = &peer{node: node, answered: time.Now(), changed: make(chan struct{}), stop: make(chan struct{})}
		t.peers[node] = p
		if t.ctx.Err() == nil {
			t.wg.Go(func() { t.ping(p) })
		}
	}
	return p
}

// Watch is what is known of node now, and a channel closed when that
// changes; node is pinged from now on if it was not.
func (t *Tracker) Watch(node string) (State, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peerLocked(node)
	p.wanted = time.Now()
	return p.state, p.changed
}

// State is what is known of node now (Alive when it is not pinged).
func (t *Tracker) State(node string) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[node]; p != nil {
		return p.state
	}
	return Alive
}

// Isolated reports whether this node is cut off from the others: there
// are other members, and none of them has answered a ping for
// CutOffAfter (each is Silent or Gone).
func (t *Tracker) Isolated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.peers {
		if !p.member {
			continue
		}
		if p.state == Alive || time.Since(p.answered) < t.cfg.CutOffAfter {
			return false
		}
		n++
	}
	return n > 0
}

// ping pings p every Every until it is no longer wanted.
func (t *Tracker) ping(p *peer) {
	tick := time.NewTicker(t.cfg.Every)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.Every)
		err := t.cfg.Ping(ctx, p.node)
		cancel()
		if t.ctx.Err() != nil {
			return
		}
		t.note(p, err)
		select {
		case <-t.ctx.Done():
			return
		case <-p.stop:
			return
		case <-tick.C:
		}
	}
}

// note records a ping's outcome and moves p's state.
func (t *Tracker) note(p *peer, err error) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	next := p.state
	switch {
	case err == nil:
		p.answered, p.missed, next = now, 0, Alive
	case errors.Is(err, ErrNobody):
		if p.missed++; p.missed >= 2 {
			next = Gone // twice: a node that stops answers what it holds in between
		}
	default:
		// No answer in time: busy, or lost. Silent once long enough.
		p.missed = 0
		if now.Sub(p.answered) >= t.cfg.SilentAfter && now.Sub(t.since) >= t.cfg.SilentAfter {
			next = Silent
		}
	}
	if next == p.state {
		return
	}
	t.cfg.Logger.Info("a node's liveness changed", "peer", p.node, "from", p.state, "to", next,
		"last_answer", now.Sub(p.answered).Round(time.Millisecond))
	p.state = next
	close(p.changed)
	p.changed = make(chan struct{})
}
