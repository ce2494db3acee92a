package jsstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/jsstore"
)

// TestLeaderLoss: the node leading a partition's stream goes away while
// appends are in flight (their acknowledgements may be lost with it).
// Every append still succeeds, once the stream has a new leader, and the
// stream holds each record exactly once, in order.
func TestLeaderLoss(t *testing.T) {
	nodes := natstest.Cluster(t, 3)
	cfg := jsstore.Config{Conn: connect(t, nodes[0]), Prefix: "loss", Replicas: 3, AckTimeout: time.Second}
	s := open(t, cfg)
	mustAppend(t, s, 1, 0, false, "r0")
	s.Close()

	leader := streamLeader(t, nodes, "loss_P1")
	var writer, reader *natsnode.Node
	for _, n := range nodes {
		switch {
		case n == leader:
		case writer == nil:
			writer = n
		default:
			reader = n
		}
	}
	cfg.Conn = connect(t, writer)
	s = open(t, cfg)
	if err := s.ReplayPartition(1, 0, func(store.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}

	want, killAt, done := appendUnder(s, 400, 100)
	<-killAt
	t0 := time.Now()
	leader.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("the appends went on %v after the stream leader %s stopped", time.Since(t0).Round(time.Millisecond), leader.Name())
	if st := s.Stats(); st.FailedWrites != 0 {
		t.Fatalf("%d failed writes", st.FailedWrites)
	}
	s.Close()

	cfg.Conn = connect(t, reader)
	r := open(t, cfg)
	if got := replay(t, r).data(1); !slices.Equal(got, want) {
		t.Fatalf("after the leader's loss the partition holds %d records (want %d): a record lost or doubled", len(got), len(want))
	}
	st := streamState(t, cfg.Conn, "loss_P1")
	t.Logf("stream: %d messages, last sequence %d", st.Msgs, st.LastSeq)
}

// appendUnder appends records r1 … rn to partition 1 of s (which holds
// r0), eight at a time, in the background. It returns every record the
// partition should then hold, a channel closed once at of them are
// durable (for the test to act while appends go on), and one that reports
// how the appends ended.
func appendUnder(s *jsstore.Store, n, at int) (want []string, reached <-chan struct{}, done <-chan error) {
	const window = 8
	want = []string{"r0"}
	for i := range n {
		want = append(want, fmt.Sprint("r", i+1))
	}
	signal, end := make(chan struct{}), make(chan error, 1)
	go func() {
		signal := signal // closed once, then nil
		last := uint64(1)
		for last < uint64(n)+1 {
			var fs []store.Future
			for j := 0; j < window && last+uint64(j) < uint64(n)+1; j++ {
				p := last + uint64(j)
				fs = append(fs, s.Append(1, p, []store.Rec{{Data: []byte(want[p])}}))
			}
			for _, f := range fs {
				if err := f.Wait(context.Background()); err != nil {
					end <- fmt.Errorf("append ending at %d: %w", last+1, err)
					return
				}
				last++
			}
			if last >= uint64(at) && signal != nil {
				close(signal)
				signal = nil
			}
		}
		end <- nil
	}()
	return want, signal, end
}

// streamLeader is the node that leads a stream.
func streamLeader(t *testing.T, nodes []*natsnode.Node, stream string) *natsnode.Node {
	t.Helper()
	name := leaderName(t, nodes, stream)
	for _, n := range nodes {
		if n.Name() == name {
			return n
		}
	}
	t.Fatalf("stream %s is led by %q, not one of the nodes", stream, name)
	return nil
}

// leaderName names the server that leads a stream: "" while it has none,
// or none answers within a few seconds.
func leaderName(t *testing.T, nodes []*natsnode.Node, stream string) string {
	t.Helper()
	nc := connect(t, nodes[0])
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := js.Stream(c, stream)
	if err != nil {
		t.Logf("stream %s: %v", stream, err)
		return ""
	}
	info, err := st.Info(c)
	if err != nil || info.Cluster == nil {
		t.Logf("stream %s: %v", stream, err)
		return ""
	}
	return info.Cluster.Leader
}

// TestLead: Lead moves a partition's stream leader to the store's own
// server, on an idle partition at once, and under a stream of appends
// between two of them: no append is in flight while the leader changes,
// so none goes unanswered (a publish that reaches a leader as it steps
// down is dropped, and would be sent again only after AckTimeout).
func TestLead(t *testing.T) {
	nodes := natstest.Cluster(t, 3)
	cfg := jsstore.Config{Conn: connect(t, nodes[0]), Prefix: "lead", Replicas: 3}
	s := open(t, cfg)
	mustAppend(t, s, 1, 0, false, "r0")
	s.Close()
	others := func(not *natsnode.Node) []*natsnode.Node {
		return slices.DeleteFunc(slices.Clone(nodes), func(n *natsnode.Node) bool { return n == not })
	}
	acquire := func(n *natsnode.Node) *jsstore.Store {
		cfg.Conn = connect(t, n)
		s := open(t, cfg)
		if err := s.ReplayPartition(1, 0, func(store.Entry) error { return nil }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitLeader := func(want *natsnode.Node) {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond) // polled until the deadline
		defer tick.Stop()
		deadline := time.After(20 * time.Second)
		for leaderName(t, nodes, "lead_P1") != want.Name() {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("the stream is led by %q, not the store's server %s", leaderName(t, nodes, "lead_P1"), want.Name())
			}
		}
	}

	// Idle: no write to wait for.
	idle := others(streamLeader(t, nodes, "lead_P1"))[0]
	s = acquire(idle)
	s.Lead(1)
	waitLeader(idle)
	s.Close()

	// Under appends.
	busy := others(idle)[0]
	s = acquire(busy)
	want, leadAt, done := appendUnder(s, 300, 50)
	<-leadAt
	s.Lead(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitLeader(busy)
	if st := s.Stats(); st.ResentWrites != 0 || st.FailedWrites != 0 {
		t.Fatalf("%d writes sent again after no answer, %d failed, while the leader moved", st.ResentWrites, st.FailedWrites)
	}
	s.Close()
	cfg.Conn = connect(t, nodes[0])
	if got := replay(t, open(t, cfg)).data(1); !slices.Equal(got, want) {
		t.Fatalf("the partition holds %d records (want %d): a record lost or doubled", len(got), len(want))
	}
}
