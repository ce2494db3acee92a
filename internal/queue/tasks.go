package queue

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicemq/sluice/internal/record"
)

// Move tasks kept: SQS lists the tasks of the last 14 days, newest first,
// up to 10 (running ones are always kept).
const (
	TaskKeep  = 14 * 24 * time.Hour
	TasksKept = 10
)

// TaskRecord is the record of a move task's state (applied once durable).
func (q *Queue) TaskRecord(t record.MoveTask) *record.Record {
	return &record.Record{Type: record.Task, Pos: q.take(), Task: &t}
}

// Tasks returns the move tasks kept at now, oldest first (copies: their
// Allowed and Filter are shared, and never changed).
func (q *Queue) Tasks(now time.Time) []record.MoveTask {
	q.forgetTasks(ms(now))
	return slices.Clone(q.tasks)
}

// Task returns the move task of handle.
func (q *Queue) Task(handle string) (record.MoveTask, bool) {
	for _, t := range q.tasks {
		if t.Handle == handle {
			return t, true
		}
	}
	return record.MoveTask{}, false
}

// applyTask takes a task's latest state. A task ends once: a record that
// runs an ended task again (a runner's progress written after its end)
// changes nothing.
func (q *Queue) applyTask(t record.MoveTask) {
	i := slices.IndexFunc(q.tasks, func(x record.MoveTask) bool { return x.Handle == t.Handle })
	switch {
	case i < 0:
		q.tasks = append(q.tasks, t)
		slices.SortStableFunc(q.tasks, func(a, b record.MoveTask) int { return cmp.Compare(a.Started, b.Started) })
	case q.tasks[i].Status.Ended():
		return
	default:
		q.tasks[i] = t
	}
	q.forgetTasks(q.now)
}

// forgetTasks drops the ended tasks that ended more than TaskKeep before
// now (unix ms), and the oldest ended ones beyond TasksKept.
func (q *Queue) forgetTasks(now int64) {
	ended := 0
	for _, t := range q.tasks {
		if t.Status.Ended() {
			ended++
		}
	}
	cut := now - TaskKeep.Milliseconds()
	q.tasks = slices.DeleteFunc(q.tasks, func(t record.MoveTask) bool {
		if !t.Status.Ended() {
			return false
		}
		if ended > TasksKept || t.Ended < cut {
			ended--
			return true
		}
		return false
	})
}
