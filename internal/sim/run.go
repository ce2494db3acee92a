package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/attr"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/sched"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Epoch is the virtual time a run starts at: fixed, so that a run's
// timestamps (and so its message ages in milliseconds) do not depend on
// when it ran.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Options are what a run takes besides its scenario.
type Options struct {
	// FirstReceive, when set, is told of every message's first receive:
	// its tenant (a class's member by its own name), when it was sent (since the start of the run) and how
	// long it waited for that receive (the owner's SentTimestamp and
	// FirstReceiveTimestamp, milliseconds).
	FirstReceive func(tenant string, sent, waited time.Duration)
	// Trace, when set, is told of every call the run makes to the queue,
	// after it returned, in order: what a replay against a server needs
	// to make the same calls at the same virtual times.
	Trace func(Op)
}

// Op is one call a run made to the queue, at At since the start of the
// run (the fake clock was at Epoch+At).
type Op struct {
	At   time.Duration
	Kind OpKind
	// Send: the tenant (MessageGroupId and sender) and the body, which
	// names the tenant and the message's number among its sends
	// ("acme#17"); Err is the queue's error code ("" when it took it).
	Tenant, Body string
	Err          string
	// Receive: MaxMessages, the shard it was bound to (-1: any), and
	// the bodies received, in the order the queue gave them.
	Max, Shard int
	Bodies     []string
	// Delete, ChangeVisibility, Retry: the body of the message whose
	// delivery is settled; Visibility the new timeout (ChangeVisibility);
	// Err the queue's error code, if it refused.
	Visibility int
}

// OpKind says which call an Op is.
type OpKind uint8

// The calls a run makes.
const (
	OpSend OpKind = iota
	OpReceive
	OpDelete
	OpChangeVisibility
	OpRetry
)

// Result is what a run measured.
type Result struct {
	Scenario *Scenario
	Tenants  []TenantResult
	// Samples are the time series: one row per tenant per sample, at
	// every Scenario.Sample and at the end.
	Samples []Sample
	// Queue are the queue's own figures at the end of the run.
	Queue st.QueueStats
	// Events counts the events the run handled; Messages the messages
	// sent.
	Events, Messages int64
	// Members are every tenant's own waits, when the scenario counts the
	// hurt (Scenario.Hurt): the blast radius, tenant by tenant.
	Members []MemberResult
	// Windows are the figures of the scenario's windows, in its order.
	Windows []WindowResult
	// CaughtUp is the first sample from which on no tenant's oldest
	// message had waited longer than Standing at any sample (0: none
	// ever did; -1: one still had at the end).
	CaughtUp time.Duration
}

// Standing is how long a tenant's oldest ready message must have waited
// for its backlog to stand (the backlog mode's sched.StandingTarget +
// StandingInterval): Result.CaughtUp says when the queue last stopped
// standing.
const Standing = time.Duration(sched.StandingTarget+sched.StandingInterval) * time.Millisecond

// WindowResult are the figures of the messages sent in a window.
type WindowResult struct {
	Window
	// Sent counts the messages the queue took in the window (of its
	// tenants), FirstReceives those of them received by the end, and
	// Wait how long those waited for their first receive.
	Sent, FirstReceives int64
	Wait                Quantiles
	// AllServed is when the last of them was first received (-1: not
	// all were, within the run).
	AllServed time.Duration
}

// MemberResult is one tenant's waits (a class's member's, by its own
// name).
type MemberResult struct {
	Name, Class string
	Wait        Quantiles
}

// TenantResult are one tenant's figures over the run: one [[tenant]]
// entry's, a class of Members tenants alike when its count is more than
// one (the class's figures are its tenants' together).
type TenantResult struct {
	Name    string
	Members int
	// Sent counts the sends the queue took; Throttled those it refused
	// with RequestThrottled (the tenant's send limit), Refused those it
	// refused otherwise. A refused message is not sent again.
	Sent, Throttled, Refused int64
	// Received counts deliveries (first ones and later), Deleted the
	// deletes of a delivery still current, Failed the deliveries the
	// consumers failed, Late the deliveries served after they had been
	// delivered again (their delete does nothing).
	Received, Deleted, Failed, Late int64
	// Duplicates counts the deliveries of a message made while another
	// delivery of it was still in service: two consumers working on it
	// at once.
	Duplicates int64
	// FirstReceives counts first deliveries; Wait is how long they waited
	// since their send (the owner's timestamps).
	FirstReceives int64
	Wait          Quantiles
	// Ahead counts the first receives served ahead of an older message
	// of the same tenant (sent before, and not yet received): the
	// deliveries out of the tenant's send order. The messages of one
	// receive are served together: one received with an older one is
	// not ahead of it.
	Ahead int64
	// Hurt counts the tenants whose p99 wait exceeded the scenario's Hurt
	// (0 when it sets none).
	Hurt int
	// LastArrival is when the tenant last sent (-1: never); Drained how
	// long after it the tenant held no message (-1: not within the run).
	LastArrival, Drained time.Duration
	// Backlog is what the tenant held at the end (ready, delayed and in
	// flight), DeadLettered what it had in the dead-letter queue, and
	// Dropped what left the queue otherwise without a consumer deleting
	// it: all counted message by message at the end.
	Backlog      int
	DeadLettered int
	Dropped      int64
	// SidelinedPeak is the most of its messages in the backlog lane
	// (SidelineAgeSeconds) at one sample.
	SidelinedPeak int
}

// Quantiles summarise waits.
type Quantiles struct{ P50, P99, Max time.Duration }

// Sample is one tenant's (or class's) figures at one moment of the run.
type Sample struct {
	At     time.Duration
	Tenant string
	// Sent, Received and Deleted count since the previous sample.
	Sent, Received, Deleted int64
	// Backlog is the tenant's messages ready and in flight, InFlight the
	// latter, Sidelined those in the backlog lane (SidelineAgeSeconds),
	// Oldest the age of its oldest ready message: the owner's figures.
	Backlog, InFlight, Sidelined int
	Oldest                       time.Duration
	// FirstReceives counts the first deliveries since the previous
	// sample, and Wait how long they waited since their send.
	FirstReceives int64
	Wait          Quantiles
	// Duplicates counts the deliveries since the previous sample made
	// while another delivery of the same message was in service.
	Duplicates int64
	// Ahead counts the first receives since the previous sample served
	// ahead of an older message of the same tenant (TenantResult.Ahead).
	Ahead int64
	// SentWait is how long the messages sent since the previous sample
	// waited for their first receive, SentOpen how many of them were not
	// received by the end of the run (they count as waiting for ever: a
	// quantile that falls on one is -1, unknown). Filled in at the end.
	SentWait Quantiles
	SentOpen int64
}

type kind uint8

const (
	kindSample kind = iota // ordered first at equal times: a sample sees the state before what happens at its time
	kindArrival
	kindDone
	kindBeat
	kindPoll
)

type event struct {
	at   time.Duration
	seq  uint64
	kind kind
	i    int32 // the tenant, the consumer, or the service slot
	gen  uint32
}

// events is the run's event queue: a binary min-heap ordered by time,
// then kind, then seq. Hand-written rather than container/heap, whose
// Push and Pop box every event in an interface (an allocation each, a
// few million a simulated day). seq is unique, so the order is total and
// any correct heap pops the same sequence.
type events []event

func (e *event) before(f *event) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	if e.kind != f.kind {
		return e.kind < f.kind
	}
	return e.seq < f.seq
}

func (h *events) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !q[i].before(&q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// pop removes and returns the first event; h must not be empty.
func (h *events) pop() event {
	q := *h
	first := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		least, l := i, 2*i+1
		if l < n && q[l].before(&q[least]) {
			least = l
		}
		if r := l + 1; r < n && q[r].before(&q[least]) {
			least = r
		}
		if least == i {
			break
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
	*h = q
	return first
}

// member is one tenant of the run.
type member struct {
	name   string
	class  int32
	arr    *arrivals
	ended  bool  // no arrival comes any more
	bodies int64 // sends tried, numbering the bodies
	waits  []time.Duration
	// sent and recv are each message's (by its body's number) send and
	// first receive, since the start of the run: sent is the run's time
	// of the send, the owner's SentTimestamp once received (-1:
	// refused); recv the owner's FirstReceiveTimestamp (-1: not yet).
	// head is the first message sent and neither received nor expired.
	// They tell the first receives served out of the tenant's send order
	// (Ahead), the windows' figures and the waits by send time; without
	// fair delivery (and on a FIFO queue) the queue keeps no figures by
	// tenant, and they give the oldest message's age too.
	sent, recv []time.Duration
	head       int
}

// advance moves head past the messages received, refused or expired
// (sent expiry or longer before now; 0: none expire).
func (m *member) advance(now, expiry time.Duration) {
	for m.head < len(m.sent) && (m.recv[m.head] >= 0 || m.sent[m.head] < 0 || expiry > 0 && m.sent[m.head] <= now-expiry) {
		m.head++
	}
}

// oldest is the age at now of the member's oldest message not yet
// received (0: none), from the run's own figures.
func (m *member) oldest(now, expiry time.Duration) time.Duration {
	m.advance(now, expiry)
	if m.head == len(m.sent) {
		return 0
	}
	return now - m.sent[m.head]
}

// class is a [[tenant]] entry: its figures, over its members.
type class struct {
	TenantResult
	ended    int   // members whose arrivals ended
	open     int64 // sent and not deleted
	waits    []time.Duration
	interval []time.Duration
	iSent    int64
	iRecv    int64
	iDel     int64
	iDup     int64
	iAhead   int64
}

type consumer struct {
	busy    int  // messages in service
	waiting bool // for a free slot of the concurrency limit
}

// slot is a message in service; gen tells its heartbeats from those of an
// earlier message in the same slot.
type slot struct {
	handle, id, body string
	member           int32
	consumer         int32
	gen              uint32
	fail             bool
}

type runner struct {
	sc      *Scenario
	opt     Options
	ctx     context.Context
	clk     *clock.Fake
	eng     *engine.Engine
	q       *partition.Owner
	dlq     *partition.Owner // its dead-letter queue, nil if none
	h       events
	seq     uint64
	end     time.Duration
	members []*member
	classes []*class
	names   map[string]int32
	cons    []consumer
	// slots are the messages in service, free the unused ones.
	slots     []slot
	free      []int32
	inService int
	limit     int
	waitSlot  []int32 // consumers waiting for a slot, in order
	svc, fail *rand.Rand
	// current maps a message id in service to the handle of its latest
	// delivery: a delivery served after the message was delivered again
	// is late (its delete would do nothing). serving counts the
	// deliveries of each message in service.
	current    map[string]string
	serving    map[string]int32
	visibility int // the queue's VisibilityTimeout, seconds (heartbeats)
	shards     int // the queue's Shards (bound consumers)
	fifo       bool
	// own: the queue keeps no figures by tenant (FairDelivery = false, or
	// a FIFO queue), so the run keeps its own.
	own bool
	// expiry is the age at which the queue drops a message (its
	// retention, or MaxMessageAgeSeconds if shorter).
	expiry time.Duration
	// firsts are the first receives of the receive at hand.
	firsts  []firstReceive
	deps    []dependency
	samples []Sample
	events  int64
	zero    int
	// send and del are the one-entry arguments of each Send and Delete,
	// reused: the owner reads them during the call and keeps neither.
	send [1]st.SendInput
	del  [1]string
}

// firstReceive is a member's message (by its body's number) first received.
type firstReceive struct {
	member int32
	k      int
}

// dependency is a Dependency period, with the classes it affects (nil:
// every class).
type dependency struct {
	Dependency
	classes []bool
}

// Run simulates sc (a scenario of one configuration: see Expand). It
// drives a real engine on a fake clock from the calling goroutine, and
// closes it before it returns. ctx cancels the run.
func Run(ctx context.Context, sc *Scenario, opt Options) (*Result, error) {
	if len(sc.Variants) > 0 {
		return nil, fmt.Errorf("sim: scenario %s has %d variants: run each of Expand", sc.Name, len(sc.Variants))
	}
	r := &runner{sc: sc, opt: opt, ctx: ctx, clk: clock.NewFake(Epoch), end: sc.Duration.D(), names: map[string]int32{},
		current: map[string]string{}, serving: map[string]int32{}}
	seed := sc.Seed
	stream := func(n uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, n)) }
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	var err error
	r.eng, err = engine.Open(engine.Config{Store: store.NewMemory(), Region: Region, AccountID: AccountID, MaxQueues: 10,
		Clock: r.clk, Rand: rand.NewChaCha8(key), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("sim: opening the engine: %w", err)
	}
	defer r.eng.Close()
	if err := r.createQueues(); err != nil {
		return nil, err
	}
	cfg := r.q.Config()
	r.visibility, r.shards = int(cfg.Queue.VisibilityTimeout/time.Second), cfg.Shards
	r.fifo = sc.FIFO()
	r.own = r.fifo || sc.Queue["FairDelivery"] == "false"
	r.expiry = cfg.Queue.Retention
	if a := cfg.Queue.MaxAge; a > 0 && (r.expiry == 0 || a < r.expiry) {
		r.expiry = a
	}
	r.svc, r.fail = stream(1), stream(2)
	for ci := range sc.Tenants {
		t := &sc.Tenants[ci]
		c := &class{TenantResult: TenantResult{Name: t.Name, Members: max(1, t.Count), LastArrival: -1, Drained: -1}}
		r.classes = append(r.classes, c)
		for _, name := range t.members() {
			// Tenant i of the run draws its arrivals from stream 100+i.
			i := int32(len(r.members))
			m := &member{name: name, class: int32(ci), arr: newArrivals(t, stream(100+uint64(i)))}
			r.members = append(r.members, m)
			r.names[name] = i
			r.nextArrival(i)
		}
	}
	for _, d := range sc.Consumers.Dependency {
		dep := dependency{Dependency: d}
		if len(d.Tenants) > 0 {
			dep.classes = make([]bool, len(sc.Tenants))
			for ci, t := range sc.Tenants {
				dep.classes[ci] = slices.Contains(d.Tenants, t.Name)
			}
		}
		r.deps = append(r.deps, dep)
	}
	c := sc.Consumers
	r.cons = make([]consumer, c.Count)
	r.limit = c.Concurrency
	if r.limit == 0 {
		r.limit = c.Count * c.Batch
	}
	for i := range r.cons {
		// Staggered over one idle interval, so that they do not poll in
		// lockstep.
		r.push(time.Duration(int64(c.IdlePoll)*int64(i)/int64(c.Count)), kindPoll, int32(i), 0)
	}
	// Samples are taken every Sample and at the end; loop pushes each
	// when it handles the one before, so that the event heap stays small
	// (all of a day's samples in it made every push and pop slower).
	r.push(min(sc.Sample.D(), r.end), kindSample, 0, 0)
	if err := r.loop(); err != nil {
		return nil, err
	}
	return r.result(), nil
}

// createQueues creates the queue (and first its dead-letter queue, when
// its RedrivePolicy names one of this account).
func (r *runner) createQueues() error {
	ctx := context.Background()
	if rp := r.sc.Queue["RedrivePolicy"]; rp != "" {
		p, err := attr.ParseRedrivePolicy(rp)
		if err != nil {
			return fmt.Errorf("%w: queue.RedrivePolicy: %w", ErrScenario, err)
		}
		name := r.sc.QueueName()
		dlq, err := r.eng.QueueNameFromARN(p.DeadLetterTargetArn)
		if err != nil || dlq == name {
			return fmt.Errorf("%w: queue.RedrivePolicy: deadLetterTargetArn must be a queue of arn:aws:sqs:%s:%s:, other than %q", ErrScenario, Region, AccountID, name)
		}
		var attrs map[string]string
		if r.sc.FIFO() {
			attrs = map[string]string{"FifoQueue": "true"} // a FIFO queue's dead-letter queue is one too
		}
		if _, err := r.eng.CreateQueue(ctx, dlq, attrs, nil); err != nil {
			return fmt.Errorf("%w: queue.RedrivePolicy: creating the dead-letter queue: %w", ErrScenario, err)
		}
		if r.dlq, err = r.eng.Queue(dlq); err != nil {
			return err
		}
	}
	if _, err := r.eng.CreateQueue(ctx, r.sc.QueueName(), r.sc.Queue, nil); err != nil {
		return fmt.Errorf("%w: queue: %w", ErrScenario, err)
	}
	q, err := r.eng.Queue(r.sc.QueueName())
	if err != nil {
		return err
	}
	r.q = q
	return nil
}

func (r *runner) push(at time.Duration, k kind, i int32, gen uint32) {
	r.seq++
	r.h.push(event{at: at, seq: r.seq, kind: k, i: i, gen: gen})
}

func (r *runner) trace(op Op) {
	if r.opt.Trace != nil {
		r.opt.Trace(op)
	}
}

func (r *runner) loop() error {
	for len(r.h) > 0 {
		ev := r.h.pop()
		if ev.at > r.end {
			break
		}
		r.events++
		if r.events&0xffff == 1 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		// The engine's timers (maintenance, snapshots) due by then run
		// here, on this goroutine.
		r.clk.Set(Epoch.Add(ev.at))
		var err error
		switch ev.kind {
		case kindArrival:
			err = r.arrive(ev.i, ev.at)
		case kindPoll:
			err = r.poll(ev.i, ev.at)
		case kindDone:
			err = r.done(ev.i, ev.at)
		case kindBeat:
			err = r.beat(ev.i, ev.gen, ev.at)
		case kindSample:
			r.sample(ev.at)
			if ev.at < r.end {
				r.push(min(ev.at+r.sc.Sample.D(), r.end), kindSample, 0, 0)
			}
		}
		if err != nil {
			return fmt.Errorf("sim: at %s: %w", ev.at, err)
		}
	}
	return nil
}

func (r *runner) nextArrival(i int32) {
	m := r.members[i]
	at, ok := m.arr.next()
	if !ok {
		m.ended = true
		c := r.classes[m.class]
		c.ended++
		r.checkDrained(c, c.LastArrival)
		return
	}
	d := time.Duration(math.Round(at * float64(time.Second)))
	r.push(d, kindArrival, i, 0)
}

func (r *runner) arrive(i int32, now time.Duration) error {
	m := r.members[i]
	c := r.classes[m.class]
	m.bodies++
	in := st.SendInput{Body: m.name + "#" + strconv.FormatInt(m.bodies, 10), GroupID: m.name, SenderID: m.name}
	if r.fifo {
		in.DedupID = in.Body // each body is new
	}
	r.send[0] = in
	_, _, err := r.q.Send(r.ctx, r.send[:], false)
	op := Op{At: now, Kind: OpSend, Tenant: m.name, Body: in.Body}
	at := now
	if err != nil {
		at = -1
	}
	m.sent, m.recv = append(m.sent, at), append(m.recv, -1)
	switch {
	case err == nil:
		c.Sent++
		c.iSent++
		c.open++
		c.LastArrival = now
	case st.CodeOf(err) == st.CodeRequestThrottled:
		c.Throttled++
		op.Err = string(st.CodeRequestThrottled)
	case errors.As(err, new(*st.Error)):
		c.Refused++
		op.Err = string(st.CodeOf(err))
	default:
		return err
	}
	r.trace(op)
	r.nextArrival(i)
	return nil
}

// inOutage reports whether consumers are out at now, and until when.
func (r *runner) inOutage(now time.Duration) (time.Duration, bool) {
	for _, o := range r.sc.Consumers.Outages {
		if now >= o[0].D() && now < o[1].D() {
			return o[1].D(), true
		}
	}
	return 0, false
}

func (r *runner) poll(ci int32, now time.Duration) error {
	cs := &r.cons[ci]
	if cs.busy > 0 || cs.waiting {
		return nil // a wake-up for a consumer that got work meanwhile
	}
	if until, out := r.inOutage(now); out {
		r.push(until, kindPoll, ci, 0)
		return nil
	}
	n := min(r.sc.Consumers.Batch, r.limit-r.inService)
	if n <= 0 {
		cs.waiting = true
		r.waitSlot = append(r.waitSlot, ci)
		return nil
	}
	in := st.ReceiveInput{MaxMessages: n, WaitTimeSeconds: &r.zero}
	part := -1
	if r.sc.Consumers.Bind {
		part = int(ci) % r.shards
		in.Shard = &part
	}
	msgs, err := r.q.Receive(r.ctx, in)
	if err != nil {
		var se *st.Error
		if !errors.As(err, &se) {
			return err
		}
		msgs = nil // OverLimit: as if empty
	}
	if r.opt.Trace != nil {
		op := Op{At: now, Kind: OpReceive, Max: n, Shard: part}
		for _, m := range msgs {
			op.Bodies = append(op.Bodies, m.Body)
		}
		r.trace(op)
	}
	if len(msgs) == 0 {
		r.push(now+r.sc.Consumers.IdlePoll.D(), kindPoll, ci, 0)
		return nil
	}
	for _, m := range msgs {
		mi, ok := r.names[m.GroupID]
		if !ok {
			return fmt.Errorf("received a message of unknown tenant %q", m.GroupID)
		}
		mem := r.members[mi]
		c := r.classes[mem.class]
		c.Received++
		c.iRecv++
		if m.ReceiveCount == 1 {
			sent, first := m.SentTimestamp.Sub(Epoch), m.FirstReceiveTimestamp.Sub(Epoch)
			waited := first - sent
			c.FirstReceives++
			c.waits = append(c.waits, waited)
			c.interval = append(c.interval, waited)
			if r.sc.Hurt > 0 {
				mem.waits = append(mem.waits, waited)
			}
			_, n, _ := strings.Cut(m.Body, "#")
			if k, err := strconv.Atoi(n); err == nil && k >= 1 && k <= len(mem.recv) {
				mem.sent[k-1], mem.recv[k-1] = sent, first
				r.firsts = append(r.firsts, firstReceive{mi, k})
			}
			if r.opt.FirstReceive != nil {
				r.opt.FirstReceive(mem.name, sent, waited)
			}
		}
		if r.serving[m.MessageID] > 0 {
			c.Duplicates++
			c.iDup++
		}
		r.serving[m.MessageID]++
		r.current[m.MessageID] = m.ReceiptHandle
		latency, failure := r.dependency(mem.class, now)
		s := slot{handle: m.ReceiptHandle, id: m.MessageID, body: m.Body, member: mi, consumer: ci}
		s.fail = failure > 0 && r.fail.Float64() < failure
		var si int32
		if k := len(r.free); k > 0 {
			si = r.free[k-1]
			r.free = r.free[:k-1]
			s.gen = r.slots[si].gen + 1
			r.slots[si] = s
		} else {
			si = int32(len(r.slots))
			r.slots = append(r.slots, s)
		}
		cs.busy++
		r.inService++
		r.push(now+r.serviceTime()+latency, kindDone, si, 0)
		if hb := r.sc.Consumers.Heartbeat.D(); hb > 0 {
			r.push(now+hb, kindBeat, si, s.gen)
		}
	}
	// A first receive is ahead of an older message of its tenant when one
	// sent before it is still not received, after this receive.
	for _, f := range r.firsts {
		mem := r.members[f.member]
		mem.advance(now, r.expiry)
		if mem.head < f.k-1 {
			c := r.classes[mem.class]
			c.Ahead++
			c.iAhead++
		}
	}
	r.firsts = r.firsts[:0]
	return nil
}

// dependency is the latency added to a service of class ci started at
// now, and the probability that it fails.
func (r *runner) dependency(ci int32, now time.Duration) (time.Duration, float64) {
	var latency time.Duration
	failure := r.sc.Consumers.Failure
	for _, d := range r.deps {
		if now < d.From.D() || now >= d.To.D() || (d.classes != nil && !d.classes[ci]) {
			continue
		}
		latency += d.Latency.D()
		if d.Failure != nil {
			failure = *d.Failure
		}
	}
	return latency, failure
}

func (r *runner) serviceTime() time.Duration {
	s := r.sc.Consumers.Service
	switch s.Distribution {
	case "exponential":
		return time.Duration(r.svc.ExpFloat64() * float64(s.Mean))
	case "lognormal":
		// ln X ~ N(mu, sigma): the median is e^mu, the 99th percentile
		// e^(mu + 2.3263 sigma).
		mu := math.Log(float64(s.Median))
		sigma := (math.Log(float64(s.P99)) - mu) / 2.3263478740408408
		return time.Duration(math.Exp(mu + sigma*r.svc.NormFloat64()))
	}
	return s.Time.D()
}

// beat extends the visibility of the message in slot si, if it is still
// the one served there and its delivery is still current, and beats
// again a heartbeat later.
func (r *runner) beat(si int32, gen uint32, now time.Duration) error {
	s := r.slots[si]
	if s.gen != gen || s.handle == "" || r.current[s.id] != s.handle {
		return nil
	}
	errs, err := r.q.ChangeVisibility(r.ctx, []st.VisibilityChange{{ReceiptHandle: s.handle, Seconds: r.visibility}})
	if err == nil {
		err = errs[0]
	}
	r.trace(Op{At: now, Kind: OpChangeVisibility, Body: s.body, Visibility: r.visibility, Err: errCode(err)})
	if errors.As(err, new(*st.Error)) {
		return nil // too late: the message is visible again (a heartbeat longer than the timeout)
	}
	if err != nil {
		return fmt.Errorf("extending the visibility of a message of tenant %s: %w", r.members[s.member].name, err)
	}
	r.push(now+r.sc.Consumers.Heartbeat.D(), kindBeat, si, gen)
	return nil
}

func (r *runner) done(si int32, now time.Duration) error {
	s := r.slots[si]
	r.slots[si] = slot{gen: s.gen}
	r.free = append(r.free, si)
	mem := r.members[s.member]
	c := r.classes[mem.class]
	if r.serving[s.id]--; r.serving[s.id] == 0 {
		delete(r.serving, s.id)
	}
	current := r.current[s.id] == s.handle
	if current {
		delete(r.current, s.id)
	}
	switch {
	case !current:
		c.Late++
	case s.fail:
		c.Failed++
		if err := r.failed(s, now); err != nil {
			return fmt.Errorf("giving back a message of tenant %s: %w", mem.name, err)
		}
	default:
		r.del[0] = s.handle
		errs, err := r.q.Delete(r.ctx, r.del[:])
		if err == nil {
			err = errs[0]
		}
		if err != nil {
			return fmt.Errorf("deleting a message of tenant %s: %w", mem.name, err)
		}
		r.trace(Op{At: now, Kind: OpDelete, Body: s.body})
		c.Deleted++
		c.iDel++
		c.open--
		r.checkDrained(c, now)
	}
	cs := &r.cons[s.consumer]
	cs.busy--
	r.inService--
	if cs.busy == 0 {
		r.push(now, kindPoll, s.consumer, 0)
	}
	if len(r.waitSlot) > 0 {
		w := r.waitSlot[0]
		r.waitSlot = slices.Delete(r.waitSlot, 0, 1)
		r.cons[w].waiting = false
		r.push(now, kindPoll, w, 0)
	}
	return nil
}

// failed gives back a message whose service failed, as the consumers'
// on_failure says: left to time out, RetryMessage, or visible at once. A
// call the queue refuses (the delivery's visibility ran out meanwhile:
// the message is back anyway) is left at that.
func (r *runner) failed(s slot, now time.Duration) error {
	var err error
	switch r.sc.Consumers.OnFailure {
	case "retry":
		err = r.q.RetryMessage(r.ctx, s.handle, nil, "sim")
		r.trace(Op{At: now, Kind: OpRetry, Body: s.body, Err: errCode(err)})
	case "release":
		var errs []error
		errs, err = r.q.ChangeVisibility(r.ctx, []st.VisibilityChange{{ReceiptHandle: s.handle}})
		if err == nil {
			err = errs[0]
		}
		r.trace(Op{At: now, Kind: OpChangeVisibility, Body: s.body, Err: errCode(err)})
	}
	if errors.As(err, new(*st.Error)) {
		return nil
	}
	return err
}

// errCode is the queue's error code of err ("" for none).
func errCode(err error) string {
	if err == nil {
		return ""
	}
	return string(st.CodeOf(err))
}

// checkDrained notes when a class whose arrivals ended holds nothing any
// more (each of its messages deleted).
func (r *runner) checkDrained(c *class, now time.Duration) {
	if c.ended == c.Members && c.open == 0 && c.Drained < 0 {
		c.Drained = max(0, now-c.LastArrival)
	}
}

// figures sums the owner's tenant figures by class. Without fair
// delivery, and on a FIFO queue, the owner keeps none by tenant, and they
// are the run's own:
// the messages sent and not deleted, those in service, and the age of the
// oldest not yet received.
func (r *runner) figures() []st.TenantInfo {
	out := make([]st.TenantInfo, len(r.classes))
	if r.own {
		now := r.clk.Now().Sub(Epoch)
		for ci, c := range r.classes {
			out[ci].Ready = int(c.open)
		}
		for _, s := range r.slots {
			if s.handle != "" {
				ci := r.members[s.member].class
				out[ci].InFlight++
				out[ci].Ready--
			}
		}
		for _, m := range r.members {
			out[m.class].OldestAge = max(out[m.class].OldestAge, m.oldest(now, r.expiry))
		}
		return out
	}
	for _, ti := range r.q.Tenants(0) {
		mi, ok := r.names[ti.Name]
		if !ok {
			continue
		}
		f := &out[r.members[mi].class]
		f.Ready += ti.Ready
		f.InFlight += ti.InFlight
		f.OldestAge = max(f.OldestAge, ti.OldestAge)
		if f.Lanes == nil {
			f.Lanes = map[string]int{}
		}
		f.Lanes["backlog"] += ti.Lanes["backlog"]
	}
	return out
}

func (r *runner) sample(now time.Duration) {
	info := r.figures()
	for ci, c := range r.classes {
		ti := info[ci]
		s := Sample{At: now, Tenant: c.Name, Sent: c.iSent, Received: c.iRecv, Deleted: c.iDel,
			Backlog: ti.Ready + ti.InFlight, InFlight: ti.InFlight, Sidelined: ti.Lanes["backlog"], Oldest: ti.OldestAge,
			FirstReceives: int64(len(c.interval)), Wait: quantiles(c.interval), Duplicates: c.iDup, Ahead: c.iAhead}
		r.samples = append(r.samples, s)
		c.iSent, c.iRecv, c.iDel, c.iDup, c.iAhead, c.interval = 0, 0, 0, 0, 0, c.interval[:0]
	}
}

func (r *runner) result() *Result {
	r.waitsBySend()
	res := &Result{Scenario: r.sc, Samples: r.samples, Events: r.events, Windows: r.windows()}
	for _, s := range r.samples {
		switch {
		case s.Oldest > Standing:
			res.CaughtUp = -1
		case res.CaughtUp < 0:
			res.CaughtUp = s.At
		}
	}
	for _, qs := range r.eng.Stats() {
		if qs.Name == r.sc.QueueName() {
			res.Queue = qs
		}
	}
	if r.sc.Hurt > 0 {
		for _, m := range r.members {
			w := quantiles(m.waits)
			if w.P99 > r.sc.Hurt.D() {
				r.classes[m.class].Hurt++
			}
			res.Members = append(res.Members, MemberResult{Name: m.name, Class: r.classes[m.class].Name, Wait: w})
		}
	}
	// What each class holds at the end, and what went to the dead-letter
	// queue, counted message by message: the rest of what it sent and did
	// not delete was dropped (an age limit, a ladder without a dead-letter
	// queue, retention).
	held, dead := r.held(r.q), r.held(r.dlq)
	for ci, c := range r.classes {
		tr := c.TenantResult
		tr.Wait = quantiles(c.waits)
		tr.Backlog, tr.DeadLettered = held[ci], dead[ci]
		tr.Dropped = tr.Sent - tr.Deleted - int64(held[ci]) - int64(dead[ci])
		for _, sm := range r.samples {
			if sm.Tenant == c.Name {
				tr.SidelinedPeak = max(tr.SidelinedPeak, sm.Sidelined)
			}
		}
		res.Tenants = append(res.Tenants, tr)
		res.Messages += c.Sent
	}
	return res
}

// waitsBySend fills in each sample's SentWait and SentOpen: the waits of
// the messages sent since the sample before, by tenant (or class).
func (r *runner) waitsBySend() {
	nc := len(r.classes)
	n := len(r.samples) / nc
	if n == 0 {
		return
	}
	every := r.sc.Sample.D()
	waits := make([][]time.Duration, len(r.samples))
	open := make([]int64, len(r.samples))
	for _, m := range r.members {
		for k, s := range m.sent {
			if s < 0 {
				continue
			}
			// A sample at t has what happened before t since the one
			// before it (a sample comes first at equal times).
			j := min(int(s/every), n-1)*nc + int(m.class)
			if m.recv[k] < 0 {
				open[j]++
			} else {
				waits[j] = append(waits[j], m.recv[k]-s)
			}
		}
	}
	for j := range r.samples {
		r.samples[j].SentWait, r.samples[j].SentOpen = openQuantiles(waits[j], open[j]), open[j]
	}
}

// windows are the figures of the scenario's windows.
func (r *runner) windows() []WindowResult {
	var out []WindowResult
	for _, w := range r.sc.Windows {
		wr := WindowResult{Window: w, AllServed: -1}
		var waits []time.Duration
		var open int64
		last := time.Duration(-1)
		for _, m := range r.members {
			if len(w.Tenants) > 0 && !slices.Contains(w.Tenants, r.classes[m.class].Name) {
				continue
			}
			for k, s := range m.sent {
				if s < w.From.D() || s >= w.To.D() && w.To < r.sc.Duration {
					continue // refused (-1) or sent outside it (a window to the end has the sends at the end)
				}
				wr.Sent++
				if m.recv[k] < 0 {
					open++
					continue
				}
				waits = append(waits, m.recv[k]-s)
				last = max(last, m.recv[k])
			}
		}
		wr.FirstReceives, wr.Wait = int64(len(waits)), quantiles(waits)
		if open == 0 && wr.Sent > 0 {
			wr.AllServed = last
		}
		out = append(out, wr)
	}
	return out
}

// held counts the messages q holds, by class (none for a nil q).
func (r *runner) held(q *partition.Owner) []int {
	out := make([]int, len(r.classes))
	if q == nil {
		return out
	}
	q.Messages(0, 0, func(m *queue.Msg) bool {
		if mi, ok := r.names[m.Group()]; ok {
			out[r.members[mi].class]++
		}
		return false // counted, not copied
	})
	return out
}

// quantiles are the nearest-rank 50th and 99th percentiles and the
// maximum of ds (which it sorts).
func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return Quantiles{P50: rank(0.50), P99: rank(0.99), Max: ds[len(ds)-1]}
}

// openQuantiles are the quantiles of ds and of open more that have no
// end (they rank above every wait of ds): a quantile that falls on one of
// them is -1, unknown. It sorts ds.
func openQuantiles(ds []time.Duration, open int64) Quantiles {
	n := len(ds) + int(open)
	if n == 0 {
		return Quantiles{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := min(max(int(math.Ceil(p*float64(n)))-1, 0), n-1)
		if i >= len(ds) {
			return -1
		}
		return ds[i]
	}
	return Quantiles{P50: rank(0.50), P99: rank(0.99), Max: rank(1)}
}
