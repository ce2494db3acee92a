package redrive

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Message move tasks move a dead-letter queue's messages to their source
// queues (or to a named destination) at a bounded rate.
//
// A task lives in its source queue's partition, as Task records, each the
// task's whole state (record.MoveTask): written when it starts, as it
// goes (progressEvery, progressInterval) and when it ends (completed,
// cancelled, failed). Snapshots carry the tasks (queue.SnapshotEach), so
// neither a restart nor a compaction loses one. The owner of the source
// queue's partition runs its tasks: whenever an owner starts serving
// (engine.OnStart: at a start, after a crash, when the partition is
// handed over or taken over by this node), its running tasks resume from
// its records. An owner that stops serving stops its runners without
// ending their tasks (the next owner goes on); a stale owner's writes are
// fenced, like all its writes.
//
// A task moves the messages that were in its queue when it started: those
// below its bound (and, for a filtered redrive, that its filter matches).
// A resumed task lists them again from the queue as it is: a message moved
// is gone from it, and a move a crash cut short between the copy and the
// delete is entered once (Destination.Enter's key), so nothing is moved
// twice. Its moved count is the one last written: after a crash it may be
// behind by what the runner moved since (at most progressEvery messages or
// progressInterval), which SQS's "Approximate" allows.

// Progress is written every progressEvery messages moved, or once
// progressInterval has passed since it was last written, whichever comes
// first.
const (
	progressEvery    = 100
	progressInterval = time.Second
)

// retryAfter is how long a runner waits before trying again a move that
// failed for the time being (its destination's owner moving).
const retryAfter = time.Second

// Remote reaches the owner of a queue on another node of a cluster, for
// the task actions any node answers (nil functions: a single node). The
// caller has checked that its caller may use the queue.
type Remote struct {
	// List answers ListLocal on the node that owns the queue named.
	List func(ctx context.Context, queue string, max int) ([]st.MoveTask, error)
	// Cancel answers CancelLocal on the node that owns the queue named.
	Cancel func(ctx context.Context, queue, handle string) (int64, error)
}

// remoteOf returns how the tools reach other nodes (zero: a single node).
func (t *Tools) remoteOf() Remote {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.remote
}

// SetRemote connects the tools to the other nodes of a cluster.
func (t *Tools) SetRemote(r Remote) {
	t.mu.Lock()
	t.remote = r
	t.mu.Unlock()
}

// runner runs one task on this node, for one owner of its source queue.
// Its task and info are its own; info is read under Tools.mu.
type runner struct {
	o    *partition.Owner
	name string // the source queue
	info st.MoveTask
	// cancel carries a cancellation: the runner writes the task's end and
	// answers (an error: not written, the task goes on).
	cancel chan chan error
	stop   chan struct{} // closed: stop without ending the task
	halted bool          // stop is closed (under Tools.mu)
	done   chan struct{} // closed once the runner has returned
	// durable: the runner's end is written (the partition's record says
	// what info says); unwritten is its end when that could not be.
	durable   bool
	unwritten *record.MoveTask
}

func (r *runner) halt() {
	if !r.halted {
		r.halted = true
		close(r.stop)
	}
}

// StopAll stops this node's runners and waits for them (at close). Their
// tasks do not end: they write their progress and go on wherever their
// queue is served next.
func (t *Tools) StopAll() {
	t.lifeMu.Lock()
	t.mu.Lock()
	t.stopping = true
	for _, r := range t.runs {
		r.halt()
	}
	t.mu.Unlock()
	t.lifeMu.Unlock()
	t.wg.Wait()
}

func resourceNotFound(param string) error {
	return st.Errorf(st.CodeResourceNotFound, "The resource that you specified for the %s parameter doesn't exist.", param)
}

func invalidHandle() error {
	return st.Errorf(st.CodeResourceNotFound, "Value for parameter TaskHandle is invalid.")
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
	dn := ""
	if dst != "" {
		if dn, err = t.e.QueueNameFromARN(dst); err != nil || !st.Authorized(ctx, dn) {
			return "", resourceNotFound("DestinationArn")
		}
		if _, err := t.e.GetQueue(dn); err != nil {
			return "", resourceNotFound("DestinationArn")
		}
	}
	return t.start(ctx, srcName, src, dst, dn, rate, nil)
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
	tf := &record.TaskFilter{Tenant: f.Tenant, Source: f.Source, Reason: f.Reason}
	if !f.Since.IsZero() {
		tf.Since = f.Since.UnixMilli()
	}
	if !f.Until.IsZero() {
		tf.Until = f.Until.UnixMilli()
	}
	return t.start(ctx, name, t.e.ARN(name), dst, dest, rate, tf)
}

// filterOf is the peek filter a task's filter stands for.
func filterOf(tf *record.TaskFilter) st.PeekFilter {
	if tf == nil {
		return st.PeekFilter{}
	}
	f := st.PeekFilter{Tenant: tf.Tenant, Source: tf.Source, Reason: tf.Reason}
	if tf.Since != 0 {
		f.Since = time.UnixMilli(tf.Since)
	}
	if tf.Until != 0 {
		f.Until = time.UnixMilli(tf.Until)
	}
	return f
}

// start writes a new task's first record and runs it. Its bound is past
// the queue's last message; what it may move into is what ctx's caller
// may use now among its destination (dstName) or, without one, its
// messages' sources.
func (t *Tools) start(ctx context.Context, name, src, dst, dstName string, rate int, tf *record.TaskFilter) (string, error) {
	o, err := t.e.Queue(name)
	if err != nil {
		return "", err
	}
	match := t.matcher(filterOf(tf))
	t.lifeMu.Lock()
	defer t.lifeMu.Unlock()
	tasks, err := o.Tasks()
	if err != nil {
		return "", err
	}
	for _, tk := range tasks {
		if tk.Status != record.TaskRunning {
			continue
		}
		if err := t.rewriteEnd(o, tk.Handle); err != nil {
			return "", err
		}
		if again, ok := o.Task(tk.Handle); !ok || again.Status == record.TaskRunning {
			return "", st.Errorf(st.CodeUnsupportedOperation, "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	ms, now, err := o.Messages(0, 0, match)
	if err != nil {
		return "", err
	}
	tk := record.MoveTask{Source: src, Destination: dst, Rate: int32(rate), Status: record.TaskRunning, Started: now.UnixMilli(),
		Bound: 1, Filter: tf}
	if dstName != "" {
		tk.Allowed = []string{dstName}
	}
	for i := range ms {
		m := &ms[i]
		tk.Bound = max(tk.Bound, m.Seq+1)
		if m.State == queue.Ready {
			tk.ToMove++
		}
		if dst != "" {
			continue
		}
		if back, err := t.e.QueueNameFromARN(m.DLQSource()); err == nil && !slices.Contains(tk.Allowed, back) && st.Authorized(ctx, back) {
			tk.Allowed = append(tk.Allowed, back)
		}
	}
	raw, _ := json.Marshal(map[string]string{"taskId": t.e.NewID(), "sourceArn": src})
	tk.Handle = base64.StdEncoding.EncodeToString(raw)
	if err := o.SaveTask(tk); err != nil {
		return "", err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopping {
		return tk.Handle, nil // written: it runs on the next start
	}
	t.launchLocked(o, name, tk)
	return tk.Handle, nil
}

// resume runs the running tasks of a queue whose owner just started
// serving here, unless a runner runs them for that owner already. A
// runner of a former owner stops (its owner stopped serving).
func (t *Tools) resume(o *partition.Owner) {
	t.lifeMu.Lock()
	defer t.lifeMu.Unlock()
	tasks, err := o.Tasks()
	if err != nil {
		return // no longer serving: its next owner resumes them
	}
	name := o.Name()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tk := range tasks {
		if tk.Status != record.TaskRunning || t.stopping {
			continue
		}
		if r := t.runs[tk.Handle]; r != nil {
			if r.o == o {
				continue
			}
			r.halt()
		}
		t.e.Log().Info("resuming a message move task", "queue", name, "moved", tk.Moved, "to_move", tk.ToMove)
		t.launchLocked(o, name, tk)
	}
}

// info is a task as ListMessageMoveTasks shows it.
func info(tk *record.MoveTask) st.MoveTask {
	mt := st.MoveTask{Status: tk.Status.String(), SourceArn: tk.Source, DestinationArn: tk.Destination,
		MaxNumberOfMessagesPerSecond: int(tk.Rate), ApproximateNumberOfMessagesMoved: tk.Moved,
		ApproximateNumberOfMessagesToMove: tk.ToMove, FailureReason: tk.Failure, StartedTimestamp: time.UnixMilli(tk.Started)}
	if tk.Status == record.TaskRunning {
		mt.TaskHandle = tk.Handle
	}
	return mt
}

func (t *Tools) launchLocked(o *partition.Owner, name string, tk record.MoveTask) {
	r := &runner{o: o, name: name, info: info(&tk), cancel: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
	t.runs[tk.Handle] = r
	t.wg.Add(1)
	go t.run(r, tk)
}

// allowedIn is a context whose authorizer allows the queues a task may
// move into, and no other.
func allowedIn(names []string) context.Context {
	return st.WithAuthorizer(context.Background(), func(q string) bool { return slices.Contains(names, q) })
}

// run moves a task's messages one at a time, in sequence order, paced to
// its rate, until none is left, it is cancelled or it fails (it writes
// its end then), or it stops (its owner stopped serving, the broker
// closes: it writes its progress, if it still may, and the task goes on
// where its queue is served next).
func (t *Tools) run(r *runner, tk record.MoveTask) {
	defer t.wg.Done()
	defer close(r.done)
	defer func() {
		t.mu.Lock()
		if t.runs[tk.Handle] == r && (r.durable || r.info.Status == "RUNNING") {
			delete(t.runs, tk.Handle) // the partition's record says the rest
		}
		t.mu.Unlock()
	}()
	clk := t.e.Clock()
	ctx := allowedIn(tk.Allowed)
	match := t.matcher(filterOf(tk.Filter))
	ms, _, err := r.o.Messages(0, 0, func(m *queue.Msg) bool { return m.Seq < tk.Bound && m.State == queue.Ready && match(m) })
	if err != nil {
		return // no longer serving
	}
	dest := ""
	if tk.Destination != "" {
		dest, _ = t.e.QueueNameFromARN(tk.Destination)
	}
	interval := time.Duration(0)
	if tk.Rate > 0 {
		interval = time.Second / time.Duration(tk.Rate)
	}
	saved, savedAt := tk.Moved, clk.Now()
	for i := 0; ; {
		if !t.idle(r, &tk, 0) {
			return
		}
		if i == len(ms) {
			t.end(r, &tk, record.TaskCompleted, "")
			return
		}
		ok, err := t.move(ctx, r.o, ms[i].Seq, dest)
		if err != nil {
			if !r.o.Serving() {
				return // its next owner goes on
			}
			if st.CodeOf(err) == st.CodeServiceUnavailable {
				if !t.idle(r, &tk, retryAfter) {
					return
				}
				continue // the same message again
			}
			reason := string(st.CodeOf(err))
			if st.CodeOf(err) == st.CodeQueueDoesNotExist {
				reason = "AWS.SimpleQueueService.NonExistentQueue"
			}
			t.end(r, &tk, record.TaskFailed, reason)
			return
		}
		i++
		if !ok {
			continue // gone or in flight by its turn
		}
		tk.Moved++
		t.mu.Lock()
		r.info.ApproximateNumberOfMessagesMoved = tk.Moved
		t.mu.Unlock()
		if now := clk.Now(); tk.Moved-saved >= progressEvery || now.Sub(savedAt) >= progressInterval {
			if err := r.o.SaveTask(tk); err != nil && r.o.Serving() {
				t.e.Log().Warn("writing a move task's progress failed", "queue", r.name, "err", err)
			}
			saved, savedAt = tk.Moved, now
		}
		if interval > 0 && !t.idle(r, &tk, interval) {
			return
		}
	}
}

// move moves one message out of the task's queue (Engine.Redrive, from
// this owner).
func (t *Tools) move(ctx context.Context, o *partition.Owner, seq uint64, dest string) (bool, error) {
	resolve := func(arn string) (partition.Destination, error) {
		name, err := t.e.QueueNameFromARN(arn)
		if err != nil {
			return nil, err
		}
		return t.e.DestinationFor(ctx, name)
	}
	var dst partition.Destination
	if dest != "" {
		var err error
		if dst, err = t.e.DestinationFor(ctx, dest); err != nil {
			return false, err
		}
	}
	return o.Redrive(ctx, seq, dst, resolve, true)
}

// idle waits d (0: only looks) for what a runner obeys, a cancellation
// first; it reports false when the run is over.
func (t *Tools) idle(r *runner, tk *record.MoveTask, d time.Duration) bool {
	var tick <-chan struct{}
	if d > 0 {
		c := make(chan struct{})
		tm := t.e.Clock().AfterFunc(d, func() { close(c) })
		defer tm.Stop()
		tick = c
	}
	for {
		select {
		case reply := <-r.cancel:
			err := t.end(r, tk, record.TaskCancelled, "")
			reply <- err
			if err == nil {
				return false
			}
			continue // not written: the task goes on
		default:
		}
		select {
		case <-r.stop:
			if r.o.Serving() {
				_ = r.o.SaveTask(*tk) // its progress, for the next owner
			}
			return false
		case <-r.o.Stopped():
			return false
		case <-t.e.Closing():
			return false
		default:
		}
		if tick == nil {
			return true
		}
		select {
		case reply := <-r.cancel:
			err := t.end(r, tk, record.TaskCancelled, "")
			reply <- err
			if err == nil {
				return false
			}
		case <-r.stop:
		case <-r.o.Stopped():
		case <-t.e.Closing():
		case <-tick:
			return true
		}
	}
}

// end writes the task's end. A cancellation that cannot be written is not
// made (the error says why). A completion or failure that cannot be
// written ends the runner all the same: its queue's next owner resumes
// the task and ends it again (a completed one finds nothing left), and
// meanwhile this node shows it ended.
func (t *Tools) end(r *runner, tk *record.MoveTask, status record.TaskStatus, reason string) error {
	e := *tk
	e.Status, e.Failure, e.Ended = status, reason, t.e.Clock().Now().UnixMilli()
	err := r.o.SaveTask(e)
	if err != nil && status == record.TaskCancelled {
		return err
	}
	if err != nil {
		if !r.o.Serving() {
			return err // the next owner goes on
		}
		t.e.Log().Error("writing the end of a move task failed; the next start ends it again", "queue", r.name, "status", status, "err", err)
	}
	*tk = e
	t.mu.Lock()
	r.info = info(&e)
	r.durable = err == nil
	if err != nil {
		r.unwritten = &e
	}
	t.mu.Unlock()
	return nil
}

// rewriteEnd writes again the end of a task whose runner here could not
// (a new task of its queue may start once it is written).
func (t *Tools) rewriteEnd(o *partition.Owner, handle string) error {
	t.mu.Lock()
	r := t.runs[handle]
	t.mu.Unlock()
	if r == nil || t.live(handle) != nil || r.unwritten == nil {
		return nil
	}
	if err := o.SaveTask(*r.unwritten); err != nil {
		return err
	}
	t.mu.Lock()
	if t.runs[handle] == r {
		delete(t.runs, handle)
	}
	t.mu.Unlock()
	return nil
}

// sourceOf is the queue a task handle names.
func (t *Tools) sourceOf(handle string) (string, bool) {
	raw, err := base64.StdEncoding.DecodeString(handle)
	if err != nil {
		return "", false
	}
	var h struct {
		SourceArn string `json:"sourceArn"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return "", false
	}
	name, err := t.e.QueueNameFromARN(h.SourceArn)
	return name, err == nil
}

// ListMoveTasks lists the move tasks of a source queue, newest first, at
// most max (1-10; 0 means 1): the tasks its partition holds, with the
// progress of those running here.
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
	out, err := t.ListLocal(name, max)
	if list := t.remoteOf().List; errors.Is(err, partition.ErrNotOwner) && list != nil {
		return list(ctx, name, max)
	}
	return out, err
}

// ListLocal lists the move tasks of a queue this node owns, newest first,
// at most max (ListMoveTasks without its checks: for the queue's owner,
// asked by another node that made them).
func (t *Tools) ListLocal(name string, max int) ([]st.MoveTask, error) {
	o, err := t.e.Queue(name)
	if err != nil {
		return nil, err
	}
	tasks, err := o.Tasks()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []st.MoveTask
	for i := len(tasks) - 1; i >= 0 && len(out) < max; i-- {
		mt := info(&tasks[i])
		if r := t.runs[tasks[i].Handle]; r != nil && (r.o == o || tasks[i].Status == record.TaskRunning) {
			mt = r.info // further on than its last record
		}
		out = append(out, mt)
	}
	return out, nil
}

// WaitMoveTask waits until the move task of handle has ended (completed,
// cancelled or failed) and returns it as it ended, or ctx's error if ctx
// ends first. A task running on another node (or not running here any
// more: the broker closes, its queue moved) is ServiceUnavailable.
func (t *Tools) WaitMoveTask(ctx context.Context, handle string) (st.MoveTask, error) {
	name, ok := t.sourceOf(handle)
	if !ok || !st.Authorized(ctx, name) {
		return st.MoveTask{}, invalidHandle()
	}
	for {
		t.mu.Lock()
		r := t.runs[handle]
		t.mu.Unlock()
		if r == nil {
			break
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return st.MoveTask{}, ctx.Err()
		}
		t.mu.Lock()
		mt, again := r.info, t.runs[handle] != nil && t.runs[handle] != r
		t.mu.Unlock()
		if mt.Status != "RUNNING" {
			return mt, nil
		}
		if !again {
			break
		}
	}
	o, err := t.e.Queue(name)
	if err != nil {
		if errors.Is(err, partition.ErrNotOwner) {
			return st.MoveTask{}, err
		}
		return st.MoveTask{}, invalidHandle()
	}
	tasks, err := o.Tasks()
	if err != nil {
		return st.MoveTask{}, err
	}
	for i := range tasks {
		if tasks[i].Handle != handle {
			continue
		}
		if tasks[i].Status != record.TaskRunning {
			return info(&tasks[i]), nil
		}
		return st.MoveTask{}, &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second, Message: "The task is not running on this node now; it goes on where its queue is served."}
	}
	return st.MoveTask{}, invalidHandle()
}

// CancelMoveTask cancels a running move task, durably, and returns how
// many messages it has moved.
func (t *Tools) CancelMoveTask(ctx context.Context, handle string) (int64, error) {
	name, ok := t.sourceOf(handle)
	if !ok || !st.Authorized(ctx, name) {
		return 0, invalidHandle()
	}
	moved, err := t.CancelLocal(name, handle)
	if cancel := t.remoteOf().Cancel; errors.Is(err, partition.ErrNotOwner) && cancel != nil {
		return cancel(ctx, name, handle)
	}
	return moved, err
}

// CancelLocal cancels a running move task of a queue this node owns
// (CancelMoveTask without its checks: for the queue's owner, asked by
// another node that made them). Its runner writes its end; without one
// (between a start and its resumption), the end is written here.
func (t *Tools) CancelLocal(name, handle string) (int64, error) {
	for {
		if r := t.live(handle); r != nil {
			reply := make(chan error, 1)
			select {
			case r.cancel <- reply:
				if err := <-reply; err != nil {
					return 0, err
				}
				t.mu.Lock()
				defer t.mu.Unlock()
				return r.info.ApproximateNumberOfMessagesMoved, nil
			case <-r.done:
			}
		}
		o, err := t.e.Queue(name)
		if err != nil {
			if errors.Is(err, partition.ErrNotOwner) {
				return 0, err
			}
			return 0, invalidHandle()
		}
		moved, again, err := t.cancelUnrun(o, handle)
		if !again {
			return moved, err
		}
	}
}

// live is the runner of handle here, if it has not returned.
func (t *Tools) live(handle string) *runner {
	t.mu.Lock()
	r := t.runs[handle]
	t.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	default:
		return r
	}
}

// cancelUnrun writes the end of a running task no runner runs here (again:
// one started meanwhile; cancel through it).
func (t *Tools) cancelUnrun(o *partition.Owner, handle string) (moved int64, again bool, err error) {
	t.lifeMu.Lock()
	defer t.lifeMu.Unlock()
	if t.live(handle) != nil {
		return 0, true, nil
	}
	tasks, err := o.Tasks()
	if err != nil {
		return 0, false, err
	}
	t.mu.Lock()
	r := t.runs[handle]
	t.mu.Unlock()
	for _, tk := range tasks {
		if tk.Handle != handle {
			continue
		}
		if tk.Status != record.TaskRunning || (r != nil && r.info.Status != "RUNNING") {
			return 0, false, st.Errorf(st.CodeUnsupportedOperation, "Only active tasks can be cancelled.")
		}
		tk.Status, tk.Ended = record.TaskCancelled, t.e.Clock().Now().UnixMilli()
		if err := o.SaveTask(tk); err != nil {
			return 0, false, err
		}
		return tk.Moved, false, nil
	}
	return 0, false, invalidHandle()
}
