package natsnode_test

import (
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicemq/sluice/internal/natsnode"
)

func TestStartRejectsBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	peers := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	// valid is a clustered config that passes validation; each case breaks
	// one thing. None of them gets as far as listening.
	valid := func() natsnode.Config {
		return natsnode.Config{Cluster: "c", Node: "n1", Dir: dir, ClusterAddr: peers[0], Peers: peers}
	}
	for _, tc := range []struct {
		name   string
		modify func(*natsnode.Config)
		want   string
	}{
		{"no node name", func(c *natsnode.Config) { c.Node = "" }, "node name is required"},
		{"node name with a space", func(c *natsnode.Config) { c.Node = "n 1" }, `node name "n 1" contains a space`},
		{"no dir", func(c *natsnode.Config) { c.Dir = "" }, "dir is required"},
		{"dir under a file", func(c *natsnode.Config) { c.Dir = filepath.Join(file, "sub") }, "dir: mkdir"},
		{"peers without cluster name", func(c *natsnode.Config) { c.Cluster = "" }, "cluster name is required when peers are set"},
		{"cluster name with a space", func(c *natsnode.Config) { c.Cluster = "my cluster" }, `cluster name "my cluster" contains a space`},
		{"peers without cluster address", func(c *natsnode.Config) { c.ClusterAddr = "" }, "cluster address is required when peers are set"},
		{"cluster address without port", func(c *natsnode.Config) { c.ClusterAddr = "127.0.0.1" }, `cluster address: "127.0.0.1" is not host:port`},
		{"cluster address port 0", func(c *natsnode.Config) { c.ClusterAddr = "127.0.0.1:0" }, `port "0" is not a number from 1 to 65535`},
		{"cluster address port too big", func(c *natsnode.Config) { c.ClusterAddr = "127.0.0.1:65536" }, `port "65536" is not a number`},
		{"cluster address port not a number", func(c *natsnode.Config) { c.ClusterAddr = "127.0.0.1:http" }, `port "http" is not a number`},
		{"bad peer", func(c *natsnode.Config) { c.Peers = []string{peers[0], "h2"} }, `peer: "h2" is not host:port`},
		{"peer listed twice", func(c *natsnode.Config) { c.Peers = []string{peers[0], peers[1], peers[1]} }, `peer "127.0.0.1:2" is listed twice`},
		{"peers only this node", func(c *natsnode.Config) { c.Peers = peers[:1] }, "peers list only this node"},
		{"cluster address without peers", func(c *natsnode.Config) { c.Peers = nil }, "cluster address \"127.0.0.1:1\" is set but there are no peers"},
		{"bad client address", func(c *natsnode.Config) { c.ClientAddr = "localhost" }, `client address: "localhost" is not host:port`},
		{"client address without token", func(c *natsnode.Config) { c.ClientAddr = "127.0.0.1:0" }, "ClientToken is required with ClientAddr"},
		{"client token too short", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", "0123456789abcde" },
			"ClientToken: client token is 15 bytes long; it must have from 16 to 256"},
		{"client token too long", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", strings.Repeat("a", 257) },
			"client token is 257 bytes long"},
		{"client token with a space", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", "0123456789 abcdef" },
			"ClientToken: client token contains a space or a line break (byte 11 of 17)"},
		{"client token with a tab", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", "\t0123456789abcdef" },
			"client token contains a space or a line break (byte 1 of 17)"},
		{"client token with a line break", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", "0123456789abcdef\n" },
			"client token contains a space or a line break (byte 17 of 17)"},
		{"client token with a quote", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", `0123456789"abcdef` },
			`client token contains a character other than ASCII letters, digits and "-._~+/=" (byte 11 of 17)`},
		{"client token like a bcrypt hash", func(c *natsnode.Config) { c.ClientAddr, c.ClientToken = "127.0.0.1:0", "$2a$11$0123456789abcdef" },
			"client token contains a character other than"},
		{"client token without client address", func(c *natsnode.Config) { c.ClientToken = "0123456789abcdef" },
			"ClientToken is set but ClientAddr is not"},
		{"negative max store", func(c *natsnode.Config) { c.MaxStore = -1 }, "max store -1 is negative"},
		{"negative max memory", func(c *natsnode.Config) { c.MaxMemory = -1 }, "max memory -1 is negative"},
		{"max payload too big", func(c *natsnode.Config) { c.MaxPayload = 65<<20 + 1 }, "max payload 68157441 is not between 1 and 67108864 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.modify(&cfg)
			err := startRefused(t, cfg, tc.want)
			if cfg.ClientToken != "" && strings.Contains(err.Error(), cfg.ClientToken) {
				t.Errorf("Start: %v quotes the client token", err)
			}
		})
	}
}

// TestStartAddressInUse checks that Start reports a port it cannot listen
// on as such, quickly, and leaves nothing running.
func TestStartAddressInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().String()
	for _, tc := range []struct {
		name string
		cfg  natsnode.Config
	}{
		{"cluster", natsnode.Config{Cluster: "c", Node: "n1", ClusterAddr: busy, Peers: []string{busy, "127.0.0.1:1"}}},
		{"client", natsnode.Config{Node: "n1", ClientAddr: busy, ClientToken: "0123456789abcdef"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Dir = t.TempDir()
			n, err := natsnode.Start(tc.cfg)
			if err == nil {
				n.Close()
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, natsnode.ErrConfig) {
				t.Errorf("Start: %v; want EADDRINUSE", err)
			}
		})
	}
}

// startRefused starts a node with cfg, which must be refused with an
// ErrConfig containing want, and returns the error.
func startRefused(t *testing.T, cfg natsnode.Config, want string) error {
	t.Helper()
	n, err := natsnode.Start(cfg)
	if err == nil {
		n.Close()
		t.Fatal("Start succeeded")
	}
	if !errors.Is(err, natsnode.ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("Start: %v\nwant an ErrConfig containing %q", err, want)
	}
	return err
}

// TestCheckClientToken: what the usual ways of making a token give is
// accepted.
func TestCheckClientToken(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"0123456789abcdef",       // hex, the shortest
		rand.Text(),              // base32
		"Zm9vYmFyYmF6cXV4Cg+/==", // base64
		"Zm9vYmFyYmF6cXV4Cg-_",   // base64url
		strings.Repeat("a", 256), // the longest
	} {
		if err := natsnode.CheckClientToken(ok); err != nil {
			t.Errorf("CheckClientToken(%q): %v", ok, err)
		}
	}
}
