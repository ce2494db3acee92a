// Package engine is the registry of a broker's queues over the store seam:
// the catalog partition (which queues exist, under which partition), the
// owner of each queue's partition (package partition), the queue
// lifecycle (create, delete, settings), recovery, and the background work
// (maintenance, snapshots, compaction). Operations on one queue's
// messages are its owner's; the engine finds the owner.
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/topic"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Config configures an Engine. Open fills no defaults: internal/broker's
// Config does (WithDefaults).
type Config struct {
	Store     store.Store
	Region    string
	AccountID string
	MaxQueues int
	Clock     clock.Clock
	// Rand is the source of message ids and receipt handle nonces
	// (crypto/rand in a server; a seeded source in the simulator).
	Rand            io.Reader
	Logger          *slog.Logger
	CompactInterval time.Duration
	// Node names this engine in the epoch records it writes when it takes
	// a partition over ("" in a single node: "local").
	Node string
	// TopicFormat makes the message a topic's subscription delivers into
	// its queue (the SNS front's envelope or raw message).
	TopicFormat topic.Formatter
	// FlowControl lets queues hold sends back while consumers take
	// messages off a backlog (partition.Host.FlowControl).
	FlowControl bool
	// Cluster makes the engine one node of a cluster (nil: a single
	// node). Open replays nothing; partitions are acquired and released
	// as the cluster's leases say (Acquire, Release), and the catalog is
	// read as a view unless this node owns it (cluster.go).
	Cluster Cluster
}

// Engine owns the queues of one store.
type Engine struct {
	cfg Config
	// cl is the cluster the engine is a node of (Single when it is not:
	// clustered false).
	cl        Cluster
	clustered bool
	st        store.Store
	clock     clock.Clock
	log       *slog.Logger
	host      *partition.Host

	mu sync.RWMutex // guards the registry below
	// queues and byPart are the queues this engine owns (a single node:
	// every queue).
	queues map[string]*partition.Owner
	byPart map[store.PartitionID]*partition.Owner
	// names is the catalog: every queue and its partition. On the
	// catalog's owner (a single node always) it changes with the
	// catalog's writes; on other nodes of a cluster it is a view, read
	// again from the catalog partition when it changes.
	names    map[string]store.PartitionID
	catOwned bool
	// topics are the topics (a single node: all of them), by name and by
	// partition; topicIDs the catalog's. topicMu serialises their
	// creations and deletions.
	topics      map[string]*topic.Owner
	topicByPart map[store.PartitionID]*topic.Owner
	topicIDs    map[string]store.PartitionID
	topicMu     sync.Mutex
	// freeAt: when each recently deleted queue's name may be used again
	// (60 seconds after its deletion), as the catalog's Drops say.
	freeAt   map[string]time.Time
	nextPart store.PartitionID

	// missMu serialises the catalog reads that names missing from the
	// view cause; missRead is when the last one ended (refreshForMiss).
	missMu   sync.Mutex
	missRead time.Time
	// viewMu serialises CatalogChanged's reads and installs, and viewPos
	// is the catalog position of the view installed last: a read that
	// began before another's install must not put an older view back (it
	// would drop partitions created, and taken here, after it).
	viewMu  sync.Mutex
	viewPos uint64

	// The catalog partition: its own lock and position.
	catMu   sync.Mutex
	catLast uint64

	closing chan struct{}
	closed  atomic.Bool
	bg      sync.WaitGroup // work of its own in the background (dropping orphans); Close waits for it

	timerMu       sync.Mutex
	maintainTimer clock.Timer
	compactTimer  clock.Timer
	snapshotMu    sync.Mutex // one round of snapshots at a time

	relocated atomic.Int64

	// started is told of every owner that starts serving (OnStart).
	started atomic.Pointer[func(o *partition.Owner)]

	// salvage is what the recovery's salvage found and lost (nil: the
	// store held no damage, or was not opened to salvage).
	salvage *st.SalvageReport
}

// Salvaged is what the recovery's salvage found and lost: nil when the
// store was not opened to salvage or held no damage.
func (e *Engine) Salvaged() *st.SalvageReport { return e.salvage }

// Open recovers the queues the store holds and starts serving.
func Open(cfg Config) (*Engine, error) {
	e := newEngine(cfg)
	if !e.clustered {
		e.catOwned = true
		if err := e.recover(); err != nil {
			return nil, err
		}
	} else {
		// Nothing replayed: each partition keeps its bodies as it is
		// acquired, and a replicated store frees nothing of a partition
		// being acquired.
		e.st.Recovered()
	}
	e.every(&e.maintainTimer, time.Second, e.maintain)
	if _, ok := e.st.(store.Compactor); ok && cfg.CompactInterval > 0 {
		e.every(&e.compactTimer, cfg.CompactInterval, e.compact)
	}
	return e, nil
}

func newEngine(cfg Config) *Engine {
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	e := &Engine{cfg: cfg, st: cfg.Store, clock: cfg.Clock, log: cfg.Logger,
		queues: map[string]*partition.Owner{}, byPart: map[store.PartitionID]*partition.Owner{}, names: map[string]store.PartitionID{}, freeAt: map[string]time.Time{},
		topics: map[string]*topic.Owner{}, topicByPart: map[store.PartitionID]*topic.Owner{}, topicIDs: map[string]store.PartitionID{},
		nextPart: 1, closing: make(chan struct{}), cl: cfg.Cluster, clustered: cfg.Cluster != nil}
	if e.cl == nil {
		e.cl = Single{}
	}
	e.host = &partition.Host{Store: cfg.Store, Clock: cfg.Clock, Log: cfg.Logger, Region: cfg.Region, AccountID: cfg.AccountID,
		Rand: cfg.Rand, Resolve: e.lookupARN, Closing: e.closing, Fenced: e.fenced, Started: e.ownerStarted, FirstAttempt: e.firstAttempt,
		FlowControl: cfg.FlowControl}
	if e.cfg.Node == "" {
		e.cfg.Node = "local"
	}
	return e
}

// Close stops background work, wakes long polls (they return empty), and
// closes the store.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(e.closing)
	e.timerMu.Lock()
	for _, t := range []clock.Timer{e.maintainTimer, e.compactTimer} {
		if t != nil {
			t.Stop()
		}
	}
	e.timerMu.Unlock()
	e.bg.Wait()
	return e.st.Close()
}

// OnStart has f told of every owner that starts serving a queue's
// partition from now on (after a takeover, a hand-over to this node, a
// fenced owner's replacement), on the goroutine that started it, and
// returns the owners serving already (recovered at Open, or acquired
// since): one may be both returned and told of.
func (e *Engine) OnStart(f func(o *partition.Owner)) []*partition.Owner {
	e.started.Store(&f)
	return e.all()
}

func (e *Engine) ownerStarted(o *partition.Owner) {
	if f := e.started.Load(); f != nil {
		(*f)(o)
	}
}

// Closing is closed when the engine closes.
func (e *Engine) Closing() <-chan struct{} { return e.closing }

// Log is the engine's logger.
func (e *Engine) Log() *slog.Logger { return e.log }

// Clock is the engine's time source.
func (e *Engine) Clock() clock.Clock { return e.clock }

// NewID is a fresh message or task id.
func (e *Engine) NewID() string { return e.host.NewID() }

// every runs f each d (from the end of one run to the start of the next)
// until the engine closes.
func (e *Engine) every(slot *clock.Timer, d time.Duration, f func()) {
	e.timerMu.Lock()
	defer e.timerMu.Unlock()
	if e.closed.Load() {
		return
	}
	*slot = e.clock.AfterFunc(d, func() {
		select {
		case <-e.closing:
			return
		default:
		}
		f()
		e.every(slot, d, f)
	})
}

// fenced takes over again a partition whose owner another writer fenced
// off: the owner has stopped; a new one replays the partition (with what
// the other writer wrote), claims it, and takes its place. (A single node
// has no other writer of its store; in a cluster, ownership moves by
// lease, and the node that holds it acquires.) A store that counts kept
// records rather than tracking each one (the disk log) counts the new
// owner's keeps on top of the old one's, so the segments of the
// partition's live bodies are not freed before a restart: storage leaks
// for a while, nothing is lost.
func (e *Engine) fenced(old *partition.Owner) {
	p := old.Partition()
	if e.clustered {
		e.lost(p, old)
		return
	}
	e.mu.RLock()
	cur := e.byPart[p]
	e.mu.RUnlock()
	if cur != old || e.closed.Load() {
		return
	}
	o, missing, err := partition.Acquire(e.host, p, e.clock.Now(), e.cfg.Node, 0)
	if err != nil {
		e.log.Error("taking a fenced partition over again failed; its queue does not serve", "partition", p, "err", err)
		return
	}
	e.mu.Lock()
	if e.byPart[p] != old {
		e.mu.Unlock()
		o.Relinquish()
		return
	}
	name := o.Meta().Name
	e.queues[name], e.byPart[p] = o, o
	e.mu.Unlock()
	o.Start()
	e.log.Warn("took a queue's partition over again after another writer fenced it", "queue", name, "partition", p, "messages_without_body", missing)
}

// ---- registry ----

// ARN is a queue's ARN.
func (e *Engine) ARN(name string) string { return e.host.ARN(name) }

// QueueNameFromARN returns the queue name of an ARN of this account.
func (e *Engine) QueueNameFromARN(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter QueueArn is invalid. Reason: not a valid SQS queue ARN.", arn)
	}
	if parts[4] != e.cfg.AccountID {
		return "", partition.NoQueue()
	}
	return parts[5], nil
}

// all lists the queues' owners, in partition order.
func (e *Engine) all() []*partition.Owner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*partition.Owner, 0, len(e.queues))
	for _, o := range e.queues {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition() < out[j].Partition() })
	return out
}

// Queue returns the owner of a queue, or QueueDoesNotExist.
//
// In a cluster, a queue another node owns is NotOwner (retryable: the
// request goes to its owner), not QueueDoesNotExist.
func (e *Engine) Queue(name string) (*partition.Owner, error) {
	e.mu.RLock()
	o := e.queues[name]
	_, known := e.names[name]
	e.mu.RUnlock()
	if o == nil {
		if known && e.clustered {
			return nil, partition.NotOwner()
		}
		return nil, partition.NoQueue()
	}
	return o, nil
}

// lookupARN finds the queue an ARN names, as a destination of moves
// (nil when none).
func (e *Engine) lookupARN(arn string) partition.Destination {
	name, err := e.QueueNameFromARN(arn)
	if err != nil {
		return nil
	}
	return e.destination(name)
}

// destination is the queue name as a destination of hand-overs: its owner
// here, or, in a cluster, the owner on another node (nil: no such queue).
func (e *Engine) destination(name string) partition.Destination {
	if o, err := e.Queue(name); err == nil {
		return o
	}
	if !e.clustered {
		return nil
	}
	p, _, err := e.Route(name)
	if err != nil {
		return nil
	}
	return e.cl.Remote(p, name)
}

// QueueFor returns the owner of a queue the ctx's caller may use (else it
// answers as if the queue did not exist: no existence oracle).
func (e *Engine) QueueFor(ctx context.Context, name string) (*partition.Owner, error) {
	if !st.Authorized(ctx, name) {
		return nil, partition.NoQueue()
	}
	return e.Queue(name)
}

// nameOf is the name of the queue an ARN names ("" when none).
func (e *Engine) nameOf(arn string) string {
	name, _ := e.QueueNameFromARN(arn)
	return name
}

// catalogAppend appends a record to the catalog partition and waits.
func (e *Engine) catalogAppend(r *record.Record) error {
	if !e.ownsCatalog() {
		return partition.NotOwner()
	}
	e.catMu.Lock()
	r.Pos = e.catLast + 1
	f := e.st.Append(store.Catalog, e.catLast, []store.Rec{{Data: record.Encode(r)}})
	e.catLast++
	e.catMu.Unlock()
	return e.catalogWait(f)
}

// catalogWait waits for a catalog write; a failed one leaves the catalog's
// end where the store says it is, so the next write is not fenced off.
func (e *Engine) catalogWait(f store.Future) error {
	err := f.Wait(context.Background())
	if err != nil {
		e.catMu.Lock()
		if last, ok := store.LastPosition(err); ok && last < e.catLast {
			e.catLast = last
		}
		e.catMu.Unlock()
		if e.clustered && errors.Is(err, store.ErrFenced) {
			e.lost(store.Catalog, nil)
		}
	}
	return partition.WriteError(err)
}

// Admit checks that new messages may be sent: under the disk alarm it
// first renews the snapshots that would free space (so a drained disk lets
// sends go on by themselves), then refuses with a retryable error naming
// the free space.
func (e *Engine) Admit() error {
	d := e.st.Disk()
	if !d.Alarm {
		return nil
	}
	if len(e.st.Wanted()) > 0 {
		e.snapshotWanted()
		if d = e.st.Disk(); !d.Alarm {
			return nil
		}
	}
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: 5 * time.Second, Message: fmt.Sprintf(
		"The server is short of disk space: %s free, below its reserve of %s. New messages are refused until space is freed; receives, deletes and purges still work.",
		mib(d.Free), mib(d.Reserve))}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
