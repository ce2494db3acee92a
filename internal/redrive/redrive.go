// Package redrive holds the dead-letter tools: peeking at messages without
// receiving them, filtered purges, redrives (moving messages back to their
// source queue or to another one) and message move tasks, which move a
// dead-letter queue's messages at a bounded rate in the background. It
// works through the engine's operations only; a move is the engine's
// (a copy in the destination, then a delete in the source).
package redrive

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
	e     *engine.Engine
	mu    sync.Mutex
	tasks map[string][]*task // by source ARN, newest last
	byID  map[string]*task
	wg    sync.WaitGroup
}

// New returns the tools of e.
func New(e *engine.Engine) *Tools {
	return &Tools{e: e, tasks: map[string][]*task{}, byID: map[string]*task{}}
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

// ---- move tasks ----

// task is one message move task: messages leave a dead-letter queue for
// their source queue (or a named destination) at a bounded rate. Task
// state lives in memory: a restart ends running tasks (the messages moved
// stay moved; the rest stay in the dead-letter queue).
type task struct {
	handle string
	info   st.MoveTask
	cancel chan struct{}
	done   chan struct{} // closed when the task has ended
	// seqs are the messages to move, oldest first, chosen when the task
	// started (a message gone or in flight by its turn is skipped).
	seqs []uint64
	// ctx carries the starter's authorizer: the task moves only into
	// queues its starter may use.
	ctx context.Context
}

// StopAll cancels running tasks and waits for them (at close).
func (t *Tools) StopAll() {
	t.mu.Lock()
	for _, list := range t.tasks {
		for _, mt := range list {
			if mt.info.Status == "RUNNING" {
				close(mt.cancel)
				mt.info.Status = "CANCELLING"
			}
		}
	}
	t.mu.Unlock()
	t.wg.Wait()
}

func resourceNotFound(param string) error {
	return st.Errorf(st.CodeResourceNotFound, "The resource that you specified for the %s parameter doesn't exist.", param)
}

// StartMoveTask starts moving messages out of a dead-letter queue, to
// destinationArn or (when "") back to each message's source queue, at most
// rate messages per second (0: as fast as the store allows; at most 500).
func (t *Tools) StartMoveTask(ctx context.Context, src, dst string, rate int) (string, error) {
	if rate < 0 || rate > 500 {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500.", rate)
	}
	srcName, err := t.e.QueueNameFromARN(src)
	if err != nil || !st.Authorized(ctx, srcName) {
		return "", resourceNotFound("SourceArn")
	}
	if _, err := t.e.GetQueue(srcName); err != nil {
		return "", resourceNotFound("SourceArn")
	}
	if len(t.e.SourcesOf(srcName)) == 0 {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Source queue must be configured as a Dead Letter Queue.")
	}
	if dst != "" {
		dn, err := t.e.QueueNameFromARN(dst)
		if err != nil || !st.Authorized(ctx, dn) {
			return "", resourceNotFound("DestinationArn")
		}
		if _, err := t.e.GetQueue(dn); err != nil {
			return "", resourceNotFound("DestinationArn")
		}
	}
	return t.start(ctx, srcName, src, dst, rate, nil)
}

// StartRedrive starts a message move task over the messages of a queue
// that match the filter (index fields only: tenant, source, reason, time
// range; not Contains), to dest (a queue name; "" sends each back to the
// queue it was dead-lettered from), at most rate messages a second (0:
// unlimited).
func (t *Tools) StartRedrive(ctx context.Context, name string, f st.PeekFilter, dest string, rate int) (string, error) {
	if rate < 0 || rate > 500 {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter rate is invalid. Reason: Must be between 1 and 500.", rate)
	}
	if f.Contains != "" {
		return "", st.Errorf(st.CodeInvalidParameterValue, "A redrive task cannot filter by body; redrive without a rate to move the matches at once.")
	}
	if _, err := t.e.GetQueue(name); err != nil {
		return "", err
	}
	dst := ""
	if dest != "" {
		if _, err := t.e.GetQueue(dest); err != nil || !st.Authorized(ctx, dest) {
			return "", st.Errorf(st.CodeQueueDoesNotExist, "The specified queue does not exist.")
		}
		dst = t.e.ARN(dest)
	}
	return t.start(ctx, name, t.e.ARN(name), dst, rate, t.matcher(f))
}

func (t *Tools) start(ctx context.Context, name, src, dst string, rate int, match func(*queue.Msg) bool) (string, error) {
	ready := func(m *queue.Msg) bool { return m.State == queue.Ready && (match == nil || match(m)) }
	o, err := t.e.Queue(name)
	if err != nil {
		return "", err
	}
	ms, now, err := o.Messages(0, 0, ready)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mt := range t.tasks[src] {
		if mt.info.Status == "RUNNING" || mt.info.Status == "CANCELLING" {
			return "", st.Errorf(st.CodeUnsupportedOperation, "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	seqs := make([]uint64, len(ms))
	for i := range ms {
		seqs[i] = ms[i].Seq
	}
	id := t.e.NewID()
	raw, _ := json.Marshal(map[string]string{"taskId": id, "sourceArn": src})
	mt := &task{handle: base64.StdEncoding.EncodeToString(raw), cancel: make(chan struct{}), done: make(chan struct{}), seqs: seqs,
		ctx: context.WithoutCancel(ctx), info: st.MoveTask{
			Status: "RUNNING", SourceArn: src, DestinationArn: dst, MaxNumberOfMessagesPerSecond: rate,
			ApproximateNumberOfMessagesToMove: int64(len(seqs)), StartedTimestamp: now,
		}}
	mt.info.TaskHandle = mt.handle
	t.tasks[src] = append(t.tasks[src], mt)
	t.byID[mt.handle] = mt
	t.wg.Add(1)
	go t.run(mt, name, dst)
	return mt.handle, nil
}

// run moves messages one at a time, pacing them to the task's rate.
func (t *Tools) run(mt *task, name, dst string) {
	defer t.wg.Done()
	clk := t.e.Clock()
	interval := time.Duration(0)
	if mt.info.MaxNumberOfMessagesPerSecond > 0 {
		interval = time.Second / time.Duration(mt.info.MaxNumberOfMessagesPerSecond)
	}
	finish := func(status, reason string) {
		t.mu.Lock()
		mt.info.Status = status
		mt.info.FailureReason = reason
		mt.info.TaskHandle = ""
		t.mu.Unlock()
		close(mt.done)
	}
	dest := ""
	if dst != "" {
		dest, _ = t.e.QueueNameFromARN(dst)
	}
	var moved int64
	for {
		select {
		case <-mt.cancel:
			finish("CANCELLED", "")
			return
		case <-t.e.Closing():
			finish("CANCELLED", "")
			return
		default:
		}
		if len(mt.seqs) == 0 {
			finish("COMPLETED", "")
			return
		}
		seq := mt.seqs[0]
		mt.seqs = mt.seqs[1:]
		ok, err := t.e.Redrive(mt.ctx, name, seq, dest, true)
		if err != nil {
			code := st.CodeOf(err)
			if code == st.CodeQueueDoesNotExist {
				finish("FAILED", "AWS.SimpleQueueService.NonExistentQueue")
			} else {
				finish("FAILED", string(code))
			}
			return
		}
		if !ok {
			continue // gone or in flight by its turn
		}
		moved++
		t.mu.Lock()
		mt.info.ApproximateNumberOfMessagesMoved = moved
		t.mu.Unlock()
		if interval > 0 {
			done := make(chan struct{})
			tm := clk.AfterFunc(interval, func() { close(done) })
			select {
			case <-done:
			case <-mt.cancel:
				tm.Stop()
				finish("CANCELLED", "")
				return
			case <-t.e.Closing():
				tm.Stop()
				finish("CANCELLED", "")
				return
			}
		}
	}
}

// ListMoveTasks lists the move tasks of a source queue, newest first, at
// most max (1-10; 0 means 1).
func (t *Tools) ListMoveTasks(ctx context.Context, src string, max int) ([]st.MoveTask, error) {
	if max == 0 {
		max = 1
	}
	if max < 1 || max > 10 {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxResults is invalid. Reason: You must enter a number that's between 1 and 10.", max)
	}
	name, err := t.e.QueueNameFromARN(src)
	if err != nil || !st.Authorized(ctx, name) {
		return nil, resourceNotFound("SourceArn")
	}
	if _, err := t.e.GetQueue(name); err != nil {
		return nil, resourceNotFound("SourceArn")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []st.MoveTask
	for i := len(t.tasks[src]) - 1; i >= 0 && len(out) < max; i-- {
		out = append(out, t.tasks[src][i].info)
	}
	return out, nil
}

// taskLocked returns the task of handle, if ctx's caller may see it.
func (t *Tools) taskLocked(ctx context.Context, handle string) (*task, error) {
	mt := t.byID[handle]
	if mt != nil {
		if name, err := t.e.QueueNameFromARN(mt.info.SourceArn); err != nil || !st.Authorized(ctx, name) {
			mt = nil
		}
	}
	if mt == nil {
		return nil, st.Errorf(st.CodeResourceNotFound, "Value for parameter TaskHandle is invalid.")
	}
	return mt, nil
}

// WaitMoveTask waits until the move task of handle has ended (completed,
// cancelled or failed) and returns it as it ended, or ctx's error if ctx
// ends first.
func (t *Tools) WaitMoveTask(ctx context.Context, handle string) (st.MoveTask, error) {
	t.mu.Lock()
	mt, err := t.taskLocked(ctx, handle)
	t.mu.Unlock()
	if err != nil {
		return st.MoveTask{}, err
	}
	select {
	case <-mt.done:
	case <-ctx.Done():
		return st.MoveTask{}, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return mt.info, nil
}

// CancelMoveTask cancels a running move task and returns how many messages
// it has moved.
func (t *Tools) CancelMoveTask(ctx context.Context, handle string) (int64, error) {
	t.mu.Lock()
	mt, err := t.taskLocked(ctx, handle)
	if err != nil {
		t.mu.Unlock()
		return 0, err
	}
	if mt.info.Status != "RUNNING" {
		t.mu.Unlock()
		return 0, st.Errorf(st.CodeUnsupportedOperation, "Only active tasks can be cancelled.")
	}
	mt.info.Status = "CANCELLING"
	close(mt.cancel)
	moved := mt.info.ApproximateNumberOfMessagesMoved
	t.mu.Unlock()
	return moved, nil
}
