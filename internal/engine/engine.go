// Package engine runs the queues of one broker over the store seam: the
// catalog of queues, one owner per queue (its lock, its state machine,
// its waiting receivers and its writes in flight), and the operations
// (send, receive, settle, dead-letter, recover, snapshot) built from the
// queue core's commands and records.
//
// Lock discipline: an owner's mutex guards its state; helpers named
// ...Locked need it held and never release it. Everything that can be
// done before taking it (validation, hashing, encoding payloads) is. A
// write is submitted under the owner's lock (so that the partition's
// positions are in order) and waited for without it; its change is
// applied under the lock again once durable, in submission order, by
// whoever takes the lock first. The store never calls back into an owner
// while writing; only compaction (its own goroutine) does.
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
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Config configures an Engine. Open fills no defaults: the root package's
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
}

// Engine owns the queues of one store.
type Engine struct {
	cfg   Config
	st    store.Store
	clock clock.Clock
	log   *slog.Logger
	rand  lockedReader

	mu        sync.RWMutex // guards the registry below
	queues    map[string]*owner
	byPart    map[store.PartitionID]*owner
	deletedAt map[string]time.Time
	nextPart  store.PartitionID

	// The catalog partition: its own lock and position.
	catMu   sync.Mutex
	catLast uint64

	closing chan struct{}
	closed  atomic.Bool

	timerMu       sync.Mutex
	maintainTimer clock.Timer
	compactTimer  clock.Timer
	snapshotting  sync.Mutex // one round of snapshots at a time

	relocated atomic.Int64
}

// lockedReader serialises a random source that may not be safe for
// concurrent use.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return io.ReadFull(l.r, p)
}

// Open recovers the queues the store holds and starts serving.
func Open(cfg Config) (*Engine, error) {
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	e := &Engine{cfg: cfg, st: cfg.Store, clock: cfg.Clock, log: cfg.Logger, rand: lockedReader{r: cfg.Rand},
		queues: map[string]*owner{}, byPart: map[store.PartitionID]*owner{}, deletedAt: map[string]time.Time{},
		nextPart: 1, closing: make(chan struct{})}
	if err := e.recover(); err != nil {
		return nil, err
	}
	e.every(&e.maintainTimer, time.Second, e.maintain)
	if _, ok := e.st.(store.Compactor); ok && cfg.CompactInterval > 0 {
		e.every(&e.compactTimer, cfg.CompactInterval, e.compact)
	}
	return e, nil
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
	for _, o := range e.all() {
		o.mu.Lock()
		o.wakeLocked()
		o.mu.Unlock()
	}
	return e.st.Close()
}

// Closing is closed when the engine closes.
func (e *Engine) Closing() <-chan struct{} { return e.closing }

// Clock is the engine's time source.
func (e *Engine) Clock() clock.Clock { return e.clock }

// Logger is the engine's logger.
func (e *Engine) Logger() *slog.Logger { return e.log }

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

// ---- errors ----

func noQueue() error {
	return st.Errorf(st.CodeQueueDoesNotExist, "The specified queue does not exist.")
}

func unavailable() error {
	return st.Errorf(st.CodeServiceUnavailable, "The server is shutting down.")
}

// wait waits for a durable write; it does not give up when the caller's
// context ends, since the outcome decides what the caller is told.
func wait(f store.Future) error {
	return writeError(f.Wait(context.Background()))
}

// writeError is the error a client gets for a failed write.
func writeError(err error) error {
	if err == nil {
		return nil
	}
	var se *st.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, store.ErrClosed) {
		return &st.Error{Code: st.CodeServiceUnavailable, Message: "The server is shutting down; the request was not persisted.", Cause: err}
	}
	msg := "The server could not persist the request."
	if errors.Is(err, store.ErrNoSpace) {
		msg = "The server is out of disk space; the request was not persisted."
	}
	return &st.Error{Code: st.CodeInternal, Message: msg, Cause: err}
}

// ---- registry ----

// ARN is a queue's ARN.
func (e *Engine) ARN(name string) string {
	return "arn:aws:sqs:" + e.cfg.Region + ":" + e.cfg.AccountID + ":" + name
}

// QueueNameFromARN returns the queue name of an ARN of this account.
func (e *Engine) QueueNameFromARN(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter QueueArn is invalid. Reason: not a valid SQS queue ARN.", arn)
	}
	if parts[4] != e.cfg.AccountID {
		return "", noQueue()
	}
	return parts[5], nil
}

func (e *Engine) all() []*owner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*owner, 0, len(e.queues))
	for _, o := range e.queues {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].p < out[j].p })
	return out
}

func (e *Engine) lookup(name string) (*owner, error) {
	e.mu.RLock()
	o := e.queues[name]
	e.mu.RUnlock()
	if o == nil {
		return nil, noQueue()
	}
	return o, nil
}

// lookupARN is lookup by ARN (nil when none).
func (e *Engine) lookupARN(arn string) *owner {
	name, err := e.QueueNameFromARN(arn)
	if err != nil {
		return nil
	}
	o, _ := e.lookup(name)
	return o
}

// catalogAppend appends a record to the catalog partition and waits.
func (e *Engine) catalogAppend(r *record.Record) error {
	e.catMu.Lock()
	r.Pos = e.catLast + 1
	f := e.st.Append(store.Catalog, e.catLast, []store.Rec{{Data: record.Encode(r)}})
	e.catLast++
	e.catMu.Unlock()
	err := f.Wait(context.Background())
	if err != nil {
		e.catMu.Lock()
		if last, ok := store.LastPosition(err); ok && last < e.catLast {
			e.catLast = last
		}
		e.catMu.Unlock()
	}
	return writeError(err)
}

// NewID is a message id (a UUID from the engine's random source).
func (e *Engine) NewID() string {
	var b [16]byte
	_, _ = e.rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
