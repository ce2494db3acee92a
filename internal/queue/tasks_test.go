package queue

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/record"
)

// applyTask applies a task's record as an owner does once it is durable.
func applyTask(t *testing.T, q *Queue, now time.Time, tk record.MoveTask) {
	t.Helper()
	if err := q.Apply(now, q.TaskRecord(tk), Loc{}); err != nil {
		t.Fatal(err)
	}
}

func handles(ts []record.MoveTask) []string {
	var out []string
	for _, tk := range ts {
		out = append(out, fmt.Sprint(tk.Handle, ":", tk.Status, ":", tk.Moved))
	}
	return out
}

// TestSnapshotKeepsTasks: a queue's move tasks are in its snapshot, and a
// queue rebuilt from the snapshot alone has them as they were.
func TestSnapshotKeepsTasks(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := New(Config{})
	applyTask(t, q, now, record.MoveTask{Handle: "a", Status: record.TaskCompleted, Started: now.UnixMilli(), Ended: now.UnixMilli(), Moved: 3, ToMove: 3})
	running := record.MoveTask{Handle: "b", Source: "arn:src", Destination: "arn:dst", Rate: 5, Status: record.TaskRunning,
		Started: now.UnixMilli() + 1, ToMove: 9, Moved: 4, Bound: 77, Filter: &record.TaskFilter{Tenant: "t"}, Allowed: []string{"dst"}}
	applyTask(t, q, now, running)
	snap := q.Snapshot(now)
	fresh := New(Config{})
	for i, r := range snap {
		r.Pos = uint64(i + 1)
		if err := fresh.Replay(now, r, Loc{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fresh.Tasks(now), q.Tasks(now); !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Fatalf("rebuilt from the snapshot: %+v\nwant %+v", got, want)
	}
	if got, _ := fresh.Task("b"); !reflect.DeepEqual(got, running) {
		t.Fatalf("the running task: %+v", got)
	}
}

// TestTaskEndsOnce: a record that runs an ended task again (progress
// written after its end) changes nothing.
func TestTaskEndsOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := New(Config{})
	tk := record.MoveTask{Handle: "a", Status: record.TaskRunning, Started: now.UnixMilli(), Moved: 1}
	applyTask(t, q, now, tk)
	tk.Moved = 2
	applyTask(t, q, now, tk)
	ended := tk
	ended.Status, ended.Ended = record.TaskCancelled, now.UnixMilli()
	applyTask(t, q, now, ended)
	tk.Moved = 3
	applyTask(t, q, now, tk)
	if got := handles(q.Tasks(now)); !reflect.DeepEqual(got, []string{"a:CANCELLED:2"}) {
		t.Fatalf("tasks: %v", got)
	}
}

// TestTasksForgotten: a queue keeps its running tasks, and of its ended
// ones the newest TasksKept that ended within TaskKeep.
func TestTasksForgotten(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := New(Config{})
	applyTask(t, q, now, record.MoveTask{Handle: "run", Status: record.TaskRunning, Started: now.UnixMilli()})
	for i := 0; i < TasksKept+2; i++ {
		at := now.Add(time.Duration(i) * time.Minute).UnixMilli()
		applyTask(t, q, now, record.MoveTask{Handle: fmt.Sprint(i), Status: record.TaskCompleted, Started: at, Ended: at})
	}
	got := handles(q.Tasks(now))
	if len(got) != TasksKept+1 || got[0] != "run:RUNNING:0" || got[1] != "2:COMPLETED:0" {
		t.Fatalf("tasks: %v", got)
	}
	later := now.Add(TaskKeep + 5*time.Minute + time.Second) // the ones that ended in the first five minutes go
	if got := handles(q.Tasks(later)); len(got) != 1+TasksKept-4 || got[0] != "run:RUNNING:0" || got[1] != "6:COMPLETED:0" {
		t.Fatalf("tasks after %v: %v", TaskKeep, got)
	}
	if n := len(q.Snapshot(later)); n != 1+len(q.Tasks(later)) { // its State, and its tasks
		t.Fatalf("a snapshot of %d records", n)
	}
}
