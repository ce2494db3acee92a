package sluice

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/sched"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// queueMeta is a queue's identity and settings, persisted whole on every
// change so its record is idempotent.
type queueMeta struct {
	ID       uint64            `json:"id"`
	Name     string            `json:"name"`
	FIFO     bool              `json:"fifo,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
	Created  int64             `json:"created"`
	Modified int64             `json:"modified"`
	// Tenants holds per-tenant overrides of weight and limits (admin API).
	Tenants map[string]sched.Limits `json:"tenants,omitempty"`
}

// queueState is the owner of one queue's state machine.
type queueState struct {
	mu        sync.Mutex
	meta      queueMeta
	q         *queue.Queue
	lastPurge time.Time
	deleted   bool
	ctr       counters
	// pollers are the long polls waiting on the queue, longest waiting
	// first; bound counts those bound to one partition. The scheduler
	// keeps TenantHeadroom of them for tenants below their fair share.
	pollers []*poller
	bound   int
	// dlqRP and dlqArn cache the dead-letter target of RedrivePolicy
	// dlqRP (parsing JSON on every receive would be waste).
	dlqRP, dlqArn string
	// attempts remembers FIFO receives by ReceiveRequestAttemptId for five
	// minutes, so a retried receive gets the same messages and handles.
	attempts map[string]*attempt
	// applies are changes whose records were submitted and that take
	// effect once durable, in submission order (persistLocked).
	applies []pendingApply
	// outbound holds messages taken out of the queue for another one (a
	// dead-letter queue, a redrive) until their move is durable: until
	// then the log still has them here, so checkpoints write them here.
	outbound map[uint64]outboundMsg
	// metaMu serialises changes of meta (taken before mu), so that each
	// is computed from the one before it while that one is being written.
	metaMu sync.Mutex
}

// pendingApply is a change whose records were submitted: it takes effect
// in memory once they are durable (never when the write fails), in the
// order the queue's records were submitted, so that memory goes through
// the states that replaying the log goes through.
type pendingApply struct {
	w     waiter
	apply func(now time.Time)
}

// persistLocked submits recs, whose change apply makes in memory once they
// are durable. It unlocks the queue while the write is under way and
// returns with it locked again and the change applied, or not applied when
// the write failed (the error says why).
func (b *broker) persistLocked(qs *queueState, recs []*record, apply func(now time.Time)) error {
	w := b.submit(recs...)
	qs.applies = append(qs.applies, pendingApply{w: w, apply: apply})
	qs.mu.Unlock()
	err := wait(w)
	qs.mu.Lock()
	b.applyDurableLocked(qs)
	return err
}

// applyDurableLocked applies, in order, the queue's changes whose writes
// have finished (dropping those that failed), up to the first still under
// way.
func (b *broker) applyDurableLocked(qs *queueState) {
	if len(qs.applies) == 0 {
		return
	}
	now := b.clock.Now()
	i := 0
	for ; i < len(qs.applies); i++ {
		done, err := qs.applies[i].w.Done()
		if !done {
			break
		}
		if err == nil && qs.applies[i].apply != nil {
			qs.applies[i].apply(now)
		}
	}
	n := copy(qs.applies, qs.applies[i:])
	clear(qs.applies[n:])
	qs.applies = qs.applies[:n]
}

// outboundMsg is a message leaving its queue and the write of its move
// (nil until the move is submitted).
type outboundMsg struct {
	m queue.Msg
	w waiter
}

// takeOutboundLocked notes that m left the queue for another one: until
// its move is durable, checkpoints keep it here.
func (qs *queueState) takeOutboundLocked(m *queue.Msg) {
	if qs.outbound == nil {
		qs.outbound = map[uint64]outboundMsg{}
	}
	qs.outbound[m.Seq] = outboundMsg{m: *m}
}

// lockPair locks two queues (in id order, so two moves in opposite
// directions cannot deadlock) and returns the unlock.
func lockPair(a, b *queueState) func() {
	if a == b {
		a.mu.Lock()
		return a.mu.Unlock
	}
	if a.meta.ID > b.meta.ID {
		a, b = b, a
	}
	a.mu.Lock()
	b.mu.Lock()
	return func() { b.mu.Unlock(); a.mu.Unlock() }
}

type attempt struct {
	expires time.Time
	msgs    []st.Message
	seqs    []uint64
	fences  []uint32
}

// retryAttemptLocked answers a retried FIFO receive with the messages of
// the earlier attempt, their visibility reset once that is durable, if
// none of them has been deleted or delivered again since; otherwise it
// forgets the attempt. It returns with the queue locked.
func (b *broker) retryAttemptLocked(qs *queueState, id string, now time.Time, vis time.Duration) ([]st.Message, bool, error) {
	a := qs.attempts[id]
	if a == nil {
		return nil, false, nil
	}
	if now.After(a.expires) {
		delete(qs.attempts, id)
		return nil, false, nil
	}
	for i, seq := range a.seqs {
		m, ok := qs.q.Lookup(seq)
		if !ok || m.Fence() != a.fences[i] || m.State != queue.InFlight {
			delete(qs.attempts, id)
			return nil, false, nil
		}
	}
	at := now.Add(vis).UnixMilli()
	recs := make([]*record, len(a.seqs))
	for i, seq := range a.seqs {
		recs[i] = &record{T: recVisibility, Q: qs.meta.ID, Seq: seq, Vis: at}
	}
	err := b.persistLocked(qs, recs, func(now time.Time) {
		for _, seq := range a.seqs {
			qs.q.ApplyVisibility(now, seq, at)
		}
	})
	if err != nil {
		return nil, true, err
	}
	return a.msgs, true, nil
}

func (b *broker) rememberAttemptLocked(qs *queueState, id string, now time.Time, msgs []st.Message, got []queue.Msg) {
	if qs.attempts == nil {
		qs.attempts = map[string]*attempt{}
	}
	for k, a := range qs.attempts { // keep the map bounded by the window
		if now.After(a.expires) {
			delete(qs.attempts, k)
		}
	}
	a := &attempt{expires: now.Add(5 * time.Minute), msgs: msgs}
	for _, m := range got {
		a.seqs = append(a.seqs, m.Seq)
		a.fences = append(a.fences, m.Fence())
	}
	qs.attempts[id] = a
}

// poller is a long poll waiting on a queue.
type poller struct {
	woken chan struct{} // closed when it is woken (and taken off the list)
	part  int           // the partition it is bound to, or -1
}

// parkLocked puts a long poll on the queue's waiting list.
func (qs *queueState) parkLocked(part int) *poller {
	p := &poller{woken: make(chan struct{}), part: part}
	qs.pollers = append(qs.pollers, p)
	if part >= 0 {
		qs.bound++
	}
	return p
}

// unparkLocked takes p off the waiting list. It reports false when p was
// not on it: it had been woken.
func (qs *queueState) unparkLocked(p *poller) bool {
	i := slices.Index(qs.pollers, p)
	if i < 0 {
		return false
	}
	qs.pollers = slices.Delete(qs.pollers, i, i+1)
	if p.part >= 0 {
		qs.bound--
	}
	return true
}

// leave takes a long poll that gives up off the list; if it had been
// woken meanwhile, the wake goes to the next one, so that the message it
// was woken for is not left waiting for a poll that is gone.
func (qs *queueState) leave(p *poller) {
	qs.mu.Lock()
	if !qs.unparkLocked(p) {
		qs.wakeSomeLocked(1)
	}
	qs.mu.Unlock()
}

// wakeLocked wakes every long poll waiting on the queue: for changes
// after which any of them may find something (a visibility change, a
// delete that frees a FIFO group or a capped tenant, new timers).
func (qs *queueState) wakeLocked() {
	for _, p := range qs.pollers {
		close(p.woken)
	}
	clear(qs.pollers)
	qs.pollers, qs.bound = qs.pollers[:0], 0
}

// wakeSomeLocked wakes the n longest-waiting long polls: n messages became
// ready. Waking every poll for each send would have all of them take the
// queue's lock to find that one got the message: with a thousand idle
// consumers, a thousand wake-ups a send. Any waiting poll can take any
// ready message, unless some are bound to a partition: then all are woken.
func (qs *queueState) wakeSomeLocked(n int) {
	if n >= len(qs.pollers) || qs.bound > 0 {
		qs.wakeLocked()
		return
	}
	for _, p := range qs.pollers[:n] {
		close(p.woken)
	}
	rest := copy(qs.pollers, qs.pollers[n:])
	clear(qs.pollers[rest:])
	qs.pollers = qs.pollers[:rest]
}

type broker struct {
	cfg   Config
	clock Clock
	log   *slog.Logger
	store *store.Log    // the disk log; nil in memory mode
	mem   *store.Memory // payload records in memory mode

	// live counts, per log segment, the messages whose record is in it, so
	// a segment nobody needs is unlinked (disk mode).
	segMu   sync.Mutex
	live    map[uint32]int64
	written map[uint32]int64 // records counted into each segment, for compaction

	mu        sync.RWMutex
	queues    map[string]*queueState
	byID      map[uint64]*queueState
	deletedAt map[string]time.Time
	nextQID   uint64

	seq     atomic.Uint64 // message sequences, unique across queues
	closing chan struct{}
	closed  atomic.Bool

	timerMu       sync.Mutex // guards the two timers below
	compactTimer  Timer
	maintainTimer Timer

	tasks *moveTasks

	relocated atomic.Int64 // messages compaction copied forward
}

func open(cfg Config) (*Broker, error) {
	if cfg.Sync == "" {
		cfg.Sync = SyncAlways
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 10 * time.Millisecond
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "000000000000"
	}
	if cfg.CompactInterval <= 0 {
		cfg.CompactInterval = time.Second
	}
	if cfg.MaxQueues <= 0 {
		cfg.MaxQueues = 10000
	}
	if cfg.DiskReserve == 0 {
		cfg.DiskReserve = 256 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &broker{
		cfg: cfg, clock: cfg.Clock, log: cfg.Logger,
		queues: map[string]*queueState{}, byID: map[uint64]*queueState{}, deletedAt: map[string]time.Time{},
		nextQID: 1, closing: make(chan struct{}), live: map[uint32]int64{}, written: map[uint32]int64{},
	}
	b.tasks = newMoveTasks(b)
	if cfg.InMemory {
		b.mem = store.NewMemory()
	} else {
		if cfg.Dir == "" {
			return nil, errors.New("sluice: Config.Dir is required unless InMemory is set")
		}
		var mode store.SyncMode
		switch cfg.Sync {
		case SyncAlways:
			mode = store.SyncAlways
		case SyncBatch:
			mode = store.SyncBatch
		case SyncNone:
			mode = store.SyncNone
		default:
			return nil, fmt.Errorf("sluice: unknown sync mode %q (want always, batch or none)", cfg.Sync)
		}
		fs := cfg.FS
		if fs == nil {
			fs = vfs.OS{}
		}
		lg, err := store.Open(fs, filepath.Clean(cfg.Dir), store.Options{
			Sync: mode, SyncInterval: cfg.SyncInterval, Snapshot: b.snapshot, Retain: b.retain, Logger: cfg.Logger,
			SegmentBytes: cfg.SegmentBytes, CheckpointBytes: cfg.CheckpointBytes, Reserve: max(cfg.DiskReserve, 0),
			Preallocate: cfg.FS == nil && !cfg.NoPreallocate, // real disks only
		})
		if err != nil {
			return nil, err
		}
		b.store = lg
		if err := lg.Recover(b.loadSnapshot, b.replay); err != nil {
			return nil, err
		}
		b.scheduleCompaction()
	}
	b.scheduleMaintenance()
	return &Broker{impl: b}, nil
}

func (b *broker) close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(b.closing)
	b.timerMu.Lock()
	for _, t := range []Timer{b.compactTimer, b.maintainTimer} {
		if t != nil {
			t.Stop()
		}
	}
	b.timerMu.Unlock()
	b.tasks.stopAll()
	if b.store != nil {
		return b.store.Close()
	}
	return b.mem.Close()
}

// every runs f each d (from the end of one run to the start of the next)
// until the broker closes. slot keeps the pending timer for close to stop,
// so that a closed broker is not kept alive, caches and all, until it fires.
func (b *broker) every(slot *Timer, d time.Duration, f func()) {
	b.timerMu.Lock()
	defer b.timerMu.Unlock()
	if b.closed.Load() {
		return
	}
	*slot = b.clock.AfterFunc(d, func() {
		select {
		case <-b.closing:
			return
		default:
		}
		f()
		b.every(slot, d, f)
	})
}

// ---- persistence helpers ----

type waiter interface {
	Wait(ctx context.Context) error
	Done() (bool, error)
}

type doneWaiter struct{ err error }

func (d doneWaiter) Wait(context.Context) error { return d.err }
func (d doneWaiter) Done() (bool, error)        { return true, d.err }

// submit hands state records to the log; callers hold the lock of the
// state they changed (so log order is memory order) and wait after
// releasing it. Memory mode keeps no state records.
func (b *broker) submit(recs ...*record) waiter {
	if b.closed.Load() {
		return doneWaiter{unavailable()}
	}
	if b.store == nil || len(recs) == 0 {
		return doneWaiter{}
	}
	raw := make([][]byte, len(recs))
	for i, r := range recs {
		raw[i] = r.encode()
	}
	return b.store.Submit(raw...)
}

// submitPayload hands send records (which carry message bodies) to the
// store; applied runs once they are durable, with their locations.
func (b *broker) submitPayload(recs []*record, applied func(locs []queue.Loc)) waiter {
	if b.closed.Load() {
		return doneWaiter{unavailable()}
	}
	raw := make([][]byte, len(recs))
	for i, r := range recs {
		raw[i] = r.encode()
	}
	fn := func(locs []store.Loc) {
		q := make([]queue.Loc, len(locs))
		for i, l := range locs {
			q[i] = qloc(l)
		}
		applied(q)
	}
	if b.store == nil {
		return b.mem.SubmitFunc(raw, fn)
	}
	return b.store.SubmitFunc(raw, fn)
}

func qloc(l store.Loc) queue.Loc { return queue.Loc{Seg: l.Seg, Off: l.Off, FLen: l.FLen, Idx: l.Idx} }
func sloc(l queue.Loc) store.Loc { return store.Loc{Seg: l.Seg, Off: l.Off, FLen: l.FLen, Idx: l.Idx} }

// readPayload reads a message's body and attributes back from its record.
func (b *broker) readPayload(loc queue.Loc) (*payload, error) {
	return b.readPayloadCached(loc, nil)
}

type frameKey struct{ seg, off uint32 }

// readPayloadCached is readPayload that reads each frame once per cache:
// messages sent in one batch are usually received together.
func (b *broker) readPayloadCached(loc queue.Loc, cache map[frameKey][][]byte) (*payload, error) {
	var raw []byte
	var err error
	if b.store == nil {
		raw, err = b.mem.ReadRecord(sloc(loc))
	} else {
		k := frameKey{loc.Seg, loc.Off}
		recs, ok := cache[k]
		if !ok {
			recs, err = b.store.ReadFrame(sloc(loc))
			if err == nil && cache != nil {
				cache[k] = recs
			}
		}
		if err == nil {
			if int(loc.Idx) >= len(recs) {
				return nil, fmt.Errorf("record %d of a frame of %d", loc.Idx, len(recs))
			}
			raw = recs[loc.Idx]
		}
	}
	if err != nil {
		return nil, err
	}
	rec, err := decodeRecord(raw)
	if err != nil {
		return nil, err
	}
	if rec.P == nil {
		return nil, fmt.Errorf("record at %+v holds no message", loc)
	}
	return rec.P, nil
}

// acquire counts a message whose record is at loc.
func (b *broker) acquire(loc queue.Loc) {
	if b.store == nil || loc.Seg == 0 {
		return
	}
	b.segMu.Lock()
	b.live[loc.Seg]++
	b.written[loc.Seg]++
	b.segMu.Unlock()
}

// release forgets messages; a segment left with none is unlinked (once no
// checkpoint needs it for replay).
func (b *broker) release(locs []queue.Loc) {
	if b.store == nil {
		for _, l := range locs {
			b.mem.Free(sloc(l))
		}
		return
	}
	var dead []uint32
	b.segMu.Lock()
	for _, l := range locs {
		if l.Seg == 0 {
			continue
		}
		b.live[l.Seg]--
		if b.live[l.Seg] <= 0 {
			delete(b.live, l.Seg)
			delete(b.written, l.Seg)
			dead = append(dead, l.Seg)
		}
	}
	b.segMu.Unlock()
	for _, seg := range dead {
		b.store.Release(seg)
	}
}

// retain tells the store whether a segment still holds a live message.
func (b *broker) retain(seg uint32) bool {
	b.segMu.Lock()
	defer b.segMu.Unlock()
	return b.live[seg] > 0
}

// wait waits for a durable write; it does not give up when the caller's
// context ends, since the outcome decides what the caller is told.
func wait(w waiter) error {
	err := w.Wait(context.Background())
	if err == nil {
		return nil
	}
	var se *st.Error
	if errors.As(err, &se) {
		return err
	}
	msg := "The server could not persist the request."
	if errors.Is(err, store.ErrNoSpace) {
		msg = "The server is out of disk space; the request was not persisted."
	}
	return &st.Error{Code: st.CodeInternal, Message: msg, Cause: err}
}

func unavailable() error {
	return st.Errorf(st.CodeServiceUnavailable, "The server is shutting down.")
}

// ---- queue lookup ----

func (b *broker) arn(name string) string {
	return "arn:aws:sqs:" + b.cfg.Region + ":" + b.cfg.AccountID + ":" + name
}

func noQueue() error {
	return st.Errorf(st.CodeQueueDoesNotExist, "The specified queue does not exist.")
}

// allQueues lists the queues at this moment.
func (b *broker) allQueues() []*queueState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*queueState, 0, len(b.queues))
	for _, qs := range b.queues {
		out = append(out, qs)
	}
	return out
}

func (b *broker) lookup(name string) (*queueState, error) {
	b.mu.RLock()
	qs := b.queues[name]
	b.mu.RUnlock()
	if qs == nil {
		return nil, noQueue()
	}
	return qs, nil
}

func (b *broker) queueNameFromARN(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter QueueArn is invalid. Reason: not a valid SQS queue ARN.", arn)
	}
	if parts[4] != b.cfg.AccountID {
		return "", noQueue()
	}
	return parts[5], nil
}

func (b *broker) getQueue(name string) (QueueInfo, error) {
	qs, err := b.lookup(name)
	if err != nil {
		return QueueInfo{}, err
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return QueueInfo{Name: qs.meta.Name, ARN: b.arn(qs.meta.Name), FIFO: qs.meta.FIFO}, nil
}

// ---- queue lifecycle ----

func (b *broker) createQueue(ctx context.Context, name string, attrs, tags map[string]string) (QueueInfo, error) {
	if err := validateQueueName(name); err != nil {
		return QueueInfo{}, err
	}
	fifo := strings.HasSuffix(name, ".fifo")
	if v, ok := attrs["FifoQueue"]; ok {
		if v != "true" && v != "false" {
			return QueueInfo{}, invalidAttrValue("FifoQueue", "")
		}
		if (v == "true") != fifo {
			return QueueInfo{}, st.Errorf(st.CodeInvalidParameterValue, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
		}
	} else if fifo {
		return QueueInfo{}, st.Errorf(st.CodeInvalidParameterValue, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
	}
	clean, err := validateAttrs(attrs, fifo, true)
	if err != nil {
		return QueueInfo{}, err
	}
	delete(clean, "FifoQueue")
	if err := validateTags(tags); err != nil {
		return QueueInfo{}, err
	}
	if err := b.checkRedriveTarget(name, clean, fifo); err != nil {
		return QueueInfo{}, err
	}
	now := b.clock.Now()
	b.mu.Lock()
	if qs := b.queues[name]; qs != nil {
		b.mu.Unlock()
		qs.mu.Lock()
		defer qs.mu.Unlock()
		names := make([]string, 0, len(clean))
		for k := range clean {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if effective(qs.meta.Attrs, k) != effective(clean, k) {
				return QueueInfo{}, st.Errorf(st.CodeQueueNameExists, "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return QueueInfo{Name: name, ARN: b.arn(name), FIFO: qs.meta.FIFO}, nil
	}
	if at, ok := b.deletedAt[name]; ok && now.Sub(at) < 60*time.Second {
		b.mu.Unlock()
		return QueueInfo{}, st.Errorf(st.CodeQueueDeletedRecently, "You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	if len(b.queues) >= b.cfg.MaxQueues {
		b.mu.Unlock()
		return QueueInfo{}, st.Errorf(st.CodeOverLimit, "This server holds the maximum of %d queues.", b.cfg.MaxQueues)
	}
	meta := queueMeta{ID: b.nextQID, Name: name, FIFO: fifo, Attrs: clean, Tags: copyMap(tags), Created: now.UnixMilli(), Modified: now.UnixMilli()}
	b.nextQID++
	qs := b.installLocked(meta)
	w := b.submit(&record{T: recQueue, Meta: &meta})
	b.mu.Unlock()
	if err := wait(w); err != nil {
		b.mu.Lock()
		if b.queues[name] == qs {
			delete(b.queues, name)
			delete(b.byID, meta.ID)
		}
		b.mu.Unlock()
		return QueueInfo{}, err
	}
	return QueueInfo{Name: name, ARN: b.arn(name), FIFO: fifo}, nil
}

func (b *broker) installLocked(meta queueMeta) *queueState {
	if meta.Attrs == nil {
		meta.Attrs = map[string]string{}
	}
	qs := &queueState{meta: meta, q: queue.New(queueConfig(meta))}
	b.queues[meta.Name] = qs
	b.byID[meta.ID] = qs
	if meta.ID >= b.nextQID {
		b.nextQID = meta.ID + 1
	}
	return qs
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func validateTags(tags map[string]string) error {
	if len(tags) > 50 {
		return st.Errorf(st.CodeInvalidParameterValue, "Too many tags added for queue. The maximum is 50 tags.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 {
			return st.Errorf(st.CodeInvalidParameterValue, "Tag keys must be between 1 and 128 characters in length.")
		}
		if len(v) > 256 {
			return st.Errorf(st.CodeInvalidParameterValue, "Tag values may only be up to 256 characters in length.")
		}
	}
	return nil
}

func (b *broker) checkRedriveTarget(source string, attrs map[string]string, fifo bool) error {
	rp := attrs["RedrivePolicy"]
	if rp == "" {
		return nil
	}
	p, err := parseRedrivePolicy(rp)
	if err != nil {
		return err
	}
	name, err := b.queueNameFromARN(p.DeadLetterTargetArn)
	if err != nil {
		return invalidAttrValue("RedrivePolicy", "Dead-letter target does not exist")
	}
	dlq, err := b.lookup(name)
	if err != nil {
		return invalidAttrValue("RedrivePolicy", "Dead-letter target does not exist")
	}
	dlq.mu.Lock()
	dfifo := dlq.meta.FIFO
	allow := dlq.meta.Attrs["RedriveAllowPolicy"]
	dlq.mu.Unlock()
	if dfifo != fifo {
		return invalidAttrValue("RedrivePolicy", "Dead-letter target must be of the same type as the source queue (standard or FIFO)")
	}
	if allow != "" {
		ap, err := parseRedriveAllowPolicy(allow)
		if err == nil && !ap.allows(b.arn(source)) {
			return invalidAttrValue("RedrivePolicy", "The dead-letter target's RedriveAllowPolicy does not allow "+source+" as a source queue")
		}
	}
	return nil
}

func (b *broker) listQueues(prefix string, max int, next string, allow func(string) bool) ([]string, string, error) {
	b.mu.RLock()
	names := make([]string, 0, len(b.queues))
	for n := range b.queues {
		if strings.HasPrefix(n, prefix) && (allow == nil || allow(n)) {
			names = append(names, n)
		}
	}
	b.mu.RUnlock()
	return page(names, max, next, 1000)
}

// page sorts names and returns one page after the token.
func page(names []string, max int, next string, limit int) ([]string, string, error) {
	if max < 0 || max > limit {
		return nil, "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and %d.", max, limit)
	}
	sort.Strings(names)
	if next != "" {
		after, err := base64.RawURLEncoding.DecodeString(next)
		if err != nil {
			return nil, "", st.Errorf(st.CodeInvalidParameterValue, "Invalid NextToken value.")
		}
		i := sort.SearchStrings(names, string(after))
		for i < len(names) && names[i] <= string(after) {
			i++
		}
		names = names[i:]
	}
	if max == 0 {
		if len(names) > limit {
			names = names[:limit]
		}
		return names, "", nil
	}
	if len(names) > max {
		names = names[:max]
		return names, base64.RawURLEncoding.EncodeToString([]byte(names[max-1])), nil
	}
	return names, "", nil
}

func (b *broker) deleteQueue(ctx context.Context, name string) error {
	b.mu.RLock()
	qs := b.queues[name]
	b.mu.RUnlock()
	if qs == nil {
		return noQueue()
	}
	qs.mu.Lock()
	if qs.deleted {
		qs.mu.Unlock()
		return noQueue()
	}
	// The queue goes once its deletion is durable (a checkpoint taken
	// after that leaves it out: the apply runs first).
	var locs []queue.Loc
	err := b.persistLocked(qs, []*record{{T: recQueueDelete, Q: qs.meta.ID}}, func(time.Time) {
		if qs.deleted {
			return
		}
		qs.deleted = true
		qs.wakeLocked()
		locs = append(locs, qs.q.TakeReleased()...)
		qs.q.Messages(func(m *queue.Msg) { locs = append(locs, m.Loc) })
		for _, o := range qs.outbound {
			locs = append(locs, o.m.Loc)
		}
	})
	deleted := qs.deleted
	qs.mu.Unlock()
	if err != nil {
		return err
	}
	b.mu.Lock()
	if deleted && b.queues[name] == qs {
		delete(b.queues, name)
		delete(b.byID, qs.meta.ID)
		b.deletedAt[name] = b.clock.Now()
	}
	b.mu.Unlock()
	b.release(locs)
	return nil
}

func (b *broker) getQueueAttributes(name string, names []string) (map[string]string, error) {
	qs, err := b.lookup(name)
	if err != nil {
		return nil, err
	}
	return b.renderAttrs(qs, names)
}

func (b *broker) setQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	qs, err := b.lookup(name)
	if err != nil {
		return err
	}
	qs.mu.Lock()
	fifo := qs.meta.FIFO
	qs.mu.Unlock()
	clean, err := validateAttrs(attrs, fifo, false)
	if err != nil {
		return err
	}
	if err := b.checkRedriveTarget(name, clean, fifo); err != nil {
		return err
	}
	return b.updateMeta(qs, func(m *queueMeta) error {
		for k, v := range clean {
			if v == "" || (k == "KmsDataKeyReusePeriodSeconds" && v == "300") {
				delete(m.Attrs, k)
				continue
			}
			m.Attrs[k] = v
		}
		if m.Attrs["KmsMasterKeyId"] != "" {
			if _, set := clean["SqsManagedSseEnabled"]; !set {
				delete(m.Attrs, "SqsManagedSseEnabled")
			}
		}
		return nil
	})
}

// updateMeta changes a queue's metadata and persists it whole; the
// change takes effect once durable.
func (b *broker) updateMeta(qs *queueState, f func(m *queueMeta) error) error {
	qs.metaMu.Lock()
	defer qs.metaMu.Unlock()
	qs.mu.Lock()
	if qs.deleted {
		qs.mu.Unlock()
		return noQueue()
	}
	meta := qs.meta
	meta.Attrs = copyMap(meta.Attrs)
	if meta.Attrs == nil {
		meta.Attrs = map[string]string{}
	}
	meta.Tags = copyMap(meta.Tags)
	if meta.Tenants != nil {
		t := make(map[string]sched.Limits, len(meta.Tenants))
		for k, v := range meta.Tenants {
			t[k] = v
		}
		meta.Tenants = t
	}
	if err := f(&meta); err != nil {
		qs.mu.Unlock()
		return err
	}
	meta.Modified = b.clock.Now().UnixMilli()
	err := b.persistLocked(qs, []*record{{T: recQueue, Meta: &meta}}, func(time.Time) {
		qs.meta = meta
		qs.q.SetConfig(queueConfig(meta))
	})
	qs.mu.Unlock()
	return err
}

func (b *broker) tagQueue(ctx context.Context, name string, tags map[string]string) error {
	qs, err := b.lookup(name)
	if err != nil {
		return err
	}
	if len(tags) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter Tags.")
	}
	return b.updateMeta(qs, func(m *queueMeta) error {
		merged := copyMap(m.Tags)
		if merged == nil {
			merged = map[string]string{}
		}
		for k, v := range tags {
			merged[k] = v
		}
		if err := validateTags(merged); err != nil {
			return err
		}
		m.Tags = merged
		return nil
	})
}

func (b *broker) untagQueue(ctx context.Context, name string, keys []string) error {
	qs, err := b.lookup(name)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter TagKeys.")
	}
	return b.updateMeta(qs, func(m *queueMeta) error {
		for _, k := range keys {
			delete(m.Tags, k)
		}
		return nil
	})
}

func (b *broker) listQueueTags(name string) (map[string]string, error) {
	qs, err := b.lookup(name)
	if err != nil {
		return nil, err
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return copyMap(qs.meta.Tags), nil
}

// ---- messages ----

func (b *broker) send(ctx context.Context, name string, in st.SendInput) (st.SendResult, error) {
	res, errs, err := b.sendMany(ctx, name, []st.SendInput{in}, false)
	if err != nil {
		return st.SendResult{}, err
	}
	if errs[0] != nil {
		return st.SendResult{}, errs[0]
	}
	return res[0], nil
}

func (b *broker) sendBatch(ctx context.Context, name string, in []st.SendInput) ([]st.SendResult, []error, error) {
	if len(in) == 0 {
		return nil, nil, st.Errorf(st.CodeEmptyBatchRequest, "There should be at least one SendMessageBatchRequestEntry in the request.")
	}
	if len(in) > 10 {
		return nil, nil, st.Errorf(st.CodeTooManyEntriesInBatchRequest, "Maximum number of entries per request are 10. You have sent %d.", len(in))
	}
	return b.sendMany(ctx, name, in, true)
}

// diskAlarm is the error sends get while free disk space is below the
// reserve (nil otherwise).
func (b *broker) diskAlarm() error {
	if b.store == nil {
		return nil
	}
	d := b.store.Alarm()
	if !d.Alarm {
		return nil
	}
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: 5 * time.Second, Message: fmt.Sprintf(
		"The server is short of disk space: %s free, below its reserve of %s. New messages are refused until space is freed; receives, deletes and purges still work.",
		mib(d.Free), mib(d.Reserve))}
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

func (b *broker) sendMany(ctx context.Context, name string, in []st.SendInput, batch bool) ([]st.SendResult, []error, error) {
	if err := b.diskAlarm(); err != nil {
		return nil, nil, err
	}
	// Hashed before the queue is locked: the MD5 is kept with the message
	// and answered by sends and receives.
	sums := make([][md5.Size]byte, len(in))
	h := md5.New()
	var chunk [1024]byte // bodies are hashed through this, not copied whole
	for i := range in {
		h.Reset()
		for s := in[i].Body; len(s) > 0; {
			n := copy(chunk[:], s)
			h.Write(chunk[:n])
			s = s[n:]
		}
		h.Sum(sums[i][:0])
	}
	qs, now, err := b.locked(name)
	if err != nil {
		return nil, nil, err
	}
	res := make([]st.SendResult, len(in))
	errs := make([]error, len(in))
	var recs []*record
	var seqs []uint64
	var sent []int // entries that wrote a record
	delayed := false
	cfg := qs.q.Config()
	maxSize := effInt(qs.meta.Attrs, "MaximumMessageSize")
	for i := range in {
		e := &in[i]
		if err := validateMessage(e, cfg.FIFO, cfg.ContentDedup, maxSize, batch); err != nil {
			errs[i] = err
			continue
		}
		tenant := tenantOf(qs.meta.Attrs["TenantKey"], e)
		if ok, after := qs.q.AllowSend(now, tenant, 1); !ok {
			qs.ctr.throttled.Add(1)
			errs[i] = &st.Error{Code: st.CodeRequestThrottled, RetryAfter: after,
				Message: fmt.Sprintf("Request is throttled: tenant %q is over its send limit; retry after %s.", tenant, after)}
			continue
		}
		m := &queue.Msg{Seq: b.seq.Add(1)}
		m.SetGroup(e.GroupID)
		m.SetTenant(tenant)
		p := &payload{ID: uuid.NewString(), Body: e.Body, Attrs: e.Attributes, Trace: e.TraceHeader, TraceParent: e.TraceParent, Sender: e.SenderID, Dedup: e.DedupID,
			MD5: string(sums[i][:])}
		delay := cfg.Delay
		if cfg.FIFO {
			if p.Dedup == "" {
				p.Dedup = queue.ContentDedupID(e.Body)
			}
			if id, num, dup := qs.q.Dedup(now, m.Group(), p.Dedup); dup {
				res[i] = st.SendResult{MessageID: id, SequenceNumber: num, MD5OfBody: hex.EncodeToString(sums[i][:])}
				continue
			}
		} else if e.DelaySeconds != nil {
			delay = time.Duration(*e.DelaySeconds) * time.Second
		}
		delayed = delayed || delay > 0
		p.SeqNum = qs.q.Prepare(now, m, delay)
		if cfg.FIFO {
			qs.q.Remember(now, m.Group(), p.Dedup, p.ID, p.SeqNum)
		}
		res[i] = st.SendResult{MessageID: p.ID, SequenceNumber: p.SeqNum, MD5OfBody: hex.EncodeToString(sums[i][:])}
		cp := *m
		recs = append(recs, &record{T: recSend, Q: qs.meta.ID, M: &cp, P: p})
		seqs = append(seqs, m.Seq)
		sent = append(sent, i)
	}
	if len(recs) == 0 {
		qs.mu.Unlock()
		if !batch && errs[0] != nil {
			return nil, nil, errs[0]
		}
		return res, errs, nil
	}
	// Messages become visible once durable: in the writer, before anyone
	// is answered and before any later checkpoint.
	w := b.submitPayload(recs, func(locs []queue.Loc) {
		qs.mu.Lock()
		now := b.clock.Now()
		for i, s := range seqs {
			if qs.q.Commit(now, s, locs[i]) {
				b.acquire(locs[i])
			}
		}
		if delayed {
			qs.wakeLocked() // the waiting polls' timers may be too late now
		} else {
			qs.wakeSomeLocked(len(seqs))
		}
		qs.mu.Unlock()
	})
	qs.mu.Unlock()
	werr := wait(w)
	if werr == nil {
		qs.ctr.sent.Add(int64(len(recs)))
		return res, errs, nil
	}
	qs.mu.Lock()
	for k, s := range seqs {
		qs.q.Abort(s)
		if cfg.FIFO {
			qs.q.Forget(in[sent[k]].GroupID, recs[k].P.Dedup)
		}
	}
	qs.mu.Unlock()
	if !batch {
		return nil, nil, werr
	}
	for _, i := range sent {
		errs[i] = werr
	}
	return res, errs, nil
}

// tenantOf derives a message's tenant key as the queue's TenantKey says:
// its MessageGroupId (the default), the sending principal, or the string
// value of a message attribute. A message without one is tenant "".
func tenantOf(key string, e *st.SendInput) string {
	switch {
	case key == "Principal":
		return e.SenderID
	case strings.HasPrefix(key, "MessageAttribute:"):
		a, ok := e.Attributes[strings.TrimPrefix(key, "MessageAttribute:")]
		if !ok || a.StringValue == nil {
			return ""
		}
		return *a.StringValue
	}
	return e.GroupID
}

// receipt handles: base64url("qid:seq:fence:nonce").
func (b *broker) handle(qid, seq uint64, fence uint32) string {
	// "qid:seq:fence:<12 hex digits of randomness>", base64url.
	var n [6]byte
	_, _ = rand.Read(n[:])
	raw := make([]byte, 0, 64)
	raw = strconv.AppendUint(raw, qid, 10)
	raw = append(raw, ':')
	raw = strconv.AppendUint(raw, seq, 10)
	raw = append(raw, ':')
	raw = strconv.AppendUint(raw, uint64(fence), 10)
	raw = append(raw, ':')
	raw = hex.AppendEncode(raw, n[:])
	return base64.RawURLEncoding.EncodeToString(raw)
}

func parseHandle(h string) (qid, seq uint64, fence uint32, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return 0, 0, 0, false
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 4 {
		return 0, 0, 0, false
	}
	qid, e1 := strconv.ParseUint(parts[0], 10, 64)
	seq, e2 := strconv.ParseUint(parts[1], 10, 64)
	f, e3 := strconv.ParseUint(parts[2], 10, 32)
	if e1 != nil || e2 != nil || e3 != nil {
		return 0, 0, 0, false
	}
	return qid, seq, uint32(f), true
}

func invalidHandle(h string) error {
	return st.Errorf(st.CodeReceiptHandleIsInvalid, "The input receipt handle \"%s\" is not a valid receipt handle.", h)
}

func (b *broker) toMessage(qid uint64, m *queue.Msg, p *payload) st.Message {
	out := st.Message{
		MessageID: p.ID, Body: p.Body, Attributes: p.Attrs, TraceHeader: p.Trace, TraceParent: p.TraceParent, SenderID: p.Sender,
		SentTimestamp: time.UnixMilli(m.Sent), ReceiveCount: int(m.RecvCount()), GroupID: m.Group(), SequenceNumber: p.SeqNum,
		DeadLetterSourceArn: m.DLQSource(),
	}
	if p.MD5 != "" {
		out.MD5OfBody = hex.EncodeToString([]byte(p.MD5))
	}
	if p.SeqNum != "" {
		out.DedupID = p.Dedup
	}
	if m.FirstRecv() != 0 {
		out.FirstReceiveTimestamp = time.UnixMilli(m.FirstRecv())
	}
	out.RetryLevel = int(m.Level)
	if f := m.Fail(); f != nil {
		out.FailReason, out.LastError, out.FirstFailure, out.Failures = f.Reason, f.LastError, time.UnixMilli(f.First), int(f.Failures)
	}
	if m.Fence() > 0 {
		out.ReceiptHandle = b.handle(qid, m.Seq, m.Fence())
	}
	return out
}

func (b *broker) receive(ctx context.Context, name string, in st.ReceiveInput) ([]st.Message, error) {
	max := in.MaxMessages
	if max == 0 {
		max = 1
	}
	if max < 1 || max > 10 {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", max)
	}
	if in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20) {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 43200) {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout)
	}
	if in.AttemptID != "" && !validID(in.AttemptID) {
		return nil, invalidIDErr("ReceiveRequestAttemptId", in.AttemptID)
	}
	qs, err := b.lookup(name)
	if err != nil {
		return nil, err
	}
	qs.mu.Lock()
	waitFor := time.Duration(effInt(qs.meta.Attrs, "ReceiveMessageWaitTimeSeconds")) * time.Second
	qs.mu.Unlock()
	if in.WaitTimeSeconds != nil {
		waitFor = time.Duration(*in.WaitTimeSeconds) * time.Second
	}
	part := -1
	if in.Partition != nil {
		part = *in.Partition
		qs.mu.Lock()
		parts, fifo := effInt(qs.meta.Attrs, "Partitions"), qs.meta.FIFO
		qs.mu.Unlock()
		if parts < 1 {
			parts = 1
		}
		if fifo || part < -1 || part >= parts {
			return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for X-Sluice-Partition is invalid. Reason: the queue has %d partitions, numbered from 0 (FIFO queues have none to bind to).", part, parts)
		}
	}
	deadline := b.clock.Now().Add(waitFor)
	var p *poller // on the queue's waiting list, or woken from it
	for {
		now := b.clock.Now()
		msgs, parked, next, err := b.receiveOnce(ctx, qs, max, in.VisibilityTimeout, in.AttemptID, part, p, now.Before(deadline))
		if p = parked; err != nil || len(msgs) > 0 {
			return msgs, err
		}
		if p == nil {
			if !now.Before(deadline) {
				qs.ctr.emptyReceives.Add(1)
				return nil, nil
			}
			continue // messages found but unreadable, and dropped: look again
		}
		wakeAt := deadline
		if !next.IsZero() && next.Before(wakeAt) {
			wakeAt = next
		}
		timer := make(chan struct{})
		t := b.clock.AfterFunc(wakeAt.Sub(now), func() { close(timer) })
		select {
		case <-p.woken:
			p = nil // off the list already
		case <-timer: // receiveOnce takes it off the list
		case <-ctx.Done():
			t.Stop()
			qs.leave(p)
			return nil, nil
		case <-b.closing:
			t.Stop()
			qs.leave(p)
			return nil, nil
		}
		t.Stop()
	}
}

// receiveOnce delivers what is ready now. p, if not nil, is the caller's
// place on the waiting list from its last attempt: it is taken off.
// canWait says the caller is a long poll with time left: only such a
// receive is held back to keep TenantHeadroom receivers waiting (a short
// poll held back would only come back empty), and when it finds nothing
// it is put on the waiting list, under the same lock, so that no message
// that comes after the look can miss it; the poller is returned with the
// next timer of the queue.
func (b *broker) receiveOnce(ctx context.Context, qs *queueState, max int, visOverride *int, attemptID string, part int, p *poller, canWait bool) ([]st.Message, *poller, time.Time, error) {
	qs.mu.Lock()
	if p != nil {
		qs.unparkLocked(p)
	}
	if qs.deleted {
		qs.mu.Unlock()
		return nil, nil, time.Time{}, noQueue()
	}
	now := b.clock.Now()
	vis := qs.q.Config().VisibilityTimeout
	if visOverride != nil {
		vis = time.Duration(*visOverride) * time.Second
	}
	if !qs.meta.FIFO {
		attemptID = "" // standard queues ignore it, as SQS does
	}
	if attemptID != "" {
		if msgs, ok, err := b.retryAttemptLocked(qs, attemptID, now, vis); ok {
			qs.mu.Unlock()
			return msgs, nil, time.Time{}, err
		}
	}
	spare := math.MaxInt
	if canWait {
		spare = len(qs.pollers)
	}
	ds := qs.q.ReceivePartition(now, max, vis, part, spare)
	if len(ds) == 0 && !qs.meta.FIFO && qs.q.InFlight() >= queue.MaxInFlight {
		qs.mu.Unlock()
		return nil, nil, time.Time{}, st.Errorf(st.CodeOverLimit, "The maximum of %d messages in flight has been reached for this queue.", queue.MaxInFlight)
	}
	// The deliveries are made at once, so that no other receive takes the
	// same messages, and undone if their records cannot be written.
	recs := make([]*record, 0, len(ds))
	got := make([]queue.Msg, 0, len(ds)) // copies: the entries may change once unlocked
	prev := make([]queue.Msg, 0, len(ds))
	var dead []queue.Delivery
	for _, d := range ds {
		m := d.Msg
		if d.DeadLetter {
			qs.takeOutboundLocked(m)
			dead = append(dead, d)
			continue
		}
		recs = append(recs, &record{T: recReceive, Q: qs.meta.ID, Seq: m.Seq, RC: int(m.RecvCount()), First: m.FirstRecv(), Dlv: m.Delivered(), Vis: m.VisibleAt, Fence: m.Fence(), Lvl: m.Level})
		got = append(got, *m)
		prev = append(prev, d.Prev)
	}
	var parked *poller
	if len(got) == 0 && canWait {
		parked = qs.parkLocked(part)
	}
	w := b.submit(recs...)
	next := qs.q.NextWake()
	srcID := qs.meta.ID
	srcArn := b.arn(qs.meta.Name)
	dlqArn := qs.dlqLocked()
	b.afterAdvanceLocked(qs)
	for _, d := range dead {
		if err := b.deadLetter(qs, srcID, srcArn, dlqArn, d.Msg, d.Prev); err == nil {
			qs.ctr.deadLettered.Add(1)
		}
	}
	if len(got) == 0 {
		return nil, parked, next, nil
	}
	if err := wait(w); err != nil {
		// Not recorded: the messages were not received. Put back the ones
		// still as this receive left them.
		qs.mu.Lock()
		for i := range got {
			if m, ok := qs.q.Lookup(got[i].Seq); ok && m.Fence() == got[i].Fence() && m.State == queue.InFlight {
				qs.q.Revert(now, prev[i])
			}
		}
		qs.wakeLocked()
		qs.mu.Unlock()
		return nil, nil, next, err
	}
	for i := range got {
		if got[i].RecvCount() == 1 {
			qs.ctr.observeFirstAttempt(time.Duration(got[i].Delivered()-got[i].Sent) * time.Millisecond)
		}
	}
	// Bodies come from disk, outside the queue lock.
	out := make([]st.Message, 0, len(got))
	var lost []uint64
	frames := map[frameKey][][]byte{}
	for i := range got {
		p, err := b.readPayloadCached(got[i].Loc, frames)
		if err != nil {
			// Compaction may have moved the record since we looked.
			qs.mu.Lock()
			m, ok := qs.q.Lookup(got[i].Seq)
			moved := ok && m.Loc != got[i].Loc
			if moved {
				got[i].Loc = m.Loc
			}
			qs.mu.Unlock()
			if moved {
				p, err = b.readPayload(got[i].Loc)
			}
		}
		if err != nil {
			// Never serve what cannot be read back intact.
			b.logFor(ctx).Error("message record unreadable; dropping the message", "queue", srcArn, "seq", got[i].Seq, "err", err)
			lost = append(lost, got[i].Seq)
			continue
		}
		out = append(out, b.toMessage(srcID, &got[i], p))
	}
	if len(lost) > 0 {
		qs.mu.Lock()
		recs := make([]*record, len(lost))
		for i, s := range lost {
			recs[i] = &record{T: recDelete, Q: srcID, Seq: s}
		}
		_ = b.persistLocked(qs, recs, func(time.Time) {
			for _, s := range lost {
				qs.q.Delete(s)
			}
		})
		b.finishLocked(qs, nil)
	}
	qs.ctr.received.Add(int64(len(out)))
	if attemptID != "" && len(out) > 0 {
		qs.mu.Lock()
		b.rememberAttemptLocked(qs, attemptID, now, out, got)
		qs.mu.Unlock()
	}
	return out, nil, next, nil
}

// logFor is the logger for work done on behalf of ctx's request: its
// lines carry the request id the client saw (x-amzn-RequestId).
func (b *broker) logFor(ctx context.Context) *slog.Logger {
	if id := st.RequestID(ctx); id != "" {
		return b.log.With("request_id", id)
	}
	return b.log
}

// deadLetter moves m (taken out of src for it, with its storage) to the
// dead-letter queue. When that queue is gone or the move cannot be
// recorded, m goes back into src as prev says.
func (b *broker) deadLetter(src *queueState, srcID uint64, srcArn, dlqArn string, m *queue.Msg, prev queue.Msg) error {
	var dlq *queueState
	if name, err := b.queueNameFromARN(dlqArn); err == nil {
		dlq, _ = b.lookup(name)
	}
	err := noQueue()
	if dlq != nil {
		err = b.moveMessage(src, dlq, m, srcArn)
	}
	if err != nil {
		b.putBack(src, prev)
		b.log.Warn("dead-letter move failed; message kept", "queue", srcArn, "dlq", dlqArn, "err", err)
	}
	return err
}

// putBack returns a message that could not leave its queue.
func (b *broker) putBack(qs *queueState, prev queue.Msg) {
	qs.mu.Lock()
	delete(qs.outbound, prev.Seq)
	qs.q.Revert(b.clock.Now(), prev)
	qs.wakeLocked()
	qs.mu.Unlock()
}

// moveMessage moves m, taken out of from (its storage with it, noted in
// from.outbound), into to with a new sequence; its body stays where it is
// on disk. The move is one record; to gets the message once it is
// durable. On failure the caller puts m back (putBack).
func (b *broker) moveMessage(from, to *queueState, m *queue.Msg, dlqSource string) error {
	moved := *m
	moved.SetDLQSource(dlqSource)
	moved.State = queue.Pending
	moved.VisibleAt = 0
	moved.SetDelivery(moved.RecvCount(), moved.FirstRecv(), moved.Delivered(), 0)
	moved.Level = 0 // a moved message starts its new queue's ladder at the bottom
	unlock := lockPair(from, to)
	if to.deleted {
		unlock()
		return noQueue()
	}
	// The sequence is taken under the queue's lock, as sends take theirs:
	// a queue's entries arrive in sequence order.
	moved.Seq = b.seq.Add(1)
	cp := moved
	w := b.submit(&record{T: recMove, Q: from.meta.ID, Seq: m.Seq, To: to.meta.ID, M: &cp})
	if o, ok := from.outbound[m.Seq]; ok {
		o.w = w
		from.outbound[m.Seq] = o
	}
	seq := m.Seq
	from.applies = append(from.applies, pendingApply{w: w, apply: func(time.Time) { delete(from.outbound, seq) }})
	if to != from {
		to.applies = append(to.applies, pendingApply{w: w, apply: func(now time.Time) {
			to.q.Restore(now, &cp)
			to.wakeLocked()
		}})
	} else {
		from.applies[len(from.applies)-1].apply = func(now time.Time) {
			delete(from.outbound, seq)
			from.q.Restore(now, &cp)
			from.wakeLocked()
		}
	}
	unlock()
	err := wait(w)
	for _, qs := range []*queueState{from, to} {
		qs.mu.Lock()
		b.applyDurableLocked(qs)
		qs.mu.Unlock()
	}
	return err
}

func (b *broker) delete(ctx context.Context, name, h string) error {
	errs, err := b.deleteBatch(ctx, name, []string{h})
	if err != nil {
		return err
	}
	return errs[0]
}

func expired(h string) error {
	return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.", h)
}

// locked looks a queue up and returns it locked, with the time and its
// timers advanced to it. The caller unlocks.
func (b *broker) locked(name string) (*queueState, time.Time, error) {
	qs, err := b.lookup(name)
	if err != nil {
		return nil, time.Time{}, err
	}
	qs.mu.Lock()
	if qs.deleted {
		qs.mu.Unlock()
		return nil, time.Time{}, noQueue()
	}
	now := b.clock.Now()
	qs.q.Advance(now)
	return qs, now, nil
}

// failEntries sets errs[i] to err for each i in idx.
func failEntries(errs []error, idx []int, err error) {
	for _, i := range idx {
		errs[i] = err
	}
}

func (b *broker) deleteBatch(ctx context.Context, name string, hs []string) ([]error, error) {
	qs, _, err := b.locked(name)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(hs))
	var recs []*record
	var idx []int
	var seqs []uint64
	for i, h := range hs {
		qid, seq, fence, ok := parseHandle(h)
		if !ok || qid != qs.meta.ID {
			errs[i] = invalidHandle(h)
			continue
		}
		m, live := qs.q.Lookup(seq)
		if !live {
			continue // already deleted (durably: deletes apply once written): idempotent, as SQS
		}
		if m.Fence() != fence {
			// Fenced: the message was delivered again since this handle.
			if qs.meta.FIFO {
				errs[i] = expired(h)
			}
			continue
		}
		if qs.meta.FIFO && m.State != queue.InFlight {
			errs[i] = expired(h)
			continue
		}
		recs = append(recs, &record{T: recDelete, Q: qs.meta.ID, Seq: seq})
		idx = append(idx, i)
		seqs = append(seqs, seq)
	}
	if len(recs) == 0 {
		qs.mu.Unlock()
		return errs, nil
	}
	// The messages go once their deletes are durable: until then a retry
	// finds them and writes its own delete, so it is never answered with
	// success for a delete that was not recorded.
	werr := b.persistLocked(qs, recs, func(time.Time) {
		for _, s := range seqs {
			qs.q.Delete(s)
		}
	})
	if werr != nil {
		failEntries(errs, idx, werr)
	} else {
		qs.ctr.deleted.Add(int64(len(recs)))
		// Deleting in-flight FIFO messages unlocks their groups.
		// So does deleting a message of a tenant at its in-flight cap.
		if qs.meta.FIFO || qs.q.Sched().HasCaps() {
			qs.wakeLocked()
		}
	}
	b.finishLocked(qs, nil)
	return errs, nil
}

func (b *broker) changeVisibility(ctx context.Context, name, h string, s int) error {
	errs, err := b.changeVisibilityBatch(ctx, name, []VisibilityChange{{ReceiptHandle: h, Seconds: s}})
	if err != nil {
		return err
	}
	return errs[0]
}

func (b *broker) changeVisibilityBatch(ctx context.Context, name string, in []VisibilityChange) ([]error, error) {
	qs, now, err := b.locked(name)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(in))
	var recs []*record
	var idx []int
	woke := false
	for i, c := range in {
		if c.Seconds < 0 || c.Seconds > 43200 {
			errs[i] = st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200, if provided.", c.Seconds)
			continue
		}
		qid, seq, fence, ok := parseHandle(c.ReceiptHandle)
		if !ok || qid != qs.meta.ID {
			errs[i] = invalidHandle(c.ReceiptHandle)
			continue
		}
		m, live := qs.q.Lookup(seq)
		if !live {
			errs[i] = st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", c.ReceiptHandle)
			continue
		}
		if m.Fence() != fence {
			errs[i] = expired(c.ReceiptHandle)
			continue
		}
		if m.State != queue.InFlight {
			if qs.meta.FIFO {
				errs[i] = st.Errorf(st.CodeMessageNotInflight, "The message referred to isn't in flight.")
			}
			continue // standard: an expired handle is answered 200, as SQS
		}
		if now.Add(time.Duration(c.Seconds)*time.Second).Sub(time.UnixMilli(m.Delivered())) > 12*time.Hour {
			errs[i] = st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", c.Seconds)
			continue
		}
		recs = append(recs, &record{T: recVisibility, Q: qs.meta.ID, Seq: seq, Vis: now.Add(time.Duration(c.Seconds) * time.Second).UnixMilli()})
		idx = append(idx, i)
		if c.Seconds == 0 {
			woke = true
		}
	}
	if len(recs) == 0 {
		qs.mu.Unlock()
		return errs, nil
	}
	werr := b.persistLocked(qs, recs, func(now time.Time) {
		for _, r := range recs {
			qs.q.ApplyVisibility(now, r.Seq, r.Vis)
		}
	})
	if werr != nil {
		failEntries(errs, idx, werr)
	} else if woke {
		qs.wakeLocked()
	}
	b.finishLocked(qs, nil)
	return errs, nil
}

func (b *broker) purge(ctx context.Context, name string) error {
	qs, now, err := b.locked(name)
	if err != nil {
		return err
	}
	if !qs.lastPurge.IsZero() && now.Sub(qs.lastPurge) < 60*time.Second {
		qs.mu.Unlock()
		return st.Errorf(st.CodePurgeQueueInProgress, "Only one PurgeQueue operation on %s is allowed every 60 seconds.", name)
	}
	last := qs.lastPurge
	qs.lastPurge = now
	upTo := b.seq.Load() + 1
	err = b.persistLocked(qs, []*record{{T: recPurge, Q: qs.meta.ID, UpTo: upTo}}, func(time.Time) {
		qs.q.Purge(upTo)
	})
	if err != nil && qs.lastPurge.Equal(now) {
		qs.lastPurge = last // not purged: it may be tried again at once
	}
	b.finishLocked(qs, nil)
	return err
}

func (b *broker) listDeadLetterSourceQueues(name string, max int, next string) ([]string, string, error) {
	if _, err := b.lookup(name); err != nil {
		return nil, "", err
	}
	arn := b.arn(name)
	var names []string
	for _, qs := range b.allQueues() {
		qs.mu.Lock()
		rp := qs.meta.Attrs["RedrivePolicy"]
		n := qs.meta.Name
		qs.mu.Unlock()
		if rp == "" {
			continue
		}
		if p, err := parseRedrivePolicy(rp); err == nil && p.DeadLetterTargetArn == arn {
			names = append(names, n)
		}
	}
	return page(names, max, next, 1000)
}
