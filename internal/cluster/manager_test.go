package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
	"github.com/sluicemq/sluice/internal/store"
)

// TestCluster runs managers on one 3-node NATS cluster; each subtest has
// a bucket of its own.
func TestCluster(t *testing.T) {
	nats := natstest.Cluster(t, 3)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, []*natsnode.Node)
	}{
		{"Spread", testSpread},
		{"CloseHandsOver", testCloseHandsOver},
		{"CrashFailsOver", testCrashFailsOver},
		{"TakeoversSideBySide", testTakeoversSideBySide},
		{"SilentSkipped", testSilentSkipped},
		{"OverdueTakenOver", testOverdueTakenOver},
		{"AcquireFails", testAcquireFails},
		{"Claim", testClaim},
		{"DuplicateName", testDuplicateName},
		{"Lost", testLost},
		{"RenewalRefused", testRenewalRefused},
		{"RefusalFromAFormerLeader", testFormerLeaderRefusal},
		{"LeaseRetaken", testLeaseRetaken},
		{"Unlisted", testUnlisted},
		{"CutOff", testCutOff},
		{"Restart", testRestart},
		{"CatalogNotify", testCatalogNotify},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, nats) })
	}
}

// Every partition gets exactly one owner, the owners spread over the
// nodes, and every node's view agrees.
func testSpread(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	took := waitFor(t, 30*time.Second, "every partition owned once, spread and balanced", func() bool {
		return settled(ms, hs, parts) && spread(hs) && balanced(hs, parts)
	})
	t.Logf("balanced after %s: %s", took.Round(time.Millisecond), layout(hs))
	waitFor(t, 30*time.Second, "every view to agree", func() bool {
		for _, m := range ms {
			st := m.Status()
			if len(st.Members) != 3 || len(st.Owners) != len(parts) {
				return false
			}
			for _, p := range parts {
				for _, h := range hs {
					if h.owns(p) && st.Owners[p] != h.name {
						return false
					}
				}
			}
		}
		return true
	})
	for i, m := range ms {
		st := m.Status()
		if got, want := st.Owned, hs[i].ownedList(); !equal(got, want) {
			t.Errorf("%s: Status.Owned %v, host owns %v", st.Node, got, want)
		}
		if st.AcquireFailures != 0 {
			t.Errorf("%s: %+v", st.Node, st)
		}
		t.Logf("%s: %+v", st.Node, st)
	}
}

// A node's Close hands its partitions to the others at once.
func testCloseHandsOver(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions spread", func() bool { return settled(ms, hs, parts) && spread(hs) })
	moved := hs[0].ownedList()
	failovers := ms[1].Status().Failovers + ms[2].Status().Failovers

	start := time.Now()
	ms[0].Close()
	closed := time.Since(start)
	waitFor(t, 30*time.Second, "the others to own every partition", func() bool {
		return settled(ms[1:], hs[1:], parts)
	})
	took := time.Since(start)
	t.Logf("Close took %s; partitions %v taken over %s after Close began: %s",
		closed.Round(time.Millisecond), moved, took.Round(time.Millisecond), layout(hs[1:]))
	if took > 3*time.Second {
		t.Errorf("graceful takeover took %s, want < 3s", took)
	}
	if got := hs[0].ownedList(); len(got) != 0 {
		t.Errorf("closed node still owns %v", got)
	}
	if n := ms[1].Status().Failovers + ms[2].Status().Failovers - failovers; n != 0 {
		t.Errorf("%d failovers counted after a graceful close", n)
	}
	if ms[0].Owned(moved[0]) {
		t.Errorf("closed manager says it owns %d", moved[0])
	}
	if _, err := ms[0].Claim(100); !errors.Is(err, ErrClosed) {
		t.Errorf("Claim after Close = %v, want ErrClosed", err)
	}
}

// A crashed node's partitions are taken over once their leases expire,
// not before.
func testCrashFailsOver(t *testing.T, nats []*natsnode.Node) {
	const ttl = 6 * time.Second // the default
	e := newEnv(t, nats, ttl)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions balanced", func() bool { return settled(ms, hs, parts) && balanced(hs, parts) })
	moved := hs[0].ownedList()
	kv := e.kv()

	e.ledger.kill(hs[0].name)
	start := time.Now()
	ms[0].Abandon()
	// When the first moved partition's lease was last written (the
	// server's clock, which is this process's).
	var renewed time.Time
	if en, err := kv.Get(t.Context(), partKey(moved[0])); err == nil {
		renewed = en.Created()
	}
	var first time.Duration
	waitFor(t, 30*time.Second, "the others to own every partition", func() bool {
		if first == 0 && (hs[1].owns(moved[0]) || hs[2].owns(moved[0])) {
			first = time.Since(start)
		}
		return settled(ms[1:], hs[1:], parts)
	})
	took := time.Since(start)
	t.Logf("crash with lease TTL %s: partition %d (last renewed %s before the crash) taken over after %s, all of %v after %s: %s",
		ttl, moved[0], start.Sub(renewed).Round(time.Millisecond), first.Round(time.Millisecond), moved,
		took.Round(time.Millisecond), layout(hs[1:]))
	// The lease expires no earlier than TTL after its last write.
	if earliest := renewed.Add(ttl).Sub(start) - 100*time.Millisecond; first < earliest {
		t.Errorf("taken over after %s, before the lease could expire (%s)", first, earliest)
	}
	var failovers uint64
	for _, m := range ms[1:] {
		failovers += m.Status().Failovers
	}
	if failovers < uint64(len(moved)) {
		t.Errorf("failovers counted: %d, want at least %d", failovers, len(moved))
	}
	waitFor(t, 30*time.Second, "the crashed node to leave the members", func() bool {
		return len(ms[1].Status().Members) == 2 && len(ms[2].Status().Members) == 2
	})
}

// A crashed node's partitions are taken over side by side, not one after
// another: while each takeover's Host.Acquire waits (as a replay waits for
// its stream to elect a leader), the others have started theirs, so the
// time to serve them again does not grow with how many there are.
func testTakeoversSideBySide(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 2*time.Second)
	parts := partitions(24)
	ms, hs := e.startN(2, parts)
	waitFor(t, 30*time.Second, "partitions balanced", func() bool { return settled(ms, hs, parts) && balanced(hs, parts) })
	moved := hs[0].ownedList()
	if len(moved) < 2 {
		t.Fatalf("%s owns %v: nothing to take over side by side", hs[0].name, moved)
	}
	release := hs[1].hold()
	defer release()
	e.ledger.kill(hs[0].name)
	ms[0].Abandon()
	took := waitFor(t, 30*time.Second, fmt.Sprintf("all %d takeovers waiting in Acquire at once", len(moved)), func() bool {
		now, _ := hs[1].held()
		return now == len(moved)
	})
	release()
	waitFor(t, 30*time.Second, "the other to own every partition", func() bool { return settled(ms[1:], hs[1:], parts) })
	_, most := hs[1].held()
	t.Logf("%d takeovers were under way at once %s after the crash (at most %d)", len(moved), took.Round(time.Millisecond), most)
}

// A member that does not answer (Config.Silent) is skipped by placement:
// when a node crashes, a partition whose preferred order puts the silent
// member first is taken by the next node at once, not a RankStep later,
// and none is handed over to the silent member. The silent member is a
// manager whose host lists no partition (it renews its membership, and
// would take nothing); RankStep is long enough that a wait for it could
// not pass unseen.
func testSilentSkipped(t *testing.T, nats []*natsnode.Node) {
	const ttl = 2 * time.Second
	e := newEnv(t, nats, ttl)
	e.cfg.RankStep = 15 * time.Second
	e.cfg.Silent = func(node string) bool { return node == "ghost" }
	parts := partitions(12)
	ms, hs := e.startN(2, parts)
	waitFor(t, time.Minute, "partitions owned", func() bool { return settled(ms, hs, parts) })
	ghost := e.start(2, e.host("ghost", nil))
	waitFor(t, 30*time.Second, "the ghost a member", func() bool { return slices.Contains(ms[0].Members(), "ghost") })
	// The partitions of n1 that the ghost outranks n2 for.
	var behind []store.PartitionID
	for _, p := range hs[0].ownedList() {
		if rank([]string{"ghost", "n2"}, p, "n2") > 0 {
			behind = append(behind, p)
		}
	}
	if len(behind) == 0 {
		t.Fatalf("n1 owns %v: none of them ranks the ghost first", hs[0].ownedList())
	}
	e.ledger.kill(hs[0].name)
	ms[0].Abandon()
	// A RankStep's wait would take it past TTL + RankStep.
	took := waitFor(t, ttl+e.cfg.RankStep/2, fmt.Sprintf("n2 to own %v (the ghost ranks first for them) without waiting for the ghost", behind), func() bool {
		return settled(ms[1:2], hs[1:2], parts)
	})
	t.Logf("n2 owned every partition %s after n1 crashed (lease TTL %s, RankStep %s)", took.Round(time.Millisecond), ttl, e.cfg.RankStep)
	if st := ghost.Status(); len(st.Owned) != 0 {
		t.Errorf("the ghost owns %v", st.Owned)
	}
}

// A lease held by a silent node that the bucket does not expire (its
// leader is being elected: only the leader expires keys) is taken over
// once it was last written longer than a lease lasts ago, by a write
// fenced on its revision. The ghost's lease is written without a TTL, so
// the bucket never expires it: only the takeover can end it.
func testOverdueTakenOver(t *testing.T, nats []*natsnode.Node) {
	const ttl = 2 * time.Second
	e := newEnv(t, nats, ttl)
	e.cfg.Silent = func(node string) bool { return node == "ghost" }
	parts := partitions(3)
	ms, hs := e.startN(1, parts)
	waitFor(t, time.Minute, "partitions owned", func() bool { return settled(ms, hs, parts) })
	const p store.PartitionID = 4
	ghost, _ := json.Marshal(holder{Node: "ghost", Instance: "g1"})
	kv := e.kv()
	rev, err := kv.Put(t.Context(), partKey(p), ghost)
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	waitFor(t, 10*time.Second, "n1 to see the ghost's lease", func() bool {
		ms[0].mu.Lock()
		defer ms[0].mu.Unlock()
		h, ok := ms[0].view.owners[p]
		return ok && h.Node == "ghost"
	})
	hs[0].add(p)
	took := waitFor(t, 10*ttl, "n1 to own the ghost's overdue partition", func() bool { return hs[0].owns(p) })
	if since := time.Since(written); since < ttl {
		t.Fatalf("the ghost's lease was taken %s after it was written, before a lease's %s", since, ttl)
	}
	e2, err := kv.Get(t.Context(), partKey(p))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := decodeHolder(e2.Value()); h.Node != "n1" || e2.Revision() <= rev {
		t.Fatalf("the lease reads %+v at revision %d, want n1's after %d", h, e2.Revision(), rev)
	}
	t.Logf("n1 took the ghost's overdue lease %s after the partition was listed (lease TTL %s)", took.Round(time.Millisecond), ttl)
}

// A partition whose Acquire fails is retried, elsewhere or later, and its
// lease is not held by the node that failed.
func testAcquireFails(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(12)
	names := []string{"n1", "n2", "n3"}
	var never, twice store.PartitionID = 0, 0 // never: fails on n1 only; twice: fails twice everywhere
	for _, p := range parts[1:] {
		if rank(names, p, "n1") == 0 {
			never = p
			break
		}
	}
	if never == 0 {
		t.Fatal("n1 is preferred for no partition")
	}
	twice = never%11 + 1
	var hs []*fakeHost
	var ms []*Manager
	for i, name := range names {
		h := e.host(name, parts)
		h.fail[twice] = 2
		if name == "n1" {
			h.fail[never] = -1
		}
		hs = append(hs, h)
		ms = append(ms, e.start(i, h))
	}
	took := waitFor(t, 30*time.Second, "both partitions owned", func() bool {
		return (hs[1].owns(never) || hs[2].owns(never)) &&
			(hs[0].owns(twice) || hs[1].owns(twice) || hs[2].owns(twice))
	})
	t.Logf("owned after %s: %s", took.Round(time.Millisecond), layout(hs))
	if n := hs[0].count(hs[0].failed, never); n < 1 {
		t.Errorf("n1 failed to acquire %d %d times, want at least 1", never, n)
	}
	failed := 0
	for _, h := range hs {
		failed += h.count(h.failed, twice)
	}
	if failed < 2 {
		t.Errorf("partition %d failed %d times, want at least 2", twice, failed)
	}
	if ms[0].Owned(never) {
		t.Errorf("n1 says it owns %d, whose Acquire fails", never)
	}
	if st := ms[0].Status(); st.AcquireFailures < 1 {
		t.Errorf("n1 counted %d acquire failures", st.AcquireFailures)
	}
	kv := e.kv()
	waitFor(t, 30*time.Second, "the lease of the failing partition held by another node", func() bool {
		en, err := kv.Get(t.Context(), partKey(never))
		if err != nil {
			return false
		}
		h, _ := decodeHolder(en.Value())
		return h.Node != "n1"
	})
}

// Claim takes a new partition's lease without Acquire; the others see it.
func testClaim(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(6)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions owned", func() bool { return settled(ms, hs, parts) })

	const p store.PartitionID = 100
	term, err := ms[0].Claim(p)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	hs[0].claimed(p, term)
	hs[0].add(p) // the catalog's owner lists the queue it created
	if term == 0 || !ms[0].Owned(p) {
		t.Fatalf("Claim = %d; Owned = %v", term, ms[0].Owned(p))
	}
	waitFor(t, 30*time.Second, "the others to see n1 own the claimed partition", func() bool {
		return ms[1].Status().Owners[p] == "n1" && ms[2].Status().Owners[p] == "n1"
	})
	for i, m := range ms {
		if node, ok := m.Owner(p); !ok || node != "n1" {
			t.Errorf("n%d: Owner(%d) = %q, %v; want n1", i+1, p, node, ok)
		}
	}
	if node, ok := ms[1].Owner(store.PartitionID(999)); ok {
		t.Errorf("Owner of a partition nobody holds = %q, want none", node)
	}
	if node, ok, err := ms[2].Holder(context.Background(), p); err != nil || !ok || node != "n1" {
		t.Errorf("n3: Holder(%d) = %q, %v, %v; want n1", p, node, ok, err)
	}
	if node, ok, err := ms[2].Holder(context.Background(), store.PartitionID(999)); err != nil || ok {
		t.Errorf("Holder of a partition nobody holds = %q, %v, %v; want none", node, ok, err)
	}
	if _, err := ms[1].Claim(p); !errors.Is(err, ErrHeld) {
		t.Errorf("Claim by another node = %v, want ErrHeld", err)
	}
	if _, err := ms[0].Claim(p); !errors.Is(err, ErrHeld) {
		t.Errorf("Claim again = %v, want ErrHeld", err)
	}
	if hs[1].owns(p) || hs[2].owns(p) {
		t.Errorf("another node acquired the claimed partition: %s", layout(hs))
	}
	for _, h := range hs[1:] {
		h.add(p)
	}
	all := append(parts, p)
	waitFor(t, 30*time.Second, "the claimed partition on its preferred node", func() bool {
		return settled(ms, hs, all) && balanced(hs, all)
	})
	t.Logf("%s", layout(hs))
}

// A second live node with the same name cannot start.
func testDuplicateName(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(4)
	ms, hs := e.startN(1, parts)
	start := time.Now()
	m, err := e.tryStart(1, "n1", e.host("n1", parts))
	if err == nil {
		m.Abandon()
		t.Fatal("a second n1 started")
	}
	if !errors.Is(err, ErrDuplicateNode) {
		t.Fatalf("second n1: %v, want ErrDuplicateNode", err)
	}
	t.Logf("second n1 refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
	waitFor(t, 30*time.Second, "the first n1 to own everything", func() bool { return settled(ms, hs, parts) })
	if st := ms[0].Status(); len(st.Members) != 1 {
		t.Errorf("members %v", st.Members)
	}

	// n1 crashes and restarts at once: the new instance waits for the old
	// one's membership to expire instead of failing, then takes over.
	e.ledger.kill("n1")
	ms[0].Abandon()
	e.ledger.revive("n1") // as a new instance
	h := e.host("n1", parts)
	start = time.Now()
	m = e.start(1, h)
	joined := time.Since(start)
	took := waitFor(t, 30*time.Second, "the restarted n1 to own everything", func() bool {
		return settled([]*Manager{m}, []*fakeHost{h}, parts)
	})
	t.Logf("n1 restarted after a crash: joined after %s, owns everything %s later", joined.Round(time.Millisecond),
		took.Round(time.Millisecond))
}

// Lost forgets a partition without deleting its lease; it is taken again
// once the lease expires.
func testLost(t *testing.T, nats []*natsnode.Node) {
	const ttl = 3 * time.Second
	e := newEnv(t, nats, ttl)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions balanced", func() bool {
		return settled(ms, hs, parts) && spread(hs) && balanced(hs, parts)
	})
	p := hs[0].ownedList()[0]
	kv := e.kv()
	before, err := kv.Get(t.Context(), partKey(p))
	if err != nil {
		t.Fatal(err)
	}
	acquired, released := hs[0].count(hs[0].acquired, p), hs[0].count(hs[0].released, p)

	hs[0].forget(p)
	ms[0].Lost(p)
	if ms[0].Owned(p) {
		t.Fatal("Owned after Lost")
	}
	// n1 no longer serves p: its status does not name itself p's owner.
	if st := ms[0].Status(); st.Owners[p] != "" || slices.Contains(st.Owned, p) {
		t.Errorf("n1's status after Lost: owner of %d %q, owned %v; want no owner, not owned", p, st.Owners[p], st.Owned)
	}
	if node, ok := ms[0].Owner(p); ok {
		t.Errorf("n1's Owner(%d) after Lost = %q, want none (its own lease it no longer holds)", p, node)
	}
	// The key was still n1's (no other node took p over), so n1 deletes
	// it at its revision, and p's preferred node (n1) takes it again at
	// once, not after the lease's TTL.
	took := waitFor(t, 30*time.Second, "the forgotten partition taken again", func() bool {
		return hs[0].count(hs[0].acquired, p) > acquired && settled(ms, hs, parts)
	})
	t.Logf("partition %d taken again %s after Lost (lease TTL %s)", p, took.Round(time.Millisecond), ttl)
	if n := hs[0].count(hs[0].released, p); n != released {
		t.Errorf("Release called %d times for the lost partition", n-released)
	}
	if took >= ttl {
		t.Errorf("taken again after %s: the lease was left to expire", took)
	}
	after, err := kv.Get(t.Context(), partKey(p))
	if err != nil || after.Revision() == before.Revision() {
		t.Fatalf("p's key after it was taken again: %v, %v; want a new revision", after, err)
	}

	// Lost never deletes another node's key: with an intruder's key in
	// place of n1's (written on n1's revision), n1's Lost leaves it.
	if err := intrude(t, nats[1], e.name, p, after.Revision(), time.Minute); err != nil {
		t.Fatal(err)
	}
	hs[0].forget(p)
	ms[0].Lost(p)
	ms[0].Close() // waits for Lost's delete
	en, err := kv.Get(t.Context(), partKey(p))
	if h, _ := decodeHolder(en.Value()); err != nil || h.Node != "intruder" {
		t.Fatalf("p's key after n1's Lost of a lease an intruder took: %+v, %v; want the intruder's", h, err)
	}
}

// A renewal refused because another holder wrote the key makes the node
// release the partition; the partition is taken again when that holder's
// lease expires.
func testRenewalRefused(t *testing.T, nats []*natsnode.Node) {
	const ttl = 3 * time.Second
	e := newEnv(t, nats, ttl)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions balanced", func() bool {
		return settled(ms, hs, parts) && balanced(hs, parts)
	})
	p := hs[0].ownedList()[0]
	released := hs[0].count(hs[0].released, p)

	// An intruder takes the key over, fenced on n1's revision, with a TTL.
	// A renewal in flight, or a stale read, refuses its write: try again.
	kv := e.kv()
	var start time.Time
	waitFor(t, 30*time.Second, "the intruder to write n1's lease", func() bool {
		en, err := kv.Get(t.Context(), partKey(p))
		if err != nil {
			return false
		}
		if h, _ := decodeHolder(en.Value()); h.Node != "n1" {
			return false
		}
		start = time.Now()
		return intrude(t, nats[1], e.name, p, en.Revision(), ttl) == nil
	})
	waitFor(t, 30*time.Second, "n1 to release the partition", func() bool {
		return hs[0].count(hs[0].released, p) > released && !ms[0].Owned(p)
	})
	// Within a renewal, unless the machine is too loaded to renew on time.
	t.Logf("n1 released partition %d %s after the intruder wrote its lease (renewed every %s)",
		p, time.Since(start).Round(time.Millisecond), ttl/3)
	waitFor(t, 30*time.Second, "the partition taken again after the intruder's lease expired", func() bool {
		return settled(ms, hs, parts)
	})
	t.Logf("partition %d owned again %s after the intrusion: %s", p, time.Since(start).Round(time.Millisecond), layout(hs))
}

// A renewal that a server still taking itself for the bucket's leader (a
// node rejoining after a cut) refuses at once, while the leader stores it,
// is a renewal: the node keeps its leases and its membership. The former
// leader is a subscriber on the bucket's subjects that refuses every
// write.
func testFormerLeaderRefusal(t *testing.T, nodes []*natsnode.Node) {
	e := newEnv(t, nodes, 3*time.Second)
	parts := partitions(4)
	ms, hs := e.startN(1, parts)
	waitFor(t, 30*time.Second, "partitions owned", func() bool { return settled(ms, hs, parts) })
	kv := e.kv()
	revs := map[string]uint64{}
	keys := []string{nodeKey("n1")}
	for _, p := range parts {
		keys = append(keys, partKey(p))
	}
	for _, key := range keys {
		en, err := kv.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		revs[key] = en.Revision()
	}
	nc, err := nodes[1].Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var refused atomic.Int64
	sub, err := nc.Subscribe("$KV."+bucketName(e.name)+".>", func(m *nats.Msg) {
		if m.Reply != "" && m.Respond([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}`)) == nil {
			refused.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Three rounds of renewals (every key renewed three times), each
	// refused by the former leader.
	want := int64(3 * len(revs))
	waitFor(t, 30*time.Second, "three rounds of renewals refused", func() bool { return refused.Load() >= want })
	for _, p := range parts {
		if n := hs[0].count(hs[0].released, p); n != 0 || !ms[0].Owned(p) {
			t.Errorf("partition %d released %d times, owned %v; want kept", p, n, ms[0].Owned(p))
		}
	}
	for key, rev := range revs {
		en, err := kv.Get(t.Context(), key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if h, _ := decodeHolder(en.Value()); h.Node != "n1" || en.Revision() <= rev {
			t.Errorf("%s holds %+v at revision %d (was %d); want n1's renewals", key, h, en.Revision(), rev)
		}
	}
	t.Logf("%d writes to the bucket refused by the former leader; %+v", refused.Load(), ms[0].Status().Members)
}

// A lease that expired while its holder could not renew it (the bucket's
// leader was lost: it elects another in 4-9 s), and that no other node
// took, is taken again by its holder at its next renewal, without the
// partition being released: its Host never hears of it. The expiry is a
// purge of the key (what a TTL's expiry leaves); one manager, so that no
// other takes the key first.
func testLeaseRetaken(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(3)
	ms, hs := e.startN(1, parts)
	waitFor(t, 30*time.Second, "partitions owned", func() bool { return settled(ms, hs, parts) })
	p := parts[1]
	released, acquired := hs[0].count(hs[0].released, p), hs[0].count(hs[0].acquired, p)
	kv := e.kv()
	if err := kv.Purge(t.Context(), partKey(p)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "n1 to take the expired lease again", func() bool { return ms[0].Status().Retaken > 0 })
	if r, a := hs[0].count(hs[0].released, p), hs[0].count(hs[0].acquired, p); r != released || a != acquired {
		t.Errorf("partition %d released %d and acquired %d more times, want the lease taken again without either", p, r-released, a-acquired)
	}
	if !ms[0].Owned(p) {
		t.Errorf("n1 no longer owns partition %d", p)
	}
	en, err := kv.Get(t.Context(), partKey(p))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := decodeHolder(en.Value()); h.Node != "n1" {
		t.Errorf("the key holds %+v, want n1", h)
	}
}

// intrude writes p's lease key as a holder no manager knows ("intruder"),
// fenced on revision rev, expiring after ttl.
func intrude(t *testing.T, n *natsnode.Node, bucket string, p store.PartitionID, rev uint64, ttl time.Duration) error {
	nc, err := n.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	intruder, _ := json.Marshal(holder{Node: "intruder", Instance: "x"})
	_, err = js.Publish(t.Context(), "$KV."+bucketName(bucket)+"."+partKey(p), intruder,
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	return err
}

// A partition the hosts no longer list (a deleted queue) is given up
// after Settle, and nobody takes it.
func testUnlisted(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(6)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions owned", func() bool { return settled(ms, hs, parts) })
	const p store.PartitionID = 5
	for _, h := range hs {
		h.remove(p)
	}
	kv := e.kv()
	took := waitFor(t, 10*e.cfg.Settle, "the unlisted partition given up", func() bool {
		for i, h := range hs {
			if h.owns(p) || ms[i].Owned(p) {
				return false
			}
		}
		_, err := kv.Get(t.Context(), partKey(p))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	t.Logf("unlisted partition given up after %s (Settle %s)", took.Round(time.Millisecond), e.cfg.Settle)
	if took < e.cfg.Settle {
		t.Errorf("given up after %s, before Settle", took)
	}
	waitFor(t, 30*time.Second, "the others settled", func() bool { return settled(ms, hs, parts[:5]) })
}

// A node cut off from NATS (its connection closed) keeps serving while
// its renewals fail (the store's fence is what would stop it), and the
// others take its partitions once the leases expire.
func testCutOff(t *testing.T, nats []*natsnode.Node) {
	const ttl = 3 * time.Second
	e := newEnv(t, nats, ttl)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions balanced", func() bool { return settled(ms, hs, parts) && balanced(hs, parts) })
	cut := hs[2].ownedList()

	e.ledger.kill(hs[2].name) // it can neither renew nor write
	kv := e.kv()
	start := time.Now()
	ms[2].cfg.Conn.Close()
	var renewed time.Time // the last write of the first lease
	if en, err := kv.Get(t.Context(), partKey(cut[0])); err == nil {
		renewed = en.Created()
	}
	waitFor(t, 30*time.Second, "the others to own every partition", func() bool { return settled(ms[:2], hs[:2], parts) })
	took := time.Since(start)
	st := ms[2].Status()
	t.Logf("n3 cut off: its partitions %v taken over after %s; n3 counted %d renew failures", cut,
		took.Round(time.Millisecond), st.RenewFailures)
	if st.RenewFailures == 0 {
		t.Error("no renew failures counted")
	}
	for _, p := range cut {
		if !ms[2].Owned(p) || !hs[2].owns(p) {
			t.Errorf("n3 stopped serving %d while its renewals merely failed", p)
		}
	}
	if earliest := renewed.Add(ttl).Sub(start) - 100*time.Millisecond; took < earliest {
		t.Errorf("taken over after %s, before the lease could expire (%s)", took, earliest)
	}
}

// A node that restarts (a new manager with the same name after Close)
// rejoins and gets its partitions back.
func testRestart(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	parts := partitions(12)
	ms, hs := e.startN(3, parts)
	waitFor(t, 30*time.Second, "partitions balanced", func() bool {
		return settled(ms, hs, parts) && balanced(hs, parts)
	})
	if len(hs[2].ownedList()) == 0 {
		t.Fatal("n3 is preferred for no partition")
	}
	ms[2].Close()
	waitFor(t, 30*time.Second, "n1 and n2 to own everything", func() bool { return settled(ms[:2], hs[:2], parts) })

	h := e.host("n3", parts)
	start := time.Now()
	m := e.start(2, h)
	ms[2], hs[2] = m, h
	waitFor(t, 30*time.Second, "the restarted n3 to get its partitions back", func() bool {
		return settled(ms, hs, parts) && balanced(hs, parts)
	})
	took := time.Since(start)
	t.Logf("rebalanced %s after the restart: %s", took.Round(time.Millisecond), layout(hs))
	if took < e.cfg.Settle {
		t.Errorf("rebalanced after %s, before Settle (%s)", took, e.cfg.Settle)
	}
	var handovers uint64
	for _, m := range ms[:2] {
		handovers += m.Status().Handovers
	}
	if handovers < uint64(len(h.ownedList())) {
		t.Errorf("handovers %d, want at least %d", handovers, len(h.ownedList()))
	}
}

// NotifyCatalog reaches the other nodes' hosts.
func testCatalogNotify(t *testing.T, nats []*natsnode.Node) {
	e := newEnv(t, nats, 3*time.Second)
	ms, hs := e.startN(3, partitions(3))
	waitFor(t, 30*time.Second, "partitions owned", func() bool { return settled(ms, hs, partitions(3)) })
	b1, b2 := hs[1].catalog.Load(), hs[2].catalog.Load()
	ms[0].NotifyCatalog()
	// Within less than catalogRefresh, so that the periodic call does not
	// count (it may come by chance; then this only checks less).
	took := waitFor(t, catalogRefresh-time.Second, "the others' CatalogChanged", func() bool {
		return hs[1].catalog.Load() > b1 && hs[2].catalog.Load() > b2
	})
	t.Logf("catalog change notified in %s", took.Round(time.Microsecond))
}

// One node with one NATS server: it owns everything; Close deletes its
// keys.
func TestSingleNode(t *testing.T) {
	node := natstest.Single(t)
	e := newEnv(t, []*natsnode.Node{node}, 2*time.Second)
	parts := partitions(4)
	ms, hs := e.startN(1, parts)
	waitFor(t, 30*time.Second, "one node to own everything", func() bool { return settled(ms, hs, parts) })
	kv := e.kv()
	ms[0].Close()
	if got := hs[0].ownedList(); len(got) != 0 {
		t.Errorf("owns %v after Close", got)
	}
	for _, key := range []string{partKey(0), partKey(3), nodeKey("n1")} {
		if _, err := kv.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("%s after Close: %v, want not found", key, err)
		}
	}

	// A bucket this server cannot make fails Start at once, without
	// waiting for its context.
	e.cfg.Cluster, e.cfg.Replicas = e.cfg.Cluster+"-r3", 3
	start := time.Now()
	if m, err := e.tryStart(0, "n1", e.host("n1", parts)); err == nil {
		m.Abandon()
		t.Fatal("3 replicas on one server: started")
	} else if took := time.Since(start); took > 10*time.Second {
		t.Errorf("3 replicas on one server: failed after %s: %v", took, err)
	} else {
		t.Logf("3 replicas on one server: %v", err)
	}
}

func equal(a, b []store.PartitionID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
