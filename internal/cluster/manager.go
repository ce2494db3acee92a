package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
)

// Host is what the manager drives: this node's engine. The manager calls
// it from its own goroutines, one call at a time for a given partition,
// and never while it holds its own lock, so the Host may call back into
// Claim, Lost, Owned and NotifyCatalog.
type Host interface {
	// Partitions lists the partitions that need an owner: the catalog (0)
	// and every queue's, as this node knows them.
	Partitions() []store.PartitionID
	// Acquire makes this node p's owner under term (the lease's revision):
	// it replays p, writes its epoch record, and serves. An error means it
	// could not; the manager then gives the lease up.
	Acquire(p store.PartitionID, term uint64) error
	// Release stops serving p (the lease is lost, or handed over); it
	// writes and releases nothing.
	Release(p store.PartitionID)
	// CatalogChanged tells that the catalog changed on another node
	// (refresh the view). Also called every few seconds without a change,
	// in case a notification was missed.
	CatalogChanged()
}

// Errors.
var (
	// ErrDuplicateNode: another live node uses this node's name.
	ErrDuplicateNode = errors.New("cluster: another live node uses this node's name")
	// ErrHeld: Claim found the partition's lease held.
	ErrHeld = errors.New("cluster: the partition's lease is held")
	// ErrClosed: the manager was closed.
	ErrClosed = errors.New("cluster: manager closed")
)

const (
	// markerTTL is how long the bucket keeps the marker an expired key
	// leaves (LimitMarkerTTL): long enough for every watcher to see it.
	markerTTL = time.Minute
	// catalogRefresh is how often Host.CatalogChanged is called without a
	// notification.
	catalogRefresh = 5 * time.Second
	// maxBackoff bounds the wait before a partition whose Acquire failed
	// is tried again here.
	maxBackoff = 30 * time.Second
	// maxHold bounds how long a partition is kept from a preferred node
	// that did not take it when it was handed over.
	maxHold = 5 * time.Minute
	// handoversPerTick bounds the partitions handed over in one tick, so
	// that a node that joins is not flooded with replays.
	handoversPerTick = 4
	// releaseParallel bounds the lease deletions in flight at Close.
	releaseParallel = 16
	// acquireParallel bounds the takeovers (lease, then Host.Acquire) that
	// run at once on a node: a lost node's partitions are taken side by
	// side, each mostly waiting for its stream to elect a leader.
	acquireParallel = 64
	// bucketAttempt bounds one attempt to create the bucket.
	bucketAttempt = 5 * time.Second
)

// Manager keeps this node's leases and membership and drives its Host.
// Its methods are safe for concurrent use.
type Manager struct {
	cfg      Config
	host     Host
	log      *slog.Logger
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	subjects string // "$KV.<bucket>.", where renewals are published
	catalog  string // the catalog notification subject
	instance string // this manager's random id
	value    []byte // the holder value of every key this manager holds

	renewEvery time.Duration // LeaseTTL/3
	renewTick  time.Duration // how often renewals are looked at
	opTimeout  time.Duration // bounds one bucket operation
	acquireAt  time.Time     // no partition is taken before (Start + RankStep)

	ctx        context.Context // ends at Close or Abandon
	stop       context.CancelFunc
	kick       chan struct{} // wakes the reconcile loop
	catKick    chan struct{} // wakes the catalog loop
	watchReady chan struct{} // closed once the watcher delivered the bucket
	readyOnce  sync.Once
	sub        *nats.Subscription
	reads      singleflight.Group // Holder's reads of the bucket, by key
	loops      sync.WaitGroup     // the manager's goroutines
	renews     sync.WaitGroup     // renewals in flight; Add only on the renew loop
	stopOnce   sync.Once

	mu       sync.Mutex
	closed   bool
	view     view
	node     *lease // this node's membership
	leases   map[store.PartitionID]*lease
	claiming map[store.PartitionID]struct{}
	counts   counts
}

type counts struct {
	failovers, handovers, acquireFailures, renewFailures, retaken uint64
}

// Status is the cluster as this node sees it.
type Status struct {
	// Node is this node's name.
	Node string `json:"node"`
	// Members are the live nodes (this one included), sorted.
	Members []string `json:"members"`
	// Owners is each leased partition's owner, as the bucket shows it,
	// except that this node is named only for the leases it holds: a key
	// of its own that it lost, forgot or is giving up (it does not serve
	// the partition) shows no owner until the bucket shows the next one.
	Owners map[store.PartitionID]string `json:"owners"`
	// Owned are the partitions this node holds, sorted.
	Owned []store.PartitionID `json:"owned"`
	// Failovers counts the partitions this node took whose previous lease
	// expired instead of being released.
	Failovers uint64 `json:"failovers"`
	// Handovers counts the partitions this node handed over to their
	// preferred node.
	Handovers uint64 `json:"handovers"`
	// AcquireFailures counts Host.Acquire calls that failed.
	AcquireFailures uint64 `json:"acquire_failures"`
	// RenewFailures counts renewals that failed without being refused
	// (timeouts, no leader); the lease was kept.
	RenewFailures uint64 `json:"renew_failures"`
	// Retaken counts leases of this node that expired while the bucket
	// could not take their renewals, and that it took again (serving on).
	Retaken uint64 `json:"leases_retaken"`
}

// Start creates the lease bucket if needed, joins the cluster as
// cfg.Node, and starts driving h. ctx bounds only the start: the bucket
// is created while JetStream has no meta leader yet, retrying until ctx
// ends. If cfg.Node's membership key is held by another instance, Start
// waits for it to expire (a crashed predecessor) and fails with
// ErrDuplicateNode if it is renewed instead (a live node with the same
// name). The caller must Close (or Abandon) the manager.
func Start(ctx context.Context, cfg Config, h Host) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: no host", ErrConfig)
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	bucket := bucketName(cfg.Cluster)
	m := &Manager{
		cfg:        cfg,
		host:       h,
		log:        cfg.Logger.With("node", cfg.Node),
		js:         js,
		subjects:   "$KV." + bucket + ".",
		catalog:    catalogSubject(cfg.Cluster),
		instance:   rand.Text(),
		renewEvery: cfg.LeaseTTL / 3,
		kick:       make(chan struct{}, 1),
		catKick:    make(chan struct{}, 1),
		watchReady: make(chan struct{}),
		view:       newView(),
		leases:     map[store.PartitionID]*lease{},
		claiming:   map[store.PartitionID]struct{}{},
	}
	m.renewTick = m.renewEvery / 4
	m.opTimeout = max(m.renewEvery, time.Second)
	m.value, _ = json.Marshal(holder{Node: cfg.Node, Instance: m.instance})

	if m.kv, err = m.openBucket(ctx, bucket); err != nil {
		return nil, err
	}
	if err := m.join(ctx); err != nil {
		return nil, err
	}
	m.ctx, m.stop = context.WithCancel(context.Background())
	m.loops.Add(1)
	go m.watchLoop()
	select {
	case <-m.watchReady:
	case <-ctx.Done():
		m.abort()
		return nil, fmt.Errorf("cluster: watching the lease bucket: %w", ctx.Err())
	}
	if m.sub, err = cfg.Conn.Subscribe(m.catalog, m.onCatalog); err != nil {
		m.abort()
		return nil, fmt.Errorf("cluster: subscribing to %s: %w", m.catalog, err)
	}
	m.acquireAt = time.Now().Add(cfg.RankStep)
	m.loops.Add(4)
	go m.reconcileLoop()
	go m.staleLoop()
	go m.renewLoop()
	go m.catalogLoop()
	m.log.Info("joined the cluster", "cluster", cfg.Cluster, "bucket", bucket, "instance", m.instance,
		"lease_ttl", cfg.LeaseTTL)
	return m, nil
}

// abort undoes a Start that failed after joining.
func (m *Manager) abort() {
	m.stop()
	m.loops.Wait()
	m.mu.Lock()
	nodeKey, nodeRev := m.node.key, m.node.rev
	m.mu.Unlock()
	m.deleteKey(nodeKey, nodeRev)
}

// openBucket creates the lease bucket or updates its config, retrying
// while JetStream cannot (no meta leader yet) until ctx ends.
func (m *Manager) openBucket(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:         bucket,
		Description:    "sluice: members and partition leases of cluster " + m.cfg.Cluster,
		History:        1,
		Replicas:       m.cfg.Replicas,
		Storage:        jetstream.FileStorage,
		LimitMarkerTTL: markerTTL,
	}
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, bucketAttempt)
		kv, err := m.js.CreateOrUpdateKeyValue(actx, cfg)
		cancel()
		if err == nil {
			return kv, nil
		}
		if ctx.Err() != nil || !transient(err) {
			return nil, fmt.Errorf("cluster: creating lease bucket %q: %w", bucket, err)
		}
		if attempt%10 == 1 {
			m.log.Warn("JetStream cannot create the lease bucket yet; retrying", "bucket", bucket, "attempt", attempt, "err", err)
		}
		if !clock.Sleep(ctx, clock.Real{}, wait) {
			return nil, fmt.Errorf("cluster: creating lease bucket %q: %w (last error: %w)", bucket, ctx.Err(), err)
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// join creates this node's membership key. A key held by another
// instance is waited out if it expires, and is a duplicate node if it is
// renewed.
func (m *Manager) join(ctx context.Context) error {
	key := nodeKey(m.cfg.Node)
	var seenRev uint64
	var seenAt time.Time
	for {
		sent := time.Now()
		rev, err := m.create(ctx, key)
		switch {
		case err == nil:
			m.node = m.newLease(0, key, rev, sent)
			m.node.state = owned
			return nil
		case !conflict(err):
			if ctx.Err() != nil || !transient(err) {
				return fmt.Errorf("cluster: joining as %q: %w", m.cfg.Node, err)
			}
			m.log.Warn("joining the cluster failed; retrying", "err", err)
		default:
			gctx, cancel := context.WithTimeout(ctx, m.opTimeout)
			e, err := m.kv.Get(gctx, key)
			cancel()
			if err != nil {
				break // expired meanwhile, or a hiccup: create again
			}
			other, _ := decodeHolder(e.Value())
			now := time.Now()
			switch {
			case seenRev == 0:
				seenRev, seenAt = e.Revision(), now
				m.log.Info("this node's membership is held by another instance; waiting for it to expire or be renewed",
					"instance", other.Instance, "revision", e.Revision())
			case e.Revision() != seenRev:
				return fmt.Errorf("%w: %q (instance %s renews its membership)", ErrDuplicateNode, m.cfg.Node, other.Instance)
			case now.Sub(seenAt) > 2*m.cfg.LeaseTTL:
				return fmt.Errorf("%w: %q (instance %s holds its membership, which does not expire)",
					ErrDuplicateNode, m.cfg.Node, other.Instance)
			}
		}
		if !clock.Sleep(ctx, clock.Real{}, m.renewTick) {
			return fmt.Errorf("cluster: joining as %q: %w", m.cfg.Node, ctx.Err())
		}
	}
}

// Close hands every partition this node holds over: it stops taking
// partitions, leaves the membership (so the others rank without this node),
// then for each partition calls Host.Release and deletes its lease, so that
// the next node takes it at once. It waits for a Host.Acquire in progress,
// so do not call it from a Host method, nor while holding a lock that
// Host.Release needs. Close is idempotent.
func (m *Manager) Close() { m.shutdown(true) }

// Abandon stops the manager without releasing or deleting anything, as a
// crash would: the leases expire after LeaseTTL. For tests.
func (m *Manager) Abandon() { m.shutdown(false) }

func (m *Manager) shutdown(graceful bool) {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.stop()
		_ = m.sub.Unsubscribe()
		m.loops.Wait()
		if !graceful {
			m.log.Info("abandoned the cluster")
			return
		}
		m.mu.Lock()
		held := make([]*lease, 0, len(m.leases))
		for _, l := range m.leases {
			held = append(held, l)
			l.state = releasing
		}
		nodeKey, nodeRev := m.node.key, m.node.rev
		m.mu.Unlock()
		slices.SortFunc(held, func(a, b *lease) int { return cmp.Compare(a.p, b.p) })
		m.deleteKey(nodeKey, nodeRev)
		for _, l := range held {
			m.host.Release(l.p)
		}
		var g errgroup.Group
		g.SetLimit(releaseParallel)
		for _, l := range held {
			g.Go(func() error { m.dropLease(l); return nil })
		}
		_ = g.Wait()
		m.log.Info("left the cluster", "released", len(held))
	})
}

// Claim takes the lease of a partition this node just created (a queue's,
// on the catalog's owner) without calling Host.Acquire, and returns its
// term. It fails with ErrHeld if the lease is held (by another node, or
// already by this one).
func (m *Manager) Claim(p store.PartitionID) (term uint64, err error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, ErrClosed
	}
	_, held := m.leases[p]
	_, claiming := m.claiming[p]
	if held || claiming {
		m.mu.Unlock()
		return 0, fmt.Errorf("cluster: claiming partition %d: %w (by this node)", p, ErrHeld)
	}
	m.claiming[p] = struct{}{}
	m.mu.Unlock()

	key := partKey(p)
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), m.opTimeout)
	rev, err := m.create(ctx, key)
	cancel()
	if err != nil && !conflict(err) {
		if r, ok := m.ours(key); ok {
			rev, err = r, nil // the create landed; its reply was lost
		}
	}

	m.mu.Lock()
	delete(m.claiming, p)
	closed := m.closed
	if err == nil && !closed {
		l := m.newLease(p, key, rev, sent)
		l.state, l.since = owned, time.Now()
		m.leases[p] = l
	}
	m.mu.Unlock()
	switch {
	case err == nil && closed:
		m.deleteKey(key, rev)
		return 0, ErrClosed
	case err == nil:
		m.log.Info("claimed a new partition", "partition", p, "term", rev)
		return rev, nil
	case conflict(err):
		return 0, fmt.Errorf("cluster: claiming partition %d: %w", p, ErrHeld)
	default:
		return 0, fmt.Errorf("cluster: claiming partition %d: %w", p, err)
	}
}

// Lost forgets partition p: the engine's owner of p was fenced off. The
// Host is not called. Another node that took p over holds a new key; if
// the key is still this node's (the fence came from a stream leader that
// had not stepped down yet, answering for a stream the others moved on:
// a node back from a cut), it is deleted at its revision, never anyone
// else's, so that the next owner takes p at once rather than after the
// lease's TTL.
func (m *Manager) Lost(p store.PartitionID) {
	m.mu.Lock()
	l := m.leases[p]
	if l != nil {
		delete(m.leases, p)
		l.lost = true
	}
	clean := l != nil && !m.closed
	if clean {
		m.loops.Add(1)
	}
	m.mu.Unlock()
	if l == nil {
		return
	}
	m.log.Warn("forgot a partition: another node fenced its owner here", "partition", p, "term", l.term)
	if clean {
		go func() {
			defer m.loops.Done()
			m.mu.Lock()
			ch := l.inflight
			m.mu.Unlock()
			if ch != nil {
				<-ch // a renewal's answer moves the revision on; bounded by its timeout
			}
			m.mu.Lock()
			rev := l.rev
			m.mu.Unlock()
			m.deleteKey(l.key, rev)
		}()
	}
}

// Owned reports whether this node holds p's lease (taken, and neither
// lost nor being released). It is true during Host.Acquire, and false
// once the manager is closed or abandoned.
func (m *Manager) Owned(p store.PartitionID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ownedLocked(p)
}

func (m *Manager) ownedLocked(p store.PartitionID) bool {
	l := m.leases[p]
	return !m.closed && l != nil && l.state != releasing && !l.lost
}

// Owner names the node that owns p as far as this node knows: this node
// while it holds p's lease, else the holder its view of the bucket shows
// (which lags the bucket by a moment: a request sent there may find that
// the partition has moved on). ok is false when no node holds it.
func (m *Manager) Owner(p store.PartitionID) (node string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ownedLocked(p) {
		return m.cfg.Node, true
	}
	h, held := m.view.owners[p]
	if !held || h.Node == "" || h.Instance == m.instance {
		return "", false // unknown, or this node's lease that it no longer holds
	}
	return h.Node, true
}

// Holder names the node that holds p's lease as the bucket itself says
// now, not the view: the view lags the bucket, by seconds when its
// watcher's consumer lived on a node that died (see checkStale), and a
// node forwarding a request on the view's word would meanwhile send it
// to the dead node. Concurrent reads of one partition share one request.
// ok is false when no node holds it. The read ends with ctx (a read of
// a bucket whose leader went silent waits for a new one).
func (m *Manager) Holder(ctx context.Context, p store.PartitionID) (node string, ok bool, err error) {
	key := partKey(p)
	ch := m.reads.DoChan(key, func() (any, error) {
		e, err := m.readKey(key, m.opTimeout)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return holder{}, nil
		}
		if err != nil {
			return holder{}, err
		}
		h, _ := decodeHolder(e.Value())
		return h, nil
	})
	var res singleflight.Result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return "", false, fmt.Errorf("cluster: reading the lease of partition %d: %w", p, ctx.Err())
	}
	if res.Err != nil {
		return "", false, fmt.Errorf("cluster: reading the lease of partition %d: %w", p, res.Err)
	}
	h := res.Val.(holder)
	return h.Node, h.Node != "", nil
}

// NotifyCatalog tells the other nodes that the catalog changed: their
// managers call Host.CatalogChanged.
func (m *Manager) NotifyCatalog() {
	if err := m.cfg.Conn.Publish(m.catalog, []byte(m.instance)); err != nil {
		m.log.Warn("notifying a catalog change failed", "err", err)
	}
	m.wake()
}

// Status returns the cluster as this node sees it.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Status{
		Node:            m.cfg.Node,
		Members:         m.membersLocked(),
		Owners:          make(map[store.PartitionID]string, len(m.view.owners)),
		Owned:           []store.PartitionID{},
		Failovers:       m.counts.failovers,
		Handovers:       m.counts.handovers,
		AcquireFailures: m.counts.acquireFailures,
		RenewFailures:   m.counts.renewFailures,
		Retaken:         m.counts.retaken,
	}
	for p, h := range m.view.owners {
		if h.Instance == m.instance {
			continue // named below while it holds the lease
		}
		s.Owners[p] = h.Node
	}
	for p, l := range m.leases {
		if l.state != releasing && !l.lost {
			s.Owners[p] = m.cfg.Node
			s.Owned = append(s.Owned, p)
		}
	}
	slices.Sort(s.Owned)
	return s
}

// Members lists the live nodes as this node's view of the bucket shows
// them, this one included, sorted.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.membersLocked()
}

// membersLocked lists the live nodes, this one included, sorted.
func (m *Manager) membersLocked() []string {
	names := []string{m.cfg.Node}
	for _, mem := range m.view.members {
		names = append(names, mem.Node)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// wake runs the reconcile loop soon.
func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// onCatalog receives catalog notifications; this node's own are ignored.
func (m *Manager) onCatalog(msg *nats.Msg) {
	if string(msg.Data) == m.instance {
		return
	}
	select {
	case m.catKick <- struct{}{}:
	default:
	}
}

// catalogLoop calls Host.CatalogChanged on notifications from other nodes
// and every catalogRefresh.
func (m *Manager) catalogLoop() {
	m.every(catalogRefresh, m.catKick, func() {
		m.host.CatalogChanged()
		m.wake() // the partitions may have changed
	})
}

// watchLoop keeps the view up to date from a watcher on the whole bucket,
// and restarts the watcher if it ends before the manager does.
func (m *Manager) watchLoop() {
	defer m.loops.Done()
	wait := 100 * time.Millisecond
	for m.ctx.Err() == nil {
		w, err := m.kv.WatchAll(m.ctx)
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Warn("watching the lease bucket failed; retrying", "err", err)
			}
			clock.Sleep(m.ctx, clock.Real{}, wait)
			wait = min(2*wait, 5*time.Second)
			continue
		}
		wait = 100 * time.Millisecond
		m.drain(w)
		if m.ctx.Err() == nil {
			m.log.Warn("the lease bucket's watcher stopped; restarting it")
		}
	}
}

// drain applies the watcher's entries to the view until the watcher ends.
// The first entries (up to the nil that marks the bucket's current state)
// build a fresh view, which then replaces the old one.
func (m *Manager) drain(w jetstream.KeyWatcher) {
	fresh, syncing := newView(), true
	done := m.ctx.Done()
	for {
		select {
		case <-done:
			// Keep draining: the watcher's callback blocks on a full channel,
			// and the channel closes only once it returned.
			_ = w.Stop()
			done = nil
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			now := time.Now()
			switch {
			case e == nil:
				if syncing {
					syncing = false
					m.mu.Lock()
					fresh.carry(m.view)
					m.view = fresh
					m.mu.Unlock()
					m.readyOnce.Do(func() { close(m.watchReady) })
					m.wake()
				}
			case syncing:
				fresh.apply(e, now)
			default:
				m.mu.Lock()
				freed := m.view.apply(e, now)
				m.mu.Unlock()
				if freed {
					m.wake()
				}
			}
		}
	}
}
