package jsstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Config configures Open. Zero values mean the documented default.
type Config struct {
	// Conn is the connection to the NATS cluster. Required. The store
	// never closes it. Give it every server's URL and a short
	// ReconnectWait: a write retries across a reconnect.
	Conn *nats.Conn
	// Prefix names the store's streams, <Prefix>_P<n>, whose subjects are
	// <prefix>.p.<n>.> with the prefix in lower case: ASCII letters,
	// digits, '-' and '_', at most 32 of them. Two stores with the same
	// prefix on one account share their partitions (nodes of one
	// cluster); two prefixes that differ only in case collide. Default
	// "SLUICE".
	Prefix string
	// Replicas is each partition stream's replica count: 3 for a cluster,
	// 1 for a single node. Default 3.
	Replicas int
	// Duplicates is the streams' deduplication window: a write retried
	// within it (after a lost acknowledgement) is stored once. At least
	// RetryFor. Default 2 minutes.
	Duplicates time.Duration
	// AckTimeout bounds one attempt of a write (publish to
	// acknowledgement) and one JetStream API request. Default 5 s.
	AckTimeout time.Duration
	// RetryFor is how long a write whose outcome is in doubt (a timeout,
	// no responders while a stream elects a leader: 4-9 s after its
	// leader's host dies) is retried, with the same message ids, before
	// the store decides from the stream's tail or gives up; and how long
	// stream creation and deletion wait for a meta leader. Default 15 s.
	RetryFor time.Duration
	// Isolated, when set, reports that this node cannot reach any other
	// node of its cluster. A write in doubt is then given up at once, its
	// outcome unknown, instead of retried for the rest of RetryFor: no
	// answer can come before the network heals, and by then another node
	// has taken the partition over, so its callers are better told now.
	Isolated func() bool
	// Logger gets the store's warnings and errors. Default: discard.
	Logger *slog.Logger
	// MaxBodyCache is the bytes of recently written or read messages that
	// hold kept records (bodies), kept decoded in memory for Read.
	// Default 32 MiB; negative: no cache.
	MaxBodyCache int64
	// Reserve is the free JetStream storage, in bytes, below which Disk
	// raises the alarm. Default: 256 MiB or 5 % of the account's storage
	// limit, whichever is smaller. Without an account limit there is
	// nothing to measure and no alarm.
	Reserve int64
	// StoreLimit is the JetStream storage, in bytes, that Disk measures
	// the account's use against when the account has no storage limit of
	// its own (an embedded cluster without accounts: give it the servers'
	// JetStreamMaxStore). The use counts every replica, as the account
	// reports it. Default 0: no limit known, no alarm.
	StoreLimit int64
	// SnapshotBytes and SnapshotMessages: a partition whose log after its
	// newest snapshot outweighs SnapshotBytes and its snapshot, each
	// message weighing its bytes plus SnapshotBytes/SnapshotMessages, is
	// named by Wanted (so SnapshotMessages small messages, or
	// SnapshotBytes of large ones, after a small snapshot). Defaults 4 MiB
	// and 10,000.
	SnapshotBytes    int64
	SnapshotMessages int
	// PurgeInterval is how often the store purges what releases freed
	// (at most one purge a partition an interval; a snapshot's purge is
	// done at once). Default 500 ms.
	PurgeInterval time.Duration
	// MaxMessage is the largest message the store writes, in bytes,
	// headers included: records are packed into messages of at most this
	// size and a larger record is split over several. At most the
	// connection's max payload (the servers' max_payload). Default: 1 MiB
	// or the max payload, whichever is smaller (larger messages make
	// larger Raft entries and slower reads of one body).
	MaxMessage int
	// MaxBatch is the most messages in one atomic batch: the servers'
	// JetStreamLimits.MaxBatchSize. An append or snapshot needing more is
	// refused with store.ErrTooBig. Default 1,000.
	MaxBatch int
}

// headerRoom is the payload bytes left to a message's headers: a message
// is at most the connection's max payload, headers included.
const headerRoom = 1024

func (c *Config) withDefaults() Config {
	d := *c
	if d.Prefix == "" {
		d.Prefix = "SLUICE"
	}
	if d.Replicas == 0 {
		d.Replicas = 3
	}
	if d.Duplicates == 0 {
		d.Duplicates = 2 * time.Minute
	}
	if d.AckTimeout == 0 {
		d.AckTimeout = 5 * time.Second
	}
	if d.RetryFor == 0 {
		d.RetryFor = 15 * time.Second
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.MaxBodyCache == 0 {
		d.MaxBodyCache = 32 << 20
	}
	if d.SnapshotBytes == 0 {
		d.SnapshotBytes = 4 << 20
	}
	if d.SnapshotMessages == 0 {
		d.SnapshotMessages = 10_000
	}
	if d.PurgeInterval == 0 {
		d.PurgeInterval = 500 * time.Millisecond
	}
	if d.MaxBatch == 0 {
		d.MaxBatch = 1000
	}
	return d
}

func (c *Config) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("jsstore: Config.Conn is required")
	case !validPrefix(c.Prefix):
		return fmt.Errorf("jsstore: prefix %q: want 1 to 32 ASCII letters, digits, '-' or '_'", c.Prefix)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("jsstore: %d replicas: want 1 to 5", c.Replicas)
	case c.AckTimeout < 0 || c.RetryFor < 0 || c.PurgeInterval < 0:
		return errors.New("jsstore: negative duration")
	case c.Duplicates < c.RetryFor:
		return fmt.Errorf("jsstore: the dedupe window %v is shorter than RetryFor %v: a retried write could be stored twice", c.Duplicates, c.RetryFor)
	case c.MaxBatch < 1:
		return fmt.Errorf("jsstore: MaxBatch %d", c.MaxBatch)
	case c.MaxMessage < 0:
		return fmt.Errorf("jsstore: MaxMessage %d", c.MaxMessage)
	case c.SnapshotBytes < 0 || c.SnapshotMessages < 0 || c.Reserve < 0 || c.StoreLimit < 0:
		return errors.New("jsstore: negative snapshot threshold or reserve")
	}
	return nil
}

func validPrefix(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
