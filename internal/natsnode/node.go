package natsnode

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

const (
	// readyForConnections is how long Start waits for the listeners.
	readyForConnections = 10 * time.Second
	// readyPoll is how often Ready checks the meta group.
	readyPoll = 100 * time.Millisecond
	// readyWarn is how often Ready logs that it still waits.
	readyWarn = 5 * time.Second
)

// ErrStopped is returned by Ready when the node was closed or nats-server
// stopped on its own.
var ErrStopped = errors.New("natsnode: node stopped")

// Node is one running nats-server with JetStream. Its methods are safe for
// concurrent use.
type Node struct {
	cfg     Config
	srv     *server.Server
	log     *slog.Logger
	adapter *logAdapter
	token   string // what clients must present (ClientToken, or a random one); "" for none
	// fresh says that Dir held no JetStream meta state at Start and Ready
	// has not succeeded since: the cluster may never have elected a meta
	// leader.
	fresh atomic.Bool

	closeOnce sync.Once
}

// PeerInfo describes a peer this node has a route to.
type PeerInfo struct {
	// Name is the peer's node name (Config.Node).
	Name string
	// Addr is the peer's route address (host:port) if this node dialled
	// it, else the address the peer's connection came from.
	Addr string
	// RTT is the route's last measured round-trip time; 0 if not known.
	RTT time.Duration
}

// Start validates cfg, then starts the node and waits until its listeners
// are up (at most 10 s after JetStream recovered its streams from Dir,
// which takes as long as it takes). It does not wait for a JetStream
// quorum: call Ready for that. The caller must Close the node.
func Start(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkDir(cfg.Dir); err != nil {
		return nil, err
	}
	// Where nats-server keeps the meta group's Raft state (setupMetaGroup).
	_, err := os.Stat(filepath.Join(cfg.Dir, server.JetStreamStoreDir, "$SYS", "_js_", metaGroup))
	fresh := errors.Is(err, fs.ErrNotExist)
	var token string
	switch {
	case cfg.ClientAddr != "":
		token = cfg.ClientToken
	case len(cfg.Peers) > 0:
		token = rand.Text() // for the loopback listener only Connect uses
	}
	var routeTLS *tls.Config
	var leaf *x509.Certificate
	if cfg.routeTLS() {
		if routeTLS, leaf, err = routeTLSConfig(cfg, time.Now()); err != nil {
			return nil, err
		}
	}
	opts, err := serverOptions(cfg, token, routeTLS)
	if err != nil {
		return nil, err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsnode: node %q: %w", cfg.Node, err)
	}
	log := cfg.Logger.With("node", cfg.Node)
	adapter := newLogAdapter(log, cfg.Cluster)
	adapter.hasSecret = cfg.ClusterSecret != ""
	adapter.hasTLS = routeTLS != nil
	ctx := context.Background()
	srv.SetLoggerV2(adapter, log.Enabled(ctx, slog.LevelDebug), log.Enabled(ctx, LevelTrace), false)

	// Start returns once the listeners are opened and JetStream has
	// recovered its streams from Dir, or after a fatal error, which it
	// reports through the logger instead of exiting.
	srv.Start()
	fail := func(err error) (*Node, error) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("natsnode: start node %q: %w", cfg.Node, err)
	}
	// The route listener starts in a goroutine, so a fatal error may come
	// after Start returned.
	for deadline := time.Now().Add(readyForConnections); ; {
		if fatal, _, _ := adapter.state(); fatal != nil {
			return fail(fatal)
		}
		if srv.ReadyForConnections(50 * time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("listeners not ready after %s", readyForConnections))
		}
	}
	if !srv.JetStreamEnabled() {
		return fail(errors.New("JetStream is not enabled"))
	}
	attrs := []any{"cluster", cfg.Cluster, "cluster_addr", cfg.ClusterAddr}
	if cfg.ClusterAdvertise != "" {
		attrs = append(attrs, "cluster_advertise", cfg.ClusterAdvertise)
	}
	if len(cfg.Peers) > 0 {
		// Whether there is a secret, never the secret.
		attrs = append(attrs, "routes_authenticated", cfg.ClusterSecret != "", "routes_tls", routeTLS != nil)
	}
	attrs = append(attrs, "peers", len(cfg.Peers), "client_url", clientURL(cfg, srv))
	if cfg.ClientAddr != "" {
		// Always true (validate requires the token); said so that an
		// operator reading the log need not know that. Never the token.
		attrs = append(attrs, "client_authenticated", opts.Authorization != "")
	}
	log.Info("NATS node started", append(attrs, "dir", cfg.Dir)...)
	if leaf != nil {
		if problem := checkRouteTLSHost(cfg, leaf); problem != "" {
			log.Warn(problem, "cert", cfg.ClusterTLSCert)
		}
	}
	n := &Node{cfg: cfg, srv: srv, log: log, adapter: adapter, token: token}
	n.fresh.Store(fresh)
	return n, nil
}

// serverOptions translates cfg into nats-server's options.
// A non-empty token is required from every client (see Node.Connect);
// a non-nil routeTLS is the routes' TLS configuration.
func serverOptions(cfg Config, token string, routeTLS *tls.Config) (*server.Options, error) {
	opts := &server.Options{
		ServerName: cfg.Node,
		JetStream:  true,
		StoreDir:   cfg.Dir,
		// Every Raft append is fsynced before it is acknowledged, so that an
		// acknowledged message survives a power loss on a minority of
		// nodes. Never turned off: the lazy default loses acked writes.
		SyncAlways:         true,
		JetStreamMaxStore:  cfg.MaxStore,
		JetStreamMaxMemory: cfg.MaxMemory,
		MaxPayload:         cfg.MaxPayload,
		// The host process owns the signals.
		NoSigs: true,
	}
	switch {
	case cfg.ClientAddr == "" && len(cfg.Peers) == 0:
		opts.DontListen = true
	case cfg.ClientAddr == "":
		// nats-server v2.15.2 starts its route listener only after the
		// client listener is up (StartRouting waits on a channel that the
		// client accept loop closes), so DontListen would keep a clustered
		// node from ever routing, and from shutting down. Listen on a
		// loopback port that only in-process clients can use: they know
		// the random token.
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
		opts.Authorization = token
	default:
		host, port, err := splitAddr(cfg.ClientAddr, 0)
		if err != nil {
			return nil, configErr("client address: %v", err)
		}
		if token == "" {
			// validate refuses that; never open the listener without one.
			return nil, configErr("ClientToken is required with ClientAddr")
		}
		opts.Host, opts.Port = host, port
		if port == 0 { // nats-server's 0 is its default port, 4222
			opts.Port = server.RANDOM_PORT
		}
		// nats-server compares it in constant time, and logs a refused
		// client's token redacted (`Token "[REDACTED]"`), as it does the
		// auth_token of the CONNECT lines it traces.
		opts.Authorization = token
	}
	if len(cfg.Peers) > 0 {
		host, port, err := splitAddr(cfg.ClusterAddr, 1)
		if err != nil {
			return nil, configErr("cluster address: %v", err)
		}
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster, Host: host, Port: port, Advertise: cfg.ClusterAdvertise}
		var user *url.Userinfo
		if cfg.ClusterSecret != "" {
			// The route listener requires them (nats-server's cluster
			// authorization), and presents them on the routes it dials to
			// nodes learned by gossip; the routes to Peers carry them in
			// their URL. nats-server logs route URLs redacted, or only
			// their host, and redacts passwords in the CONNECT lines it
			// traces.
			opts.Cluster.Username, opts.Cluster.Password = routeUser, cfg.ClusterSecret
			user = url.UserPassword(routeUser, cfg.ClusterSecret)
		}
		for _, p := range cfg.Peers {
			opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats", Host: p, User: user})
		}
		if routeTLS != nil {
			// Every route, accepted or dialled, then starts with a TLS
			// handshake (before nats-server's INFO and CONNECT, so the
			// secret too is encrypted), and nats-server refuses a route
			// whose handshake fails.
			opts.Cluster.TLSConfig = routeTLS
			opts.Cluster.TLSTimeout = routeTLSTimeout.Seconds()
		}
	}
	return opts, nil
}

// routeUser is the user name that goes with Config.ClusterSecret on
// routes. nats-server's route authorization needs one; it logs it when it
// refuses a route.
const routeUser = "sluice"

func clientURL(cfg Config, srv *server.Server) string {
	if cfg.ClientAddr == "" {
		return ""
	}
	return srv.ClientURL()
}

// Config is the node's configuration with its defaults filled in: Start
// it again, after Close, to restart the node on the same store.
func (n *Node) Config() Config {
	cfg := n.cfg
	cfg.Peers = slices.Clone(cfg.Peers)
	return cfg
}

// Name is the node's name (Config.Node).
func (n *Node) Name() string { return n.cfg.Node }

// Cluster is the node's cluster name (Config.Cluster); "" for a single node.
func (n *Node) Cluster() string { return n.cfg.Cluster }

// ClientURL is the URL for clients in other processes, e.g.
// "nats://127.0.0.1:4222"; "" without a client listener (Config.ClientAddr).
func (n *Node) ClientURL() string { return clientURL(n.cfg, n.srv) }

// Server is the embedded nats-server, for monitoring and for tests that
// need what Node does not offer. Do not shut it down; Close the node.
func (n *Node) Server() *server.Server { return n.srv }

// Ready waits until JetStream can be used from this node: JetStream runs
// and, in a cluster, the meta group has a leader that this node heard from
// recently and this node's copy of the meta state is current. Creating
// streams needs that; publishing to an existing stream needs only the
// stream's own group. A single node is ready as soon as JetStream runs.
//
// While it waits, Ready logs at Warn every 5 s how many peers are
// connected. It returns early with an error wrapping ErrDuplicateNodeName
// if another node uses this node's name, with one wrapping ErrRouteAuth if
// this node has no ClusterSecret and a peer refused its route for want of
// one (the peers have a secret that this node lacks; it would still join
// them through the routes they dial to it, leaving its own route listener
// open to anyone), or ErrStopped if the node stops. When ctx ends first
// it returns an error wrapping ctx.Err() and, if routes were refused
// because of a cluster name, ErrClusterNameMismatch, if they were
// refused because of a cluster secret, ErrRouteAuth, and if a route's TLS
// handshake failed, ErrRouteTLS.
//
// Right after a cluster forms, the meta leader may not have received every
// peer's statistics yet; until it has, creating a replicated stream fails
// with JetStream error 10005 ("no suitable peers for placement") for a
// moment. Retry that.
func (n *Node) Ready(ctx context.Context) error {
	start := time.Now()
	lastWarn := start
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		_, mismatch, dup := n.adapter.state()
		if dup != nil {
			n.log.Error("node not ready: another node uses this node's name", "err", dup)
			return dup
		}
		auth, noSecret := n.adapter.authState()
		if noSecret != nil {
			n.log.Error("node not ready: a peer requires a cluster secret and this node has none", "err", noSecret)
			return noSecret
		}
		if !n.srv.Running() {
			return fmt.Errorf("%w: %q", ErrStopped, n.cfg.Node)
		}
		if n.metaReady() {
			n.fresh.Store(false)
			if time.Since(start) >= readyWarn {
				n.log.Info("JetStream quorum reached", "waited", time.Since(start).Round(time.Millisecond),
					"meta_leader", n.MetaLeader())
			}
			return nil
		}
		if now := time.Now(); now.Sub(lastWarn) >= readyWarn {
			lastWarn = now
			attrs := []any{"waited", now.Sub(start).Round(time.Second),
				"peers_connected", len(n.Peers()), "peers_configured", len(n.cfg.Peers),
				"meta", n.metaStatus()}
			if mismatch != nil {
				attrs = append(attrs, "conflict", mismatch.Error())
			}
			if auth != nil {
				attrs = append(attrs, "route_auth", auth.Error())
			}
			if tlsErr := n.adapter.tlsState(); tlsErr != nil {
				attrs = append(attrs, "route_tls", tlsErr.Error())
			}
			if n.fresh.Load() && len(n.cfg.Peers) > 0 {
				attrs = append(attrs, "hint", "a new cluster elects its first meta leader only once every node in Peers is up; later a majority is enough")
			}
			n.log.Warn("waiting for a JetStream quorum", attrs...)
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("natsnode: node %q has no JetStream quorum after %s (%d of %d peers connected; %s): %w",
				n.cfg.Node, time.Since(start).Round(time.Millisecond), len(n.Peers()), len(n.cfg.Peers),
				n.metaStatus(), ctx.Err())
			if _, mismatch, _ := n.adapter.state(); mismatch != nil {
				err = errors.Join(err, mismatch)
			}
			if auth, _ := n.adapter.authState(); auth != nil {
				err = errors.Join(err, auth)
			}
			if tlsErr := n.adapter.tlsState(); tlsErr != nil {
				err = errors.Join(err, tlsErr)
			}
			return err
		case <-tick.C:
		}
	}
}

// metaReady reports whether JetStream is usable from this node.
func (n *Node) metaReady() bool {
	if !n.srv.JetStreamEnabled() {
		return false
	}
	if !n.srv.JetStreamIsClustered() {
		return true
	}
	return n.srv.Healthz(&server.HealthzOptions{JSMetaOnly: true}).Status == "ok"
}

// metaStatus says in words why the meta group is not usable yet.
func (n *Node) metaStatus() string {
	h := n.srv.Healthz(&server.HealthzOptions{JSMetaOnly: true})
	if h.Status == "ok" {
		return "ok"
	}
	return h.Error
}

// Peers returns the peers this node has a route to, sorted by name. A peer
// counts once however many connections its routes use. Nil for a single
// node.
func (n *Node) Peers() []PeerInfo {
	rz, err := n.srv.Routez(nil)
	if err != nil || rz == nil {
		return nil
	}
	var peers []PeerInfo
	for _, r := range rz.Routes {
		if r.RemoteName == "" {
			continue // still negotiating
		}
		addr := net.JoinHostPort(r.IP, strconv.Itoa(r.Port))
		rtt, _ := time.ParseDuration(r.RTT)
		i := slices.IndexFunc(peers, func(p PeerInfo) bool { return p.Name == r.RemoteName })
		switch {
		case i < 0:
			peers = append(peers, PeerInfo{Name: r.RemoteName, Addr: addr, RTT: rtt})
		case r.DidSolicit:
			peers[i].Addr = addr
		}
		if i >= 0 && peers[i].RTT == 0 {
			peers[i].RTT = rtt
		}
	}
	slices.SortFunc(peers, func(a, b PeerInfo) int { return strings.Compare(a.Name, b.Name) })
	return peers
}

// MetaLeader is the name of the node that leads the JetStream meta group
// (where streams are created) as this node knows it; "" while there is
// none. A single node is its own meta leader.
func (n *Node) MetaLeader() string {
	if !n.srv.JetStreamEnabled() {
		return ""
	}
	if !n.srv.JetStreamIsClustered() {
		return n.cfg.Node
	}
	if n.srv.JetStreamIsLeader() {
		return n.cfg.Node
	}
	// Raftz of the one group is cheap; Jsz would sum every stream's state.
	rz := n.srv.Raftz(&server.RaftzOptions{GroupFilter: metaGroup})
	if rz == nil {
		return ""
	}
	for _, groups := range *rz {
		g, ok := groups[metaGroup]
		if !ok || g.Leader == "" {
			continue
		}
		if g.Leader == g.ID {
			return n.cfg.Node
		}
		return g.Peers[g.Leader].Name // "" if the leader's name is not known yet
	}
	return ""
}

// metaGroup is the name of nats-server's JetStream meta Raft group.
const metaGroup = "_meta_"

// Connect opens a client connection inside the process, without a socket,
// named "sluice <node>" unless opts name it otherwise. It presents the
// token the node's client listener requires, if any (Config.ClientToken,
// or a random one).
func (n *Node) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := []nats.Option{nats.InProcessServer(n.srv), nats.Name("sluice " + n.cfg.Node)}
	if n.token != "" {
		all = append(all, nats.Token(n.token))
	}
	all = append(all, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("natsnode: connect to node %q: %w", n.cfg.Node, err)
	}
	return nc, nil
}

// Close shuts the node down gracefully and waits until it stopped: the
// Raft groups it leads hand their leadership to a peer first, so the
// cluster keeps serving without an election timeout. Close is idempotent.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.log.Info("NATS node stopped")
	})
}
