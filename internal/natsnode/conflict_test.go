package natsnode_test

import (
	"bytes"
	"context"
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
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
)

// logBuffer collects a node's log lines for the test to search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}

// startNodes starts a node for each of cfgs after giving them free
// loopback ports: cfgs[i].ClusterAddr and every Peers entry are indexes
// ("0", "1", ...) into addrs free ports. It retries with other
// ports if one was taken meanwhile, and closes the nodes when t ends.
func startNodes(t *testing.T, addrs int, cfgs []natsnode.Config) []*natsnode.Node {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ports, err := natstest.FreePorts(addrs)
		if err != nil {
			t.Fatal(err)
		}
		addr := func(i string) string {
			var n int
			fmt.Sscan(i, &n)
			return net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[n]))
		}
		var nodes []*natsnode.Node
		for _, cfg := range cfgs {
			cfg.ClusterAddr = addr(cfg.ClusterAddr)
			peers := make([]string, len(cfg.Peers))
			for j, p := range cfg.Peers {
				peers[j] = addr(p)
			}
			cfg.Peers = peers
			if cfg.Dir == "" {
				cfg.Dir = t.TempDir()
			}
			var node *natsnode.Node
			node, err = natsnode.Start(cfg)
			if err != nil {
				break
			}
			nodes = append(nodes, node)
		}
		if err == nil {
			t.Cleanup(func() {
				for _, n := range nodes {
					n.Close()
				}
			})
			return nodes
		}
		for _, n := range nodes {
			n.Close()
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			t.Fatal(err)
		}
	}
}

// readyUntil calls n.Ready until cond holds (polled, at most waitTimeout),
// then cancels Ready's context and returns its error. Ready must not
// return before.
func readyUntil(t *testing.T, n *natsnode.Node, cond func() bool) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Ready(ctx) }()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("Ready returned early: %v", err)
		case <-time.After(20 * time.Millisecond): // polling interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s", waitTimeout)
		}
	}
	cancel()
	return <-done
}

// TestNoQuorum starts one node of three: Ready waits, says so after 5 s,
// and returns ctx's error when ctx ends.
func TestNoQuorum(t *testing.T) {
	t.Parallel()
	var log logBuffer
	all := []string{"0", "1", "2"}
	n := startNodes(t, 3, []natsnode.Config{
		{Cluster: "c", Node: "n1", ClusterAddr: "0", Peers: all, Logger: log.logger(slog.LevelInfo)},
	})[0]
	warned := `level=WARN msg="waiting for a JetStream quorum" node=n1 waited=5s peers_connected=0 peers_configured=3`
	err := readyUntil(t, n, func() bool { return strings.Contains(log.String(), warned) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready: %v, want Canceled", err)
	}
	if !strings.Contains(err.Error(), "0 of 3 peers connected") {
		t.Errorf("Ready: %v; want it to say how many peers are connected", err)
	}
	for _, want := range []string{
		warned,
		`hint="a new cluster elects its first meta leader only once every node in Peers is up`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s\nlog:\n%s", want, log.String())
		}
	}
	if got := n.MetaLeader(); got != "" {
		t.Errorf("meta leader %q without a quorum", got)
	}
}

// TestClusterNameMismatch restarts one node of a running cluster with
// another cluster name: its routes are refused, it never becomes ready,
// and both its log and Ready's error say why. The other two keep a quorum.
func TestClusterNameMismatch(t *testing.T) {
	t.Parallel()
	nodes := natstest.Cluster(t, 3)
	cfg := nodes[2].Config()
	nodes[2].Close()
	var log logBuffer
	cfg.Cluster = "wrong"
	cfg.Logger = log.logger(slog.LevelInfo)
	n, err := natsnode.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)

	refused := `level=ERROR msg="cluster name does not match a peer's; the route is refused" node=n3 cluster=wrong peer_cluster=natstest-`
	err = readyUntil(t, n, func() bool { return strings.Contains(log.String(), refused) })
	if !errors.Is(err, natsnode.ErrClusterNameMismatch) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready: %v\nwant ErrClusterNameMismatch and Canceled", err)
	}
	if want := `this node "wrong"`; !strings.Contains(err.Error(), want) {
		t.Errorf("Ready: %v; want it to say %s", err, want)
	}
	if p := n.Peers(); len(p) != 0 {
		t.Errorf("peers %+v despite the cluster name", p)
	}

	// The two well configured nodes still have a meta leader.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, n := range nodes[:2] {
		if err := n.Ready(ctx); err != nil {
			t.Errorf("%s: %v", n.Name(), err)
		}
	}
}

// TestDuplicateNodeName starts a new cluster whose first and third node
// share a name: Ready on both fails at once, saying so.
func TestDuplicateNodeName(t *testing.T) {
	t.Parallel()
	var logs [3]logBuffer
	all := []string{"0", "1", "2"}
	nodes := startNodes(t, 3, []natsnode.Config{
		{Cluster: "c", Node: "n1", ClusterAddr: "0", Peers: all, Logger: logs[0].logger(slog.LevelInfo)},
		{Cluster: "c", Node: "n2", ClusterAddr: "1", Peers: all, Logger: logs[1].logger(slog.LevelInfo)},
		{Cluster: "c", Node: "n1", ClusterAddr: "2", Peers: all, Logger: logs[2].logger(slog.LevelInfo)},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, i := range []int{0, 2} {
		err := nodes[i].Ready(ctx)
		if !errors.Is(err, natsnode.ErrDuplicateNodeName) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("node %d: Ready: %v, want ErrDuplicateNodeName before the deadline", i, err)
			continue
		}
		if want := `also named "n1"`; !strings.Contains(err.Error(), want) {
			t.Errorf("node %d: Ready: %v; want it to say %s", i, err, want)
		}
		if want := `level=ERROR msg="another node uses this node's name; the route is refused" node=n1`; !strings.Contains(logs[i].String(), want) {
			t.Errorf("node %d: log lacks %s\nlog:\n%s", i, want, logs[i].String())
		}
	}
}

// mustReady waits until every node has its JetStream quorum (Ready), or
// ends the test.
func mustReady(ctx context.Context, t *testing.T, nodes []*natsnode.Node) {
	t.Helper()
	for _, n := range nodes {
		if err := n.Ready(ctx); err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
	}
}
