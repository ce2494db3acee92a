package natsnode

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Defaults for the zero fields of Config.
const (
	// DefaultMaxStore is the JetStream file storage limit: 64 GiB.
	DefaultMaxStore int64 = 64 << 30
	// DefaultMaxMemory is the JetStream memory storage limit: 256 MiB.
	// Sluice keeps its streams on disk; memory storage is for small
	// internal state only.
	DefaultMaxMemory int64 = 256 << 20
	// DefaultMaxPayload is the largest message the node accepts: 8 MiB, so
	// that a 1 MiB SQS body with its attributes and headers fits with room.
	DefaultMaxPayload int32 = 8 << 20
	// maxPayloadLimit is nats-server's default max_pending (64 MiB); a
	// payload may not exceed it.
	maxPayloadLimit int32 = 64 << 20
)

// Config describes one node. Start fills the zero fields with their
// defaults, then validates it.
type Config struct {
	// Cluster is the cluster name. Every node of a cluster must use the
	// same one; nodes with another name are refused as peers. Required
	// when Peers is not empty; no default. It may not contain spaces.
	Cluster string

	// Node is this node's name: unique in the cluster and stable across
	// restarts, because JetStream derives its Raft peer identity from it.
	// Never give it to a node whose Dir was wiped, nor to two nodes at
	// once. Required; no default. It may not contain spaces.
	Node string

	// Dir is the directory that holds JetStream's streams and Raft logs.
	// It is created if missing and must be writable. Required.
	Dir string

	// ClientAddr is the host:port of the NATS client listener, for
	// clients in other processes (port 0 picks a free port; ClientURL says
	// which). It requires ClientToken from every client. Default "": no
	// client listener; only in-process clients (Connect) can reach the
	// node.
	ClientAddr string

	// ClientToken is the token every client of the client listener must
	// present (nats.Token, or the NATS CLI's --user without --password);
	// Connect presents it too. Required with ClientAddr, and only with
	// it: the listener serves every stream, so it is never open. At least
	// MinClientToken (16) bytes of ASCII letters, digits and "-._~+/="
	// (what hex, base32 and base64 encodings produce), at most 256. It
	// crosses the network in clear text (the listener has no TLS), and is
	// never logged. No default.
	ClientToken string

	// ClusterAddr is the host:port the node listens on for routes from its
	// peers; a port from 1 to 65535. Required when Peers is not empty.
	ClusterAddr string

	// ClusterAdvertise is the host:port (a port from 1 to 65535) the node
	// tells its peers to reach its route listener at, when that is not
	// ClusterAddr: behind NAT, in a container, behind a TCP proxy. Peers
	// learn each other's routes by gossip and dial the advertised address
	// of a node they do not list in Peers; the nodes they list they dial
	// as listed. Default "": the listener's address (ClusterAddr, or the
	// host's addresses for an unspecified host). Only with Peers.
	ClusterAdvertise string

	// Peers are the route addresses (host:port) of all the nodes of the
	// cluster. It may include this node's own ClusterAddr, and must list
	// at least one other node. Default empty: a single node without
	// clustering, whose JetStream needs no quorum.
	Peers []string

	// ClusterSecret, when set, authenticates the routes between nodes: the
	// route listener refuses a peer that does not present it, and every
	// route this node dials (to Peers, or to a node learned by gossip)
	// presents it. Every node of the cluster must have the same one. At
	// least MinClusterSecret (16) bytes of ASCII letters, digits and
	// "-._~+/=" (what hex, base32 and base64 encodings produce), at most
	// 256. It crosses the network in clear text unless the routes use TLS
	// (ClusterTLSCert), and is never logged. Default "": routes are not
	// authenticated. Only with Peers.
	ClusterSecret string

	// ClusterTLSCert, ClusterTLSKey and ClusterTLSCA turn on TLS on the
	// routes between nodes, verified both ways: they are the paths of this
	// node's certificate (PEM: the certificate, then any intermediate CA
	// certificates), of its private key (PEM), and of the CA bundle (PEM,
	// one or more certificates) that the certificates of the peers must
	// chain to. Every route, accepted or dialled, is TLS 1.3 on which
	// both nodes present their certificate; a node refuses a peer whose
	// certificate the bundle does not verify, and on the routes it dials
	// also one whose certificate does not name the host it dialled (an IP
	// address or DNS name among the certificate's subject alternative
	// names). So each node's certificate names every host its peers may
	// dial it at: its host in Peers, ClusterAdvertise's host, and its IP
	// address (peers learn routes by gossip at the address a route came
	// from). It must allow TLS server and client use (extended key usage
	// serverAuth and clientAuth, or none), and verify against the bundle
	// itself: Start reads the three files and checks all that, and that
	// the key is the certificate's. The files are read once, at Start.
	// All three or none; only with Peers. Default "": plain TCP routes.
	ClusterTLSCert string
	ClusterTLSKey  string
	ClusterTLSCA   string

	// MaxStore is the JetStream file storage limit, in bytes. Default
	// DefaultMaxStore (64 GiB). Keep it below the free space of Dir's
	// disk: a full disk fails writes, where the limit refuses them cleanly.
	MaxStore int64

	// MaxMemory is the JetStream memory storage limit, in bytes. Default
	// DefaultMaxMemory (256 MiB).
	MaxMemory int64

	// MaxPayload is the largest message (body plus headers) the node
	// accepts, in bytes, at most 64 MiB. Default DefaultMaxPayload (8 MiB).
	MaxPayload int32

	// Logger receives nats-server's log, each line tagged with the key
	// "node". Debug lines are produced only when it is enabled for
	// slog.LevelDebug, and trace lines only for LevelTrace. Default: the
	// log is discarded.
	Logger *slog.Logger
}

// routeTLS reports whether any of the route TLS files is set.
func (c Config) routeTLS() bool {
	return c.ClusterTLSCert != "" || c.ClusterTLSKey != "" || c.ClusterTLSCA != ""
}

// LevelTrace is the slog level of nats-server's trace lines (each protocol
// message), below slog.LevelDebug.
const LevelTrace = slog.LevelDebug - 4

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxStore == 0 {
		c.MaxStore = DefaultMaxStore
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Peers = slices.Clone(c.Peers)
	return c
}

// ErrConfig is wrapped by every error Start returns for an invalid Config.
var ErrConfig = errors.New("natsnode: invalid config")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// validate checks a Config that has its defaults filled in. It does not
// touch the disk; checkDir does.
func (c Config) validate() error {
	if c.Node == "" {
		return configErr("node name is required")
	}
	if strings.ContainsFunc(c.Node, isSpace) {
		return configErr("node name %q contains a space", c.Node)
	}
	if c.Dir == "" {
		return configErr("dir is required")
	}
	if c.ClientAddr != "" {
		if _, _, err := splitAddr(c.ClientAddr, 0); err != nil {
			return configErr("client address: %v", err)
		}
		if c.ClientToken == "" {
			return configErr("ClientToken is required with ClientAddr: the client listener serves every stream, so it requires a token")
		}
		if err := CheckClientToken(c.ClientToken); err != nil {
			return configErr("ClientToken: %v", err)
		}
	} else if c.ClientToken != "" {
		return configErr("ClientToken is set but ClientAddr is not; there is no client listener to authenticate")
	}
	if len(c.Peers) == 0 {
		if c.ClusterAddr != "" {
			return configErr("cluster address %q is set but there are no peers; list every node's cluster address (this one's included) in Peers, or leave ClusterAddr empty for a single node", c.ClusterAddr)
		}
		if c.ClusterAdvertise != "" {
			return configErr("cluster advertise address %q is set but there are no peers; a single node has no routes to advertise", c.ClusterAdvertise)
		}
		if c.ClusterSecret != "" {
			return configErr("cluster secret is set but there are no peers; a single node has no routes to authenticate")
		}
		if c.routeTLS() {
			return configErr("cluster TLS files are set but there are no peers; a single node has no routes to encrypt")
		}
	} else {
		if c.Cluster == "" {
			return configErr("cluster name is required when peers are set")
		}
		if strings.ContainsFunc(c.Cluster, isSpace) {
			return configErr("cluster name %q contains a space", c.Cluster)
		}
		if c.ClusterAddr == "" {
			return configErr("cluster address is required when peers are set")
		}
		if _, _, err := splitAddr(c.ClusterAddr, 1); err != nil {
			return configErr("cluster address: %v", err)
		}
		if c.ClusterAdvertise != "" {
			if _, _, err := splitAddr(c.ClusterAdvertise, 1); err != nil {
				return configErr("cluster advertise address: %v", err)
			}
		}
		if c.ClusterSecret != "" {
			if err := CheckClusterSecret(c.ClusterSecret); err != nil {
				return configErr("%v", err)
			}
		}
		if c.routeTLS() {
			var missing []string
			for _, f := range []struct{ name, path string }{
				{"certificate (ClusterTLSCert)", c.ClusterTLSCert},
				{"key (ClusterTLSKey)", c.ClusterTLSKey},
				{"CA bundle (ClusterTLSCA)", c.ClusterTLSCA},
			} {
				if f.path == "" {
					missing = append(missing, f.name)
				}
			}
			switch len(missing) {
			case 1:
				return configErr("cluster TLS needs a certificate, its key and a CA bundle; the %s is missing", missing[0])
			case 2:
				return configErr("cluster TLS needs a certificate, its key and a CA bundle; the %s and the %s are missing", missing[0], missing[1])
			}
		}
		seen := make(map[string]bool, len(c.Peers))
		for _, p := range c.Peers {
			if _, _, err := splitAddr(p, 1); err != nil {
				return configErr("peer: %v", err)
			}
			if seen[p] {
				return configErr("peer %q is listed twice", p)
			}
			seen[p] = true
		}
		if len(c.Peers) == 1 && c.Peers[0] == c.ClusterAddr {
			// nats-server's Raft waits for a route that never comes.
			return configErr("peers list only this node; a cluster needs other nodes (for a single node leave Peers and ClusterAddr empty)")
		}
	}
	if c.MaxStore < 0 {
		return configErr("max store %d is negative", c.MaxStore)
	}
	if c.MaxMemory < 0 {
		return configErr("max memory %d is negative", c.MaxMemory)
	}
	if c.MaxPayload < 0 || c.MaxPayload > maxPayloadLimit {
		return configErr("max payload %d is not between 1 and %d bytes", c.MaxPayload, maxPayloadLimit)
	}
	return nil
}

// Bounds of the length of Config.ClusterSecret and Config.ClientToken, in
// bytes.
const (
	// MinClusterSecret is the shortest cluster secret accepted: 16 bytes,
	// e.g. `openssl rand -hex 16` gives 32.
	MinClusterSecret = 16
	// MinClientToken is the shortest client token accepted: 16 bytes.
	MinClientToken = 16
	// maxCredential keeps the CONNECT line, which carries the secret or
	// the token, far below nats-server's 4 KiB limit on a control line.
	maxCredential = 256
)

// CheckClusterSecret says what is wrong with secret as a
// Config.ClusterSecret, or returns nil. Its errors never contain the
// secret, nor any part of it.
func CheckClusterSecret(secret string) error {
	return checkCredential("cluster secret", secret, MinClusterSecret)
}

// CheckClientToken says what is wrong with token as a Config.ClientToken,
// or returns nil. Its errors never contain the token, nor any part of it.
func CheckClientToken(token string) error {
	return checkCredential("client token", token, MinClientToken)
}

// checkCredential checks a secret that clients or routes present in their
// CONNECT line; what names it in the errors.
func checkCredential(what, secret string, minLen int) error {
	if n := len(secret); n < minLen || n > maxCredential {
		return fmt.Errorf("%s is %d bytes long; it must have from %d to %d", what, n, minLen, maxCredential)
	}
	for i := 0; i < len(secret); i++ {
		b := secret[i]
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			return fmt.Errorf("%s contains a space or a line break (byte %d of %d)", what, i+1, len(secret))
		case !secretByte(b):
			// Others could break a URL's userinfo (':', '@'), stop
			// nats-server's redaction of the CONNECT lines it traces
			// short of the secret's end (a quote, a comma, a brace), or
			// make it take the secret for a bcrypt hash ('$'). The
			// character is not named: it is the secret's.
			return fmt.Errorf("%s contains a character other than ASCII letters, digits and \"-._~+/=\" (byte %d of %d)", what, i+1, len(secret))
		}
	}
	return nil
}

// secretByte reports whether b may appear in a cluster secret or a client
// token.
func secretByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("-._~+/=", b) >= 0
}

// checkDir creates dir if needed and checks that it can hold files.
func checkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return configErr("dir: %v", err)
	}
	f, err := os.CreateTemp(dir, ".natsnode-probe-*")
	if err != nil {
		return configErr("dir %q is not writable: %v", dir, err)
	}
	name := f.Name()
	err = errors.Join(f.Close(), os.Remove(name))
	if err != nil {
		return configErr("dir %q: %v", dir, err)
	}
	return nil
}

// splitAddr splits a host:port whose port is at least minPort. An empty
// host means every interface.
func splitAddr(addr string, minPort int) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < minPort || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not a number from %d to 65535", addr, ps, minPort)
	}
	if strings.ContainsFunc(host, isSpace) {
		return "", 0, fmt.Errorf("%q: host contains a space", addr)
	}
	return host, port, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
