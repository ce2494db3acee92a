// Package broker assembles the server: it opens a data directory (or a
// store in memory, or a cluster node's JetStream store), owns the queues
// and topics in it and offers the SQS and SNS operations as Go calls. The
// protocol fronts (internal/sqs, internal/sns), the admin API, the CLI and
// the public package (the module root, which exposes only an embedder's
// operations) all drive a *Broker.
//
// This package only wires: Config is checked and completed here, the store
// is opened here, and every operation is the engine's (internal/engine)
// or, for the dead-letter tools, internal/redrive's; in a cluster
// (cluster.go) it routes each queue to its owner. docs/architecture.md
// describes the packages, the message lifecycle and the store seam.
//
// Queues are named as in SQS (1-80 characters of [A-Za-z0-9_-], FIFO names
// end in ".fifo"); the broker serves one account (Config.AccountID) in one
// region, which it uses to build ARNs.
package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/datadir"
	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/redrive"
	"github.com/sluicemq/sluice/internal/sns/signkey"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk"
	"github.com/sluicemq/sluice/internal/vfs"
	"github.com/sluicemq/sluice/sluicetype"
)

// SyncMode says when a write is acknowledged.
type SyncMode string

const (
	// SyncAlways answers a caller only after its records are fsynced (group
	// commit). Nothing acknowledged is lost on a crash or power failure.
	SyncAlways SyncMode = "always"
	// SyncBatch answers after the write reaches the OS and fsyncs every
	// SyncInterval: a power failure (not a process crash) may lose up to one
	// interval of acknowledged writes.
	SyncBatch SyncMode = "batch"
	// SyncNone never fsyncs except at segment ends and Close: a power
	// failure may lose everything written since.
	SyncNone SyncMode = "none"
)

// Clock is the time source. The broker never calls time.Now directly.
type Clock = clock.Clock

// Timer is a stoppable timer from a Clock.
type Timer = clock.Timer

// The public types, defined in the leaf package sluicetype.
type (
	QueueInfo        = sluicetype.QueueInfo
	MoveTask         = sluicetype.MoveTask
	VisibilityChange = sluicetype.VisibilityChange
	PeekFilter       = sluicetype.PeekFilter
	PeekedMessage    = sluicetype.PeekedMessage
	TenantLimits     = sluicetype.TenantLimits
	TenantInfo       = sluicetype.TenantInfo
	QueueStats       = sluicetype.QueueStats
	StoreStats       = sluicetype.StoreStats
)

// FirstAttemptBounds are the upper bounds (seconds) of the age-at-first-
// attempt histogram.
var FirstAttemptBounds = sluicetype.FirstAttemptBounds

// StatsTenants is how many tenants Stats names per queue.
const StatsTenants = sluicetype.StatsTenants

// Config configures Open. Zero values mean the documented default
// (WithDefaults).
type Config struct {
	// Dir is the data directory; created if missing. Required unless
	// InMemory is set.
	Dir string
	// InMemory keeps everything in memory (the memory store): nothing
	// survives Close. For tests and experiments.
	InMemory bool
	// Sync is the durability mode. Default SyncAlways.
	Sync SyncMode
	// SyncInterval is the fsync period for SyncBatch. Default 10ms.
	SyncInterval time.Duration
	// Region is used in ARNs. Default "us-east-1".
	Region string
	// BaseURL is where subscribers reach this server (for example
	// "https://sqs.example.com"): the SNS envelopes' SigningCertURL and
	// UnsubscribeURL begin with it. Default "": SNS's endpoint in Region
	// (https://sns.<region>.amazonaws.com), as AWS writes them.
	BaseURL string
	// AccountID is the 12-digit account in ARNs and queue URLs.
	// Default "000000000000".
	AccountID string
	// MaxQueues caps the number of queues. Default 10000.
	MaxQueues int
	// Clock is the time source. Default: the real clock. Queues hold
	// sends back while consumers take messages off a backlog (flow
	// control, the FlowControl attribute) only on the real clock: under
	// one its caller moves, a held send would wait for the caller.
	Clock Clock
	// Rand is the source of message ids and receipt handle nonces.
	// Default: crypto/rand. A simulator passes a seeded one.
	Rand io.Reader
	// Logger receives structured logs. Default: slog.Default().
	Logger *slog.Logger
	// FS is the file system under Dir. Default: the real one. Tests pass a
	// fault-injecting one.
	FS vfs.FS
	// SegmentBytes is the log segment size in bytes. Default 64 MiB.
	SegmentBytes int64
	// NoPreallocate turns off preparing each next segment full of zeros
	// in the background (on by default on the real file system: appends
	// into allocated blocks make an fsync cheaper on ext4 and XFS). Turn it
	// off on copy-on-write file systems (btrfs, ZFS), where the zeros buy
	// nothing.
	NoPreallocate bool
	// CheckpointBytes is how much log after the oldest snapshot makes the
	// broker renew the snapshots that pin it (or the size of all newest
	// snapshots, if larger), in bytes. Default 64 MiB.
	CheckpointBytes int64
	// CompactInterval is the period of compaction rounds, each copying at
	// most 16 MiB of live messages out of mostly-dead segments. Default 1s.
	CompactInterval time.Duration
	// DiskReserve is the free disk space, in bytes, below which new
	// messages are refused (a retryable ServiceUnavailable error naming the
	// free space) while receives, deletes and purges go on, so that a full
	// disk can always be drained; sends resume by themselves once space is
	// back. The reserve in effect is at least twice the newest snapshots
	// plus one segment. Default 256 MiB; negative: only that minimum.
	DiskReserve int64
	// Cluster, when set, makes the broker one node of a cluster on NATS
	// JetStream (ClusterConfig, docs/cluster.md); Dir then holds the
	// embedded NATS server's data, and the settings above that are the
	// disk log's do not apply.
	Cluster *ClusterConfig
	// CheckReleases makes the store track every live message's body, not
	// only a count per segment, so that any release of a body it does not
	// hold is caught (StoreStats.BadReleases) instead of only one that
	// would take a count below zero. About 14 bytes per live message: for
	// tests and diagnosis.
	CheckReleases bool
	// Salvage opens a data directory whose data is damaged (ErrDamaged:
	// a frame or snapshot that fails its checks where it cannot be a
	// write cut short by a crash), which Open otherwise refuses: every
	// record that reads back is kept, each damaged stretch is written
	// over so that the next start reads on, and what the damage held is
	// counted and reported (Broker.Salvaged, the log, the unreadable
	// counters); a queue whose catalog record was lost comes back. Take a
	// copy of the directory first. A one-off: a directory without damage
	// opens as without it.
	Salvage bool
}

// ErrDamaged is what Open (and Verify's report) says of data that fails
// its checks where it cannot be a write cut short by a crash: Open
// refuses to start on it, naming the file and offset, rather than drop
// acknowledged messages; Config.Salvage keeps what reads back.
var ErrDamaged = store.ErrDamaged

// WithDefaults returns the configuration with every zero field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.Sync == "" {
		c.Sync = SyncAlways
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = 10 * time.Millisecond
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.AccountID == "" {
		c.AccountID = "000000000000"
	}
	if c.MaxQueues <= 0 {
		c.MaxQueues = 10000
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 64 << 20
	}
	if c.CheckpointBytes <= 0 {
		c.CheckpointBytes = 64 << 20
	}
	if c.CompactInterval <= 0 {
		c.CompactInterval = time.Second
	}
	if c.DiskReserve == 0 {
		c.DiskReserve = 256 << 20
	}
	return c
}

func (c Config) validate() error {
	if !c.InMemory && c.Dir == "" {
		return errors.New("sluice: Config.Dir is required unless InMemory is set")
	}
	switch c.Sync {
	case SyncAlways, SyncBatch, SyncNone:
	default:
		return fmt.Errorf("sluice: unknown sync mode %q (want always, batch or none)", c.Sync)
	}
	if c.SegmentBytes > 1<<30 {
		return errors.New("sluice: SegmentBytes is at most 1 GiB")
	}
	if c.Salvage && (c.Cluster != nil || c.InMemory) {
		return errors.New("sluice: Salvage is for a data directory's log: a cluster node's data is its streams', and memory holds no damage")
	}
	return nil
}

// Broker owns the queues of one data directory. All methods are safe for
// concurrent use. Errors are *sluicetype.Error values with SQS codes.
type Broker struct {
	e     *engine.Engine
	tools *redrive.Tools
	cl    *clusterNode // nil: a single node
	sign  *signkey.Key // the SNS envelopes' signing key (signing.go)
	lock  io.Closer    // the data directory's lock, held until Close (lockDir)
}

// Open opens (or creates) the store, recovers its queues and starts
// serving.
func Open(cfg Config) (*Broker, error) { return OpenContext(context.Background(), cfg) }

// OpenContext is Open that gives up when ctx ends: a cluster node waits
// for a JetStream quorum (ClusterConfig.ReadyTimeout bounds it too), and
// a signal that stops the process should stop that wait.
func OpenContext(ctx context.Context, cfg Config) (*Broker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Cluster != nil {
		return openClustered(ctx, cfg)
	}
	lock, err := lockDir(cfg, true)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg, false)
	if err != nil {
		lock.Close()
		return nil, err
	}
	sign := newSigner(cfg)
	e, err := engine.Open(engineConfig(cfg, st, sign))
	if err != nil {
		st.Close()
		lock.Close()
		if errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("data directory %s: %w; nothing was changed (Verify reports all the damage; Config.Salvage keeps every record that reads back)", cfg.Dir, err)
		}
		return nil, err
	}
	return &Broker{e: e, tools: redrive.New(e), sign: sign, lock: lock}, nil
}

// openClustered opens a broker as a node of a cluster.
func openClustered(ctx context.Context, cfg Config) (*Broker, error) {
	lock, err := lockDir(cfg, true) // Dir holds the embedded NATS server's data and the signing key
	if err != nil {
		return nil, err
	}
	c, st, err := openCluster(ctx, cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	sign := newSigner(cfg)
	ec := engineConfig(cfg, st, sign)
	ec.Cluster, ec.Node = c, cfg.Cluster.Node
	e, err := engine.Open(ec)
	if err != nil {
		st.Close()
		c.closeNATS()
		lock.Close()
		return nil, err
	}
	if err := c.start(e); err != nil {
		e.Close()
		c.closeNATS()
		lock.Close()
		return nil, err
	}
	b := &Broker{e: e, tools: redrive.New(e), cl: c, sign: sign, lock: lock}
	if err := errors.Join(c.serveQuestions(b), c.serveTasks(b)); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// openStore opens the store cfg names (to check only, with readOnly).
func openStore(cfg Config, readOnly bool) (store.Store, error) {
	if cfg.InMemory {
		return store.NewMemory(), nil
	}
	mode := map[SyncMode]disk.SyncMode{SyncAlways: disk.SyncAlways, SyncBatch: disk.SyncBatch, SyncNone: disk.SyncNone}[cfg.Sync]
	fs := cfg.FS
	if fs == nil {
		fs = vfs.OS{}
	}
	return disk.Open(fs, filepath.Clean(cfg.Dir), disk.Options{Sync: mode, SyncInterval: cfg.SyncInterval,
		SegmentBytes: cfg.SegmentBytes, SnapshotBytes: cfg.CheckpointBytes, Reserve: max(cfg.DiskReserve, 0), Logger: cfg.Logger,
		Preallocate: cfg.FS == nil && !cfg.NoPreallocate && !readOnly, CheckReleases: cfg.CheckReleases, // preallocate on real disks only
		Salvage: cfg.Salvage && !readOnly, ReadOnly: readOnly})
}

func engineConfig(cfg Config, st store.Store, sign *signkey.Key) engine.Config {
	return engine.Config{Store: st, Region: cfg.Region, AccountID: cfg.AccountID, MaxQueues: cfg.MaxQueues,
		Clock: cfg.Clock, Rand: cfg.Rand, Logger: cfg.Logger, CompactInterval: cfg.CompactInterval,
		FlowControl: realClock(cfg.Clock),
		TopicFormat: topicFormat(cfg.Region, cfg.AccountID, snsBase(cfg), sign)}
}

// realClock reports whether c is the real clock (nil: the default, real).
func realClock(c Clock) bool {
	_, ok := c.(clock.Real)
	return c == nil || ok
}

// VerifyReport is what Verify found; QueueCheck its part for one queue.
type (
	VerifyReport = sluicetype.VerifyReport
	QueueCheck   = sluicetype.QueueCheck
)

// Verify checks the data directory cfg names while no broker serves it:
// it reads every frame of every segment and every snapshot, rebuilds every
// queue as a start would and reads back every live message's body,
// checking its record. It reports damage (VerifyReport.Damage: what a
// start refuses, and what a salvage would lose) and what a start would
// drop, and writes nothing: it cuts no torn tail and frees nothing. With
// cfg.Salvage it salvages first (see Config.Salvage) and then checks what
// the next start will read (VerifyReport.Salvaged says what the salvage
// lost). It holds the directory's lock meanwhile: refused while a broker
// serves the directory, it keeps one from starting on it until done.
func Verify(cfg Config) (VerifyReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return VerifyReport{}, err
	}
	if cfg.InMemory {
		return VerifyReport{}, errors.New("sluice: an in-memory store has nothing to verify")
	}
	var salvaged *SalvageReport
	if cfg.Salvage {
		if cfg.Cluster != nil {
			return VerifyReport{}, errors.New("sluice: a cluster node's data is its streams': there is no log to salvage")
		}
		// A salvage is a start that reads on past damage; the check
		// after it reads what the next start will.
		b, err := Open(cfg)
		if err != nil {
			return VerifyReport{}, err
		}
		salvaged = b.Salvaged()
		if err := b.Close(); err != nil {
			return VerifyReport{}, err
		}
		cfg.Salvage = false
	}
	lock, err := lockDir(cfg, false) // refused while a broker serves the directory; never creates it
	if err != nil {
		return VerifyReport{}, err
	}
	defer lock.Close() // after the store's (deferred later)
	st, err := openStore(cfg, true)
	if err != nil {
		return VerifyReport{}, err
	}
	defer st.Close()
	rep, err := engine.Verify(engineConfig(cfg, st, nil))
	rep.Salvaged = salvaged
	return rep, err
}

// Salvaged is what the salvage of a broker opened with Config.Salvage
// found and lost: nil when there was no damage (or no salvage).
func (b *Broker) Salvaged() *SalvageReport { return b.e.Salvaged() }

// SalvageReport is what a salvage found and lost (Broker.Salvaged,
// VerifyReport).
type SalvageReport = sluicetype.SalvageReport

// Close stops background work, wakes long polls (they return empty), and
// flushes and closes the store.
func (b *Broker) Close() error {
	b.tools.StopAll()
	if b.cl != nil {
		b.cl.close() // hands the partitions over first
	}
	err := b.e.Close()
	if b.cl != nil {
		b.cl.closeNATS()
	}
	b.lock.Close() // last: nothing of this broker writes in the directory any more
	return err
}

// lockDir takes the data directory's lock (internal/datadir), making the
// directory first if create is set. A store in memory has nothing to
// lock.
func lockDir(cfg Config, create bool) (io.Closer, error) {
	if cfg.InMemory {
		return nothingLocked{}, nil
	}
	fs := cfg.FS
	if fs == nil {
		fs = vfs.OS{}
	}
	if create {
		return datadir.Create(fs, cfg.Dir)
	}
	return datadir.Lock(fs, cfg.Dir)
}

type nothingLocked struct{}

func (nothingLocked) Close() error { return nil }

// CreateQueue creates a queue, or returns the existing one when every given
// attribute matches (tags are not compared); QueueNameExists otherwise.
// The ctx's authorizer (sluicetype.WithAuthorizer) must allow every queue
// the attributes name (a dead-letter target).
func (b *Broker) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (QueueInfo, error) {
	return b.e.CreateQueue(ctx, name, attrs, tags)
}

// GetQueue returns a queue's identity, or QueueDoesNotExist.
func (b *Broker) GetQueue(name string) (QueueInfo, error) { return b.e.GetQueue(name) }

// ListQueues lists queue names with the prefix in name order, at most max
// (1-1000; 0 means 1000) from nextToken on. allow, when not nil, hides queues
// it returns false for. The returned token is "" when nothing remains.
func (b *Broker) ListQueues(prefix string, max int, nextToken string, allow func(name string) bool) ([]string, string, error) {
	return b.e.ListQueues(prefix, max, nextToken, allow)
}

// DeleteQueue deletes a queue and its messages. The name can be reused
// after 60 seconds (QueueDeletedRecently before that).
func (b *Broker) DeleteQueue(ctx context.Context, name string) error {
	return b.e.DeleteQueue(ctx, name)
}

// GetQueueAttributes returns the named attributes ("All" for all) as SQS
// renders them.
func (b *Broker) GetQueueAttributes(name string, names []string) (map[string]string, error) {
	return b.e.GetQueueAttributes(name, names)
}

// SetQueueAttributes validates and sets attributes.
func (b *Broker) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	return b.e.SetQueueAttributes(ctx, name, attrs)
}

// Send sends one message; it returns after the message is durable.
func (b *Broker) Send(ctx context.Context, queue string, in sluicetype.SendInput) (sluicetype.SendResult, error) {
	res, errs, err := b.send(ctx, queue, []sluicetype.SendInput{in}, false)
	if err != nil {
		return sluicetype.SendResult{}, err
	}
	if errs[0] != nil {
		return sluicetype.SendResult{}, errs[0]
	}
	return res[0], nil
}

func (b *Broker) send(ctx context.Context, queue string, in []sluicetype.SendInput, batch bool) ([]sluicetype.SendResult, []error, error) {
	if err := b.e.Admit(); err != nil {
		return nil, nil, err
	}
	o, err := b.e.Queue(queue)
	if err != nil {
		return nil, nil, err
	}
	return o.Send(ctx, in, batch)
}

// SendBatch sends several messages in one durable write (SQS allows 1 to
// 10, which its wire front checks; their total size is checked here).
// errs[i] is nil when entry i succeeded. err is set only when the whole
// call failed (for example QueueDoesNotExist).
func (b *Broker) SendBatch(ctx context.Context, queue string, in []sluicetype.SendInput) (res []sluicetype.SendResult, errs []error, err error) {
	return b.send(ctx, queue, in, true)
}

// Receive receives up to in.MaxMessages messages, waiting up to the wait
// time for the first one. It returns early, empty, when ctx is done.
func (b *Broker) Receive(ctx context.Context, queue string, in sluicetype.ReceiveInput) ([]sluicetype.Message, error) {
	o, err := b.e.Queue(queue)
	if err != nil {
		return nil, err
	}
	return o.Receive(ctx, in)
}

// Delete deletes the message a receipt handle names.
func (b *Broker) Delete(ctx context.Context, queue, receiptHandle string) error {
	errs, err := b.DeleteBatch(ctx, queue, []string{receiptHandle})
	if err != nil {
		return err
	}
	return errs[0]
}

// DeleteBatch deletes several messages in one durable write; errs[i] is nil
// when entry i succeeded.
func (b *Broker) DeleteBatch(ctx context.Context, queue string, receiptHandles []string) (errs []error, err error) {
	o, err := b.e.Queue(queue)
	if err != nil {
		return nil, err
	}
	return o.Delete(ctx, receiptHandles)
}

// ChangeVisibility sets the message's visibility timeout to seconds from
// now (0-43200).
func (b *Broker) ChangeVisibility(ctx context.Context, queue, receiptHandle string, seconds int) error {
	errs, err := b.ChangeVisibilityBatch(ctx, queue, []VisibilityChange{{ReceiptHandle: receiptHandle, Seconds: seconds}})
	if err != nil {
		return err
	}
	return errs[0]
}

// ChangeVisibilityBatch changes several visibility timeouts; errs[i] is nil
// when entry i succeeded.
func (b *Broker) ChangeVisibilityBatch(ctx context.Context, queue string, in []VisibilityChange) (errs []error, err error) {
	o, err := b.e.Queue(queue)
	if err != nil {
		return nil, err
	}
	return o.ChangeVisibility(ctx, in)
}

// Purge deletes every message in the queue (at most once per 60 seconds).
func (b *Broker) Purge(ctx context.Context, queue string) error {
	o, err := b.e.Queue(queue)
	if err != nil {
		return err
	}
	return o.Purge(ctx)
}

// ListDeadLetterSourceQueues lists the queues whose RedrivePolicy targets
// queue, paged like ListQueues.
func (b *Broker) ListDeadLetterSourceQueues(queue string, max int, nextToken string) ([]string, string, error) {
	return b.e.ListDeadLetterSourceQueues(queue, max, nextToken)
}

// TagQueue adds or overwrites tags.
func (b *Broker) TagQueue(ctx context.Context, queue string, tags map[string]string) error {
	return b.e.TagQueue(ctx, queue, tags)
}

// UntagQueue removes tags; missing keys are ignored.
func (b *Broker) UntagQueue(ctx context.Context, queue string, keys []string) error {
	return b.e.UntagQueue(ctx, queue, keys)
}

// ListQueueTags returns the queue's tags.
func (b *Broker) ListQueueTags(queue string) (map[string]string, error) {
	return b.e.ListQueueTags(queue)
}

// AddPermission adds a statement to the queue's Policy.
func (b *Broker) AddPermission(ctx context.Context, queue, label string, accountIDs, actions []string) error {
	return b.e.AddPermission(ctx, queue, label, accountIDs, actions)
}

// RemovePermission removes the statement with the label.
func (b *Broker) RemovePermission(ctx context.Context, queue, label string) error {
	return b.e.RemovePermission(ctx, queue, label)
}

// StartMoveTask starts moving messages out of a dead-letter queue, to
// destinationArn or (when "") back to each message's source queue, at most
// rate messages per second (0: as fast as the store allows; at most 500).
func (b *Broker) StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (taskHandle string, err error) {
	return b.tools.StartMoveTask(ctx, sourceArn, destinationArn, rate)
}

// ListMoveTasks lists the move tasks of a source queue, newest first, at
// most max (1-10; 0 means 1).
func (b *Broker) ListMoveTasks(ctx context.Context, sourceArn string, max int) ([]MoveTask, error) {
	return b.tools.ListMoveTasks(ctx, sourceArn, max)
}

// CancelMoveTask cancels a running move task and returns how many messages
// it has moved.
func (b *Broker) CancelMoveTask(ctx context.Context, taskHandle string) (moved int64, err error) {
	return b.tools.CancelMoveTask(ctx, taskHandle)
}

// WaitMoveTask waits until a move task (StartMoveTask, StartRedrive) has
// ended, and returns it as it ended: Status COMPLETED, CANCELLED or
// FAILED. It returns ctx's error if ctx ends first.
func (b *Broker) WaitMoveTask(ctx context.Context, taskHandle string) (MoveTask, error) {
	return b.tools.WaitMoveTask(ctx, taskHandle)
}

// QueueNameFromARN returns the queue name of an ARN of this broker's
// account, or an SQS error.
func (b *Broker) QueueNameFromARN(arn string) (string, error) { return b.e.QueueNameFromARN(arn) }

// RetryMessage fails a received message on the consumer's word: it climbs
// the queue's retry ladder (RetryDelays), waiting delaySeconds instead of
// the level's delay when not nil; without a ladder it becomes visible
// again after delaySeconds (0 when nil). reason travels with the message
// (SluiceLastError).
func (b *Broker) RetryMessage(ctx context.Context, queue, receiptHandle string, delaySeconds *int, reason string) error {
	o, err := b.e.Queue(queue)
	if err != nil {
		return err
	}
	return o.RetryMessage(ctx, receiptHandle, delaySeconds, reason)
}

// RejectMessage fails a received message for good: it goes to the
// dead-letter queue at once (or is dropped when there is none), with its
// reason.
func (b *Broker) RejectMessage(ctx context.Context, queue, receiptHandle, reason string) error {
	o, err := b.e.Queue(queue)
	if err != nil {
		return err
	}
	return o.RejectMessage(ctx, receiptHandle, reason)
}

// DeferMessage puts a received message off for delaySeconds without
// counting it as a failure or as a receive.
func (b *Broker) DeferMessage(ctx context.Context, queue, receiptHandle string, delaySeconds int) error {
	o, err := b.e.Queue(queue)
	if err != nil {
		return err
	}
	return o.DeferMessage(ctx, receiptHandle, delaySeconds)
}

// SetTenantLimits sets (or, with a zero value, clears) one tenant's
// overrides on a queue. They are stored with the queue.
func (b *Broker) SetTenantLimits(ctx context.Context, queue, tenant string, l TenantLimits) error {
	return b.e.SetTenantLimits(ctx, queue, tenant, l)
}

// Tenants lists the tenants of a queue that hold messages, largest backlog
// first, at most max (0: all).
func (b *Broker) Tenants(queue string, max int) ([]TenantInfo, error) { return b.e.Tenants(queue, max) }

// Tenant describes one tenant of a queue, including the partitions it
// hashes to, whether or not it holds messages.
func (b *Broker) Tenant(queue, tenant string) (TenantInfo, error) { return b.e.Tenant(queue, tenant) }

// DropBefore drops every message of a queue sent before t, of one tenant
// (all when allTenants): the watermark. The drops are durable and the
// storage is reclaimed. It returns how many were dropped.
func (b *Broker) DropBefore(ctx context.Context, queue string, before time.Time, tenant string, allTenants bool) (int, error) {
	o, err := b.e.Queue(queue)
	if err != nil {
		return 0, err
	}
	return o.DropBefore(ctx, before, tenant, allTenants)
}

// Stats returns every queue's figures (for metrics and the dashboard).
func (b *Broker) Stats() []QueueStats { return b.e.Stats() }

// StoreStats returns the store's figures.
func (b *Broker) StoreStats() StoreStats { return b.e.StoreStats() }

// Peek lists messages of a queue without receiving them (they stay where
// they are, their receive counts untouched), oldest first.
func (b *Broker) Peek(queue string, f PeekFilter) ([]PeekedMessage, string, error) {
	return b.tools.Peek(queue, f)
}

// PurgeFiltered deletes the messages that match the filter (Max and After
// are ignored) and returns how many. With an empty filter it deletes
// everything, like PurgeQueue but at once.
func (b *Broker) PurgeFiltered(ctx context.Context, queue string, f PeekFilter) (int, error) {
	return b.tools.PurgeFiltered(ctx, queue, f)
}

// RedriveFiltered moves the messages that match the filter to dest (a
// queue name; "" sends each back to the queue it was dead-lettered from),
// with their receive counts and retry levels reset. It returns how many
// moved.
func (b *Broker) RedriveFiltered(ctx context.Context, queue string, f PeekFilter, dest string) (int, error) {
	return b.tools.RedriveFiltered(ctx, queue, f, dest)
}

// StartRedrive starts a message move task over the messages of a queue
// that match the filter (index fields only), to dest (a queue name; ""
// sends each back to the queue it was dead-lettered from), at most rate
// messages a second (0: unlimited). Its progress shows in ListMoveTasks;
// CancelMoveTask stops it.
func (b *Broker) StartRedrive(ctx context.Context, queue string, f PeekFilter, dest string, rate int) (string, error) {
	return b.tools.StartRedrive(ctx, queue, f, dest, rate)
}

// Snapshot renews every queue's snapshot now (the broker does it by
// itself as its log grows; for tools, backups and tests). A ctx that has
// ended writes nothing.
func (b *Broker) Snapshot(ctx context.Context) error {
	if err := ctx.Err(); err != nil { // nothing written
		return err
	}
	return b.e.Snapshot()
}
