package natsnode_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/natsnode"
)

// TestClusterSecretRejectsBad: a cluster secret is checked at Start, and
// the error says what is wrong without quoting the secret.
func TestClusterSecretRejectsBad(t *testing.T) {
	t.Parallel()
	peers := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	for _, tc := range []struct {
		name   string
		secret string
		peers  []string
		want   string
	}{
		{"too short", "0123456789abcde", peers, "cluster secret is 15 bytes long; it must have from 16 to 256"},
		{"too long", strings.Repeat("a", 257), peers, "cluster secret is 257 bytes long"},
		{"a space", "0123456789 abcdef", peers, "cluster secret contains a space or a line break (byte 11 of 17)"},
		{"a line break", "0123456789abcdef\n", peers, "contains a space or a line break (byte 17 of 17)"},
		{"a colon", "0123456789:abcdef", peers, `cluster secret contains a character other than ASCII letters, digits and "-._~+/=" (byte 11 of 17)`},
		{"an at sign", "user@0123456789abcdef", peers, "(byte 5 of 21)"},
		{"a quote", `0123456789"abcdef`, peers, "(byte 11 of 17)"},
		{"a dollar", "$2a$0123456789abcdef", peers, "(byte 1 of 20)"},
		{"not ASCII", "0123456789abcdéf", peers, "(byte 15 of 17)"},
		{"without peers", "0123456789abcdef", nil, "cluster secret is set but there are no peers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natsnode.Config{Cluster: "c", Node: "n1", Dir: t.TempDir(), Peers: tc.peers, ClusterSecret: tc.secret}
			if tc.peers != nil {
				cfg.ClusterAddr = peers[0]
			}
			err := startRefused(t, cfg, tc.want)
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("Start: %v quotes the secret", err)
			}
		})
	}
	for _, ok := range []string{
		"0123456789abcdef",               // hex, the shortest
		"Zm9vYmFyYmF6cXV4Cg+/==",         // base64
		"Zm9vYmFyYmF6cXV4Cg-_",           // base64url
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ.~27", // base32 and the rest
		strings.Repeat("a", 256),         // the longest
	} {
		if err := natsnode.CheckClusterSecret(ok); err != nil {
			t.Errorf("CheckClusterSecret(%q): %v", ok, err)
		}
	}
}

// TestClusterSecret runs three nodes with one secret, n1 and n3 listing
// only n2 (and themselves) so that their route to each other is one
// dialled on gossip; then restarts n3 with a wrong secret, and with none.
// The three form a cluster; n3 with another secret refuses n2's route and
// n2 refuses n3's, and n3 says both when Ready gives up; n3 without one is refused by its
// peers and Ready fails at once; n1 and n2 stay ready throughout, and log
// the refusals. Every node logs at LevelTrace (each protocol message,
// CONNECT lines included): no line holds either secret.
func TestClusterSecret(t *testing.T) {
	t.Parallel()
	secret, wrong := "good-"+rand.Text(), "wrong-"+rand.Text()
	var logs [5]logBuffer // n1, n2, n3, n3 with the wrong secret, n3 without one
	cfgs := []natsnode.Config{
		{Node: "n1", ClusterAddr: "0", Peers: []string{"0", "1"}},
		{Node: "n2", ClusterAddr: "1", Peers: []string{"0", "1", "2"}},
		{Node: "n3", ClusterAddr: "2", Peers: []string{"1", "2"}},
	}
	for i := range cfgs {
		cfgs[i].Cluster, cfgs[i].ClusterSecret, cfgs[i].Logger = "secret", secret, logs[i].logger(natsnode.LevelTrace)
	}
	nodes := startNodes(t, 3, cfgs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	mustReady(ctx, t, nodes)
	peerNames := func(n *natsnode.Node) string {
		var names []string
		for _, p := range n.Peers() {
			names = append(names, p.Name)
		}
		return strings.Join(names, ",")
	}
	eventually(t, "every node routed to both others", func() error {
		for i, want := range []string{"n2,n3", "n1,n3", "n1,n2"} {
			if got := peerNames(nodes[i]); got != want {
				return fmt.Errorf("%s's peers: %q, want %q", nodes[i].Name(), got, want)
			}
		}
		return nil
	})
	for i := range 3 {
		if want := `msg="NATS node started" node=n` + fmt.Sprint(i+1) + ` cluster=secret`; !strings.Contains(logs[i].String(), want) ||
			!strings.Contains(logs[i].String(), "routes_authenticated=true") {
			t.Errorf("n%d's log lacks %s ... routes_authenticated=true", i+1, want)
		}
	}
	n1, n2 := nodes[0], nodes[1]
	stillReady := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for _, n := range []*natsnode.Node{n1, n2} {
			if err := n.Ready(ctx); err != nil {
				t.Errorf("%s %s: %v", n.Name(), when, err)
			}
		}
	}
	restart := func(secret string, log *logBuffer) *natsnode.Node {
		t.Helper()
		cfg := nodes[2].Config()
		nodes[2].Close()
		cfg.ClusterSecret, cfg.Logger = secret, log.logger(natsnode.LevelTrace)
		n, err := natsnode.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		nodes[2] = n
		return n
	}
	refusedLine := `level=ERROR msg="cluster secret does not match a peer's; the route is refused" node=`

	// n3 with another secret: n2 refuses its route, and it refuses n2's.
	n3 := restart(wrong, &logs[3])
	err := readyUntil(t, n3, func() bool {
		log := logs[3].String()
		// At Error, or at Debug if the refusal of n2's route to n3 came
		// first: refusals repeated within 30 s are logged at Debug.
		return strings.Contains(log, strings.TrimPrefix(refusedLine, "level=ERROR ")+`n3 peer_addr=`+n2.Config().ClusterAddr) &&
			strings.Contains(log, "this node refused a route from a peer")
	})
	if !errors.Is(err, natsnode.ErrRouteAuth) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready: %v\nwant ErrRouteAuth and Canceled", err)
	}
	for _, want := range []string{
		"a peer (route " + n2.Config().ClusterAddr + ") refused this node's route: its cluster secret differs from this node's",
		"this node refused a route from a peer (connection 127.0.0.1:",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Ready: %v; want it to say %s", err, want)
		}
	}
	if p := n3.Peers(); len(p) != 0 {
		t.Errorf("n3 with another secret has peers %+v", p)
	}
	eventually(t, "n2 logs the refusal of n3's route, and has no route to it", func() error {
		if want := "this node refused a route from a peer"; !strings.Contains(logs[1].String(), want) {
			return errors.New("n2's log lacks " + want)
		}
		if got := peerNames(n2); got != "n1" {
			return fmt.Errorf("n2's peers: %q", got)
		}
		return nil
	})
	for _, want := range []string{refusedLine + "n2", "the peer's cluster secret differs from this node's"} {
		if !strings.Contains(logs[1].String(), want) {
			t.Errorf("n2's log lacks %s", want)
		}
	}
	stillReady("with n3 on another secret")

	// n3 without a secret: n2 refuses its route, and Ready fails at once.
	// (n3 would accept n2's route, and join through it.)
	n3 = restart("", &logs[4])
	ctx, cancel = context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err = n3.Ready(ctx)
	if !errors.Is(err, natsnode.ErrRouteAuth) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ready: %v\nwant ErrRouteAuth before the deadline", err)
	}
	if want := "it requires a cluster secret and this node has none"; !strings.Contains(err.Error(), want) {
		t.Errorf("Ready: %v; want it to say %s", err, want)
	}
	if want := `level=ERROR msg="node not ready: a peer requires a cluster secret and this node has none" node=n3`; !strings.Contains(logs[4].String(), want) {
		t.Errorf("n3's log lacks %s", want)
	}
	eventually(t, "n2 logs that n3 has no secret", func() error {
		if want := "the peer has no cluster secret"; !strings.Contains(logs[1].String(), want) {
			return errors.New("n2's log lacks " + want)
		}
		return nil
	})
	n3.Close()
	stillReady("after n3 without a secret")

	for i := range logs {
		log := logs[i].String()
		for _, s := range []string{secret, wrong} {
			if j := strings.Index(log, s); j >= 0 {
				t.Errorf("log %d holds a secret: %s", i, log[max(0, j-200):j+len(s)])
			}
		}
	}
	// The trace lines were there to leak it: each node traced the CONNECT
	// of the routes it accepted, with the password redacted.
	for i := range 3 {
		if !slices.ContainsFunc(strings.Split(logs[i].String(), "\n"), func(l string) bool {
			return strings.Contains(l, "<<- [CONNECT") && strings.Contains(l, `\"user\":\"sluice\"`)
		}) {
			t.Errorf("n%d's log has no trace of a route's CONNECT", i+1)
		}
	}
}

// TestClusterSecretTurnedOn restarts the nodes of a cluster without a
// secret one at a time with one (docs/cluster.md): a node with the
// secret still routes to those without it, which accept any route, so
// the cluster stays whole, and the nodes with the secret are ready after
// each restart. (Those without it were ready before; Ready on them would
// now fail at once, as it does on a node started without the secret.)
func TestClusterSecretTurnedOn(t *testing.T) {
	t.Parallel()
	secret := rand.Text()
	all := []string{"0", "1", "2"}
	nodes := startNodes(t, 3, []natsnode.Config{
		{Cluster: "c", Node: "n1", ClusterAddr: "0", Peers: all},
		{Cluster: "c", Node: "n2", ClusterAddr: "1", Peers: all},
		{Cluster: "c", Node: "n3", ClusterAddr: "2", Peers: all},
	})
	// whole checks that the cluster is whole: every node is routed to both
	// others, and the nodes Ready is asked of are ready.
	whole := func(when string, askReady func(*natsnode.Node) bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for _, n := range nodes {
			if !askReady(n) {
				continue
			}
			if err := n.Ready(ctx); err != nil {
				t.Fatalf("%s: %s: %v", when, n.Name(), err)
			}
		}
		eventually(t, when+": every node routed to both others", func() error {
			for _, n := range nodes {
				if p := n.Peers(); len(p) != 2 {
					return fmt.Errorf("%s's peers: %+v", n.Name(), p)
				}
			}
			return nil
		})
	}
	whole("without a secret", func(*natsnode.Node) bool { return true })
	for i := range nodes {
		cfg := nodes[i].Config()
		nodes[i].Close()
		cfg.ClusterSecret = secret
		n, err := natsnode.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		nodes[i] = n
		whole(fmt.Sprintf("after n%d got the secret", i+1), func(n *natsnode.Node) bool { return n.Config().ClusterSecret != "" })
	}
}
