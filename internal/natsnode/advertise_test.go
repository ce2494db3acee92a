package natsnode_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/natsnode/natstest"
)

// TestClusterAdvertiseRejectsBad: an advertised route address is checked
// like the route listener's, and only makes sense with peers.
func TestClusterAdvertiseRejectsBad(t *testing.T) {
	t.Parallel()
	peers := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	for _, tc := range []struct {
		name string
		cfg  natsnode.Config
		want string
	}{
		{"no port", natsnode.Config{Cluster: "c", ClusterAddr: peers[0], Peers: peers, ClusterAdvertise: "10.0.0.1"},
			`cluster advertise address: "10.0.0.1" is not host:port`},
		{"port 0", natsnode.Config{Cluster: "c", ClusterAddr: peers[0], Peers: peers, ClusterAdvertise: "10.0.0.1:0"},
			`port "0" is not a number from 1 to 65535`},
		{"host with a space", natsnode.Config{Cluster: "c", ClusterAddr: peers[0], Peers: peers, ClusterAdvertise: "a b:4248"},
			"host contains a space"},
		{"without peers", natsnode.Config{ClusterAdvertise: "10.0.0.1:4248"},
			`cluster advertise address "10.0.0.1:4248" is set but there are no peers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Node, tc.cfg.Dir = "n1", t.TempDir()
			n, err := natsnode.Start(tc.cfg)
			if err == nil {
				n.Close()
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, natsnode.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v\nwant an ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

// TestClusterAdvertise checks that peers which learn a node's route by
// gossip dial the address it advertises, not the one it listens on: n1
// and n3 list only n2 (and themselves) in Peers, so they learn of each
// other from n2, and each advertises a forwarder in front of its route
// listener (as a node behind NAT or in a container advertises what its
// peers can reach). The route between n1 and n3 must go through a
// forwarder.
func TestClusterAdvertise(t *testing.T) {
	t.Parallel()
	fwd := []*forwarder{newForwarder(t), nil, newForwarder(t)}
	var nodes []*natsnode.Node
	for attempt := 1; ; attempt++ {
		ports, err := natstest.FreePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		addr := make([]string, 3)
		for i, p := range ports {
			addr[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		}
		fwd[0].setTarget(addr[0])
		fwd[2].setTarget(addr[2])
		cfgs := []natsnode.Config{
			{Node: "n1", ClusterAddr: addr[0], Peers: []string{addr[0], addr[1]}, ClusterAdvertise: fwd[0].addr()},
			{Node: "n2", ClusterAddr: addr[1], Peers: addr},
			{Node: "n3", ClusterAddr: addr[2], Peers: []string{addr[1], addr[2]}, ClusterAdvertise: fwd[2].addr()},
		}
		nodes = nodes[:0]
		for _, cfg := range cfgs {
			cfg.Cluster, cfg.Dir, cfg.Logger = "advertise", t.TempDir(), natstest.Logger(t)
			var n *natsnode.Node
			if n, err = natsnode.Start(cfg); err != nil {
				break
			}
			nodes = append(nodes, n)
		}
		if err == nil {
			break
		}
		for _, n := range nodes {
			n.Close()
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range slices.Backward(nodes) {
			n.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), natstest.ReadyTimeout)
	defer cancel()
	mustReady(ctx, t, nodes)
	names := func(n *natsnode.Node) []string {
		var out []string
		for _, p := range n.Peers() {
			out = append(out, p.Name)
		}
		return out
	}
	eventually(t, "a route between n1 and n3", func() error {
		if got := names(nodes[0]); !slices.Equal(got, []string{"n2", "n3"}) {
			return errors.New("n1's peers: " + strings.Join(got, ","))
		}
		if got := names(nodes[2]); !slices.Equal(got, []string{"n1", "n2"}) {
			return errors.New("n3's peers: " + strings.Join(got, ","))
		}
		return nil
	})
	if a, b := fwd[0].accepted.Load(), fwd[2].accepted.Load(); a+b == 0 {
		t.Errorf("n1 and n3 are routed, but neither dialled the other's advertised address")
	}
}

// forwarder is a TCP forwarder on a loopback port, in front of a target
// set later: what a NAT or a container's port mapping does.
type forwarder struct {
	ln       net.Listener
	accepted atomic.Int64

	wg sync.WaitGroup

	mu     sync.Mutex // guards target, conns and closed
	target string
	conns  []net.Conn
	closed bool
}

func newForwarder(t *testing.T) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) setTarget(addr string) {
	f.mu.Lock()
	f.target = addr
	f.mu.Unlock()
}

func (f *forwarder) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		f.mu.Lock()
		target := f.target
		f.mu.Unlock()
		d, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			c.Close()
			d.Close()
			return
		}
		f.conns = append(f.conns, c, d)
		f.mu.Unlock()
		f.wg.Go(func() { io.Copy(d, c); d.Close() })
		f.wg.Go(func() { io.Copy(c, d); c.Close() })
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
