package broker_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// The flags of TestModel's long run, and of a replay.
var (
	modelSeed = flag.Uint64("model.seed", 0, "seed of TestModel's operations (a failure names it; 0: the seeds of modelSeeds)")
	modelOps  = flag.Int("model.ops", 0, "operations in TestModel (0: 4000, 1000 with -short)")
	// Overlapping snapshots and compaction rounds run in two goroutines:
	// how they interleave is the scheduler's, so a run with them may not
	// replay exactly. Without them a seed replays the same operations.
	modelOverlap = flag.Bool("model.overlap", false, "TestModel also renews snapshots while compaction rounds run")
	modelDamage  = flag.Bool("model.damage", true, "TestModel flips bits at rest and damages reads (model_damage_test.go)")
)

const (
	modelSegment    = 64 << 10
	modelCheckpoint = 128 << 10
	modelCompact    = 5 * time.Second
	modelMaxRecv    = 3 // beta's maxReceiveCount
	// modelLadderRecv is zeta's maxReceiveCount: above the receives its
	// retry ladder allows (one a level), so that only the ladder sends
	// its messages to the dead-letter queue.
	modelLadderRecv = 10
	// modelOldest is the age beyond which the model purges messages by
	// their send time (PurgeFiltered), well before the 14 days of
	// retention would drop them on the broker's own.
	modelOldest = 12 * 24 * time.Hour
)

// TestModel is the model-based test of the disk broker (TigerBeetle's
// VOPR, FoundationDB's simulation): random operations from a seed against
// a small model of what the broker acknowledged, on an in-memory file
// system and a fake clock, with restarts, snapshots, compaction rounds,
// failing writes and power losses injected, between operations and inside
// them (at each fsync point). Segments are 64 KiB and bodies reach 256
// KiB, so segments roll, are compacted and are unlinked all the time.
// Before and after every restart and power loss every message the model
// holds must be there, with its body, and no deleted one may come back;
// every received message is checked against the model as it comes, and
// the queues' counts after every operation. Two queues have a retry
// ladder (RetryDelays): a message whose visibility runs out, or that is
// given back with RetryMessage, climbs a level and waits its delay; off
// the last level it goes to the dead-letter queue (zeta) or is dropped
// (eta). The operations are in model_ops_test.go.
//
// The short run is part of the normal test command. The long run:
//
//	go test -run 'TestModel$' -model.ops 200000 -model.seed 7 ./internal/broker
//
// The same seed runs the same operations, and the broker does the same
// with them (it runs on the test's goroutine and its own writer). A
// failure names its seed and operation, the last operations, the history
// of the messages that differ and the broker's last warnings.
func TestModel(t *testing.T) {
	ops := *modelOps
	if ops <= 0 {
		ops = 4000
		if testing.Short() {
			ops = 1000
		}
	}
	seeds := modelSeeds
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { modelRun(t, seed, ops) })
	}
}

// modelSeeds are the seeds of the normal test command: 60 found an
// acknowledged visibility change lost by recovery (replay advanced time
// after each record, so the receive timed out before the change).
var modelSeeds = []uint64{1, 60}

func modelRun(t *testing.T, seed uint64, ops int) {
	t.Logf("seed %d, %d operations (again: go test -run 'TestModel$' -model.seed %d -model.ops %d ./internal/broker)", seed, ops, seed, ops)
	s := newSim(t, seed, false)
	defer s.close()
	s.run(ops)
	// A run that does not do all of this cannot find what it is for.
	f := &s.fig
	if f.restarts == 0 || f.crashes == 0 {
		t.Errorf("%d restarts and %d power losses: the run does not test recovery", f.restarts, f.crashes)
	}
	if f.removed == 0 || f.unlinked == 0 {
		t.Errorf("no segment was removed (store %d, files %d): the run cannot find a segment removed too early", f.removed, f.unlinked)
	}
	if f.relocated == 0 {
		t.Errorf("compaction moved nothing: the run does not test compaction")
	}
	if f.snapshots == 0 {
		t.Errorf("no snapshot was written")
	}
	s.checkMoved()
	s.checkLadder()
}

// run runs ops random operations, checking the counts after each, then
// restarts and reports.
func (s *sim) run(ops int) {
	for s.op = 1; s.op <= ops; s.op++ {
		s.step()
		s.checkCounts()
		s.observeFiles()
	}
	s.op = ops
	s.restart()
	s.report()
}

// checkMoved fails a run that moved no message between queues.
func (s *sim) checkMoved() {
	if f := &s.fig; f.toDLQ == 0 || f.redriven == 0 {
		s.t.Errorf("%d messages dead-lettered, %d redriven: the run does not test moves", f.toDLQ, f.redriven)
	}
}

// checkLadder fails a run that did not take messages up the retry
// ladders, off their last level to the dead-letter queue and dropped, and
// give messages back with RetryMessage.
func (s *sim) checkLadder() {
	if f := &s.fig; f.climbs == 0 || f.exhausted == 0 || f.dropped == 0 || f.retried == 0 {
		s.t.Errorf("%d ladder climbs, %d off the ladder to the dead-letter queue, %d dropped, %d RetryMessage: the run does not test retry ladders",
			f.climbs, f.exhausted, f.dropped, f.retried)
	}
}

// ---- the model ----

// mQueue is one queue of the simulation.
type mQueue struct {
	name   string
	arn    string
	fifo   bool
	dlq    int // its dead-letter queue, -1 if none
	weight int
	// maxRecv is its RedrivePolicy's maxReceiveCount (with a dlq).
	maxRecv int
	// ladder is its retry ladder (RetryDelays), nil if none: a failure
	// (its visibility ran out, RetryMessage) takes a message up a level,
	// visible that level's delay after the failure; a failure on the
	// last level sends it to the dead-letter queue, or drops it.
	ladder []time.Duration
	attrs  map[string]string // as created
	// lastPurge is its last acknowledged PurgeQueue (zero: none), which
	// SQS allows once every 60 seconds: across restarts, power losses
	// and, in a cluster, moves to another node.
	lastPurge time.Time
	// deleted: the queue is deleted (DeleteQueue), since deletedAt. Its
	// name is free again 60 seconds after (the catalog remembers).
	deleted   bool
	deletedAt time.Time
}

// mMsg is one message the broker acknowledged and has not deleted.
type mMsg struct {
	id    string
	q     int
	body  string
	attrs map[string]st.AttributeValue
	trace string
	group string
	sent  int64 // ms
	// inc counts the message's moves: each move makes it a new message
	// of its new queue, and receipt handles of an older one name nothing.
	inc   int
	count int // its receive count
	level int // its retry level (0: first attempts; a move starts it at 0)
	// Its failures as the broker records them (RetryMessage, a ladder's
	// climbs, dead-lettering): the last reason, the last reason text
	// given, when the first was (ms; -1: not known, a move by a receive
	// the model cannot time) and how many.
	failReason, lastError string
	firstFail             int64
	failures              int
	// visibleAt (ms) ends its delay or, received, its visibility.
	visibleAt int64
	// received: received in this incarnation, and in flight since (or
	// visible again once its visibility ran out). A failure on a ladder,
	// or RetryMessage, ends it: the message waits as a delayed one does,
	// and handle, while its newest receipt, still names it.
	received  bool
	handle    string // "" when not received in this incarnation
	delivered int64  // ms of its newest receive
	dlqSource string // the ARN of the queue it was dead-lettered from
	// moving: it was ready with a count at maxReceiveCount in a
	// dead-letter source when a receive did not return it, so that
	// receive may have moved it to the dead-letter queue. Peek says where
	// it is (resolve).
	moving bool
	// maybe names the operation under way at a power loss that may have
	// left the message out (a send) or taken it (a delete): verification
	// finds out, and requires the operation's one write to be there for
	// all of its messages or for none.
	maybe int
	hist  []string // what happened to it, for a failure's report
}

// receipt is a receipt handle the model was given.
type receipt struct {
	q, inc int
	id     string
	handle string
}

type model struct {
	queues   []*mQueue
	msgs     map[string]*mMsg
	order    []*mMsg // live messages in send order (deleted ones removed lazily)
	gone     map[string]bool
	receipts []receipt // the newest handles, some stale
	sends    int
	maybes   int // operations under way at a power loss
	// flying are the messages received from a queue with a retry ladder,
	// by id: they climb once their visibility runs out (sim.ladder).
	flying map[string]*mMsg
}

func (m *model) live() []*mMsg {
	out := m.order[:0]
	for _, mm := range m.order {
		if m.msgs[mm.id] == mm {
			out = append(out, mm)
		}
	}
	clear(m.order[len(out):])
	m.order = out
	return out
}

func (m *model) in(q int) []*mMsg {
	var out []*mMsg
	for _, mm := range m.live() {
		if mm.q == q {
			out = append(out, mm)
		}
	}
	return out
}

func (m *model) remove(mm *mMsg) {
	delete(m.msgs, mm.id)
	m.gone[mm.id] = true
}

// moveTo makes mm a message of q.
func (m *model) moveTo(mm *mMsg, q int) {
	mm.q, mm.inc, mm.moving, mm.level = q, mm.inc+1, false, 0
	mm.received, mm.handle, mm.visibleAt = false, "", 0
}

// failed records a failure of mm at (ms; -1: not known), as the broker
// does: the first one's time, the last reason and reason text given.
func (m *model) failed(mm *mMsg, at int64, reason, text string) {
	if mm.failures == 0 {
		mm.firstFail = at
	}
	mm.failures++
	mm.failReason = reason
	if text != "" {
		mm.lastError = text
	}
}

func (m *model) addReceipt(r receipt) {
	if len(m.receipts) == 400 {
		m.receipts = slices.Delete(m.receipts, 0, 100)
	}
	m.receipts = append(m.receipts, r)
}

// handleState is what a receipt handle names now.
type handleState int

const (
	hGone    handleState = iota // its message (as received) left the queue
	hStale                      // its message was received again since
	hCurrent                    // the newest delivery of a message in the queue
	hUnsure                     // its message may have moved: resolve first
)

func (m *model) stateOf(r receipt) (*mMsg, handleState) {
	mm := m.msgs[r.id]
	switch {
	case mm == nil || mm.q != r.q || mm.inc != r.inc:
		return nil, hGone
	case mm.moving:
		return mm, hUnsure
	case mm.handle != r.handle:
		return mm, hStale
	}
	return mm, hCurrent
}

// ---- the simulation ----

// modelBroker is what the model drives: one broker (TestModel), or the
// nodes of a cluster with each call sent to the node that owns its queue
// (TestClusterModel).
type modelBroker interface {
	CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (broker.QueueInfo, error)
	GetQueue(name string) (broker.QueueInfo, error)
	DeleteQueue(ctx context.Context, name string) error
	GetQueueAttributes(name string, names []string) (map[string]string, error)
	Send(ctx context.Context, queue string, in st.SendInput) (st.SendResult, error)
	SendBatch(ctx context.Context, queue string, in []st.SendInput) ([]st.SendResult, []error, error)
	Receive(ctx context.Context, queue string, in st.ReceiveInput) ([]st.Message, error)
	Delete(ctx context.Context, queue, receiptHandle string) error
	DeleteBatch(ctx context.Context, queue string, receiptHandles []string) ([]error, error)
	ChangeVisibilityBatch(ctx context.Context, queue string, in []broker.VisibilityChange) ([]error, error)
	Purge(ctx context.Context, queue string) error
	StartMoveTask(ctx context.Context, sourceArn, destinationArn string, rate int) (string, error)
	WaitMoveTask(ctx context.Context, taskHandle string) (broker.MoveTask, error)
	RetryMessage(ctx context.Context, queue, receiptHandle string, delaySeconds *int, reason string) error
	Peek(queue string, f broker.PeekFilter) ([]broker.PeekedMessage, string, error)
	PurgeFiltered(ctx context.Context, queue string, f broker.PeekFilter) (int, error)
	RedriveFiltered(ctx context.Context, queue string, f broker.PeekFilter, dest string) (int, error)
	Snapshot(ctx context.Context) error
	StoreStats() broker.StoreStats
	Close() error
}

type figures struct {
	ops, sends, sent, sentBytes, receives, received, deletes, visChanges int
	purges, purgeRefused, redrives, redriven, toDLQ, advances, restarts  int
	crashes, snapshots, compactions, faults, faultFailed, verifies       int
	checked, maxLive, maxSegs, unlinked                                  int
	// The retry ladders: climbs (a level up), messages off their last
	// level to the dead-letter queue, and dropped (no dead-letter queue);
	// RetryMessage calls the broker took and refused (not in flight, an
	// old handle).
	climbs, exhausted, dropped, retried, retryRefused int
	// Operations under way at a power loss: queue deletions that took
	// effect or not; batches whose messages were there after it or not.
	// inflightCut counts those the power loss fell inside.
	inflightKept, inflightLost, inflightSeen, inflightGone, inflightCut int
	removed, relocated                                                  int64
	// Damage: bits flipped at rest, starts that refused them, salvages,
	// flips that cost nothing (the log's last sync mark), messages the
	// salvages lost (each counted), messages purged as ambiguous after
	// one (unlike the model after a lost record), and reads damaged on
	// their way.
	damaged, refused, salvaged, harmless, salvageLost, salvageAmbiguous, salvageUndeleted, damagedReads int
}

type sim struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	drng  *rand.Rand // damage's (model_damage_test.go)
	mem   *vfs.Mem
	fault *vfs.Fault
	power *powerFS
	clk   *clock.Fake
	cfg   broker.Config
	b     modelBroker
	// cl is the cluster of TestClusterModel (cluster_model_test.go); nil
	// for one broker on the in-memory file system.
	cl *clusterSim
	// test and replay name another test that drives the cluster (and how
	// to run it again) in failures.
	test, replay string
	m            model
	fig          figures
	logs         *logTail
	block        string // filler of bodies
	op           int
	phase        int // 0 mixed, 1 filling, 2 draining
	// faulted: writes fail during the operation running, which may then
	// fail (and must change nothing).
	faulted bool
	trace   []string // the last operations, for a failure's report
	segs    map[string]bool
	gone    map[string]bool // segment files seen unlinked
	// removedBefore sums SegmentsRemoved and Relocated of the brokers
	// closed so far (the store counts from its open).
	removedBefore, relocatedBefore int64
}

// newSim starts the simulation on one broker, or on a cluster of three
// (TestClusterModel).
func newSim(t *testing.T, seed uint64, cluster bool) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), drng: rand.New(rand.NewPCG(seed, 0xda4a6e)), mem: vfs.NewMem(),
		clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), logs: &logTail{},
		segs: map[string]bool{}, gone: map[string]bool{}}
	s.m = model{msgs: map[string]*mMsg{}, gone: map[string]bool{}, flying: map[string]*mMsg{}}
	s.fault = vfs.NewFault(s.mem)
	s.power = &powerFS{FS: s.fault, mem: s.mem, left: -1}
	var seedBytes [32]byte // message ids and receipt handles
	binary.LittleEndian.PutUint64(seedBytes[:], seed)
	s.cfg = broker.Config{Dir: "/data", CheckReleases: true, FS: s.power, Clock: s.clk, Rand: rand.NewChaCha8(seedBytes),
		SegmentBytes: modelSegment, CheckpointBytes: modelCheckpoint, CompactInterval: modelCompact,
		Logger: slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: noTime}))}
	var fill strings.Builder
	for fill.Len() < 8<<10 {
		if s.rng.IntN(64) == 0 {
			fill.WriteByte('\n')
		} else {
			fill.WriteByte(byte(' ' + s.rng.IntN(95)))
		}
	}
	s.block = fill.String()
	if cluster {
		s.cl = startClusterSim(s, seed)
		s.b = clusterBroker{s.cl}
	} else {
		s.open()
	}
	s.createQueues()
	return s
}

func (s *sim) createQueues() {
	const acct = "arn:aws:sqs:us-east-1:000000000000:"
	// add creates a queue; dlq, when not -1, is its dead-letter queue
	// (created before it), with maxRecv its maxReceiveCount.
	add := func(name string, fifo bool, dlq, maxRecv, weight int, attrs map[string]string) {
		attrs["MessageRetentionPeriod"] = "1209600"
		attrs["VisibilityTimeout"] = "30"
		if dlq >= 0 {
			attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":"%s%s","maxReceiveCount":"%d"}`, acct, s.m.queues[dlq].name, maxRecv)
		}
		if _, err := s.b.CreateQueue(ctx, name, attrs, nil); err != nil {
			s.t.Fatalf("create %s: %v", name, err)
		}
		mq := &mQueue{name: name, arn: acct + name, fifo: fifo, dlq: dlq, maxRecv: maxRecv, weight: weight, attrs: attrs}
		if v := attrs["RetryDelays"]; v != "" {
			for _, d := range strings.Split(v, ",") {
				l, err := time.ParseDuration(d)
				if err != nil {
					s.t.Fatalf("RetryDelays of %s: %v", name, err)
				}
				mq.ladder = append(mq.ladder, l)
			}
		}
		s.m.queues = append(s.m.queues, mq)
	}
	add("alpha", false, -1, 0, 6, map[string]string{}) // the busiest: its stream is compacted in a cluster
	add("beta-dlq", false, -1, 0, 1, map[string]string{})
	betaAttrs := map[string]string{}
	if s.cl != nil {
		// The cluster's run is short (1,500 operations on real time): a
		// message beta gives back waits behind fresh ones while backlog
		// mode serves them first, and rarely reaches maxReceiveCount in
		// it. Served oldest first, its messages are dead-lettered.
		betaAttrs["OldestFirst"] = "true"
	}
	add("beta", false, 1, modelMaxRecv, 3, betaAttrs)
	add("gamma", false, -1, 0, 1, map[string]string{}) // little traffic: its bodies stay long
	add("delta.fifo", true, -1, 0, 2, map[string]string{"FifoQueue": "true"})
	add("epsilon", false, -1, 0, 1, map[string]string{}) // deleted and created again
	// Retry ladders short enough that the clock's advances climb them
	// and take messages off them all along; their retry lanes get half
	// the receives while first attempts wait (not a tenth), so that
	// messages reach the last level often.
	add("zeta-dlq", false, -1, 0, 1, map[string]string{})
	add("zeta", false, 6, modelLadderRecv, 3, map[string]string{"RetryDelays": "1s,5s", "LowerLaneShare": "0.5"})
	add("eta", false, -1, 0, 2, map[string]string{"RetryDelays": "2s", "LowerLaneShare": "0.5"}) // dropped off its ladder
}

// source is the queue whose dead-letter queue q is, or -1.
func (s *sim) source(q int) int {
	for i, mq := range s.m.queues {
		if mq.dlq == q {
			return i
		}
	}
	return -1
}

func (s *sim) open() {
	s.t.Helper()
	b, err := broker.Open(s.cfg)
	if err != nil {
		s.fail("open: %v", err)
	}
	s.b = b
}

func (s *sim) close() {
	if s.b != nil {
		s.b.Close()
	}
}

// closeBroker closes the broker and adds its store figures to the run's.
func (s *sim) closeBroker() {
	ss := s.b.StoreStats()
	s.removedBefore += ss.SegmentsRemoved
	s.relocatedBefore += ss.Relocated
	s.b.Close()
	s.b = nil
}

// restart closes the broker and opens it again. The queues are verified
// before and after, so that a difference found after is one the restart
// made.
func (s *sim) restart() {
	s.verify("before a restart")
	s.fig.restarts++
	if s.cl != nil {
		s.note("restart %s", s.cl.restartNode(false))
	} else {
		s.note("restart")
		s.closeBroker()
		s.open()
	}
	s.verify("after a restart")
}

// crash loses power: the broker is abandoned and a new one opens what the
// disk made durable. Every operation before was acknowledged, so all of
// it must be there.
func (s *sim) crash() {
	s.verify("before a power loss")
	if s.cl != nil {
		s.fig.crashes++
		s.note("crash of %s", s.cl.restartNode(true))
	} else {
		s.note("power loss")
		s.lose(nil)
	}
	s.verify("after a power loss")
}

// lose loses power and opens what the disk made durable. With inflight,
// the power goes during it: just before one of its first fsyncs (of a
// file or a directory: between two of them nothing more becomes
// durable), or after it when it makes fewer; the abandoned broker
// finishes it, and answers, on a disk that is no longer there.
func (s *sim) lose(inflight func()) {
	s.fig.crashes++
	var survived *vfs.Mem
	if inflight != nil {
		s.power.arm(s.rng.IntN(6))
		inflight()
		if survived = s.power.disarm(); survived != nil {
			s.fig.inflightCut++
		}
	}
	if survived == nil {
		survived = s.mem.Crash()
	}
	s.closeBroker() // writes nothing more to survived: it is a copy
	s.mem = survived
	s.fault = vfs.NewFault(survived)
	s.power = &powerFS{FS: s.fault, mem: survived, left: -1}
	s.cfg.FS = s.power
	s.open()
}

// powerFS is the file system under the broker: the fault injector, and a
// switch that, armed, cuts the power (takes what survives, vfs.Mem.Crash)
// just before the nth fsync, so that a power loss lands at a chosen
// point inside an operation, the same for the same seed.
type powerFS struct {
	vfs.FS // the fault injector
	mem    *vfs.Mem
	mu     sync.Mutex
	left   int      // fsyncs let through before the power goes; -1: not armed
	lost   *vfs.Mem // what survived, once the power went
}

type powerFile struct {
	vfs.File
	p *powerFS
}

func (p *powerFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := p.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return powerFile{File: f, p: p}, nil
}

func (p *powerFS) SyncDir(dir string) error {
	p.beforeSync()
	return p.FS.SyncDir(dir)
}

func (f powerFile) Sync() error {
	f.p.beforeSync()
	return f.File.Sync()
}

func (p *powerFS) beforeSync() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.left < 0 || p.lost != nil:
	case p.left == 0:
		p.lost = p.mem.Crash()
	default:
		p.left--
	}
}

// arm cuts the power just before the (n+1)th fsync from now.
func (p *powerFS) arm(n int) {
	p.mu.Lock()
	p.left, p.lost = n, nil
	p.mu.Unlock()
}

// disarm returns what survived the power cut, or nil if it did not come.
func (p *powerFS) disarm() *vfs.Mem {
	p.mu.Lock()
	defer p.mu.Unlock()
	lost := p.lost
	p.left, p.lost = -1, nil
	return lost
}

func (s *sim) now() int64 { return s.clk.Now().UnixMilli() }

// note records an operation for a failure's report.
func (s *sim) note(format string, args ...any) {
	if len(s.trace) == 40 {
		s.trace = slices.Delete(s.trace, 0, 10)
	}
	s.trace = append(s.trace, fmt.Sprintf("op %d t+%s: ", s.op, s.clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))+fmt.Sprintf(format, args...))
}

// event notes what happened to mm.
func (s *sim) event(mm *mMsg, format string, args ...any) {
	if len(mm.hist) == 12 {
		mm.hist = slices.Delete(mm.hist, 1, 4) // keep its send
	}
	mm.hist = append(mm.hist, fmt.Sprintf("op %d: ", s.op)+fmt.Sprintf(format, args...))
}

// about is mm's history.
func about(mm *mMsg) string { return "\n      " + strings.Join(mm.hist, "\n      ") }

// fail reports a difference between the broker and the model, with what
// is needed to replay it, and stops the test.
func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	test, replay := "TestModel", fmt.Sprintf("go test -run 'TestModel$' -model.seed %d -model.ops %d .", s.seed, max(s.op, *modelOps))
	if s.cl != nil {
		test, replay = "TestClusterModel", fmt.Sprintf("go test -run TestClusterModel -cmodel.seed %d -cmodel.ops %d . (not exactly: real time)", s.seed, max(s.op, *clusterModelOps))
	}
	if s.test != "" {
		test, replay = s.test, s.replay
	}
	s.t.Fatalf("%s seed %d, operation %d: %s\n\nlast operations:\n  %s\n\nbroker log (warnings and errors, last lines):\n%s\nreplay: %s",
		test, s.seed, s.op, fmt.Sprintf(format, args...), strings.Join(s.trace, "\n  "), s.logs.tail(30), replay)
}

// observeFiles counts the segment files unlinked since the last look.
func (s *sim) observeFiles() {
	s.fig.maxLive = max(s.fig.maxLive, len(s.m.msgs))
	if s.cl != nil {
		return // a cluster's streams are not files
	}
	names, _ := s.mem.ReadDir("/data")
	now := map[string]bool{}
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			now[n] = true
		}
	}
	for n := range s.segs {
		if !now[n] && !s.gone[n] {
			s.gone[n] = true
			s.fig.unlinked++
		}
	}
	s.segs = now
	s.fig.maxSegs = max(s.fig.maxSegs, len(now))
}

func (s *sim) report() {
	f := &s.fig
	ss := s.b.StoreStats()
	f.removed = s.removedBefore + ss.SegmentsRemoved
	f.relocated = s.relocatedBefore + ss.Relocated
	s.t.Logf("seed %d: %d operations, %d restarts, %d power losses, %d snapshots, %d compaction rounds, %d clock advances to t+%s",
		s.seed, f.ops, f.restarts, f.crashes, f.snapshots, f.compactions, f.advances, s.clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	s.t.Logf("%d sends of %d messages (%.1f MiB), %d receives of %d messages, %d deletes, %d visibility changes, %d purges (%d refused), %d dead-lettered over maxReceiveCount, %d redrives of %d messages",
		f.sends, f.sent, float64(f.sentBytes)/(1<<20), f.receives, f.received, f.deletes, f.visChanges, f.purges, f.purgeRefused, f.toDLQ, f.redrives, f.redriven)
	s.t.Logf("retry ladders: %d climbs, %d off the last level to the dead-letter queue, %d dropped; %d RetryMessage taken, %d refused (not in flight, an old handle)",
		f.climbs, f.exhausted, f.dropped, f.retried, f.retryRefused)
	s.t.Logf("%d write faults (%d entries failed and changed nothing), %d verifications of %d messages, 0 differences; at most %d live messages and %d segment files",
		f.faults, f.faultFailed, f.verifies, f.checked, f.maxLive, f.maxSegs)
	s.t.Logf("power losses inside an operation: %d (the others after it); batch writes under way (sends, deletes): messages there after it %d times, gone %d times; queue deletions under way: %d took effect, %d not",
		f.inflightCut, f.inflightSeen, f.inflightGone, f.inflightKept, f.inflightLost)
	s.t.Logf("segments removed: %d (store), %d files seen unlinked; %d messages relocated by compaction; now %d segments, %d live, %d bad releases, %d unreadable",
		f.removed, f.unlinked, f.relocated, ss.Segments, ss.LiveMessages, ss.BadReleases, ss.Unreadable)
	if s.cl == nil {
		s.t.Log(s.damageReport())
	}
}

// noTime leaves the wall-clock time out of the broker's log lines.
func noTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// logTail keeps the broker's last log lines.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 200 {
		l.lines = slices.Delete(l.lines, 0, 50)
	}
	l.lines = append(l.lines, string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func (l *logTail) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "  " + strings.Join(l.lines[max(0, len(l.lines)-n):], "\n  ")
}
