package broker_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// taskRig is a disk broker on an in-memory file system that can lose
// power, on a fake clock, inside a testing/synctest bubble: after the
// clock moves, synctest.Wait says when the broker (a task's runner
// included) has done all it can until the clock moves again.
type taskRig struct {
	t   *testing.T
	mem *vfs.Mem
	clk *clock.Fake
	cfg broker.Config
	b   *broker.Broker
	dlq st.QueueInfo
}

// taskMessages is how many messages each test moves: at 50 a second,
// four seconds of the fake clock, many progress records.
const taskMessages = 200

// newTaskRig opens a broker with queues src (whose dead-letter queue is
// dlq) and dest, and taskMessages messages rejected into dlq.
func newTaskRig(t *testing.T, cfg broker.Config) *taskRig {
	r := &taskRig{t: t, mem: vfs.NewMem(), clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	cfg.Dir, cfg.FS, cfg.Clock = "/data", r.mem, r.clk
	r.cfg = cfg
	r.open()
	t.Cleanup(func() { r.b.Close() })
	var err error
	if r.dlq, err = r.b.CreateQueue(ctx, "dlq", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.b.CreateQueue(ctx, "src", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, r.dlq.ARN)}, nil); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 500) // the log rolls segments
	for i := 0; i < taskMessages; i++ {
		if _, err := r.b.Send(ctx, "src", st.SendInput{Body: fmt.Sprintf("m%03d-%s", i, body)}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < taskMessages; {
		ms, err := r.b.Receive(ctx, "src", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptr(3600)})
		if err != nil || len(ms) == 0 {
			t.Fatalf("receive: %d %v", len(ms), err)
		}
		for _, m := range ms {
			if err := r.b.RejectMessage(ctx, "src", m.ReceiptHandle, "test"); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if got := attr(t, r.b, "dlq", "ApproximateNumberOfMessages"); got != fmt.Sprint(taskMessages) {
		t.Fatalf("the dead-letter queue holds %s messages", got)
	}
	return r
}

func (r *taskRig) open() {
	r.t.Helper()
	b, err := broker.Open(r.cfg)
	if err != nil {
		r.t.Fatalf("open: %v", err)
	}
	r.b = b
	synctest.Wait()
}

// restart closes the broker and opens it again on the same data.
func (r *taskRig) restart() {
	r.t.Helper()
	if err := r.b.Close(); err != nil {
		r.t.Fatal(err)
	}
	r.open()
}

// crash loses power: what was not synced is gone, and a new broker opens
// what is left.
func (r *taskRig) crash() {
	r.t.Helper()
	survived := r.mem.Crash()
	r.b.Close() // writes nothing more to survived: it is a copy
	r.mem = survived
	r.cfg.FS = survived
	r.open()
}

// task is the newest task of the dead-letter queue.
func (r *taskRig) task() broker.MoveTask {
	r.t.Helper()
	ts, err := r.b.ListMoveTasks(ctx, r.dlq.ARN, 10)
	if err != nil || len(ts) == 0 {
		r.t.Fatalf("tasks: %+v %v", ts, err)
	}
	return ts[0]
}

// runUntil moves the clock on by a rate's interval at a time, each time
// until the broker is idle, until done says so (or a minute of the fake
// clock has passed).
func (r *taskRig) runUntil(done func(mt broker.MoveTask) bool) broker.MoveTask {
	r.t.Helper()
	for range 3000 {
		synctest.Wait()
		if mt := r.task(); done(mt) {
			return mt
		}
		r.clk.Advance(20 * time.Millisecond)
	}
	r.t.Fatalf("the task did not get there: %+v", r.task())
	return broker.MoveTask{}
}

func movedAtLeast(n int64) func(broker.MoveTask) bool {
	return func(mt broker.MoveTask) bool { return mt.ApproximateNumberOfMessagesMoved >= n }
}

func ended(mt broker.MoveTask) bool { return mt.Status != "RUNNING" }

// checkAllMovedOnce: every message is back in src once, none left in dlq.
func (r *taskRig) checkAllMovedOnce() {
	r.t.Helper()
	if got := attr(r.t, r.b, "dlq", "ApproximateNumberOfMessages"); got != "0" {
		r.t.Fatalf("%s messages left in the dead-letter queue", got)
	}
	bodies := bodiesOf(r.t, r.b, "src")
	if len(bodies) != taskMessages {
		r.t.Fatalf("src holds %d messages, want %d", len(bodies), taskMessages)
	}
	for i, b := range bodies {
		if want := fmt.Sprintf("m%03d-", i); !strings.HasPrefix(b, want) {
			r.t.Fatalf("message %d is %.5s, want %s (one lost, one twice?)", i, b, want)
		}
	}
}

// TestMoveTaskSurvivesRestart: a task the broker's close interrupts is
// listed RUNNING after the restart, resumes where it got to, and
// completes; every message moved once.
func TestMoveTaskSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTaskRig(t, broker.Config{})
		h, err := r.b.StartMoveTask(ctx, r.dlq.ARN, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		before := r.runUntil(movedAtLeast(60))
		r.restart()
		mt := r.task()
		// Its progress was written as the broker closed (and it went on
		// at once: by one message at most).
		if n := mt.ApproximateNumberOfMessagesMoved - before.ApproximateNumberOfMessagesMoved; mt.Status != "RUNNING" || mt.TaskHandle != h || n < 0 || n > 1 ||
			mt.ApproximateNumberOfMessagesToMove != taskMessages || mt.MaxNumberOfMessagesPerSecond != 50 {
			t.Fatalf("after the restart: %+v; before: %+v", mt, before)
		}
		mt = r.runUntil(ended)
		if mt.Status != "COMPLETED" || mt.ApproximateNumberOfMessagesMoved != taskMessages || mt.TaskHandle != "" {
			t.Fatalf("the task ended %+v", mt)
		}
		if got, err := r.b.WaitMoveTask(ctx, h); err != nil || got.Status != "COMPLETED" {
			t.Fatalf("WaitMoveTask: %+v %v", got, err)
		}
		r.checkAllMovedOnce()
		r.restart()
		if mt := r.task(); mt.Status != "COMPLETED" || mt.ApproximateNumberOfMessagesMoved != taskMessages {
			t.Fatalf("after another restart: %+v", mt)
		}
	})
}

// TestMoveTaskSurvivesPowerLoss: after a power loss mid-task, the task
// resumes and completes; its moved count may be behind by what it moved
// since its last progress record, but no message is lost or moved twice.
func TestMoveTaskSurvivesPowerLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTaskRig(t, broker.Config{})
		if _, err := r.b.StartMoveTask(ctx, r.dlq.ARN, "", 50); err != nil {
			t.Fatal(err)
		}
		before := r.runUntil(movedAtLeast(70))
		r.crash()
		mt := r.task()
		if mt.Status != "RUNNING" || mt.ApproximateNumberOfMessagesMoved > before.ApproximateNumberOfMessagesMoved+1 ||
			mt.ApproximateNumberOfMessagesMoved < before.ApproximateNumberOfMessagesMoved-100 {
			t.Fatalf("after the power loss: %+v; before: %+v", mt, before)
		}
		mt = r.runUntil(ended)
		if mt.Status != "COMPLETED" || mt.ApproximateNumberOfMessagesMoved > taskMessages || mt.ApproximateNumberOfMessagesMoved < taskMessages-100 {
			t.Fatalf("the task ended %+v", mt)
		}
		r.checkAllMovedOnce()
	})
}

// TestCancelledMoveTaskStaysCancelled: once CancelMoveTask answered, no
// restart (nor power loss) runs the task again, and what it had not moved
// stays in the dead-letter queue.
func TestCancelledMoveTaskStaysCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTaskRig(t, broker.Config{})
		h, err := r.b.StartMoveTask(ctx, r.dlq.ARN, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		r.runUntil(movedAtLeast(40))
		moved, err := r.b.CancelMoveTask(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.b.CancelMoveTask(ctx, h); code(err) != st.CodeUnsupportedOperation {
			t.Fatalf("cancelling again: %v", err)
		}
		check := func(when string) {
			t.Helper()
			mt := r.task()
			if mt.Status != "CANCELLED" || mt.ApproximateNumberOfMessagesMoved != moved || mt.TaskHandle != "" {
				t.Fatalf("%s: %+v, %d moved", when, mt, moved)
			}
			for range 100 { // two seconds: a task running would move 100
				r.clk.Advance(20 * time.Millisecond)
				synctest.Wait()
			}
			if got := attr(t, r.b, "dlq", "ApproximateNumberOfMessages"); got != fmt.Sprint(taskMessages-moved) {
				t.Fatalf("%s: %s messages in the dead-letter queue, want %d", when, got, taskMessages-moved)
			}
		}
		check("cancelled")
		r.crash()
		check("after a power loss")
		r.restart()
		check("after a restart")
		// A new task may start, and moves the rest.
		if _, err := r.b.StartMoveTask(ctx, r.dlq.ARN, "", 0); err != nil {
			t.Fatal(err)
		}
		if mt := r.runUntil(ended); mt.Status != "COMPLETED" || mt.ApproximateNumberOfMessagesMoved != taskMessages-moved {
			t.Fatalf("the second task: %+v", mt)
		}
		ts, err := r.b.ListMoveTasks(ctx, r.dlq.ARN, 10)
		if err != nil || len(ts) != 2 || ts[1].Status != "CANCELLED" {
			t.Fatalf("tasks newest first: %+v %v", ts, err)
		}
		r.checkAllMovedOnce()
	})
}

// TestMoveTaskSurvivesSnapshotAndCompaction: a task whose records are all
// before the partition's newest snapshot (and in segments compaction and
// unlinking may take) is in the snapshot, and resumes from it after a
// power loss.
func TestMoveTaskSurvivesSnapshotAndCompaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTaskRig(t, broker.Config{SegmentBytes: 64 << 10, CheckpointBytes: 128 << 10})
		h, err := r.b.StartRedrive(ctx, "dlq", broker.PeekFilter{}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		r.runUntil(movedAtLeast(50))
		if err := r.b.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		r.runUntil(movedAtLeast(150)) // compaction rounds run every second meanwhile
		if err := r.b.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := r.task()
		r.crash() // the runner wrote nothing since the snapshot
		// The snapshot holds the task as its last progress record said:
		// behind by 100 messages at most.
		if mt := r.task(); mt.Status != "RUNNING" || mt.TaskHandle != h || mt.ApproximateNumberOfMessagesMoved > before.ApproximateNumberOfMessagesMoved+1 ||
			mt.ApproximateNumberOfMessagesMoved < before.ApproximateNumberOfMessagesMoved-100 {
			t.Fatalf("after the power loss: %+v; before: %+v", mt, before)
		}
		if mt := r.runUntil(ended); mt.Status != "COMPLETED" || mt.ApproximateNumberOfMessagesMoved > taskMessages || mt.ApproximateNumberOfMessagesMoved < taskMessages-100 {
			t.Fatalf("the task ended %+v", mt)
		}
		r.checkAllMovedOnce()
	})
}

// TestMoveTasksKept: a queue keeps its ten newest ended tasks (and lists
// them newest first), across a restart.
func TestMoveTasksKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTaskRig(t, broker.Config{})
		var handles []string
		for i := 0; i < 12; i++ {
			h, err := r.b.StartRedrive(ctx, "dlq", broker.PeekFilter{Tenant: "nobody"}, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			r.runUntil(ended)
			handles = append(handles, h)
			r.clk.Advance(time.Second)
		}
		r.restart()
		ts, err := r.b.ListMoveTasks(ctx, r.dlq.ARN, 10)
		if err != nil || len(ts) != 10 {
			t.Fatalf("%d tasks, %v", len(ts), err)
		}
		if !slices.IsSortedFunc(ts, func(a, b broker.MoveTask) int { return b.StartedTimestamp.Compare(a.StartedTimestamp) }) {
			t.Fatalf("not newest first: %+v", ts)
		}
		if _, err := r.b.WaitMoveTask(ctx, handles[0]); code(err) != st.CodeResourceNotFound {
			t.Fatalf("the oldest task is still there: %v", err)
		}
		if mt, err := r.b.WaitMoveTask(ctx, handles[11]); err != nil || mt.Status != "COMPLETED" {
			t.Fatalf("the newest task: %+v %v", mt, err)
		}
	})
}
