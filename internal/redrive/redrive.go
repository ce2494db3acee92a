// Package redrive holds the dead-letter tools: peeking at messages without
// receiving them, filtered purges, redrives (moving messages back to their
// source queue or to another one) and message move tasks, which move a
// dead-letter queue's messages at a bounded rate in the background, kept
// in that queue's partition and run by its owner (tasks.go). It works
// through the engine's operations only; a move is the owner's (a copy in
// the destination, then a delete in the source).
package redrive

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/engine"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Tools are the dead-letter tools of one engine.
type Tools struct {
	e *engine.Engine
	// lifeMu serialises what starts or ends a task outside its runner:
	// starting one, resuming a partition's, cancelling one no runner
	// here runs. (Taken before mu.)
	lifeMu sync.Mutex

	mu       sync.Mutex
	runs     map[string]*runner // by task handle: this node's runners
	stopping bool               // StopAll: no runner starts any more
	remote   Remote

	wg sync.WaitGroup
}

// New returns the tools of e. They resume the running move tasks of
// every queue e serves, now and whenever it starts serving one.
func New(e *engine.Engine) *Tools {
	t := &Tools{e: e, runs: map[string]*runner{}}
	for _, o := range e.OnStart(t.resume) {
		t.resume(o)
	}
	return t
}

// matcher is a filter on a message's index fields.
func (t *Tools) matcher(f st.PeekFilter) func(m *queue.Msg) bool {
	srcArn := ""
	if f.Source != "" && !strings.HasPrefix(f.Source, "arn:") {
		srcArn = t.e.ARN(f.Source)
	}
	return func(m *queue.Msg) bool {
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
}

func after(token string) (uint64, error) {
	if token == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(token, 10, 64)
	if err != nil {
		return 0, st.Errorf(st.CodeInvalidParameterValue, "Invalid value for the parameter NextToken.")
	}
	return n, nil
}

// scan returns the messages that match the filter (Contains included:
// bodies are read for it), after the token, up to max (0: all), with
// their payloads when bodies is set, and the token to go on from.
func (t *Tools) scan(name string, f st.PeekFilter, max int, bodies bool) ([]queue.Msg, []*record.Payload, time.Time, string, error) {
	from, err := after(f.After)
	if err != nil {
		return nil, nil, time.Time{}, "", err
	}
	o, err := t.e.Queue(name)
	if err != nil {
		return nil, nil, time.Time{}, "", err
	}
	cands, now, err := o.Messages(from, 0, t.matcher(f))
	if err != nil {
		return nil, nil, time.Time{}, "", err
	}
	var out []queue.Msg
	var ps []*record.Payload
	next := ""
	read := bodies || f.Contains != ""
	for i := range cands {
		var p *record.Payload
		if read {
			if p, err = o.Body(&cands[i]); err != nil {
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
	return out, ps, now, next, nil
}

// Peek lists messages of a queue without receiving them (they stay where
// they are, their receive counts untouched), oldest first.
func (t *Tools) Peek(name string, f st.PeekFilter) ([]st.PeekedMessage, string, error) {
	if f.Max == 0 {
		f.Max = 10
	}
	if f.Max < 1 || f.Max > 100 {
		return nil, "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter Max is invalid. Reason: Must be between 1 and 100.", f.Max)
	}
	ms, ps, at, next, err := t.scan(name, f, f.Max, true)
	if err != nil {
		return nil, "", err
	}
	now := at.UnixMilli()
	out := make([]st.PeekedMessage, len(ms))
	for i := range ms {
		m, p := &ms[i], ps[i]
		pm := st.PeekedMessage{MessageID: p.ID, Body: p.Body, GroupID: m.Group(), Tenant: m.Tenant(), Source: m.DLQSource(),
			Sent: time.UnixMilli(m.Sent), ReceiveCount: int(m.RecvCount()), RetryLevel: int(m.Level), State: "visible"}
		switch {
		case m.State == queue.InFlight && m.VisibleAt > now:
			pm.State = "in_flight"
		case m.State == queue.Waiting && m.VisibleAt > now:
			pm.State = "delayed"
		}
		if fl := m.Fail(); fl != nil {
			pm.Reason, pm.LastError = fl.Reason, fl.LastError
			pm.FirstFailure = time.UnixMilli(fl.First)
		}
		out[i] = pm
	}
	return out, next, nil
}

// PurgeFiltered deletes the messages that match the filter (Max and After
// are ignored) and returns how many. With an empty filter it deletes
// everything, like PurgeQueue but at once.
func (t *Tools) PurgeFiltered(ctx context.Context, name string, f st.PeekFilter) (int, error) {
	f.After = ""
	ms, _, _, _, err := t.scan(name, f, 0, false)
	if err != nil {
		return 0, err
	}
	seqs := make([]uint64, len(ms))
	for i := range ms {
		seqs[i] = ms[i].Seq
	}
	o, err := t.e.Queue(name)
	if err != nil {
		return 0, err
	}
	return o.DeleteMessages(ctx, seqs, record.ByClient)
}

// RedriveFiltered moves the messages that match the filter to dest (a
// queue name; "" sends each back to the queue it was dead-lettered from),
// with their receive counts and retry levels reset. It returns how many
// moved.
func (t *Tools) RedriveFiltered(ctx context.Context, name string, f st.PeekFilter, dest string) (int, error) {
	if dest != "" {
		if _, err := t.e.GetQueue(dest); err != nil || !st.Authorized(ctx, dest) {
			return 0, st.Errorf(st.CodeQueueDoesNotExist, "The specified queue does not exist.")
		}
	}
	f.After = ""
	ms, _, _, _, err := t.scan(name, f, 0, false)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, c := range ms {
		if dest == "" {
			if _, err := t.e.QueueNameFromARN(c.DLQSource()); err != nil {
				continue // not a dead-lettered message: nowhere to go back to
			}
		}
		ok, err := t.e.Redrive(ctx, name, c.Seq, dest, false)
		if err != nil {
			if st.CodeOf(err) == st.CodeQueueDoesNotExist && dest == "" {
				continue // its source queue is gone
			}
			return moved, err
		}
		if ok {
			moved++
		}
	}
	return moved, nil
}
