package sluice

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

// PeekFilter selects messages for Peek, PurgeFiltered and RedriveFiltered.
// Zero fields match everything.
type PeekFilter struct {
	Tenant   string
	Source   string // DeadLetterQueueSourceArn (or the source queue's name)
	Reason   string // failure reason (RetryMessage / RejectMessage / VisibilityTimeout / MaxReceiveCount / MaxMessageAge)
	Since    time.Time
	Until    time.Time
	Contains string // body substring
	// Max is the page size (default 10, at most 100); After is the Next
	// token of the previous page.
	Max   int
	After string
}

// PeekedMessage is a message seen without receiving it.
type PeekedMessage struct {
	MessageID    string    `json:"message_id"`
	Body         string    `json:"body"`
	GroupID      string    `json:"group_id,omitempty"`
	Tenant       string    `json:"tenant,omitempty"`
	Source       string    `json:"source_arn,omitempty"`
	Sent         time.Time `json:"sent"`
	ReceiveCount int       `json:"receive_count"`
	State        string    `json:"state"` // visible, in_flight, delayed
	RetryLevel   int       `json:"retry_level,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
	FirstFailure time.Time `json:"first_failure,omitempty"`
}

func (f PeekFilter) matchIndex(m *queue.Msg, srcArn string) bool {
	if f.Tenant != "" && m.Tenant() != f.Tenant {
		return false
	}
	if f.Source != "" && m.DLQSource() != f.Source && m.DLQSource() != srcArn {
		return false
	}
	if f.Reason != "" && (m.Fail() == nil || m.Fail().Reason != f.Reason) {
		return false
	}
	if !f.Since.IsZero() && m.Sent < f.Since.UnixMilli() {
		return false
	}
	if !f.Until.IsZero() && m.Sent >= f.Until.UnixMilli() {
		return false
	}
	return true
}

// scan returns copies of the queue's messages that match the filter, in
// send order, after the token, up to max (0: no limit), and the token to
// continue from. Bodies are read from disk only when bodies is set or the
// filter needs them (ps is nil otherwise).
func (b *broker) scan(qs *queueState, f PeekFilter, max int, bodies bool) ([]queue.Msg, []*payload, string, error) {
	var after uint64
	if f.After != "" {
		n, err := strconv.ParseUint(f.After, 10, 64)
		if err != nil {
			return nil, nil, "", st.Errorf(st.CodeInvalidParameterValue, "Invalid value for the parameter NextToken.")
		}
		after = n
	}
	srcArn := ""
	if f.Source != "" && !strings.HasPrefix(f.Source, "arn:") {
		srcArn = b.arn(f.Source)
	}
	qs.mu.Lock()
	qs.q.Advance(b.clock.Now())
	var cands []queue.Msg
	qs.q.Messages(func(m *queue.Msg) {
		if m.Seq > after && m.Loc.Seg != 0 && f.matchIndex(m, srcArn) {
			cands = append(cands, *m)
		}
	})
	qs.mu.Unlock() // cands are in sequence order, as Messages goes
	var out []queue.Msg
	var ps []*payload
	next := ""
	read := bodies || f.Contains != ""
	for i := range cands {
		var p *payload
		if read {
			var err error
			if p, err = b.readPayload(cands[i].Loc); err != nil {
				continue // deleted or moved since: skip
			}
			if f.Contains != "" && !strings.Contains(p.Body, f.Contains) {
				continue
			}
		}
		out = append(out, cands[i])
		if bodies {
			ps = append(ps, p)
		}
		if max > 0 && len(out) == max {
			if i < len(cands)-1 {
				next = strconv.FormatUint(cands[i].Seq, 10)
			}
			break
		}
	}
	return out, ps, next, nil
}

// Peek lists messages of a queue without receiving them (they stay
// where they are, their receive counts untouched), oldest first.
func (b *Broker) Peek(queueName string, f PeekFilter) ([]PeekedMessage, string, error) {
	if f.Max == 0 {
		f.Max = 10
	}
	if f.Max < 1 || f.Max > 100 {
		return nil, "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter Max is invalid. Reason: Must be between 1 and 100.", f.Max)
	}
	qs, err := b.impl.lookup(queueName)
	if err != nil {
		return nil, "", err
	}
	now := b.impl.clock.Now().UnixMilli()
	ms, ps, next, err := b.impl.scan(qs, f, f.Max, true)
	if err != nil {
		return nil, "", err
	}
	out := make([]PeekedMessage, len(ms))
	for i := range ms {
		m, p := &ms[i], ps[i]
		pm := PeekedMessage{MessageID: p.ID, Body: p.Body, GroupID: m.Group(), Tenant: m.Tenant(), Source: m.DLQSource(),
			Sent: time.UnixMilli(m.Sent), ReceiveCount: int(m.RecvCount()), RetryLevel: int(m.Level), State: "visible"}
		switch {
		case m.State == queue.InFlight && m.VisibleAt > now:
			pm.State = "in_flight"
		case m.State == queue.Waiting && m.VisibleAt > now:
			pm.State = "delayed"
		}
		if f := m.Fail(); f != nil {
			pm.Reason, pm.LastError = f.Reason, f.LastError
			pm.FirstFailure = time.UnixMilli(f.First)
		}
		out[i] = pm
	}
	return out, next, nil
}

// PurgeFiltered deletes the messages that match the filter (Max and
// After are ignored) and returns how many. With an empty filter it
// deletes everything, like PurgeQueue but at once.
func (b *Broker) PurgeFiltered(ctx context.Context, queueName string, f PeekFilter) (int, error) {
	qs, err := b.impl.lookup(queueName)
	if err != nil {
		return 0, err
	}
	f.After = ""
	ms, _, _, err := b.impl.scan(qs, f, 0, false)
	if err != nil {
		return 0, err
	}
	qs2, _, err := b.impl.locked(queueName)
	if err != nil {
		return 0, err
	}
	var recs []*record
	var seqs []uint64
	for _, m := range ms {
		if _, ok := qs2.q.Lookup(m.Seq); ok {
			recs = append(recs, &record{T: recDelete, Q: qs2.meta.ID, Seq: m.Seq})
			seqs = append(seqs, m.Seq)
		}
	}
	if len(recs) == 0 {
		qs2.mu.Unlock()
		return 0, nil
	}
	n := 0
	err = b.impl.persistLocked(qs2, recs, func(time.Time) {
		for _, s := range seqs {
			if qs2.q.Delete(s) {
				n++
			}
		}
	})
	b.impl.finishLocked(qs2, nil)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// RedriveFiltered moves the messages that match the filter to dest (a
// queue name; "" sends each back to the queue it was dead-lettered from),
// with their receive counts and retry levels reset. It returns how many
// moved.
func (b *Broker) RedriveFiltered(ctx context.Context, queueName string, f PeekFilter, dest string) (int, error) {
	qs, err := b.impl.lookup(queueName)
	if err != nil {
		return 0, err
	}
	var to *queueState
	if dest != "" {
		if to, err = b.impl.lookup(dest); err != nil {
			return 0, err
		}
	}
	f.After = ""
	ms, _, _, err := b.impl.scan(qs, f, 0, false)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, c := range ms {
		target := to
		if target == nil {
			name, err := b.impl.queueNameFromARN(c.DLQSource())
			if err != nil {
				continue // not a dead-lettered message: nowhere to go back to
			}
			if target, err = b.impl.lookup(name); err != nil {
				continue
			}
		}
		prev, m, ok := takeForMove(qs, c.Seq, nil)
		if !ok {
			continue
		}
		cp := *m
		cp.SetDelivery(0, 0, cp.Delivered(), cp.Fence())
		cp.Level = 0
		cp.SetFail(nil)
		if err := b.impl.moveMessage(qs, target, &cp, ""); err != nil {
			b.impl.putBack(qs, prev)
			return moved, err
		}
		qs.ctr.redriven.Add(1)
		moved++
	}
	return moved, nil
}

// takeForMove takes a live message (that ok, when not nil, accepts) out
// of its queue for a move, with its storage, noted as outbound until the
// move is durable. prev is the message as it was (for putBack).
func takeForMove(qs *queueState, seq uint64, ok func(m *queue.Msg) bool) (prev queue.Msg, m *queue.Msg, taken bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	x, live := qs.q.Lookup(seq)
	if !live || qs.deleted || (ok != nil && !ok(x)) {
		return queue.Msg{}, nil, false
	}
	prev = *x
	m, taken = qs.q.TakeForMove(seq)
	if taken {
		qs.takeOutboundLocked(&prev)
	}
	return prev, m, taken
}

// StartRedrive starts a message move task over the messages of a queue
// that match the filter (index fields only: tenant, source, reason, time
// range; not Contains), to dest (a queue name; "" sends each back to the
// queue it was dead-lettered from), at most rate messages a second (0:
// unlimited). Its progress shows in ListMoveTasks; CancelMoveTask stops
// it.
func (b *Broker) StartRedrive(ctx context.Context, queueName string, f PeekFilter, dest string, rate int) (string, error) {
	if rate < 0 || rate > 500 {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter rate is invalid. Reason: Must be between 1 and 500.", rate)
	}
	if f.Contains != "" {
		return "", st.Errorf(st.CodeInvalidParameterValue, "A redrive task cannot filter by body; redrive without a rate to move the matches at once.")
	}
	bi := b.impl
	qs, err := bi.lookup(queueName)
	if err != nil {
		return "", err
	}
	dst := ""
	if dest != "" {
		if _, err := bi.lookup(dest); err != nil {
			return "", err
		}
		dst = bi.arn(dest)
	}
	srcArn := ""
	if f.Source != "" && !strings.HasPrefix(f.Source, "arn:") {
		srcArn = bi.arn(f.Source)
	}
	seqs := bi.readySeqs(qs, func(m *queue.Msg) bool { return f.matchIndex(m, srcArn) })
	t := bi.tasks
	src := bi.arn(queueName)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mt := range t.tasks[src] {
		if mt.info.Status == "RUNNING" || mt.info.Status == "CANCELLING" {
			return "", st.Errorf(st.CodeUnsupportedOperation, "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	return t.startLocked(qs, src, dst, rate, seqs)
}
