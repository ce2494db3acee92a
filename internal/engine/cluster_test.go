package engine

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// twoNodes are two clustered engines over one replicated log (the memory
// store: one log both write, fenced by position as JetStream fences by
// sequence), with the manager's part played by the test.
type twoNodes struct {
	s    *store.Memory
	clk  *clock.Fake
	a, b *Engine
	mu   sync.Mutex
	lost map[string][]store.PartitionID
}

func newTwoNodes(t *testing.T) *twoNodes {
	n := unopenedNodes()
	n.a, n.b = n.open(t, "a", n.s, nil), n.open(t, "b", n.s, nil)
	return n
}

// unopenedNodes is twoNodes before its engines are opened.
func unopenedNodes() *twoNodes {
	return &twoNodes{s: store.NewMemory(), clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), lost: map[string][]store.PartitionID{}}
}

// open opens node's clustered engine over s (logging to logger; nil:
// nowhere), whose lost partitions n notes; the test's end closes it.
func (n *twoNodes) open(t *testing.T, node string, s store.Store, logger *slog.Logger) *Engine {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e, err := Open(Config{Store: s, Region: "us-east-1", AccountID: "000000000000", MaxQueues: 100, Clock: n.clk,
		Logger: logger, Node: node, Cluster: testCluster{lost: func(p store.PartitionID) {
			n.mu.Lock()
			n.lost[node] = append(n.lost[node], p)
			n.mu.Unlock()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// testCluster is the test's part of the cluster: it notes the
// partitions an engine lost, and asks nobody else anything.
type testCluster struct {
	Single
	lost func(store.PartitionID)
}

func (c testCluster) Lost(p store.PartitionID) { c.lost(p) }

func (n *twoNodes) lostBy(node string) []store.PartitionID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]store.PartitionID(nil), n.lost[node]...)
}

// A clustered engine serves only what it acquired: the catalog's owner
// creates queues, the other node sees them in its view, and a partition
// taken over by the other node (replay, epoch record) fences its former
// owner, which stops and says so; the messages are all there.
func TestClusteredEnginesHandOver(t *testing.T) {
	n := newTwoNodes(t)
	if _, err := n.b.CreateQueue(ctx, "q", nil, nil); err == nil {
		t.Fatal("a node that does not own the catalog created a queue")
	}
	if err := n.a.Acquire(store.Catalog, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := n.a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	p, local, err := n.a.Route("q")
	if err != nil || !local {
		t.Fatalf("the creating node routes q: %d %v %v", p, local, err)
	}
	oa, _ := n.a.Queue("q")
	for i := 0; i < 30; i++ {
		if _, _, err := oa.Send(ctx, []st.SendInput{{Body: "m"}}, false); err != nil {
			t.Fatal(err)
		}
	}
	// b's view learns of q; it does not own it.
	if bp, blocal, err := n.b.Route("q"); err != nil || blocal || bp != p {
		t.Fatalf("the other node routes q: %d %v %v, want %d remote", bp, blocal, err, p)
	}
	if err := n.b.Acquire(p, 2); err != nil {
		t.Fatal(err)
	}
	if _, blocal, _ := n.b.Route("q"); !blocal {
		t.Fatal("after acquiring, q is not local on b")
	}
	// a's owner is fenced on its next write, stops, and tells.
	if _, _, err := oa.Send(ctx, []st.SendInput{{Body: "late"}}, false); err == nil {
		t.Fatal("the former owner's send succeeded")
	}
	waitFor(t, "the former owner reports the partition lost", func() bool {
		l := n.lostBy("a")
		return len(l) == 1 && l[0] == p
	})
	if _, alocal, _ := n.a.Route("q"); alocal {
		t.Fatal("the fenced node still routes q to itself")
	}
	ob, _ := n.b.Queue("q")
	got := 0
	for {
		ms, err := ob.Receive(ctx, st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		got += len(ms)
	}
	if got != 30 {
		t.Fatalf("the new owner has %d messages, want 30", got)
	}
	// The catalog moves too: b takes it, and a's next catalog write is
	// fenced.
	if err := n.b.Acquire(store.Catalog, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := n.a.CreateQueue(ctx, "r", nil, nil); err == nil {
		t.Fatal("the former catalog owner created a queue")
	}
	if n.a.OwnsCatalog() {
		t.Fatal("the fenced catalog owner still owns the catalog")
	}
	if _, err := n.b.CreateQueue(ctx, "r", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Deleting q on the catalog's owner, which owns q too, drops it; a
	// sees the catalog change.
	if err := n.b.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	n.a.CatalogChanged()
	if _, _, err := n.a.Route("q"); err == nil {
		t.Fatal("a deleted queue still routes")
	}
	if names, _, _ := n.a.ListQueues("", 0, "", nil); len(names) != 1 || names[0] != "r" {
		t.Fatalf("a lists %v, want [r]", names)
	}
	if ps, _ := n.s.Partitions(); len(ps) != 2 {
		t.Fatalf("partitions left: %v, want the catalog and r's", ps)
	}
}

// A partition the catalog does not name (its queue's creation was cut
// short: the catalog's owner died between the queue's first record and
// its Create) is dropped by the next owner of the catalog, and no new
// queue gets its id.
func TestCatalogOwnerDropsOrphans(t *testing.T) {
	n := newTwoNodes(t)
	if err := n.a.Acquire(store.Catalog, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := n.a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	// The orphan: a queue's settings in partition 7, no Create for it.
	meta := record.Encode(&record.Record{Type: record.Meta, Meta: &record.QueueMeta{ID: 7, Name: "half"}})
	if err := n.s.Append(7, 0, []store.Rec{{Data: meta}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.b.Acquire(store.Catalog, 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphan is dropped", func() bool {
		ps, err := n.s.Partitions()
		return err == nil && !slices.Contains(ps, 7)
	})
	if ps, _ := n.s.Partitions(); !slices.Contains(ps, 1) {
		t.Fatalf("partitions %v: the live queue's is gone", ps)
	}
	if _, err := n.b.CreateQueue(ctx, "next", nil, nil); err != nil {
		t.Fatal(err)
	}
	if p, _, err := n.b.Route("next"); err != nil || p <= 7 {
		t.Fatalf("the next queue got partition %d (%v), want one past the orphan's 7", p, err)
	}
	if _, err := n.b.GetQueue("half"); err == nil {
		t.Fatal("the orphan's queue exists")
	}
}

// replayHook is a store whose first ReplayPartition of partition p from
// its start runs after once the replay has read the partition, before it
// returns: a write another node lands between a takeover's replay and
// its claim.
type replayHook struct {
	*store.Memory
	p     store.PartitionID
	after func()
	once  sync.Once
}

func (s *replayHook) ReplayPartition(p store.PartitionID, from uint64, fn func(store.Entry) error) error {
	err := s.Memory.ReplayPartition(p, from, fn)
	if p == s.p && from == 0 {
		s.once.Do(s.after)
	}
	return err
}

// A takeover whose claim is fenced by a write of the former owner that
// landed after its replay replays again and serves; the fenced claim is
// the acquisition's own business, not a lost lease: the node does not
// tell its manager the partition was lost (which would drop the lease it
// is acquiring under and take it again onto a partition owned here).
func TestFencedClaimKeepsTheLease(t *testing.T) {
	n := unopenedNodes()
	var blog lockedBuffer // b's log: it says when its fenced claim's owner was heard of
	a := n.open(t, "a", n.s, nil)
	if err := a.Acquire(store.Catalog, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	p, _, err := a.Route("q")
	if err != nil {
		t.Fatal(err)
	}
	oa, _ := a.Queue("q")
	if _, _, err := oa.Send(ctx, []st.SendInput{{Body: "before"}}, false); err != nil {
		t.Fatal(err)
	}
	b := n.open(t, "b", &replayHook{Memory: n.s, p: p, after: func() {
		if _, _, err := oa.Send(ctx, []st.SendInput{{Body: "after the replay"}}, false); err != nil {
			t.Errorf("the former owner's send between the replay and the claim: %v", err)
		}
	}}, slog.New(slog.NewTextHandler(&blog, nil)))
	if err := b.Acquire(p, 2); err != nil {
		t.Fatalf("the takeover whose first claim was fenced: %v", err)
	}
	if _, local, _ := b.Route("q"); !local {
		t.Fatal("after acquiring, q is not local on b")
	}
	ob, _ := b.Queue("q")
	if _, _, err := ob.Send(ctx, []st.SendInput{{Body: "new owner"}}, false); err != nil {
		t.Fatalf("the new owner's send: %v", err)
	}
	// The fenced claim's owner is heard of on a goroutine of its own:
	// wait until b has, then it must not have told its manager.
	waitFor(t, "b hears of its fenced claim", func() bool {
		return strings.Contains(blog.String(), "was fenced") || strings.Contains(blog.String(), "took a partition over")
	})
	// The former owner is fenced on its next write and tells its own.
	if _, _, err := oa.Send(ctx, []st.SendInput{{Body: "late"}}, false); err == nil {
		t.Fatal("the former owner's send succeeded")
	}
	waitFor(t, "the former owner reports the partition lost", func() bool {
		return slices.Contains(n.lostBy("a"), p)
	})
	if lb := n.lostBy("b"); len(lb) > 0 {
		t.Fatalf("b told its manager it lost %v while it acquired and serves partition %d", lb, p)
	}
	got := receiveAll(t, b, "q")
	slices.Sort(got)
	if want := []string{"after the replay", "before", "new owner"}; !slices.Equal(got, want) {
		t.Fatalf("the new owner has %q, want %q", got, want)
	}
}

// lockedBuffer is a log's bytes, written and read from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
