package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/cmdkit"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/gcheadroom"
	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs"
)

// ServeConfig is the configuration of `sluice serve`. Every field has a
// flag and a SLUICE_* environment variable (flag wins); docs/configuration.md
// documents them.
type ServeConfig struct {
	SQSAddr         string // --sqs-addr, SLUICE_SQS_ADDR, default 127.0.0.1:9324
	AdminAddr       string // --admin-addr, SLUICE_ADMIN_ADDR, default 127.0.0.1:9325
	DataDir         string // --data-dir, SLUICE_DATA_DIR, default ./sluice-data
	Sync            string // --sync, SLUICE_SYNC: always|batch|none, default always
	Credentials     string // --credentials, SLUICE_CREDENTIALS: credentials JSON file
	Region          string // --region, SLUICE_REGION, default us-east-1
	AccountID       string // --account-id, SLUICE_ACCOUNT_ID, default 000000000000
	LogLevel        string // --log-level, SLUICE_LOG_LEVEL: debug|info|warn|error, default info
	Insecure        bool   // --insecure, SLUICE_INSECURE: allow a non-loopback address without credentials
	BaseURL         string // --base-url, SLUICE_BASE_URL: queue URL base instead of the request's Host
	Preallocate     bool   // --preallocate, SLUICE_PREALLOCATE: prepare log segments full of zeros, default true
	DiskReserve     string // --disk-reserve, SLUICE_DISK_RESERVE: free space below which sends are refused, default 256MiB
	SegmentBytes    string // --segment-bytes, SLUICE_SEGMENT_BYTES: size of a log segment, default 64MiB
	CheckpointBytes string // --checkpoint-bytes, SLUICE_CHECKPOINT_BYTES: log after the oldest snapshot that renews snapshots, default 64MiB
	GCHeadroom      string // --gc-headroom, SLUICE_GC_HEADROOM: the least the heap may grow between collections, default 64MiB; 0 for Go's default
	AdminToken      string // --admin-token, SLUICE_ADMIN_TOKEN: required on the admin address (Bearer, or Basic password)
	AdminTokenFile  string // --admin-token-file, SLUICE_ADMIN_TOKEN_FILE: the token, read from a file
	AdminHosts      string // --admin-allowed-hosts, SLUICE_ADMIN_ALLOWED_HOSTS: Host names the admin address answers to besides loopback
	// Cluster mode (docs/cluster.md).
	Cluster          string // --cluster, SLUICE_CLUSTER: the cluster's name; turns cluster mode on
	Node             string // --node, SLUICE_NODE: this node's stable name
	Peers            string // --peers, SLUICE_PEERS: comma-separated route addresses of every node (host:port)
	ClusterListen    string // --cluster-addr, SLUICE_CLUSTER_ADDR: this node's route address, default 127.0.0.1:9326 with --peers
	ClusterAdvertise string // --cluster-advertise, SLUICE_CLUSTER_ADVERTISE: the route address peers reach this node at, default --cluster-addr
	NATSAddr         string // --nats-addr, SLUICE_NATS_ADDR: the embedded NATS server's client address (for NATS tools), default none
	NATSToken        string // --nats-token, SLUICE_NATS_TOKEN: the token --nats-addr requires of every client (the environment keeps it out of ps)
	NATSURL          string // --nats-url, SLUICE_NATS_URL: an existing NATS cluster instead of an embedded server
	Replicas         int    // --replicas, SLUICE_REPLICAS: each stream's replicas, default 3 (1 for a lone node)
	LeaseTTL         string // --lease-ttl, SLUICE_LEASE_TTL: how long a dead node keeps its queues, default 6s

	// Salvage starts on a damaged data directory, keeping every record
	// that reads back (broker.Config.Salvage). A flag only, no variable:
	// left set, it would salvage without a word the next damage a start
	// should refuse.
	Salvage bool // --salvage

	// The secret that authenticates the routes between embedded NATS
	// servers: read from a file (a secret on the command line would show
	// in ps), or given in the environment.
	ClusterSecretFile string // --cluster-secret-file, SLUICE_CLUSTER_SECRET_FILE: the file holding it (wins over SLUICE_CLUSTER_SECRET)
	ClusterSecret     string // SLUICE_CLUSTER_SECRET only: the secret itself; no flag

	// TLS on the routes between embedded NATS servers, verified both ways.
	ClusterTLSCert string // --cluster-tls-cert, SLUICE_CLUSTER_TLS_CERT: this node's certificate (PEM, with any intermediates)
	ClusterTLSKey  string // --cluster-tls-key, SLUICE_CLUSTER_TLS_KEY: its private key (PEM)
	ClusterTLSCA   string // --cluster-tls-ca, SLUICE_CLUSTER_TLS_CA: the CA bundle (PEM) the peers' certificates must chain to
}

func serveFlags(env Env) (*flag.FlagSet, *ServeConfig) {
	c := &ServeConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	def := func(name, fallback string) string {
		if v := env.Getenv(name); v != "" {
			return v
		}
		return fallback
	}
	fs.StringVar(&c.SQSAddr, "sqs-addr", def("SLUICE_SQS_ADDR", "127.0.0.1:9324"), "SQS API listen address")
	fs.StringVar(&c.AdminAddr, "admin-addr", def("SLUICE_ADMIN_ADDR", "127.0.0.1:9325"), "admin listen address: /metrics, /api, the dashboard at /ui, /healthz, /debug/pprof")
	fs.StringVar(&c.DataDir, "data-dir", def("SLUICE_DATA_DIR", "./sluice-data"), "data directory")
	fs.StringVar(&c.Sync, "sync", def("SLUICE_SYNC", "always"), "durability: always (fsync before answering), batch (fsync every 10ms), none")
	fs.StringVar(&c.Credentials, "credentials", def("SLUICE_CREDENTIALS", ""), "credentials JSON file; enables SigV4 verification")
	fs.StringVar(&c.Region, "region", def("SLUICE_REGION", "us-east-1"), "region used in ARNs")
	fs.StringVar(&c.AccountID, "account-id", def("SLUICE_ACCOUNT_ID", "000000000000"), "12-digit account id in ARNs and queue URLs")
	fs.StringVar(&c.LogLevel, "log-level", def("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error")
	fs.BoolVar(&c.Insecure, "insecure", def("SLUICE_INSECURE", "") == "true" || def("SLUICE_INSECURE", "") == "1", "allow a non-loopback address without a credentials file")
	fs.StringVar(&c.BaseURL, "base-url", def("SLUICE_BASE_URL", ""), "base of queue URLs, and of the SigningCertURL and UnsubscribeURL of SNS envelopes (default: the request's scheme and Host; for envelopes SNS's endpoint)")
	pre := def("SLUICE_PREALLOCATE", "true")
	fs.BoolVar(&c.Preallocate, "preallocate", pre != "false" && pre != "0", "prepare each next log segment full of zeros (faster fsync on ext4/XFS; turn off on btrfs/ZFS)")
	fs.StringVar(&c.DiskReserve, "disk-reserve", def("SLUICE_DISK_RESERVE", "256MiB"), "free disk space below which new messages are refused (bytes, or 512MiB, 2GiB)")
	fs.StringVar(&c.SegmentBytes, "segment-bytes", def("SLUICE_SEGMENT_BYTES", "64MiB"), "size of a log segment (bytes, or 512MiB, 2GiB; at most 1GiB)")
	fs.StringVar(&c.CheckpointBytes, "checkpoint-bytes", def("SLUICE_CHECKPOINT_BYTES", "64MiB"), "log written after the oldest snapshot that makes the server renew the snapshots pinning it (bytes, or 512MiB, 2GiB)")
	fs.StringVar(&c.GCHeadroom, "gc-headroom", def("SLUICE_GC_HEADROOM", "64MiB"), "the least the heap may grow between garbage collections (bytes, or 32MiB); 0 for Go's default (as much as is live); not used when GOGC is set")
	fs.StringVar(&c.AdminToken, "admin-token", def("SLUICE_ADMIN_TOKEN", ""), "token required on the admin address (Authorization: Bearer, or Basic with it as password)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", def("SLUICE_ADMIN_TOKEN_FILE", ""), "file holding the admin token (instead of --admin-token)")
	fs.StringVar(&c.AdminHosts, "admin-allowed-hosts", def("SLUICE_ADMIN_ALLOWED_HOSTS", ""), "comma-separated Host names the admin address answers to besides loopback ones (behind a proxy)")
	fs.StringVar(&c.Cluster, "cluster", def("SLUICE_CLUSTER", ""), "run as a node of this cluster on NATS JetStream (docs/cluster.md)")
	fs.StringVar(&c.Node, "node", def("SLUICE_NODE", ""), "this node's name in the cluster: stable across restarts, unique")
	fs.StringVar(&c.Peers, "peers", def("SLUICE_PEERS", ""), "comma-separated route addresses (host:port) of every node of the cluster, this one's included")
	fs.StringVar(&c.ClusterListen, "cluster-addr", def("SLUICE_CLUSTER_ADDR", ""), "this node's route address, which the others' --peers name (default 127.0.0.1:9326 with --peers)")
	fs.StringVar(&c.ClusterAdvertise, "cluster-advertise", def("SLUICE_CLUSTER_ADVERTISE", ""), "the route address (host:port) the other nodes reach this one at, when not --cluster-addr (behind NAT, in a container)")
	fs.StringVar(&c.ClusterSecretFile, "cluster-secret-file", def("SLUICE_CLUSTER_SECRET_FILE", ""), "file holding the secret that authenticates the routes between nodes, the same on every node (or SLUICE_CLUSTER_SECRET; with --peers)")
	c.ClusterSecret = env.Getenv("SLUICE_CLUSTER_SECRET")
	fs.StringVar(&c.ClusterTLSCert, "cluster-tls-cert", def("SLUICE_CLUSTER_TLS_CERT", ""), "this node's certificate (PEM) for TLS on the routes between nodes; with --cluster-tls-key and --cluster-tls-ca, and --peers")
	fs.StringVar(&c.ClusterTLSKey, "cluster-tls-key", def("SLUICE_CLUSTER_TLS_KEY", ""), "the private key (PEM) of --cluster-tls-cert")
	fs.StringVar(&c.ClusterTLSCA, "cluster-tls-ca", def("SLUICE_CLUSTER_TLS_CA", ""), "the CA bundle (PEM) that the other nodes' route certificates must be signed by")
	fs.StringVar(&c.NATSAddr, "nats-addr", def("SLUICE_NATS_ADDR", ""), "the embedded NATS server's client address, for NATS tools (default: none); requires --nats-token")
	fs.StringVar(&c.NATSToken, "nats-token", def("SLUICE_NATS_TOKEN", ""), "the token every client of --nats-addr must present: 16 to 256 ASCII letters, digits and \"-._~+/=\" (prefer SLUICE_NATS_TOKEN: a command line shows in ps)")
	fs.StringVar(&c.NATSURL, "nats-url", def("SLUICE_NATS_URL", ""), "use this existing NATS cluster (comma-separated URLs) instead of an embedded server")
	replicas, _ := strconv.Atoi(def("SLUICE_REPLICAS", "0"))
	fs.IntVar(&c.Replicas, "replicas", replicas, "replicas of each stream (default 3; 1 for a lone node)")
	fs.StringVar(&c.LeaseTTL, "lease-ttl", def("SLUICE_LEASE_TTL", "6s"), "how long a node that stopped renewing its leases (crashed, cut off) keeps its queues before another takes them: whole seconds, at least 2s")
	fs.BoolVar(&c.Salvage, "salvage", false, "start on a damaged data directory (which a start refuses), keeping every record that reads back and logging what is lost; take a copy first (sluice verify --salvage does the same and reports)")
	return fs, c
}

// clusterConfig maps the cluster flags onto the broker's ClusterConfig
// (nil without --cluster).
func (c *ServeConfig) clusterConfig() (*broker.ClusterConfig, error) {
	if c.Cluster == "" {
		if c.Node != "" || c.Peers != "" || c.ClusterAdvertise != "" || c.NATSURL != "" || c.ClusterSecretFile != "" || c.ClusterSecret != "" || c.clusterTLS() ||
			c.NATSAddr != "" || c.NATSToken != "" {
			return nil, errors.New("--node, --peers, --cluster-advertise, --cluster-secret-file (SLUICE_CLUSTER_SECRET), --cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca, --nats-addr, --nats-token (SLUICE_NATS_TOKEN) and --nats-url need --cluster")
		}
		return nil, nil
	}
	if c.Node == "" {
		return nil, errors.New("--cluster needs --node: this node's stable name")
	}
	ttl, err := time.ParseDuration(c.LeaseTTL)
	if err != nil || ttl < 2*time.Second || ttl%time.Second != 0 {
		return nil, fmt.Errorf("--lease-ttl: %q is not a whole number of seconds of at least 2s", c.LeaseTTL)
	}
	cc := &broker.ClusterConfig{Name: c.Cluster, Node: c.Node, Listen: c.ClusterListen, Advertise: c.ClusterAdvertise, ClientListen: c.NATSAddr,
		NATSURL: c.NATSURL, Replicas: c.Replicas, LeaseTTL: ttl}
	if cc.ClientToken, err = c.natsToken(); err != nil {
		return nil, err
	}
	for _, p := range strings.Split(c.Peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if _, _, err := net.SplitHostPort(p); err != nil {
				return nil, fmt.Errorf("--peers: %q is not host:port", p)
			}
			cc.Peers = append(cc.Peers, p)
		}
	}
	if len(cc.Peers) > 0 && cc.Listen == "" {
		cc.Listen = "127.0.0.1:9326"
	}
	if cc.Advertise != "" {
		if len(cc.Peers) == 0 {
			return nil, errors.New("--cluster-advertise needs --peers: it is the embedded NATS server's route address")
		}
		if _, _, err := net.SplitHostPort(cc.Advertise); err != nil {
			return nil, fmt.Errorf("--cluster-advertise: %q is not host:port", cc.Advertise)
		}
	}
	if cc.Secret, err = c.clusterSecret(); err != nil {
		return nil, err
	}
	if cc.Secret != "" && len(cc.Peers) == 0 {
		if cc.NATSURL != "" {
			return nil, errors.New("--cluster-secret-file (SLUICE_CLUSTER_SECRET) is for the routes of the embedded NATS servers (--peers); with --nats-url, give the credentials in the URL")
		}
		return nil, errors.New("--cluster-secret-file (SLUICE_CLUSTER_SECRET) needs --peers: it authenticates the routes between the embedded NATS servers")
	}
	if c.clusterTLS() {
		const flags = "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca"
		switch {
		case cc.NATSURL != "":
			return nil, errors.New(flags + " are for the routes of the embedded NATS servers (--peers); they do not apply with --nats-url (use a tls:// URL)")
		case len(cc.Peers) == 0:
			return nil, errors.New(flags + " need --peers: they encrypt the routes between the embedded NATS servers")
		case c.ClusterTLSCert == "" || c.ClusterTLSKey == "" || c.ClusterTLSCA == "":
			var missing []string
			for _, f := range []struct{ flag, v string }{{"--cluster-tls-cert", c.ClusterTLSCert}, {"--cluster-tls-key", c.ClusterTLSKey}, {"--cluster-tls-ca", c.ClusterTLSCA}} {
				if f.v == "" {
					missing = append(missing, f.flag)
				}
			}
			return nil, fmt.Errorf("%s go together; missing: %s", flags, strings.Join(missing, ", "))
		}
		cc.TLSCert, cc.TLSKey, cc.TLSCA = c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA
	}
	return cc, nil
}

// natsToken checks --nats-addr and --nats-token (SLUICE_NATS_TOKEN) and
// returns the token: the embedded NATS server's client listener is never
// open without one. Its errors never quote the token.
func (c *ServeConfig) natsToken() (string, error) {
	const token = "--nats-token (SLUICE_NATS_TOKEN)"
	switch {
	case c.NATSURL != "" && c.NATSAddr != "":
		return "", errors.New("--nats-addr opens the embedded NATS server's client listener; with --nats-url there is none (NATS tools connect to the existing cluster)")
	case c.NATSURL != "" && c.NATSToken != "":
		return "", errors.New(token + " is for the embedded NATS server's client listener (--nats-addr); with --nats-url, give the credentials in the URL")
	case c.NATSAddr != "" && c.NATSToken == "":
		return "", errors.New("--nats-addr needs --nats-token (or SLUICE_NATS_TOKEN, which keeps it out of ps): whoever reaches the NATS client listener can read, purge and delete every queue's stream, so it requires a token, e.g. SLUICE_NATS_TOKEN=$(openssl rand -hex 32)")
	case c.NATSAddr == "" && c.NATSToken != "":
		return "", errors.New(token + " needs --nats-addr: it is the token of the embedded NATS server's client listener")
	case c.NATSToken == "":
		return "", nil
	}
	if err := natsnode.CheckClientToken(c.NATSToken); err != nil {
		return "", fmt.Errorf("%s: %w", token, err)
	}
	return c.NATSToken, nil
}

// clusterTLS reports whether any of the route TLS flags is set.
func (c *ServeConfig) clusterTLS() bool {
	return c.ClusterTLSCert != "" || c.ClusterTLSKey != "" || c.ClusterTLSCA != ""
}

// clusterSecret reads the cluster secret from --cluster-secret-file, or
// else SLUICE_CLUSTER_SECRET, and checks it; "" if neither is set. Its
// errors never quote the secret.
func (c *ServeConfig) clusterSecret() (string, error) {
	secret, from := c.ClusterSecret, "SLUICE_CLUSTER_SECRET"
	if c.ClusterSecretFile != "" {
		raw, err := os.ReadFile(c.ClusterSecretFile)
		if err != nil {
			return "", fmt.Errorf("--cluster-secret-file: %w", err)
		}
		// What echo or an editor leaves at the end; anything else counts.
		secret, from = strings.TrimRight(string(raw), "\r\n"), "--cluster-secret-file "+c.ClusterSecretFile
		if secret == "" {
			return "", fmt.Errorf("%s is empty", from)
		}
	}
	if secret == "" {
		return "", nil
	}
	if err := natsnode.CheckClusterSecret(secret); err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return secret, nil
}

// parseSize reads a byte count: a number, or one with a unit (KiB, MiB,
// GiB, TiB; KB, MB, GB, TB in powers of ten).
func parseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("not a size: %q (bytes, or with a unit: 512MiB, 2GiB)", v)
	}
	return int64(n * float64(mult)), nil
}

// brokerConfig maps the flags onto the broker's Config.
func (c *ServeConfig) brokerConfig(log *slog.Logger) (broker.Config, error) {
	reserve, err := parseSize(c.DiskReserve)
	if err != nil {
		return broker.Config{}, fmt.Errorf("--disk-reserve: %w", err)
	}
	if reserve == 0 {
		reserve = -1 // only the minimum the state needs (Config's 0 is the default)
	}
	segment, err := positiveSize("--segment-bytes", c.SegmentBytes)
	if err != nil {
		return broker.Config{}, err
	}
	checkpoint, err := positiveSize("--checkpoint-bytes", c.CheckpointBytes)
	if err != nil {
		return broker.Config{}, err
	}
	switch c.Sync {
	case "always", "batch", "none":
	default:
		return broker.Config{}, fmt.Errorf("--sync must be always, batch or none, not %q", c.Sync)
	}
	cc, err := c.clusterConfig()
	if err != nil {
		return broker.Config{}, err
	}
	return broker.Config{Dir: c.DataDir, Sync: broker.SyncMode(c.Sync), Region: c.Region, AccountID: c.AccountID, BaseURL: c.BaseURL, Logger: log,
		NoPreallocate: !c.Preallocate, DiskReserve: reserve, SegmentBytes: segment, CheckpointBytes: checkpoint, Cluster: cc, Salvage: c.Salvage}, nil
}

// positiveSize reads flag's size, which must not be 0: Config takes 0 as
// its default, and a flag that said 0 would silently mean 64 MiB.
func positiveSize(flag, v string) (int64, error) {
	n, err := parseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flag, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: must be more than 0", flag)
	}
	return n, nil
}

// adminHTTPServer is the admin address's server, with timeouts like the
// SQS port's so that slow or idle connections cannot pile up.
func adminHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadTimeout: 30 * time.Second, ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serve(ctx context.Context, args []string, env Env) error {
	fs, c := serveFlags(env)
	if _, err := cmdkit.ParseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	var creds *sigv4.Credentials
	if c.Credentials != "" {
		var err error
		if creds, err = sigv4.LoadCredentials(c.Credentials); err != nil {
			return err
		}
	} else if !c.Insecure && !isLoopback(c.SQSAddr) {
		return fmt.Errorf("refusing to listen on a non-loopback address (%s) without --credentials: anyone could read and write every queue; pass --insecure to do it anyway", c.SQSAddr)
	}
	token := c.AdminToken
	if c.AdminTokenFile != "" {
		raw, err := os.ReadFile(c.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		token = strings.TrimSpace(string(raw))
		if token == "" {
			return fmt.Errorf("--admin-token-file %s is empty", c.AdminTokenFile)
		}
	}
	if token == "" && !c.Insecure && !isLoopback(c.AdminAddr) {
		return fmt.Errorf("refusing to serve the admin API on a non-loopback address (%s) without --admin-token: anyone could read message bodies and purge queues; pass --insecure to do it anyway", c.AdminAddr)
	}
	cfg, err := c.brokerConfig(log)
	if err != nil {
		return err
	}
	headroom, err := parseSize(c.GCHeadroom)
	if err != nil {
		return fmt.Errorf("--gc-headroom: %w", err)
	}
	b, err := broker.OpenContext(ctx, cfg) // a signal stops a wait for a quorum
	if errors.Is(err, broker.ErrDamaged) {
		return fmt.Errorf("%w\n\nThe server will not start on damaged data rather than drop the acknowledged messages it may hold back. "+
			"See all the damage and what it holds with `sluice verify --data-dir %s`. Then take a copy of the directory, and keep every record that reads back "+
			"with `sluice verify --salvage --data-dir %s` (which reports what is lost) or by starting once with --salvage; or restore a backup", err, c.DataDir, c.DataDir)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	srv := sqs.NewServer(sqs.ServerConfig{Region: c.Region, AccountID: c.AccountID, BaseURL: c.BaseURL, Credentials: creds, Logger: log}, b)
	ln, err := net.Listen("tcp", c.SQSAddr)
	if err != nil {
		return err
	}
	aln, err := net.Listen("tcp", c.AdminAddr)
	if err != nil {
		ln.Close()
		return err
	}
	adm := admin.New(b, admin.Options{Logger: log, Collectors: []prometheus.Collector{srv.Collector()}})
	adm.Start()
	defer adm.Stop()
	// The process's collector: GOGC, when the user set it, wins.
	if headroom > 0 && env.Getenv("GOGC") == "" {
		gc := gcheadroom.Start(uint64(headroom))
		defer gc.Stop()
	}
	b.ServeForwarded("sqs", srv) // in a cluster: requests other nodes forward here
	// Forwarded admin requests act as who sent them, checked again here.
	b.ServeForwarded("admin", admin.Authenticated(adm, &admin.Access{Token: token, Credentials: creds}))
	mux := http.NewServeMux()
	mux.Handle("/", adm) // metrics, the JSON API and the dashboard
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	// Profiles for operators, on the admin address only.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/heap", pprof.Index)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var hosts []string
	if c.AdminHosts != "" {
		hosts = strings.Split(c.AdminHosts, ",")
	}
	adminSrv := adminHTTPServer(admin.Guard(mux, admin.GuardOptions{Token: token, Credentials: creds, AllowedHosts: hosts}))
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() {
		if err := adminSrv.Serve(aln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	auth := "off (any signature accepted)"
	if creds != nil {
		auth = "SigV4 with " + c.Credentials
	}
	log.Info("sluice serving", "sqs", "http://"+ln.Addr().String(), "admin", "http://"+aln.Addr().String(),
		"data_dir", c.DataDir, "sync", c.Sync, "auth", auth, "admin_access", adminAccess(token, creds), "cluster", c.Cluster, "node", c.Node)
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests")
	case err := <-errc:
		if err != nil {
			log.Error("server failed", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = adminSrv.Shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil && !strings.Contains(err.Error(), "closed") {
		log.Warn("shutdown", "err", err)
	}
	if err := b.Close(); err != nil {
		return err
	}
	log.Info("stopped; store flushed and closed")
	return nil
}

// adminAccess says at start who may use the admin address.
func adminAccess(token string, creds *sigv4.Credentials) string {
	switch {
	case token == "" && creds == nil:
		return "open: no token and no credentials, anyone who reaches the address by a loopback name is the operator (a developer's laptop)"
	case creds == nil:
		return "the admin token only (the operator)"
	case token == "":
		return "principals only, each signing with its access key and seeing its own queues and topics; no admin token, so nobody has the operator's views (/metrics, the store, the cluster): set --admin-token"
	}
	return "the admin token (the operator), and principals signing with their access keys, each seeing its own queues and topics"
}
