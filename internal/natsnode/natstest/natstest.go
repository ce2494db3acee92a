// Package natstest starts embedded NATS nodes (package natsnode) for
// tests: a cluster of n nodes in the test's process, on free loopback
// ports, each with its own temporary store, or a single node.
//
// The nodes are ready (JetStream usable) when the functions return and are
// closed when the test ends. Their log goes to t.Log at Warn and above, so
// it shows when a test fails or runs with -v.
package natstest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/natsnode"
)

// ReadyTimeout is how long Cluster and Single wait for JetStream. Generous:
// a meta election takes up to ~7 s, more on a loaded machine.
const ReadyTimeout = 30 * time.Second

// startAttempts bounds the retries when another process takes a port
// between picking it and listening on it.
const startAttempts = 5

// Cluster starts n clustered nodes named "n1" to "n<n>", with a cluster
// name of their own, waits until every one of them is Ready and the meta
// leader can place stream replicas on all of them, and closes them when
// the test ends. Each node listens for routes on a free loopback port and
// has no client listener: connect with Node.Connect. A cluster of 1 is
// Single, since nats-server cannot cluster a node with itself alone.
func Cluster(t testing.TB, n int) []*natsnode.Node {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: Cluster of %d nodes", n)
	}
	if n == 1 {
		return []*natsnode.Node{Single(t)}
	}
	log := Logger(t)
	cluster := "natstest-" + rand.Text()[:8]
	var nodes []*natsnode.Node
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		nodes, err = startCluster(t, cluster, n, log)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		t.Logf("natstest: attempt %d: %v; picking other ports", attempt, err)
	}
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() { closeAll(nodes) })

	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() { errs[i] = node.Ready(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("natstest: cluster of %d not ready: %v", n, err)
	}
	// Ready means the meta group works, but the meta leader places a
	// stream's replicas only on peers whose statistics it has received,
	// a moment later: until then an R3 stream cannot be created (10005 no
	// suitable peers for placement). nats-server's own tests wait for the
	// same (waitOnClusterReady).
	for {
		if placeable(nodes) == n {
			return nodes
		}
		select {
		case <-ctx.Done():
			t.Fatalf("natstest: the meta leader of the cluster of %d can place replicas on %d of them after %s",
				n, placeable(nodes), ReadyTimeout)
		case <-time.After(10 * time.Millisecond): // polling interval
		}
	}
}

// placeable is how many peers the current meta leader among nodes can place
// stream replicas on; 0 if none of them leads.
func placeable(nodes []*natsnode.Node) int {
	for _, n := range nodes {
		if s := n.Server(); s.JetStreamIsLeader() {
			return len(s.JetStreamClusterPeers())
		}
	}
	return 0
}

// startCluster starts n nodes on freshly picked ports; on an error it
// closes the ones it started.
func startCluster(t testing.TB, cluster string, n int, log *slog.Logger) ([]*natsnode.Node, error) {
	ports, err := FreePorts(n)
	if err != nil {
		return nil, err
	}
	peers := make([]string, n)
	for i, p := range ports {
		peers[i] = net.JoinHostPort("127.0.0.1", fmt.Sprint(p))
	}
	nodes := make([]*natsnode.Node, 0, n)
	for i := range n {
		node, err := natsnode.Start(natsnode.Config{
			Cluster:     cluster,
			Node:        fmt.Sprintf("n%d", i+1),
			Dir:         t.TempDir(),
			ClusterAddr: peers[i],
			Peers:       peers,
			Logger:      log,
		})
		if err != nil {
			closeAll(nodes)
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// Single starts one node without clustering, waits until it is Ready, and
// closes it when the test ends.
func Single(t testing.TB) *natsnode.Node {
	t.Helper()
	node, err := natsnode.Start(natsnode.Config{Node: "n1", Dir: t.TempDir(), Logger: Logger(t)})
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(node.Close)
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := node.Ready(ctx); err != nil {
		t.Fatalf("natstest: single node not ready: %v", err)
	}
	return node
}

// closeAll closes nodes in reverse order, as a test's cleanups would.
func closeAll(nodes []*natsnode.Node) {
	for i := len(nodes) - 1; i >= 0; i-- {
		nodes[i].Close()
	}
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago. Another process may take one before it is used; a caller that
// listens on it must be ready to pick again.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natstest: pick a port: %w", err)
		}
		// Kept open until all are picked, so that the n are distinct.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Logger returns a logger that writes Warn and above to t.Log until the
// test's cleanups have run; lines logged later (by goroutines still
// stopping) are dropped, since t.Log panics after a test completed.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first, so it runs after the nodes' Close
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	t       testing.TB
	mu      sync.Mutex
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}
