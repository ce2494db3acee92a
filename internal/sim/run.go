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
	"time"

	"github.com/sluicemq/sluice/internal/attr"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/partition"
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
	// its tenant, when it was sent (since the start of the run) and how
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
	// Receive: MaxMessages, the partition it was bound to (-1: any), and
	// the bodies received, in the order the queue gave them.
	Max, Partition int
	Bodies         []string
	// Delete, ChangeVisibility, Retry: the body of the message whose
	// delivery is settled; Visibility the new timeout (ChangeVisibility).
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
}

// TenantResult are one tenant's figures over the run.
type TenantResult struct {
	Name string
	// Sent counts the sends the queue took; Throttled those it refused
	// with RequestThrottled (the tenant's send limit), Refused those it
	// refused otherwise. A refused message is not sent again.
	Sent, Throttled, Refused int64
	// Received counts deliveries (first ones and later), Deleted the
	// deletes of a delivery still current, Failed the deliveries the
	// consumers failed (left to time out), Late the deliveries served
	// after they had been delivered again (their delete does nothing).
	Received, Deleted, Failed, Late int64
	// FirstReceives counts first deliveries; Wait is how long they waited
	// since their send (the owner's timestamps).
	FirstReceives int64
	Wait          Quantiles
	// LastArrival is when the tenant last sent (-1: never); Drained how
	// long after it the tenant held no message (-1: not within the run).
	LastArrival, Drained time.Duration
	// Backlog is what the tenant held at the end (ready and in flight).
	Backlog int
}

// Quantiles summarise waits.
type Quantiles struct{ P50, P99, Max time.Duration }

// Sample is one tenant's figures at one moment of the run.
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
}

type kind uint8

const (
	kindSample kind = iota // ordered first at equal times: a sample sees the state before what happens at its time
	kindArrival
	kindDone
	kindPoll
)

type event struct {
	at   time.Duration
	seq  uint64
	kind kind
	i    int32 // the tenant, the consumer, or the service slot
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

type tenantRun struct {
	TenantResult
	arr      *arrivals
	ended    bool  // no arrival comes any more
	open     int64 // sent and not deleted
	bodies   int64 // sends tried, numbering the bodies
	waits    []time.Duration
	interval []time.Duration
	iSent    int64
	iRecv    int64
	iDel     int64
}

type consumer struct {
	busy    int  // messages in service
	waiting bool // for a free slot of the concurrency limit
}

// slot is a message in service.
type slot struct {
	handle, id, body string
	tenant           int32
	consumer         int32
}

type runner struct {
	sc    *Scenario
	opt   Options
	ctx   context.Context
	clk   *clock.Fake
	eng   *engine.Engine
	q     *partition.Owner
	h     events
	seq   uint64
	end   time.Duration
	ts    []*tenantRun
	names map[string]int32
	cons  []consumer
	// slots are the messages in service, free the unused ones.
	slots     []slot
	free      []int32
	inService int
	limit     int
	waitSlot  []int32 // consumers waiting for a slot, in order
	svc, fail *rand.Rand
	// current maps a message id in service to the handle of its latest
	// delivery: a delivery served after the message was delivered again
	// is late (its delete would do nothing).
	current map[string]string
	samples []Sample
	events  int64
	zero    int
	// send and del are the one-entry arguments of each Send and Delete,
	// reused: the owner reads them during the call and keeps neither.
	send [1]st.SendInput
	del  [1]string
}

// Run simulates sc. It drives a real engine on a fake clock from the
// calling goroutine, and closes it before it returns. ctx cancels the
// run.
func Run(ctx context.Context, sc *Scenario, opt Options) (*Result, error) {
	r := &runner{sc: sc, opt: opt, ctx: ctx, clk: clock.NewFake(Epoch), end: sc.Duration.D(), names: map[string]int32{}, current: map[string]string{}}
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
	r.svc, r.fail = stream(1), stream(2)
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		tr := &tenantRun{TenantResult: TenantResult{Name: t.Name, LastArrival: -1, Drained: -1}, arr: newArrivals(t, stream(100+uint64(i)))}
		r.ts = append(r.ts, tr)
		r.names[t.Name] = int32(i)
		r.nextArrival(int32(i))
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
		r.push(time.Duration(int64(c.IdlePoll)*int64(i)/int64(c.Count)), kindPoll, int32(i))
	}
	// Samples are taken every Sample and at the end; loop pushes each
	// when it handles the one before, so that the event heap stays small
	// (all of a day's samples in it made every push and pop slower).
	r.push(min(sc.Sample.D(), r.end), kindSample, 0)
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
		dlq, err := r.eng.QueueNameFromARN(p.DeadLetterTargetArn)
		if err != nil || dlq == QueueName {
			return fmt.Errorf("%w: queue.RedrivePolicy: deadLetterTargetArn must be a queue of arn:aws:sqs:%s:%s:, other than %q", ErrScenario, Region, AccountID, QueueName)
		}
		if _, err := r.eng.CreateQueue(ctx, dlq, nil, nil); err != nil {
			return fmt.Errorf("%w: queue.RedrivePolicy: creating the dead-letter queue: %w", ErrScenario, err)
		}
	}
	if _, err := r.eng.CreateQueue(ctx, QueueName, r.sc.Queue, nil); err != nil {
		return fmt.Errorf("%w: queue: %w", ErrScenario, err)
	}
	q, err := r.eng.Queue(QueueName)
	if err != nil {
		return err
	}
	r.q = q
	return nil
}

func (r *runner) push(at time.Duration, k kind, i int32) {
	r.seq++
	r.h.push(event{at: at, seq: r.seq, kind: k, i: i})
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
		case kindSample:
			r.sample(ev.at)
			if ev.at < r.end {
				r.push(min(ev.at+r.sc.Sample.D(), r.end), kindSample, 0)
			}
		}
		if err != nil {
			return fmt.Errorf("sim: at %s: %w", ev.at, err)
		}
	}
	return nil
}

func (r *runner) nextArrival(i int32) {
	t := r.ts[i]
	at, ok := t.arr.next()
	if !ok {
		t.ended = true
		r.checkDrained(t, t.LastArrival)
		return
	}
	d := time.Duration(math.Round(at * float64(time.Second)))
	r.push(d, kindArrival, i)
}

func (r *runner) arrive(i int32, now time.Duration) error {
	t := r.ts[i]
	t.bodies++
	in := st.SendInput{Body: t.Name + "#" + strconv.FormatInt(t.bodies, 10), GroupID: t.Name, SenderID: t.Name}
	r.send[0] = in
	_, _, err := r.q.Send(r.ctx, r.send[:], nil, false)
	if r.opt.Trace != nil {
		op := Op{At: now, Kind: OpSend, Tenant: t.Name, Body: in.Body}
		if se := (*st.Error)(nil); errors.As(err, &se) {
			op.Err = string(st.CodeOf(err))
		}
		r.opt.Trace(op)
	}
	switch {
	case err == nil:
		t.Sent++
		t.iSent++
		t.open++
		t.LastArrival = now
	case st.CodeOf(err) == st.CodeRequestThrottled:
		t.Throttled++
	case errors.As(err, new(*st.Error)):
		t.Refused++
	default:
		return err
	}
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
	c := &r.cons[ci]
	if c.busy > 0 || c.waiting {
		return nil // a wake-up for a consumer that got work meanwhile
	}
	if until, out := r.inOutage(now); out {
		r.push(until, kindPoll, ci)
		return nil
	}
	n := min(r.sc.Consumers.Batch, r.limit-r.inService)
	if n <= 0 {
		c.waiting = true
		r.waitSlot = append(r.waitSlot, ci)
		return nil
	}
	msgs, err := r.q.Receive(r.ctx, st.ReceiveInput{MaxMessages: n, WaitTimeSeconds: &r.zero})
	if err != nil {
		var se *st.Error
		if !errors.As(err, &se) {
			return err
		}
		msgs = nil // OverLimit: as if empty
	}
	if r.opt.Trace != nil {
		op := Op{At: now, Kind: OpReceive, Max: n, Partition: -1}
		for _, m := range msgs {
			op.Bodies = append(op.Bodies, m.Body)
		}
		r.opt.Trace(op)
	}
	if len(msgs) == 0 {
		r.push(now+r.sc.Consumers.IdlePoll.D(), kindPoll, ci)
		return nil
	}
	for _, m := range msgs {
		ti, ok := r.names[m.GroupID]
		if !ok {
			return fmt.Errorf("received a message of unknown tenant %q", m.GroupID)
		}
		t := r.ts[ti]
		t.Received++
		t.iRecv++
		if m.ReceiveCount == 1 {
			sent := m.SentTimestamp.Sub(Epoch)
			waited := m.FirstReceiveTimestamp.Sub(m.SentTimestamp)
			t.FirstReceives++
			t.waits = append(t.waits, waited)
			t.interval = append(t.interval, waited)
			if r.opt.FirstReceive != nil {
				r.opt.FirstReceive(t.Name, sent, waited)
			}
		}
		r.current[m.MessageID] = m.ReceiptHandle
		s := slot{handle: m.ReceiptHandle, id: m.MessageID, body: m.Body, tenant: ti, consumer: ci}
		var si int32
		if k := len(r.free); k > 0 {
			si = r.free[k-1]
			r.free = r.free[:k-1]
			r.slots[si] = s
		} else {
			si = int32(len(r.slots))
			r.slots = append(r.slots, s)
		}
		c.busy++
		r.inService++
		r.push(now+r.serviceTime(), kindDone, si)
	}
	return nil
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

func (r *runner) done(si int32, now time.Duration) error {
	s := r.slots[si]
	r.slots[si] = slot{}
	r.free = append(r.free, si)
	t := r.ts[s.tenant]
	current := r.current[s.id] == s.handle
	if current {
		delete(r.current, s.id)
	}
	switch {
	case !current:
		t.Late++
	case r.sc.Consumers.Failure > 0 && r.fail.Float64() < r.sc.Consumers.Failure:
		t.Failed++ // left in flight: it comes back after its visibility timeout
	default:
		r.del[0] = s.handle
		errs, err := r.q.Delete(r.ctx, r.del[:])
		if err == nil {
			err = errs[0]
		}
		if r.opt.Trace != nil {
			r.opt.Trace(Op{At: now, Kind: OpDelete, Body: s.body})
		}
		if err != nil {
			return fmt.Errorf("deleting a message of tenant %s: %w", t.Name, err)
		}
		t.Deleted++
		t.iDel++
		t.open--
		r.checkDrained(t, now)
	}
	c := &r.cons[s.consumer]
	c.busy--
	r.inService--
	if c.busy == 0 {
		r.push(now, kindPoll, s.consumer)
	}
	if len(r.waitSlot) > 0 {
		w := r.waitSlot[0]
		r.waitSlot = slices.Delete(r.waitSlot, 0, 1)
		r.cons[w].waiting = false
		r.push(now, kindPoll, w)
	}
	return nil
}

// checkDrained notes when a tenant whose arrivals ended holds nothing
// any more (each of its messages deleted).
func (r *runner) checkDrained(t *tenantRun, now time.Duration) {
	if t.ended && t.open == 0 && t.Drained < 0 {
		t.Drained = max(0, now-t.LastArrival)
	}
}

func (r *runner) sample(now time.Duration) {
	info := map[string]st.TenantInfo{}
	for _, ti := range r.q.Tenants(0) {
		info[ti.Name] = ti
	}
	for _, t := range r.ts {
		ti := info[t.Name]
		s := Sample{At: now, Tenant: t.Name, Sent: t.iSent, Received: t.iRecv, Deleted: t.iDel,
			Backlog: ti.Ready + ti.InFlight, InFlight: ti.InFlight, Sidelined: ti.Lanes["backlog"], Oldest: ti.OldestAge,
			FirstReceives: int64(len(t.interval)), Wait: quantiles(t.interval)}
		r.samples = append(r.samples, s)
		t.iSent, t.iRecv, t.iDel, t.interval = 0, 0, 0, t.interval[:0]
	}
}

func (r *runner) result() *Result {
	res := &Result{Scenario: r.sc, Samples: r.samples, Events: r.events}
	for _, qs := range r.eng.Stats() {
		if qs.Name == QueueName {
			res.Queue = qs
		}
	}
	info := map[string]st.TenantInfo{}
	for _, ti := range r.q.Tenants(0) {
		info[ti.Name] = ti
	}
	for _, t := range r.ts {
		tr := t.TenantResult
		tr.Wait = quantiles(t.waits)
		tr.Backlog = info[t.Name].Ready + info[t.Name].InFlight
		res.Tenants = append(res.Tenants, tr)
		res.Messages += t.Sent
	}
	return res
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
