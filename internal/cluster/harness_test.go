package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
	"github.com/sluicemq/sluice/internal/store"
)

// ledger records which live hosts believe they own each partition (from
// Acquire to Release), and checks the invariant that two live hosts never
// both do for longer than limit.
type ledger struct {
	limit time.Duration

	mu         sync.Mutex
	owners     map[store.PartitionID]map[string]bool
	dead       map[string]bool
	overlap    map[store.PartitionID]time.Time // more than one owner since
	worst      time.Duration
	violations []string
}

func newLedger(limit time.Duration) *ledger {
	return &ledger{limit: limit, owners: map[store.PartitionID]map[string]bool{}, dead: map[string]bool{},
		overlap: map[store.PartitionID]time.Time{}}
}

func (l *ledger) acquire(p store.PartitionID, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead[node] {
		l.violations = append(l.violations, fmt.Sprintf("dead %s acquired partition %d", node, p))
		return
	}
	if l.owners[p] == nil {
		l.owners[p] = map[string]bool{}
	}
	l.owners[p][node] = true
	if len(l.owners[p]) > 1 {
		if _, ok := l.overlap[p]; !ok {
			l.overlap[p] = time.Now()
		}
	}
}

func (l *ledger) release(p store.PartitionID, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.owners[p], node)
	l.endOverlapLocked(p, time.Now())
}

// kill forgets what a crashed node believed.
func (l *ledger) kill(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[node] = true
	now := time.Now()
	for p, o := range l.owners {
		delete(o, node)
		l.endOverlapLocked(p, now)
	}
}

// revive lets a node that was killed own partitions again (restarted).
func (l *ledger) revive(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.dead, node)
}

func (l *ledger) endOverlapLocked(p store.PartitionID, now time.Time) {
	since, ok := l.overlap[p]
	if !ok || len(l.owners[p]) > 1 {
		return
	}
	delete(l.overlap, p)
	d := now.Sub(since)
	l.worst = max(l.worst, d)
	if d > l.limit {
		l.violations = append(l.violations, fmt.Sprintf("partition %d had two owners for %s", p, d))
	}
}

func (l *ledger) addViolation(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

// check fails t if the invariant was broken, counting overlaps still open.
func (l *ledger) check(t testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for p, since := range l.overlap {
		if d := now.Sub(since); d > l.limit {
			l.violations = append(l.violations, fmt.Sprintf("partition %d has had two owners for %s: %v",
				p, d, slices.Sorted(maps.Keys(l.owners[p]))))
		}
		l.worst = max(l.worst, now.Sub(since))
	}
	for _, v := range l.violations {
		t.Errorf("invariant: %s", v)
	}
	if l.worst > 0 {
		t.Logf("longest time two live nodes both owned a partition: %s (limit %s)", l.worst, l.limit)
	}
}

// fakeHost is an engine that owns what it is told to and records it.
type fakeHost struct {
	name    string
	ledger  *ledger
	catalog atomic.Int64

	mu       sync.Mutex
	parts    []store.PartitionID
	fail     map[store.PartitionID]int // Acquire calls of p left to fail; -1: every one
	owned    map[store.PartitionID]uint64
	acquired map[store.PartitionID]int // successful Acquire calls
	failed   map[store.PartitionID]int
	released map[store.PartitionID]int

	// gate, when set, holds every Acquire until it is closed (a replay
	// that waits for its stream's leader); waiting counts those it holds,
	// most the most it held at once.
	gate          chan struct{}
	waiting, most int
}

// hold makes the host's Acquire calls wait until the returned func is
// called.
func (h *fakeHost) hold() (release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gate := make(chan struct{})
	h.gate = gate
	return sync.OnceFunc(func() {
		h.mu.Lock()
		h.gate = nil
		h.mu.Unlock()
		close(gate)
	})
}

// held is how many Acquire calls wait at the gate now, and the most at
// once.
func (h *fakeHost) held() (now, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting, h.most
}

func newFakeHost(name string, l *ledger, parts []store.PartitionID) *fakeHost {
	return &fakeHost{name: name, ledger: l, parts: slices.Clone(parts), fail: map[store.PartitionID]int{},
		owned: map[store.PartitionID]uint64{}, acquired: map[store.PartitionID]int{},
		failed: map[store.PartitionID]int{}, released: map[store.PartitionID]int{}}
}

func (h *fakeHost) Partitions() []store.PartitionID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.parts)
}

func (h *fakeHost) Acquire(p store.PartitionID, term uint64) error {
	h.mu.Lock()
	if gate := h.gate; gate != nil {
		h.waiting++
		h.most = max(h.most, h.waiting)
		h.mu.Unlock()
		<-gate
		h.mu.Lock()
		h.waiting--
	}
	defer h.mu.Unlock()
	if _, ok := h.owned[p]; ok {
		h.ledger.addViolation("%s: Acquire of partition %d, which it owns", h.name, p)
		return errors.New("fake: owned already")
	}
	if n := h.fail[p]; n != 0 {
		if n > 0 {
			h.fail[p]--
		}
		h.failed[p]++
		return errors.New("fake: cannot acquire")
	}
	h.owned[p] = term
	h.acquired[p]++
	h.ledger.acquire(p, h.name)
	return nil
}

func (h *fakeHost) Release(p store.PartitionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.owned[p]; !ok {
		h.ledger.addViolation("%s: Release of partition %d, which it does not own", h.name, p)
		return
	}
	delete(h.owned, p)
	h.released[p]++
	h.ledger.release(p, h.name)
}

func (h *fakeHost) CatalogChanged() { h.catalog.Add(1) }

// claimed records a partition the test claimed for this host.
func (h *fakeHost) claimed(p store.PartitionID, term uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.owned[p] = term
	h.ledger.acquire(p, h.name)
}

// forget drops a partition the way an engine that was fenced off does.
func (h *fakeHost) forget(p store.PartitionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.owned, p)
	h.ledger.release(p, h.name)
}

func (h *fakeHost) add(p store.PartitionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.parts = append(h.parts, p)
}

func (h *fakeHost) remove(p store.PartitionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.parts = slices.DeleteFunc(h.parts, func(q store.PartitionID) bool { return q == p })
}

func (h *fakeHost) owns(p store.PartitionID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.owned[p]
	return ok
}

func (h *fakeHost) ownedList() []store.PartitionID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.owned))
}

func (h *fakeHost) count(m map[store.PartitionID]int, p store.PartitionID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return m[p]
}

// env is one test's cluster of managers on a shared NATS cluster, with a
// bucket of its own.
type env struct {
	t      *testing.T
	nats   []*natsnode.Node
	name   string
	cfg    Config // the managers' config, without Conn and Node
	ledger *ledger
}

// newEnv makes managers with lease TTL ttl and short timings.
func newEnv(t *testing.T, nats []*natsnode.Node, ttl time.Duration) *env {
	cfg := Config{
		Cluster:  "t-" + strings.ToLower(rand.Text()[:8]),
		Replicas: min(3, len(nats)),
		LeaseTTL: ttl,
		Tick:     100 * time.Millisecond,
		RankStep: 500 * time.Millisecond,
		Settle:   2 * time.Second,
		Logger:   natstest.Logger(t),
	}
	e := &env{t: t, nats: nats, name: cfg.Cluster, cfg: cfg,
		ledger: newLedger(ttl/3 + cfg.Tick + time.Second)}
	t.Cleanup(func() { e.ledger.check(t) }) // after the managers' Close
	return e
}

func (e *env) host(name string, parts []store.PartitionID) *fakeHost {
	return newFakeHost(name, e.ledger, parts)
}

// start starts a manager for h on NATS node i (mod the cluster's size).
func (e *env) start(i int, h *fakeHost) *Manager {
	e.t.Helper()
	m, err := e.tryStart(i, h.name, h)
	if err != nil {
		e.t.Fatalf("start %s: %v", h.name, err)
	}
	return m
}

func (e *env) tryStart(i int, node string, h Host) (*Manager, error) {
	nc, err := e.nats[i%len(e.nats)].Connect()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	cfg := e.cfg
	cfg.Conn, cfg.Node = nc, node
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Start(ctx, cfg, h)
	if err == nil {
		e.t.Cleanup(m.Close) // before nc.Close
	}
	return m, err
}

// startN starts managers n1..n<n>, each listing parts.
func (e *env) startN(n int, parts []store.PartitionID) ([]*Manager, []*fakeHost) {
	e.t.Helper()
	var ms []*Manager
	var hs []*fakeHost
	for i := range n {
		h := e.host(fmt.Sprintf("n%d", i+1), parts)
		ms = append(ms, e.start(i, h))
		hs = append(hs, h)
	}
	return ms, hs
}

// kv opens the env's bucket from NATS node 0.
func (e *env) kv() jetstream.KeyValue {
	e.t.Helper()
	nc, err := e.nats[0].Connect()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	kv, err := js.KeyValue(e.t.Context(), bucketName(e.name))
	if err != nil {
		e.t.Fatal(err)
	}
	return kv
}

func partitions(n int) []store.PartitionID {
	ps := make([]store.PartitionID, n)
	for i := range ps {
		ps[i] = store.PartitionID(i)
	}
	return ps
}

// waitFor polls cond until it holds, or fails t after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("after %s, still waiting for %s", d, what)
		}
		<-tick.C
	}
	return time.Since(start)
}

// settled reports whether every partition has exactly one owner among hs,
// whose manager says so, and no other manager does.
func settled(ms []*Manager, hs []*fakeHost, parts []store.PartitionID) bool {
	for _, p := range parts {
		owners := 0
		for i, h := range hs {
			own, says := h.owns(p), ms[i].Owned(p)
			if own != says {
				return false
			}
			if own {
				owners++
			}
		}
		if owners != 1 {
			return false
		}
	}
	return true
}

// spread reports whether every host owns a partition.
func spread(hs []*fakeHost) bool {
	for _, h := range hs {
		if len(h.ownedList()) == 0 {
			return false
		}
	}
	return true
}

// balanced reports whether every partition is owned by its preferred
// node among hs.
func balanced(hs []*fakeHost, parts []store.PartitionID) bool {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.name
	}
	for _, p := range parts {
		want := preferred(names, p)
		for _, h := range hs {
			if h.owns(p) != (h.name == want) {
				return false
			}
		}
	}
	return true
}

// layout renders who owns what, for logs.
func layout(hs []*fakeHost) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s:%v ", h.name, h.ownedList())
	}
	return strings.TrimSpace(b.String())
}
