package sluice

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

// moveTasks runs message move tasks: messages leave a dead-letter queue for
// their source queue (or a named destination), at a bounded rate. Task state
// lives in memory: a restart ends running tasks (the messages already moved
// stay moved; the rest stay in the dead-letter queue).
type moveTasks struct {
	b     *broker
	mu    sync.Mutex
	tasks map[string][]*moveTask // by source ARN, newest last
	byID  map[string]*moveTask
	wg    sync.WaitGroup
}

type moveTask struct {
	id     string
	handle string
	info   MoveTask
	cancel chan struct{}
	// seqs are the messages to move, oldest first, chosen when the task
	// started (a message gone or in flight by its turn is skipped).
	seqs []uint64
}

func newMoveTasks(b *broker) *moveTasks {
	return &moveTasks{b: b, tasks: map[string][]*moveTask{}, byID: map[string]*moveTask{}}
}

func (t *moveTasks) stopAll() {
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

func (b *broker) startMoveTask(ctx context.Context, src, dst string, rate int) (string, error) {
	if rate < 0 || rate > 500 {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500.", rate)
	}
	srcName, err := b.queueNameFromARN(src)
	if err != nil {
		return "", resourceNotFound("SourceArn")
	}
	sq, err := b.lookup(srcName)
	if err != nil {
		return "", resourceNotFound("SourceArn")
	}
	sources, _, _ := b.listDeadLetterSourceQueues(srcName, 0, "")
	if len(sources) == 0 {
		return "", st.Errorf(st.CodeInvalidParameterValue, "Source queue must be configured as a Dead Letter Queue.")
	}
	if dst != "" {
		dn, err := b.queueNameFromARN(dst)
		if err != nil {
			return "", resourceNotFound("DestinationArn")
		}
		if _, err := b.lookup(dn); err != nil {
			return "", resourceNotFound("DestinationArn")
		}
	}
	t := b.tasks
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mt := range t.tasks[src] {
		if mt.info.Status == "RUNNING" || mt.info.Status == "CANCELLING" {
			return "", st.Errorf(st.CodeUnsupportedOperation, "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	return t.startLocked(sq, src, dst, rate, b.readySeqs(sq, nil))
}

// readySeqs lists the ready messages of a queue that match the filter
// (nil: all), oldest first.
func (b *broker) readySeqs(qs *queueState, match func(m *queue.Msg) bool) []uint64 {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.q.Advance(b.clock.Now())
	var seqs []uint64
	qs.q.Messages(func(m *queue.Msg) {
		if m.State == queue.Ready && (match == nil || match(m)) {
			seqs = append(seqs, m.Seq)
		}
	})
	return seqs // in sequence order, as Messages goes
}

func (t *moveTasks) startLocked(sq *queueState, src, dst string, rate int, seqs []uint64) (string, error) {
	b := t.b
	toMove := int64(len(seqs))
	id := uuid.NewString()
	raw, _ := json.Marshal(map[string]string{"taskId": id, "sourceArn": src})
	mt := &moveTask{id: id, handle: base64.StdEncoding.EncodeToString(raw), cancel: make(chan struct{}), info: MoveTask{
		Status: "RUNNING", SourceArn: src, DestinationArn: dst, MaxNumberOfMessagesPerSecond: rate,
		ApproximateNumberOfMessagesToMove: toMove, StartedTimestamp: b.clock.Now(),
	}}
	mt.info.TaskHandle = mt.handle
	mt.seqs = seqs
	t.tasks[src] = append(t.tasks[src], mt)
	t.byID[mt.handle] = mt
	t.wg.Add(1)
	go t.run(mt, sq, dst)
	return mt.handle, nil
}

// run moves messages one at a time, pacing them to the task's rate.
func (t *moveTasks) run(mt *moveTask, sq *queueState, dst string) {
	defer t.wg.Done()
	b := t.b
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
	}
	var moved int64
	for {
		select {
		case <-mt.cancel:
			finish("CANCELLED", "")
			return
		default:
		}
		t.mu.Lock()
		limit := mt.info.ApproximateNumberOfMessagesToMove
		t.mu.Unlock()
		if moved >= limit {
			finish("COMPLETED", "")
			return
		}
		sq.mu.Lock()
		deleted := sq.deleted
		sq.q.Advance(b.clock.Now())
		sq.mu.Unlock()
		if deleted {
			finish("FAILED", "AWS.SimpleQueueService.NonExistentQueue")
			return
		}
		var prev queue.Msg
		var m *queue.Msg
		for m == nil && len(mt.seqs) > 0 {
			seq := mt.seqs[0]
			mt.seqs = mt.seqs[1:]
			if p, taken, ok := takeForMove(sq, seq, func(x *queue.Msg) bool { return x.State == queue.Ready }); ok {
				cp := *taken
				prev, m = p, &cp
			}
		}
		if m == nil {
			finish("COMPLETED", "")
			return
		}
		target := dst
		if target == "" {
			target = m.DLQSource()
		}
		var to *queueState
		if name, err := b.queueNameFromARN(target); err == nil {
			to, _ = b.lookup(name)
		}
		if to == nil {
			// Put it back and fail, as SQS does for a missing destination.
			b.putBack(sq, prev)
			finish("FAILED", "AWS.SimpleQueueService.NonExistentQueue")
			return
		}
		m.SetDelivery(0, 0, m.Delivered(), m.Fence())
		if err := b.moveMessage(sq, to, m, ""); err != nil {
			b.putBack(sq, prev)
			finish("FAILED", string(st.CodeOf(err)))
			return
		}
		moved++
		sq.ctr.redriven.Add(1)
		t.mu.Lock()
		mt.info.ApproximateNumberOfMessagesMoved = moved
		t.mu.Unlock()
		if interval > 0 {
			done := make(chan struct{})
			tm := b.clock.AfterFunc(interval, func() { close(done) })
			select {
			case <-done:
			case <-mt.cancel:
				tm.Stop()
				finish("CANCELLED", "")
				return
			}
		}
	}
}

func (b *broker) listMoveTasks(src string, max int) ([]MoveTask, error) {
	if max == 0 {
		max = 1
	}
	if max < 1 || max > 10 {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxResults is invalid. Reason: You must enter a number that's between 1 and 10.", max)
	}
	name, err := b.queueNameFromARN(src)
	if err != nil {
		return nil, resourceNotFound("SourceArn")
	}
	if _, err := b.lookup(name); err != nil {
		return nil, resourceNotFound("SourceArn")
	}
	t := b.tasks
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []MoveTask
	for i := len(t.tasks[src]) - 1; i >= 0 && len(out) < max; i-- {
		out = append(out, t.tasks[src][i].info)
	}
	return out, nil
}

func (b *broker) cancelMoveTask(ctx context.Context, handle string) (int64, error) {
	t := b.tasks
	t.mu.Lock()
	mt := t.byID[handle]
	if mt == nil {
		t.mu.Unlock()
		return 0, st.Errorf(st.CodeResourceNotFound, "Value for parameter TaskHandle is invalid.")
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
