package topic

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/filterpolicy"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Queues reaches the queues subscriptions deliver into, on this node or
// on the one that owns them.
type Queues interface {
	// Deliver sends messages into the queue queueARN names, each from its
	// origin (a publish of this topic: queue.Origin) when from is not
	// nil: errs[i] is in[i]'s refusal; err refuses the whole call
	// (ErrNoQueue: there is no such queue).
	Deliver(ctx context.Context, queueARN string, in []st.SendInput, from []queue.Origin) (errs []error, err error)
	// Marks reads how far the queue took each origin partition.
	Marks(ctx context.Context, queueARN string) (map[uint64]uint64, error)
}

// ErrNoQueue: a subscription's queue does not exist.
var ErrNoQueue = errors.New("topic: the subscription's queue does not exist")

// Formatter makes the message a subscription's queue gets for a publish.
// An error refuses the publish for that subscription for good (raw
// delivery of more attributes than SQS takes).
type Formatter func(info *record.TopicInfo, subID string, sub record.Subscription, pub *record.Record) (st.SendInput, error)

// deliverBatch is how many publishes a round hands one subscription's
// queue at once (SendMessageBatch's limit).
const deliverBatch = 10

// cursor is how far one subscription went. mark is the last publish its
// queue took (read from the queue's marks: durable there, so a cursor
// that starts again starts at it); scanned the last one it is done with
// (taken, filtered out, or refused for good). Publishes up to the lowest
// scanned of all cursors may go.
type cursor struct {
	known         bool // mark read from the queue
	mark, scanned uint64
}

// deliveryState is the owner's delivery side: its cursors, the filter
// policies compiled, and what wakes the delivery loop.
type deliveryState struct {
	mu       sync.Mutex
	cursors  map[string]*cursor
	policies map[string]*filterpolicy.Policy // by scope and text
	wake     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// Figures: publishes, messages taken by a queue, filtered out, refused
	// for good (and dropped, or dead-lettered: Dead).
	Published, Delivered, Filtered, Refused, Dead atomic.Int64
	// lag: from publish to a queue taking it, per st.FirstAttemptBounds.
	lagMu  sync.Mutex
	lag    []int64
	lagSum time.Duration
	// first: from publish to the first receive of it by any
	// subscription's consumer (FirstAttempt); firstSeen the publishes
	// timed already (firstOrder: in the order they were, for the bound).
	firstMu    sync.Mutex
	first      st.AgeHistogram
	firstSeen  map[uint64]struct{}
	firstOrder []uint64
}

// maxFirstSeen bounds the publishes a topic remembers as received: one
// received again by another subscription after that many others is timed
// again.
const maxFirstSeen = 1 << 16

// FirstAttempt notes the first receive (at) of a message delivered from
// this topic's publish (by its origin), in any subscription's queue: the
// first of them for a publish times how long its first subscriber took
// (AgeOfFirstSubscriberFirstAttempt). Figures only, in memory: after the
// topic moves to another node, a publish received by a second
// subscription may be timed again there.
func (o *Owner) FirstAttempt(from queue.Origin, at time.Time) {
	if from.Partition != uint64(o.p) || from.At == 0 {
		return
	}
	d := &o.delivery
	d.firstMu.Lock()
	defer d.firstMu.Unlock()
	if _, ok := d.firstSeen[from.Pos]; ok {
		return
	}
	if d.firstSeen == nil {
		d.firstSeen = map[uint64]struct{}{}
	}
	d.firstSeen[from.Pos] = struct{}{}
	d.firstOrder = append(d.firstOrder, from.Pos)
	if len(d.firstOrder) > maxFirstSeen {
		delete(d.firstSeen, d.firstOrder[0])
		d.firstOrder = d.firstOrder[1:] // append copies the live part when it grows
	}
	d.first.Observe(max(0, at.Sub(time.UnixMilli(from.At))))
}

// observeLag counts a publish a queue took lag after it was published.
func (d *deliveryState) observeLag(lag time.Duration) {
	i, _ := slices.BinarySearch(st.FirstAttemptBounds, lag.Seconds())
	d.lagMu.Lock()
	if d.lag == nil {
		d.lag = make([]int64, len(st.FirstAttemptBounds)+1)
	}
	d.lag[i]++
	d.lagSum += lag
	d.lagMu.Unlock()
}

func (d *deliveryState) init() {
	d.cursors = map[string]*cursor{}
	d.policies = map[string]*filterpolicy.Policy{}
	d.wake = make(chan struct{}, 1)
	d.done = make(chan struct{})
}

func (d *deliveryState) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *deliveryState) stop() { d.stopOnce.Do(func() { close(d.done) }) }

// Figures are the topic's counters since it was taken here. A delivery
// is a publish a subscription's queue took (Delivered), a filter kept from
// it (Filtered), or a queue refused for good (Refused: dropped, or Dead:
// sent to the subscription's dead-letter queue).
type Figures struct {
	Published, Delivered, Filtered, Refused, Dead int64
	// Held is how many publishes the topic holds for a subscription that
	// has not taken them yet: its backlog.
	Held int64
	// Lag counts deliveries by the time from their publish to a queue
	// taking them, per sluicetype.FirstAttemptBounds (the last bucket:
	// above them all); LagSum is its sum.
	Lag    []int64
	LagSum time.Duration
	// FirstAttempt counts publishes by the time from their publish to the
	// first receive of them by any subscription's consumer
	// (AgeOfFirstSubscriberFirstAttempt).
	FirstAttempt st.AgeHistogram
}

// Figures returns the topic's counters.
func (o *Owner) Figures() Figures {
	d := &o.delivery
	f := Figures{Published: d.Published.Load(), Delivered: d.Delivered.Load(), Filtered: d.Filtered.Load(),
		Refused: d.Refused.Load(), Dead: d.Dead.Load()}
	o.mu.Lock()
	f.Held = int64(o.t.Held())
	o.mu.Unlock()
	d.lagMu.Lock()
	f.Lag, f.LagSum = slices.Clone(d.lag), d.lagSum
	d.lagMu.Unlock()
	d.firstMu.Lock()
	f.FirstAttempt = d.first.Clone()
	d.firstMu.Unlock()
	return f
}

// progress is what Run compares between rounds: whether a round moved a
// cursor.
func (f Figures) progress() [4]int64 { return [4]int64{f.Delivered, f.Filtered, f.Refused, f.Dead} }

// Run delivers until the owner is relinquished or ctx ends: a round after
// every publish or subscription change, at once again while rounds make
// progress through a backlog, and after retry while a queue could not
// take what it was given.
func (o *Owner) Run(ctx context.Context, retry time.Duration) {
	d := &o.delivery
	t := time.NewTimer(retry)
	defer t.Stop()
	for {
		before := o.Figures().progress()
		more := o.DeliverOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-d.done:
			return
		default:
		}
		if more && o.Figures().progress() != before {
			continue // a backlog: on at once while rounds make progress
		}
		t.Reset(retry)
		var again <-chan time.Time
		if more {
			again = t.C // a queue could not take it: in a while
		}
		select {
		case <-ctx.Done():
			return
		case <-d.done:
			return
		case <-d.wake:
		case <-again:
		}
	}
}

// DeliverOnce runs one round: each subscription's queue gets what its
// cursor has not taken yet, up to a batch. It reports whether some
// subscription has more to do (a batch was full, or a queue refused for a
// while): the caller runs another round.
func (o *Owner) DeliverOnce(ctx context.Context) (more bool) {
	o.mu.Lock()
	o.drainLocked()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	info := o.t.Info()
	d := &o.delivery
	d.mu.Lock()
	for id := range d.cursors {
		if _, ok := info.Subs[id]; !ok {
			delete(d.cursors, id) // unsubscribed
		}
	}
	d.mu.Unlock()
	o.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(info.Subs)) {
		sub := info.Subs[id]
		c := o.cursorOf(ctx, id, sub)
		if c == nil {
			more = true // its queue did not say where it is: again later
			continue
		}
		o.mu.Lock()
		pubs := slices.Clone(o.t.After(c.scanned, deliverBatch))
		o.mu.Unlock()
		if len(pubs) == 0 {
			continue
		}
		if o.deliver(ctx, &info, id, sub, c, pubs) || len(pubs) == deliverBatch {
			more = true
		}
	}
	o.trim()
	return more
}

// cursorOf returns subscription id's cursor, reading its queue's mark the
// first time (nil when the queue did not answer).
func (o *Owner) cursorOf(ctx context.Context, id string, sub record.Subscription) *cursor {
	d := &o.delivery
	d.mu.Lock()
	c := d.cursors[id]
	d.mu.Unlock()
	if c != nil {
		return c
	}
	marks, err := o.h.Queues.Marks(ctx, sub.Endpoint)
	switch {
	case errors.Is(err, ErrNoQueue):
		marks = nil // nothing taken: its deliveries are dropped, or dead-lettered
	case err != nil:
		o.h.Log.Warn("reading a subscription's queue's marks failed; retrying", "topic", o.name(), "queue", sub.Endpoint, "err", err)
		return nil
	}
	m := marks[uint64(o.p)]
	// Past what it was subscribed after, even if its queue took nothing
	// yet (or took this topic's publishes through an older subscription).
	c = &cursor{known: true, mark: m, scanned: max(m, sub.From)}
	d.mu.Lock()
	if old := d.cursors[id]; old != nil {
		c = old
	} else {
		d.cursors[id] = c
	}
	d.mu.Unlock()
	return c
}

// deliver hands pubs (after c.scanned, in order) to one subscription's
// queue and moves its cursor over what is done. It reports whether there
// is more to do: the queue refused something for a while (to retry), or
// not all of pubs fit in one call.
func (o *Owner) deliver(ctx context.Context, info *record.TopicInfo, id string, sub record.Subscription, c *cursor, pubs []*record.Record) (more bool) {
	d := &o.delivery
	policy := o.policyOf(sub)
	// entry: a publish, and what became of it.
	type entry struct {
		pub *record.Record
		idx int // in the call (-1: filtered out, or refused by the formatter)
		// msg and why: a message the formatter refused (why), for good.
		msg st.SendInput
		why error
	}
	entries := make([]entry, 0, len(pubs))
	var in []st.SendInput
	var from []queue.Origin
	after := c.mark
	size := 0 // of the call: a queue takes at most a batch's bytes at once
	cut := false
	for _, p := range pubs {
		if !matches(policy, p) {
			entries = append(entries, entry{pub: p, idx: -1})
			continue
		}
		m, err := o.h.Format(info, id, sub, p)
		if err != nil {
			entries = append(entries, entry{pub: p, idx: -1, msg: m, why: err})
			continue
		}
		if n := message.Size(&m); len(in) > 0 && size+n > message.MaxBatchBytes {
			cut = true // the rest in the next call
			break
		} else {
			size += n
		}
		entries = append(entries, entry{pub: p, idx: len(in)})
		in = append(in, m)
		from = append(from, queue.Origin{Partition: uint64(o.p), Pos: p.Number, After: after, At: p.Published})
		after = p.Number
	}
	var errs []error
	if len(in) > 0 {
		var err error
		errs, err = o.h.Queues.Deliver(ctx, sub.Endpoint, in, from)
		switch {
		case errors.Is(err, ErrNoQueue):
			// SNS drops what a missing queue cannot take (or, with a
			// RedrivePolicy, dead-letters it).
			errs = make([]error, len(in))
			for i := range errs {
				errs[i] = err
			}
		case err != nil:
			o.h.Log.Warn("delivering to a subscription's queue failed; retrying", "topic", o.name(), "queue", sub.Endpoint, "err", err)
			return true
		}
	}
	// The cursor moves over each publish once it is done with, in order;
	// the figures count what it moved over (a round that retries moves
	// nothing and counts nothing).
	for _, e := range entries {
		switch {
		case e.why != nil:
			if !o.refused(ctx, sub, e.pub, e.msg, e.why) {
				return true // its dead-letter queue did not take it: again later
			}
		case e.idx < 0:
			d.Filtered.Add(1)
		default:
			err := errs[e.idx]
			switch {
			case err == nil:
				d.mu.Lock()
				c.mark = e.pub.Number
				d.mu.Unlock()
				d.Delivered.Add(1)
				d.observeLag(o.h.Clock.Now().Sub(time.UnixMilli(e.pub.Published)))
			case transient(err) && !errors.Is(err, ErrNoQueue):
				return true // this one and what follows: again later
			default:
				if !o.refused(ctx, sub, e.pub, in[e.idx], err) {
					return true // its dead-letter queue did not take it: again later
				}
			}
		}
		d.mu.Lock()
		c.scanned = e.pub.Number
		d.mu.Unlock()
	}
	return cut
}

// refused deals with a publish a subscription's queue refused for good:
// with a RedrivePolicy it goes to the subscription's dead-letter queue
// (as the queue would have got it), otherwise it is dropped, as SNS does.
// It reports false when the dead-letter queue did not take it (to try
// again later).
func (o *Owner) refused(ctx context.Context, sub record.Subscription, p *record.Record, m st.SendInput, why error) bool {
	d := &o.delivery
	dlq := deadLetterTarget(sub)
	if dlq == "" || m.Body == "" {
		d.Refused.Add(1)
		o.h.Log.Warn("a subscription's queue refused a message for good; dropped", "topic", o.name(), "queue", sub.Endpoint, "message_id", p.Payload.ID, "err", why)
		return true
	}
	errs, err := o.h.Queues.Deliver(ctx, dlq, []st.SendInput{m}, nil)
	if err == nil && errs[0] != nil {
		err = errs[0]
	}
	if err != nil && (errors.Is(err, ErrNoQueue) || !transient(err)) {
		d.Refused.Add(1)
		o.h.Log.Warn("a message refused by a subscription's queue and by its dead-letter queue; dropped", "topic", o.name(), "queue", sub.Endpoint, "dead_letter_queue", dlq, "message_id", p.Payload.ID, "err", err)
		return true
	}
	if err != nil {
		return false
	}
	d.Dead.Add(1)
	return true
}

// trim lets go of the publishes every subscription is done with.
func (o *Owner) trim() {
	d := &o.delivery
	o.mu.Lock()
	defer o.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	low := o.t.LastNumber()
	for id := range o.t.info.Subs {
		c := d.cursors[id]
		if c == nil || !c.known {
			return // not known yet: it may need anything
		}
		low = min(low, c.scanned)
	}
	o.t.Trim(low)
}

// policyOf is a subscription's compiled filter policy (nil: none, which
// admits everything).
func (o *Owner) policyOf(sub record.Subscription) *filterpolicy.Policy {
	text := sub.Attrs["FilterPolicy"]
	if text == "" {
		return nil
	}
	scopeName := sub.Attrs["FilterPolicyScope"]
	key := scopeName + "\x00" + text
	d := &o.delivery
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.policies[key]; ok {
		return p
	}
	scope, err := filterpolicy.ParseScope(scopeName)
	if scopeName == "" {
		scope, err = filterpolicy.MessageAttributes, nil
	}
	var p *filterpolicy.Policy
	if err == nil {
		p, err = filterpolicy.Parse(text, scope)
	}
	if err != nil {
		// Checked when it was set: a policy that no longer parses admits
		// nothing rather than everything.
		o.h.Log.Error("a subscription's filter policy does not parse; it admits nothing", "topic", o.name(), "queue", sub.Endpoint, "err", err)
		p = refuseAll
	}
	d.policies[key] = p
	return p
}

// refuseAll marks a policy that admits nothing.
var refuseAll = &filterpolicy.Policy{}

func matches(p *filterpolicy.Policy, pub *record.Record) bool {
	switch p {
	case nil:
		return true
	case refuseAll:
		return false
	}
	attrs := make(map[string]filterpolicy.Attribute, len(pub.Payload.Attrs))
	for name, a := range pub.Payload.Attrs {
		if a.StringValue != nil {
			attrs[name] = filterpolicy.Attribute{Type: a.DataType, Value: *a.StringValue}
		}
	}
	return p.Match(attrs, pub.Payload.Body)
}

// transient reports whether a refusal is for a while (the queue is
// moving, throttled, or failed to write), not for good.
func transient(err error) bool {
	switch st.CodeOf(err) {
	case st.CodeServiceUnavailable, st.CodeRequestThrottled, st.CodeInternal:
		return true
	}
	return false
}

// deadLetterTarget is the dead-letter queue's ARN of a subscription's
// RedrivePolicy ("" when none; checked when it was set).
func deadLetterTarget(sub record.Subscription) string {
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if s := sub.Attrs["RedrivePolicy"]; s == "" || json.Unmarshal([]byte(s), &rp) != nil {
		return ""
	}
	return rp.DeadLetterTargetArn
}

// name is the topic's name, for logs (it never changes).
func (o *Owner) name() string {
	if n := o.named.Load(); n != nil {
		return *n
	}
	return ""
}
