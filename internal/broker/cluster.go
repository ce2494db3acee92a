package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/cluster"
	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/liveness"
	"github.com/sluicemq/sluice/internal/natsnode"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/remote"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/jsstore"
	"github.com/sluicemq/sluice/sluicetype"
)

// ClusterConfig makes a broker one node of a cluster on NATS JetStream
// (docs/cluster.md): each queue's records go to a replicated stream, one
// node owns each queue at a time (a lease), and any node serves any
// request, forwarding what it does not own to the node that does.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every node. Required.
	Name string
	// Node is this node's name: stable across restarts, unique in the
	// cluster. Required.
	Node string
	// Peers are the route addresses (host:port) of every node of the
	// cluster, this one's included, for the embedded NATS server. Empty
	// with one node, or with NATSURL.
	Peers []string
	// Listen is this node's route listener (host:port), which the other
	// nodes' Peers name. Required with Peers.
	Listen string
	// Advertise is the route address (host:port) this node tells its
	// peers to reach it at, when that is not Listen (behind NAT, in a
	// container); peers dial it when they learn of this node by gossip
	// rather than from their Peers. Default "": Listen. Only with Peers.
	Advertise string
	// Secret, when set, authenticates the routes between the embedded
	// NATS servers: every node must have the same one, and a node that
	// presents another one (or none) is refused. At least 16 bytes of
	// ASCII letters, digits and "-._~+/="; sent in clear text unless the
	// routes use TLS (TLSCert). Default "": routes are not authenticated.
	// Only with Peers.
	Secret string
	// TLSCert, TLSKey and TLSCA turn on TLS on the routes between the
	// embedded NATS servers, verified both ways: the paths of this node's
	// certificate (PEM, with any intermediates), of its private key (PEM),
	// and of the CA bundle (PEM) the peers' certificates must chain to.
	// The certificate must name every host its peers dial it at and allow
	// serverAuth and clientAuth (natsnode.Config.ClusterTLSCert says
	// more). All three or none. Default "": plain TCP routes. Only with
	// Peers.
	TLSCert, TLSKey, TLSCA string
	// ClientListen is the embedded NATS server's client listener
	// (host:port), for NATS tools; "" serves no NATS clients but this
	// process. Whoever uses it can read, purge and delete every queue's
	// stream, so it requires ClientToken.
	ClientListen string
	// ClientToken is the token every client of ClientListen must present
	// (the NATS CLI takes it as --user, without --password). Required
	// with ClientListen, and only with it. At least 16 bytes of ASCII
	// letters, digits and "-._~+/=" (natsnode.CheckClientToken), at most
	// 256; never logged. It crosses the network in clear text: keep
	// ClientListen on loopback or a private network. No default.
	ClientToken string
	// NATSURL, when set, uses an existing NATS cluster (comma-separated
	// URLs; JetStream with sync_interval always, max_payload at least
	// 2 MiB) instead of an embedded server.
	NATSURL string
	// Replicas is each stream's replica count. Default 3, or 1 for a
	// single embedded node without peers.
	Replicas int
	// LeaseTTL is how long a node that stops renewing its leases (it
	// crashed, or is cut off) keeps its queues before another node takes
	// them over. Whole seconds, at least 2 s. Default 6 s.
	LeaseTTL time.Duration
	// ReadyTimeout bounds the wait for a JetStream quorum at Open; 0
	// waits as long as it takes (and says so in the log).
	ReadyTimeout time.Duration
	// SnapshotBytes is how many bytes of a queue's stream after its
	// newest snapshot make its owner write a new one, so that what is
	// below can be purged and a new owner replays little. Default 4 MiB.
	SnapshotBytes int64
}

func (c ClusterConfig) withDefaults() ClusterConfig {
	if c.Replicas <= 0 {
		c.Replicas = 3
		if c.NATSURL == "" && len(c.Peers) <= 1 {
			c.Replicas = 1
		}
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 6 * time.Second
	}
	return c
}

func (c ClusterConfig) validate() error {
	if c.Name == "" || c.Node == "" {
		return errors.New("sluice: a cluster needs its name and this node's name (--cluster, --node)")
	}
	if c.NATSURL != "" && len(c.Peers) > 0 {
		return errors.New("sluice: give either the peers of an embedded NATS cluster or the URL of an existing one, not both")
	}
	if len(c.Peers) > 0 && c.Listen == "" {
		return errors.New("sluice: a node with peers needs its own route address (--listen-cluster)")
	}
	if c.NATSURL == "" && c.ClientListen != "" && c.ClientToken == "" {
		return errors.New("sluice: the embedded NATS server's client listener (ClientListen) needs a ClientToken")
	}
	return nil
}

// clusterNode is what a broker runs as a node of a cluster: the embedded
// NATS server (or a connection to an existing one), the JetStream store,
// the manager of leases, and the services this node offers for the
// partitions it owns.
type clusterNode struct {
	cfg  ClusterConfig
	log  *slog.Logger
	node *natsnode.Node // nil with NATSURL
	nc   *nats.Conn
	e    *engine.Engine
	m    atomic.Pointer[cluster.Manager] // set once started (the engine's hooks may run before)

	// live pings the other nodes; router forwards requests to the nodes
	// that own their partitions (Broker.Forward), as live and the leases
	// say.
	live   *liveness.Tracker
	router *forward.Router

	mu       sync.Mutex
	handlers map[string]http.Handler // by service: "sqs", "admin"
	fronts   []*forward.Server       // this node's subject of each service
	served   map[store.PartitionID]*served
	subs     []*nats.Subscription // the answers to asks

	// notes are first receives here of messages from topics other nodes
	// own, by topic partition, sent every attemptsEvery (FirstAttempt).
	notesMu    sync.Mutex
	notes      map[store.PartitionID][]attemptNote
	notesTimer *time.Timer
	notesDone  bool
}

// attemptNote is a first receive (At, unix ms) of a message from a
// topic's publish (From).
type attemptNote struct {
	From queue.Origin `json:"from"`
	At   int64        `json:"at"`
}

// attemptsEvery is how often first receives are sent to the topics'
// owners: in batches, not one message each.
const attemptsEvery = 100 * time.Millisecond

// FirstAttempt queues first receives for the owners of their topics.
func (c *clusterNode) FirstAttempt(from []queue.Origin, at time.Time) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	if c.notesDone {
		return
	}
	if c.notes == nil {
		c.notes = map[store.PartitionID][]attemptNote{}
	}
	for _, f := range from {
		p := store.PartitionID(f.Partition)
		if len(c.notes[p]) < 10000 { // figures only: a flood is cut, not queued
			c.notes[p] = append(c.notes[p], attemptNote{From: f, At: at.UnixMilli()})
		}
	}
	if c.notesTimer == nil {
		c.notesTimer = time.AfterFunc(attemptsEvery, c.sendAttempts)
	}
}

// sendAttempts sends the first receives noted to their topics' owners
// (fire and forget: figures only).
func (c *clusterNode) sendAttempts() {
	c.notesMu.Lock()
	notes := c.notes
	c.notes, c.notesTimer = nil, nil
	c.notesMu.Unlock()
	for p, ns := range notes {
		if data, err := json.Marshal(ns); err == nil {
			_ = c.nc.Publish(c.subject(p, "attempts"), data)
		}
	}
}

// takeAttempts hands first receives sent by other nodes to topic p, if
// this node owns it.
func (c *clusterNode) takeAttempts(p store.PartitionID, data []byte) {
	var ns []attemptNote
	if json.Unmarshal(data, &ns) != nil {
		return
	}
	for _, n := range ns {
		c.e.Answers().FirstAttempt(p, []queue.Origin{n.From}, time.UnixMilli(n.At))
	}
}

// openCluster starts the node's NATS (embedded, or connects), and opens
// the JetStream store.
func openCluster(ctx context.Context, cfg Config) (*clusterNode, store.Store, error) {
	cc := cfg.Cluster.withDefaults()
	if err := cc.validate(); err != nil {
		return nil, nil, err
	}
	c := &clusterNode{cfg: cc, log: cfg.Logger, handlers: map[string]http.Handler{}, served: map[store.PartitionID]*served{}}
	c.live = liveness.New(liveness.Config{Self: cc.Node, Logger: cfg.Logger,
		Members: func() []string {
			if m := c.m.Load(); m != nil {
				return m.Members()
			}
			return nil
		},
		Active: func() bool { return c.serves(livenessService) }, // a node that does not serve it would be thought gone
		Ping: func(ctx context.Context, node string) error {
			err := forward.Ping(ctx, c.nc, c.nodeSubject(node, livenessService, "0"))
			switch {
			case errors.Is(err, forward.ErrBadReply):
				return nil // a node from before pings answers them as malformed requests: it is there
			case errors.Is(err, forward.ErrNoOwner):
				return fmt.Errorf("%w: %w", liveness.ErrNobody, err)
			}
			return err
		}})
	if cc.NATSURL == "" {
		n, err := natsnode.Start(natsnode.Config{Cluster: cc.Name, Node: cc.Node, Dir: filepath.Join(cfg.Dir, "nats"),
			ClientAddr: cc.ClientListen, ClientToken: cc.ClientToken, ClusterAddr: cc.Listen, ClusterAdvertise: cc.Advertise, Peers: cc.Peers, ClusterSecret: cc.Secret,
			ClusterTLSCert: cc.TLSCert, ClusterTLSKey: cc.TLSKey, ClusterTLSCA: cc.TLSCA, Logger: cfg.Logger})
		if err != nil {
			return nil, nil, err
		}
		c.node = n
		if cc.ReadyTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cc.ReadyTimeout)
			defer cancel()
		}
		cfg.Logger.Info("waiting for JetStream", "cluster", cc.Name, "node", cc.Node, "peers", len(cc.Peers))
		if err := n.Ready(ctx); err != nil {
			n.Close()
			return nil, nil, fmt.Errorf("sluice: JetStream is not ready: %w", err)
		}
		if c.nc, err = n.Connect(nats.Name("sluice-" + cc.Node)); err != nil {
			n.Close()
			return nil, nil, err
		}
	} else {
		var err error
		c.nc, err = nats.Connect(cc.NATSURL, nats.Name("sluice-"+cc.Node), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
		if err != nil {
			return nil, nil, fmt.Errorf("sluice: connecting to NATS at %s: %w", cc.NATSURL, err)
		}
	}
	cfg.Logger.Info("JetStream is ready", "cluster", cc.Name, "node", cc.Node)
	c.router = &forward.Router{Conn: c.nc, Live: c.live, Subject: c.partitionSubject}
	jc := jsstore.Config{Conn: c.nc, Prefix: cc.Name, Replicas: cc.Replicas, Logger: cfg.Logger, SnapshotBytes: cc.SnapshotBytes,
		Isolated: c.live.Isolated}
	if c.node != nil {
		jc.StoreLimit = natsnode.DefaultMaxStore // the embedded server's limit: the disk alarm's measure
	}
	st, err := jsstore.Open(jc)
	if err != nil {
		c.closeNATS()
		return nil, nil, err
	}
	return c, st, nil
}

// start makes the engine (opened with this node as its Cluster) a node of
// the cluster: its manager takes leases and drives the engine.
func (c *clusterNode) start(e *engine.Engine) error {
	c.e = e
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds the start only
	defer cancel()
	m, err := cluster.Start(ctx, cluster.Config{Conn: c.nc, Cluster: c.cfg.Name, Node: c.cfg.Node,
		Replicas: c.cfg.Replicas, LeaseTTL: c.cfg.LeaseTTL, Logger: c.log,
		Silent: func(node string) bool { return c.live.State(node) != liveness.Alive }}, clusterHost{c})
	if err != nil {
		return err
	}
	c.m.Store(m)
	c.live.Start()
	return nil
}

// answer serves one question of the other nodes' asks (cluster.Answer):
// "stats", its queues' figures; "sources", the queues it owns whose
// dead-letter queue is the ARN asked about; "settings", the attributes of
// the queue asked about if it owns it (else null); "topics", the topics
// it owns; "cert", an SNS signing certificate if it is this node's;
// "forget", after a topic's deletion, its queues forget their marks of the
// topic's partition (the data); and the move tasks' (cluster_tasks.go).
func (c *clusterNode) answer(question string, f func(data []byte) any) error {
	sub, err := cluster.Answer(c.nc, cluster.Subjects(c.cfg.Name), question, f)
	if err == nil {
		c.mu.Lock()
		c.subs = append(c.subs, sub)
		c.mu.Unlock()
	}
	return err
}

// serveQuestions answers the other nodes' asks with what this node owns.
func (c *clusterNode) serveQuestions(b *Broker) error {
	answer := c.answer
	return errors.Join(
		answer("stats", func([]byte) any { return b.Stats() }),
		answer("sources", func(arn []byte) any { return c.e.Answers().Sources(string(arn)) }),
		answer("settings", func(name []byte) any {
			if attrs, ok := c.e.Answers().Settings(string(name)); ok {
				return attrs
			}
			return nil
		}),
		answer("topics", func([]byte) any { return c.e.Answers().Topics() }),
		answer("cert", func(p []byte) any {
			if b.sign != nil {
				if pem, ok := b.sign.Certificate(string(p)); ok {
					return string(pem)
				}
			}
			return nil
		}),
		answer("forget", func(data []byte) any {
			if p, err := strconv.ParseUint(string(data), 10, 64); err == nil && p != uint64(store.Catalog) {
				c.e.Answers().ForgetOrigin(context.Background(), store.PartitionID(p))
			}
			return true
		}))
}

// ask asks every node a question (this one's included) and returns the
// members' answers that came within a second (cluster.Ask).
func (c *clusterNode) ask(ctx context.Context, question string, data []byte) ([][]byte, error) {
	return cluster.Ask(ctx, c.nc, cluster.Subjects(c.cfg.Name), question, data, len(c.m.Load().Status().Members))
}

// gatherStats asks every node for its queues' figures.
func (c *clusterNode) gatherStats(ctx context.Context, b *Broker) []QueueStats {
	answers, err := c.ask(ctx, "stats", nil)
	if err != nil {
		return b.Stats()
	}
	return cluster.ByName(answers, func(q QueueStats) string { return q.Name })
}

// Sources asks every node which queues it owns have the dead-letter queue
// arn.
func (c *clusterNode) Sources(arn string) ([]string, bool) {
	answers, _ := c.ask(context.Background(), "sources", []byte(arn))
	var out []string
	for _, a := range answers {
		var names []string
		if json.Unmarshal(a, &names) == nil {
			out = append(out, names...)
		}
	}
	return out, true
}

// Settings asks every node for the attributes of queue name; the node
// that owns it answers them.
func (c *clusterNode) Settings(ctx context.Context, name string) (map[string]string, bool) {
	answers, _ := c.ask(ctx, "settings", []byte(name))
	for _, a := range answers {
		var attrs map[string]string
		if json.Unmarshal(a, &attrs) == nil && attrs != nil {
			return attrs, true
		}
	}
	return nil, false
}

// clusterHost is the engine as the manager drives it, with this node's
// services for what it owns.
type clusterHost struct{ c *clusterNode }

func (h clusterHost) Partitions() []store.PartitionID { return h.c.e.Partitions() }
func (h clusterHost) CatalogChanged()                 { h.c.e.CatalogChanged() }

func (h clusterHost) Acquire(p store.PartitionID, term uint64) error {
	if err := h.c.e.Acquire(p, term); err != nil {
		return err
	}
	h.c.serve(p)
	h.c.lead(p)
	return nil
}

func (h clusterHost) Release(p store.PartitionID) {
	h.c.unserve(p)
	h.c.e.Release(p)
}

// subject is what the owner of partition p serves a service on (the
// calls between owners: hand-overs, a topic's deliveries, first
// attempts).
func (c *clusterNode) subject(p store.PartitionID, service string) string {
	return cluster.Subjects(c.cfg.Name).Partition(p, service)
}

// nodeSubject is where node serves the requests forwarded to it for the
// service of partition p; "*" for p's token makes the subject the node
// subscribes to.
//
// Forwarded requests go to a node, not to a partition's subject: a node's
// subscription lasts as long as the node, while a partition's would come
// and go with its owner, and NATS drops a request routed to a
// subscription that its server has just removed (the subscription's end
// reaches the other servers a moment later), so the forwarding node would
// wait for an answer that never comes.
func (c *clusterNode) nodeSubject(node, service, p string) string {
	return cluster.Subjects(c.cfg.Name).Node(node, service, p)
}

// partitionSubject is nodeSubject for partition p's requests.
func (c *clusterNode) partitionSubject(node, service string, p store.PartitionID) string {
	return c.nodeSubject(node, service, strconv.FormatUint(uint64(p), 10))
}

// served is what this node serves for a partition it owns.
type served struct {
	stops []func() // the subscriptions of the calls between owners
	// ctx ends when the node stops serving the partition: the forwarded
	// requests being served end with it (long polls return at once).
	ctx      context.Context
	cancel   context.CancelFunc
	requests sync.WaitGroup // the forwarded requests being served
}

// serve subscribes the services of an owned partition (hand-overs into
// its queue, a topic's deliveries, first attempts) and makes this node
// answer the requests forwarded to it for the partition.
func (c *clusterNode) serve(p store.PartitionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.served[p]; ok {
		return
	}
	var stops []func()
	if p != store.Catalog {
		if sub, err := remote.Serve(c.nc, c.subject(p, "enter"), enterer{c.e, p}); err == nil {
			stops = append(stops, func() { _ = sub.Drain() })
		} else {
			c.log.Error("serving a partition's hand-overs failed", "partition", p, "err", err)
		}
		if sub, err := c.nc.Subscribe(c.subject(p, "attempts"), func(m *nats.Msg) { c.takeAttempts(p, m.Data) }); err == nil {
			stops = append(stops, func() { _ = sub.Unsubscribe() })
		}
		if subs, err := remote.ServeQueue(c.nc, c.subject(p, "deliver"), c.subject(p, "marks"), deliverer{c.e, p}); err == nil {
			stops = append(stops, func() {
				for _, sub := range subs {
					_ = sub.Drain()
				}
			})
		} else {
			c.log.Error("serving a partition's topic deliveries failed", "partition", p, "err", err)
		}
	}
	sv := &served{stops: stops}
	sv.ctx, sv.cancel = context.WithCancel(context.Background())
	c.served[p] = sv
}

// The engine's Cluster (engine.Cluster says what each does): the leases
// are the manager's, the other nodes' queues reached over NATS.

func (c *clusterNode) Claim(p store.PartitionID) (uint64, error) {
	m := c.m.Load()
	if m == nil {
		return 0, errors.New("sluice: the cluster's manager is not started")
	}
	term, err := m.Claim(p)
	if err == nil {
		c.serve(p)
	}
	return term, err
}

func (c *clusterNode) Created(p store.PartitionID) { c.lead(p) }

func (c *clusterNode) Lost(p store.PartitionID) {
	c.unserve(p)
	if m := c.m.Load(); m != nil {
		m.Lost(p)
	}
}

func (c *clusterNode) CatalogChanged() {
	if m := c.m.Load(); m != nil {
		m.NotifyCatalog()
	}
}

func (c *clusterNode) Remote(p store.PartitionID, name string) partition.Destination {
	return remote.Destination{Conn: c.nc, Subject: c.subject(p, "enter"), Queue: name}
}

func (c *clusterNode) Deliver(ctx context.Context, p store.PartitionID, name string, in []sluicetype.SendInput, from []queue.Origin) ([]error, error) {
	return remote.Deliver(ctx, c.nc, c.subject(p, "deliver"), name, in, from)
}

func (c *clusterNode) Marks(ctx context.Context, p store.PartitionID, name string) (map[uint64]uint64, error) {
	return remote.Marks(ctx, c.nc, c.subject(p, "marks"), name)
}

func (c *clusterNode) ForgetOrigin(ctx context.Context, origin store.PartitionID) {
	_, _ = c.ask(ctx, "forget", []byte(strconv.FormatUint(uint64(origin), 10)))
}

var _ engine.Cluster = (*clusterNode)(nil)

// lead asks that the stream of p (which this node now owns) be led by
// this node's NATS server: the owner's writes then go to its own server,
// and to the replicas from there, instead of first crossing a route to a
// leader elsewhere. The store's writer moves the leader between writes.
func (c *clusterNode) lead(p store.PartitionID) {
	if js, ok := c.e.Store().(*jsstore.Store); ok {
		js.Lead(p)
	}
}

// unserve stops serving partition p: forwarded requests for it are
// answered "not the owner" from now on, those being served are cancelled
// and answered before it returns, and the calls between owners are
// unsubscribed.
func (c *clusterNode) unserve(p store.PartitionID) {
	c.mu.Lock()
	sv := c.served[p]
	delete(c.served, p)
	c.mu.Unlock()
	if sv == nil {
		return
	}
	sv.cancel()
	for _, stop := range sv.stops {
		stop()
	}
	sv.requests.Wait()
}

// front answers the requests other nodes forward to this one for service
// (its handler: h), each for the partition its subject's last token
// names: those of a partition this node does not serve (it has moved, or
// is not taken yet) get a 503 marked forward.NotOwnerHeader, nothing done, so
// that the forwarding node sends them where the partition is now.
func (c *clusterNode) front(service string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject := forward.Subject(r)
		id, err := strconv.ParseUint(subject[strings.LastIndexByte(subject, '.')+1:], 10, 64)
		c.mu.Lock()
		sv, h := c.served[store.PartitionID(id)], c.handlers[service]
		if err == nil && sv != nil && h != nil {
			sv.requests.Add(1) // under mu: unserve waits for it
		}
		c.mu.Unlock()
		if err != nil || sv == nil || h == nil {
			w.Header().Set(forward.NotOwnerHeader, "1")
			http.Error(w, "This node does not serve the partition the request is for; it is sent where the partition is now.", http.StatusServiceUnavailable)
			return
		}
		defer sv.requests.Done()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(sv.ctx, cancel)()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// enterer enters hand-overs into the queue of partition p as this node
// owns it now.
type enterer struct {
	e *engine.Engine
	p store.PartitionID
}

func (d enterer) Name() string { return fmt.Sprint("partition ", d.p) }

func (d enterer) Enter(ctx context.Context, key string, m *record.Msg, pl *record.Payload) error {
	o := d.e.Owner(d.p)
	if o == nil {
		return partition.NotOwner()
	}
	return o.Enter(ctx, key, m, pl)
}

// deliverer takes topics' deliveries into the queue of partition p as
// this node owns it now.
type deliverer struct {
	e *engine.Engine
	p store.PartitionID
}

func (d deliverer) Deliver(ctx context.Context, in []sluicetype.SendInput, from []queue.Origin) ([]error, error) {
	return d.e.Answers().Deliver(ctx, d.p, in, from)
}

func (d deliverer) Marks(context.Context) (map[uint64]uint64, error) { return d.e.Answers().Marks(d.p) }

// serves reports whether this node answers requests forwarded to it for
// service.
func (c *clusterNode) serves(service string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.handlers[service]
	return ok
}

// setHandler makes the node serve a front's forwarded requests (service
// "sqs" or "admin") with h for every partition it owns, now and later.
func (c *clusterNode) setHandler(service string, h http.Handler) {
	c.mu.Lock()
	_, had := c.handlers[service]
	c.handlers[service] = h
	c.mu.Unlock()
	if had {
		return // the front reads the handler on each request
	}
	s, err := forward.Start(c.nc, forward.Config{Subject: c.nodeSubject(c.cfg.Node, service, "*"), Queue: "node",
		Handler: c.front(service), Logger: c.log})
	if err != nil {
		c.log.Error("serving forwarded requests failed", "service", service, "err", err)
		return
	}
	c.mu.Lock()
	c.fronts = append(c.fronts, s)
	c.mu.Unlock()
}

// close hands this node's partitions over (their leases are deleted, so
// others take them at once), stops its services, and closes NATS.
func (c *clusterNode) close() {
	c.live.Close()
	if m := c.m.Load(); m != nil {
		m.Close()
	}
	c.notesMu.Lock()
	c.notesDone = true
	if c.notesTimer != nil {
		c.notesTimer.Stop()
	}
	c.notesMu.Unlock()
	c.mu.Lock()
	for _, sub := range c.subs {
		_ = sub.Unsubscribe()
	}
	ps := make([]store.PartitionID, 0, len(c.served))
	for p := range c.served {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	for _, p := range ps {
		c.unserve(p)
	}
	c.mu.Lock()
	fronts := c.fronts
	c.fronts = nil
	c.mu.Unlock()
	for _, s := range fronts {
		s.Stop()
	}
}

func (c *clusterNode) closeNATS() {
	if c.nc != nil {
		c.nc.Close()
	}
	if c.node != nil {
		c.node.Close()
	}
}

// ---- the broker's part ----

// Clustered reports whether the broker is a node of a cluster.
func (b *Broker) Clustered() bool { return b != nil && b.cl != nil }

// Route says where requests for a queue are served: "" when this node
// serves them, else the route to Forward them on (service: "sqs" or
// "admin"): the queue's partition and the service, which Forward sends
// to whichever node owns the partition when it sends.
// QueueDoesNotExist when no node has the queue.
func (b *Broker) Route(queue, service string) (string, error) {
	if b.cl == nil {
		return "", nil
	}
	p, local, err := b.e.Route(queue)
	if err != nil || local {
		return "", err
	}
	return route(p, service), nil
}

// route is a partition's service as Route names it: "sqs/12".
func route(p store.PartitionID, service string) string {
	return service + "/" + strconv.FormatUint(uint64(p), 10)
}

func parseRoute(r string) (p store.PartitionID, service string, ok bool) {
	service, id, ok := strings.Cut(r, "/")
	n, err := strconv.ParseUint(id, 10, 64)
	return store.PartitionID(n), service, ok && err == nil && service != ""
}

// RouteTopic is Route for a topic's requests; ErrNoTopic when no node has
// the topic.
func (b *Broker) RouteTopic(name, service string) (string, error) {
	if b.cl == nil {
		return "", nil
	}
	p, local, err := b.e.RouteTopic(name)
	if err != nil || local {
		return "", err
	}
	return route(p, service), nil
}

// certificate asks the other nodes for the SNS signing certificate served
// at path p (each node signs with its own key).
func (c *clusterNode) certificate(ctx context.Context, p string) ([]byte, bool) {
	answers, _ := c.ask(ctx, "cert", []byte(p))
	for _, a := range answers {
		var pem *string
		if json.Unmarshal(a, &pem) == nil && pem != nil {
			return []byte(*pem), true
		}
	}
	return nil, false
}

// gatherTopics asks every node for the topics it owns.
func (c *clusterNode) gatherTopics(ctx context.Context) []TopicInfo {
	answers, _ := c.ask(ctx, "topics", nil)
	return cluster.ByName(answers, func(t TopicInfo) string { return t.Name })
}

// RouteCatalog is Route for requests that change the catalog (create and
// delete queues): "" when this node owns it.
func (b *Broker) RouteCatalog(service string) string {
	if b.cl == nil || b.e.OwnsCatalog() {
		return ""
	}
	return route(store.Catalog, service)
}

// livenessService is the service whose front is pinged (every node of
// a cluster serves it): its subscription answers pings from its
// delivery loop, which no request holds up.
const livenessService = "sqs"

// Forward sends a request (its body read already) on a route (Route's) to
// the node that owns the route's partition, as forward.Router.Forward
// does: while the partition is between owners it waits for the next, and
// a node that stops answering does not hold the request up for long.
func (b *Broker) Forward(ctx context.Context, rt string, r *http.Request, body []byte, how forward.How) (*forward.Response, error) {
	p, service, ok := parseRoute(rt)
	if !ok {
		return nil, fmt.Errorf("sluice: forwarding on a malformed route %q", rt)
	}
	m := b.cl.m.Load()
	if m == nil {
		return nil, fmt.Errorf("%w: the cluster's manager is not started", forward.ErrNoOwner)
	}
	return b.cl.router.Forward(ctx, m, p, service, r, body, how)
}

// CutOff returns forward.ErrCutOff while this node cannot reach any other node of
// its cluster (nil outside a cluster): it then answers no request about
// a queue, which it could neither write nor know the owner of.
func (b *Broker) CutOff() error {
	if b.cl == nil || !b.cl.live.Isolated() {
		return nil
	}
	return forward.ErrCutOff
}

// ServeForwarded makes this node answer the requests other nodes forward
// to it for the partitions it owns, with h (service: "sqs" or "admin").
func (b *Broker) ServeForwarded(service string, h http.Handler) {
	if b.cl != nil {
		b.cl.setHandler(service, h)
	}
}

// ClusterStatus is the cluster as this node sees it (nil outside a
// cluster): its members, each queue's owner, failovers.
func (b *Broker) ClusterStatus() *sluicetype.ClusterStatus {
	if b.cl == nil || b.cl.m.Load() == nil {
		return nil
	}
	s, fc := b.cl.m.Load().Status(), b.cl.router.Counts()
	out := &sluicetype.ClusterStatus{Node: s.Node, Members: s.Members, Owners: map[string]string{}, CatalogOwner: s.Owners[store.Catalog],
		Owned: len(s.Owned), Failovers: s.Failovers, Handovers: s.Handovers, AcquireFailures: s.AcquireFailures, RenewFailures: s.RenewFailures, LeasesRetaken: s.Retaken,
		Forwarded: fc.Forwarded, Resent: fc.Resent, OwnerLost: fc.Lost, OwnerSilent: fc.Silent,
		CutOff: b.cl.live.Isolated()}
	for p, name := range b.e.PartitionNames() {
		out.Owners[name] = s.Owners[p]
	}
	return out
}

// StreamLeaders names, for each queue, the server that leads its stream
// now (for operators and failure tests; one JetStream request a queue).
func (b *Broker) StreamLeaders(ctx context.Context) map[string]string {
	js, ok := b.e.Store().(*jsstore.Store)
	if b.cl == nil || !ok {
		return nil
	}
	out := map[string]string{}
	for p, name := range b.e.PartitionNames() {
		if l, err := js.Leader(ctx, p); err == nil {
			out[name] = l
		}
	}
	return out
}

// ClusterStats returns the figures of every queue of the cluster, each
// from the node that owns it (Stats: only this node's); outside a
// cluster, Stats.
func (b *Broker) ClusterStats(ctx context.Context) []QueueStats {
	if b.cl == nil {
		return b.Stats()
	}
	return b.cl.gatherStats(ctx, b)
}
