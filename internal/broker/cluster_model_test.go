package broker_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
	"github.com/sluicemq/sluice/internal/partition"
	st "github.com/sluicemq/sluice/sluicetype"
)

var (
	clusterModelSeed = flag.Uint64("cmodel.seed", 0, "seed of TestClusterModel's operations (0: the seeds of clusterModelSeeds)")
	clusterModelOps  = flag.Int("cmodel.ops", 0, "operations in TestClusterModel (0: 1500, 500 with -short)")
)

// clusterModelSeeds are the seeds of the normal test command.
var clusterModelSeeds = []uint64{1}

// TestClusterModel is TestModel on a three-node cluster in this process:
// the same random operations against the same model, each sent to the
// node that owns its queue (dead-letter moves and redrives go between
// nodes when the queues' owners differ), with the single node's restarts
// and power losses replaced by a node's graceful restart (it hands its
// queues over and takes some back) and its crash (its NATS server and
// connection go at once and its leases expire: another node takes its
// queues over, fencing it, then it starts again on its data). Streams
// are snapshotted every 128 KiB of log, so they are purged below their
// snapshots and long-lived bodies re-homed all along. Before and after
// every restart and crash every message the model holds must be there,
// with its body, and no deleted one may come back.
//
// It does not replay exactly: leases, hand-overs and JetStream run on
// real time. The long run:
//
//	go test -run TestClusterModel -cmodel.ops 20000 -cmodel.seed 7 ./internal/broker
func TestClusterModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ops := *clusterModelOps
	if ops <= 0 {
		ops = 1500
	}
	seeds := clusterModelSeeds
	if *clusterModelSeed != 0 {
		seeds = []uint64{*clusterModelSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { clusterModelRun(t, seed, ops) })
	}
}

func clusterModelRun(t *testing.T, seed uint64, ops int) {
	t.Logf("seed %d, %d operations (again: go test -run TestClusterModel -cmodel.seed %d -cmodel.ops %d ./internal/broker)", seed, ops, seed, ops)
	s := newSim(t, seed, true)
	defer s.close()
	s.run(ops)
	c := s.cl
	t.Logf("cluster: %d graceful restarts, %d crashes; queues taken over after a crash %d, handed over by a restart %d, moved while operations ran %d; %d calls retried on a moving queue",
		c.restarts, c.crashes, c.failovers, c.handovers, c.rebalanced, c.retried)
	f := &s.fig
	switch {
	case c.restarts == 0 || c.crashes == 0:
		t.Errorf("%d restarts and %d crashes: the run does not test ownership moving", c.restarts, c.crashes)
	case c.failovers == 0:
		t.Errorf("no queue was taken over after a crash")
	case c.handovers == 0:
		t.Errorf("no queue was handed over")
	}
	if f.removed == 0 {
		t.Errorf("no stream was purged: the run cannot find a body purged too early")
	}
	if f.relocated == 0 {
		t.Errorf("no body was re-homed: the run does not test re-homing")
	}
	s.checkMoved()
	s.checkLadder()
}

// clusterSim is the cluster of TestClusterModel: three nodes in this
// process, each with its embedded NATS server, on one fake clock.
type clusterSim struct {
	s     *sim
	nodes []*simNode
	// tasks remembers which node started each move task.
	tasks map[string]*broker.Broker
	// The run's figures: failovers and handovers count the queues of a
	// node that crashed or restarted that another node took; rebalanced
	// those that moved while operations ran (to a node that came back).
	restarts, crashes, failovers, handovers, rebalanced, retried int
	lastOwners                                                   map[string]string
}

type simNode struct {
	name string
	cfg  broker.Config
	b    *broker.Broker // nil while down
}

// startClusterSim starts the cluster's three nodes together (a new
// cluster elects its first JetStream leader once every peer is up).
func startClusterSim(s *sim, seed uint64) *clusterSim {
	// A port found free may be taken by another test's process before a
	// node binds it: start again on other ports.
	for attempt := 1; ; attempt++ {
		c, err := tryClusterSim(s, seed)
		if err == nil {
			return c
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			s.t.Fatal(err)
		}
		s.t.Logf("starting the cluster again on other ports: %v", err)
	}
}

func tryClusterSim(s *sim, seed uint64) (*clusterSim, error) {
	t := s.t
	ports, err := natstest.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, p := range ports {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", p))
	}
	c := &clusterSim{s: s, tasks: map[string]*broker.Broker{}}
	name := "m" + strings.ToLower(rand.Text()[:8])
	for i := range peers {
		var seedBytes [32]byte // message ids and receipt handles, distinct on every node
		binary.LittleEndian.PutUint64(seedBytes[:], seed)
		seedBytes[8] = byte(i + 1)
		n := &simNode{name: fmt.Sprintf("n%d", i+1)}
		n.cfg = broker.Config{Dir: t.TempDir(), CheckReleases: true, Clock: s.clk, Rand: mrand.NewChaCha8(seedBytes),
			CompactInterval: modelCompact, Logger: s.cfg.Logger.With("node", n.name),
			Cluster: &broker.ClusterConfig{Name: name, Node: n.name, Peers: peers, Listen: peers[i],
				LeaseTTL: 2 * time.Second, ReadyTimeout: time.Minute, SnapshotBytes: modelCheckpoint}}
		c.nodes = append(c.nodes, n)
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { n.b, errs[i] = broker.Open(n.cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// close stops every node at once (one by one, each would hand its queues
// to the next).
func (c *clusterSim) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n.b != nil {
			c.keepFigures(n)
			wg.Go(func() { n.b.Close() })
		}
	}
	wg.Wait()
	for _, n := range c.nodes {
		n.b = nil
	}
}

// keepFigures adds a node's store figures, before it stops, to the run's.
func (c *clusterSim) keepFigures(n *simNode) {
	ss := n.b.StoreStats()
	c.s.removedBefore += ss.SegmentsRemoved
	c.s.relocatedBefore += ss.Relocated
}

// stop closes a node (crash: abandons it) and keeps its figures.
func (c *clusterSim) stop(n *simNode, crash bool) {
	c.keepFigures(n)
	if crash {
		broker.Crash(n.b)
	} else {
		n.b.Close()
	}
	n.b = nil
}

// restartNode stops a node, gracefully or as a crash, waits until the
// others own its queues, starts it again on its data, then waits until
// every queue has an owner.
func (c *clusterSim) restartNode(crash bool) string {
	return c.restartOne(nil, crash, nil)
}

// restartOne is restartNode of node n (nil: one restartNode picks); the
// node stays down until moved also holds too, when given (it is told the
// stopped node's name).
func (c *clusterSim) restartOne(n *simNode, crash bool, moved func(stopped string) bool) string {
	before := c.owners()
	for q, o := range before {
		if last, ok := c.lastOwners[q]; ok && last != o {
			c.rebalanced++ // moved while operations ran
		}
	}
	// The node stopped owns a queue, when one does, so that every
	// restart and crash of the run moves one.
	var owning []*simNode
	for _, m := range c.nodes {
		if slices.Contains(slices.Collect(maps.Values(before)), m.name) {
			owning = append(owning, m)
		}
	}
	if len(owning) == 0 {
		owning = c.nodes
	}
	if n == nil {
		n = owning[c.s.rng.IntN(len(owning))]
	}
	if crash {
		c.crashes++
	} else {
		c.restarts++
	}
	c.stop(n, crash)
	// The node stays down until the others took its queues (handed over,
	// or once its leases expired), as a machine that does not come back
	// at once: otherwise it may win its own leases back.
	var during map[string]string
	if !c.await(func() bool {
		during = c.owners()
		for _, o := range during {
			if o == "" || o == n.name {
				return false
			}
		}
		if moved != nil && !moved(n.name) {
			return false
		}
		return len(during) == len(before)
	}) {
		c.s.fail("%s stopped: its queues not taken over after %s: %v", n.name, moveWait, during)
	}
	for _, o := range before {
		switch {
		case o == n.name && crash:
			c.failovers++
		case o == n.name:
			c.handovers++
		}
	}
	b, err := broker.Open(n.cfg)
	if err != nil {
		c.s.fail("start %s again: %v", n.name, err)
	}
	n.b = b
	var after map[string]string
	if !c.await(func() bool {
		after = c.owners()
		for _, o := range after {
			if o == "" {
				return false
			}
		}
		return len(after) == len(before)
	}) {
		c.s.fail("queues without an owner %s after %s stopped: %v", moveWait, n.name, after)
	}
	c.lastOwners = after
	return n.name
}

// owners names each queue's owner ("" while it has none), as the
// catalog's owner sees them.
func (c *clusterSim) owners() map[string]string {
	cs := c.catalog().ClusterStatus()
	if cs == nil {
		return nil
	}
	return cs.Owners
}

// settledStats is the nodes' store figures once they keep live bodies
// (within moveWait): a deleted queue's owner drops its partition after
// the catalog's owner told it.
func (c *clusterSim) settledStats(live int64) broker.StoreStats {
	var ss broker.StoreStats
	c.await(func() bool {
		ss = clusterBroker{c}.StoreStats()
		return ss.LiveMessages == live
	})
	return ss
}

// await polls cond until it holds, or moveWait passed: it reports which.
func (c *clusterSim) await(cond func() bool) bool { return pollUntil(moveWait, cond) }

// pollUntil polls cond (every 10 ms) until it holds, or d passed: it
// reports which.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// ---- the cluster as one broker ----

// moveWait bounds how long a call waits for its queue to have an owner:
// a crashed owner's lease expires (2 s), then the next node acquires it.
const moveWait = 30 * time.Second

// owner is the node that serves queue: the owner of its partition, or
// for a queue that does not exist the catalog's owner (which says so).
func (c *clusterSim) owner(queue string) *broker.Broker {
	var b *broker.Broker
	if !c.await(func() bool {
		var catalog *broker.Broker
		for _, n := range c.nodes {
			if n.b == nil {
				continue
			}
			if n.b.RouteCatalog("sqs") == "" {
				catalog = n.b
			}
			if to, err := n.b.Route(queue, "sqs"); err == nil && to == "" {
				b = n.b
				return true
			}
		}
		if catalog != nil {
			if _, err := catalog.Route(queue, "sqs"); st.CodeOf(err) == st.CodeQueueDoesNotExist {
				b = catalog
				return true
			}
		}
		return false
	}) {
		c.s.fail("no node serves queue %s after %s", queue, moveWait)
	}
	return b
}

// catalog is the node that owns the catalog of queues.
func (c *clusterSim) catalog() *broker.Broker {
	var b *broker.Broker
	if !c.await(func() bool {
		for _, n := range c.nodes {
			if n.b != nil && n.b.RouteCatalog("sqs") == "" {
				b = n.b
				return true
			}
		}
		return false
	}) {
		c.s.fail("no node owns the catalog after %s", moveWait)
	}
	return b
}

// call runs f on the node that serves queue, again on the next owner
// while the queue is moving (NotOwner: the call changed nothing).
func call[T any](c *clusterSim, queue string, f func(b *broker.Broker) (T, error)) (T, error) {
	deadline := time.Now().Add(moveWait)
	for {
		v, err := f(c.owner(queue))
		if !errors.Is(err, partition.ErrNotOwner) || time.Now().After(deadline) {
			return v, err
		}
		c.retried++
	}
}

func call0(c *clusterSim, queue string, f func(b *broker.Broker) error) error {
	_, err := call(c, queue, func(b *broker.Broker) (struct{}, error) { return struct{}{}, f(b) })
	return err
}

type clusterBroker struct{ c *clusterSim }

func (r clusterBroker) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (broker.QueueInfo, error) {
	return r.c.catalog().CreateQueue(ctx, name, attrs, tags)
}

func (r clusterBroker) GetQueue(name string) (broker.QueueInfo, error) {
	return r.c.catalog().GetQueue(name)
}

func (r clusterBroker) DeleteQueue(ctx context.Context, name string) error {
	return r.c.catalog().DeleteQueue(ctx, name)
}

func (r clusterBroker) GetQueueAttributes(name string, names []string) (map[string]string, error) {
	return call(r.c, name, func(b *broker.Broker) (map[string]string, error) { return b.GetQueueAttributes(name, names) })
}

func (r clusterBroker) Send(ctx context.Context, queue string, in st.SendInput) (st.SendResult, error) {
	return call(r.c, queue, func(b *broker.Broker) (st.SendResult, error) { return b.Send(ctx, queue, in) })
}

func (r clusterBroker) SendBatch(ctx context.Context, queue string, in []st.SendInput) ([]st.SendResult, []error, error) {
	var res []st.SendResult
	errs, err := call(r.c, queue, func(b *broker.Broker) ([]error, error) {
		var errs []error
		var err error
		res, errs, err = b.SendBatch(ctx, queue, in)
		return errs, err
	})
	return res, errs, err
}

func (r clusterBroker) Receive(ctx context.Context, queue string, in st.ReceiveInput) ([]st.Message, error) {
	return call(r.c, queue, func(b *broker.Broker) ([]st.Message, error) { return b.Receive(ctx, queue, in) })
}

func (r clusterBroker) Delete(ctx context.Context, queue, handle string) error {
	return call0(r.c, queue, func(b *broker.Broker) error { return b.Delete(ctx, queue, handle) })
}

func (r clusterBroker) DeleteBatch(ctx context.Context, queue string, handles []string) ([]error, error) {
	return call(r.c, queue, func(b *broker.Broker) ([]error, error) { return b.DeleteBatch(ctx, queue, handles) })
}

func (r clusterBroker) ChangeVisibilityBatch(ctx context.Context, queue string, in []broker.VisibilityChange) ([]error, error) {
	return call(r.c, queue, func(b *broker.Broker) ([]error, error) { return b.ChangeVisibilityBatch(ctx, queue, in) })
}

func (r clusterBroker) Purge(ctx context.Context, queue string) error {
	return call0(r.c, queue, func(b *broker.Broker) error { return b.Purge(ctx, queue) })
}

func (r clusterBroker) StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (string, error) {
	queue := sourceArn[strings.LastIndexByte(sourceArn, ':')+1:]
	return call(r.c, queue, func(b *broker.Broker) (string, error) {
		h, err := b.StartMoveTask(ctx, sourceArn, destinationArn, rate)
		if err == nil {
			r.c.tasks[h] = b
		}
		return h, err
	})
}

func (r clusterBroker) WaitMoveTask(ctx context.Context, handle string) (broker.MoveTask, error) {
	b := r.c.tasks[handle]
	if b == nil {
		return broker.MoveTask{}, fmt.Errorf("no node started move task %s", handle)
	}
	delete(r.c.tasks, handle)
	return b.WaitMoveTask(ctx, handle)
}

func (r clusterBroker) RetryMessage(ctx context.Context, queue, handle string, delaySeconds *int, reason string) error {
	return call0(r.c, queue, func(b *broker.Broker) error { return b.RetryMessage(ctx, queue, handle, delaySeconds, reason) })
}

func (r clusterBroker) Peek(queue string, f broker.PeekFilter) ([]broker.PeekedMessage, string, error) {
	var next string
	ps, err := call(r.c, queue, func(b *broker.Broker) ([]broker.PeekedMessage, error) {
		var ps []broker.PeekedMessage
		var err error
		ps, next, err = b.Peek(queue, f)
		return ps, err
	})
	return ps, next, err
}

func (r clusterBroker) PurgeFiltered(ctx context.Context, queue string, f broker.PeekFilter) (int, error) {
	return call(r.c, queue, func(b *broker.Broker) (int, error) { return b.PurgeFiltered(ctx, queue, f) })
}

func (r clusterBroker) RedriveFiltered(ctx context.Context, queue string, f broker.PeekFilter, dest string) (int, error) {
	return call(r.c, queue, func(b *broker.Broker) (int, error) { return b.RedriveFiltered(ctx, queue, f, dest) })
}

// Snapshot snapshots what every node owns.
func (r clusterBroker) Snapshot(ctx context.Context) error {
	var errs []error
	for _, n := range r.c.nodes {
		if n.b != nil {
			errs = append(errs, n.b.Snapshot(ctx))
		}
	}
	return errors.Join(errs...)
}

// StoreStats sums the nodes' figures.
func (r clusterBroker) StoreStats() broker.StoreStats {
	var sum broker.StoreStats
	for _, n := range r.c.nodes {
		if n.b == nil {
			continue
		}
		ss := n.b.StoreStats()
		sum.LiveMessages += ss.LiveMessages
		sum.Segments += ss.Segments
		sum.SegmentsRemoved += ss.SegmentsRemoved
		sum.Relocated += ss.Relocated
		sum.BadReleases += ss.BadReleases
		sum.Unreadable += ss.Unreadable
	}
	return sum
}

func (r clusterBroker) Close() error {
	r.c.close()
	return nil
}
