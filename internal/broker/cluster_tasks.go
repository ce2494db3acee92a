package broker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/redrive"
	"github.com/sluicemq/sluice/sluicetype"
)

// Message move tasks live in their source queue's partition and run on its
// owner. ListMessageMoveTasks and CancelMessageMoveTask are answered by
// any node: one that does not own the queue asks the others ("tasks",
// "cancel-task"), and the owner answers from its partition. The asking
// node has checked that its caller may use the queue.

// taskQuestion is what a node asks about a queue's tasks.
type taskQuestion struct {
	Queue  string `json:"queue"`
	Handle string `json:"handle,omitempty"`
	Max    int    `json:"max,omitempty"`
}

// taskAnswer is a node's answer: Owner says it owns the queue (the others
// answer nothing else).
type taskAnswer struct {
	Owner   bool       `json:"owner"`
	Tasks   []MoveTask `json:"tasks,omitempty"`
	Moved   int64      `json:"moved,omitempty"`
	Code    string     `json:"code,omitempty"`
	Message string     `json:"message,omitempty"`
}

// answerTask is this node's answer to a question whose local answer is
// err: not the owner's when it does not own the queue.
func answerTask(a taskAnswer, err error) taskAnswer {
	var se *sluicetype.Error
	switch {
	case err == nil:
		a.Owner = true
	case errors.Is(err, partition.ErrNotOwner), sluicetype.CodeOf(err) == sluicetype.CodeQueueDoesNotExist:
		return taskAnswer{}
	case errors.As(err, &se):
		a = taskAnswer{Owner: true, Code: string(se.Code), Message: se.Message}
	default:
		a = taskAnswer{Owner: true, Code: string(sluicetype.CodeInternal), Message: err.Error()}
	}
	return a
}

// serveTasks answers the other nodes' questions about the tasks of the
// queues this node owns, and has the dead-letter tools ask them.
func (c *clusterNode) serveTasks(b *Broker) error {
	answer := func(question string, f func(q taskQuestion) taskAnswer) error {
		return c.answer(question, func(data []byte) any {
			var q taskQuestion
			if json.Unmarshal(data, &q) != nil {
				return taskAnswer{} // not the owner's answer
			}
			return f(q)
		})
	}
	err := errors.Join(
		answer("tasks", func(q taskQuestion) taskAnswer {
			ts, err := b.tools.ListLocal(q.Queue, q.Max)
			return answerTask(taskAnswer{Tasks: ts}, err)
		}),
		answer("cancel-task", func(q taskQuestion) taskAnswer {
			moved, err := b.tools.CancelLocal(q.Queue, q.Handle)
			return answerTask(taskAnswer{Moved: moved}, err)
		}))
	if err != nil {
		return err
	}
	b.tools.SetRemote(redrive.Remote{
		List: func(ctx context.Context, queue string, max int) ([]MoveTask, error) {
			a, err := c.askOwner(ctx, "tasks", taskQuestion{Queue: queue, Max: max})
			return a.Tasks, err
		},
		Cancel: func(ctx context.Context, queue, handle string) (int64, error) {
			a, err := c.askOwner(ctx, "cancel-task", taskQuestion{Queue: queue, Handle: handle})
			return a.Moved, err
		},
	})
	return nil
}

// askOwner asks every node a question about a queue's tasks and returns
// its owner's answer.
func (c *clusterNode) askOwner(ctx context.Context, question string, q taskQuestion) (taskAnswer, error) {
	data, _ := json.Marshal(q)
	answers, err := c.ask(ctx, question, data)
	if err != nil {
		return taskAnswer{}, &sluicetype.Error{Code: sluicetype.CodeServiceUnavailable, RetryAfter: time.Second,
			Message: "The cluster could not ask the node that owns the queue; retry the request.", Cause: err}
	}
	for _, raw := range answers {
		var a taskAnswer
		if json.Unmarshal(raw, &a) != nil || !a.Owner {
			continue
		}
		if a.Code != "" {
			return a, &sluicetype.Error{Code: sluicetype.Code(a.Code), Message: a.Message}
		}
		return a, nil
	}
	return taskAnswer{}, &sluicetype.Error{Code: sluicetype.CodeServiceUnavailable, RetryAfter: time.Second,
		Message: "The node that owns the queue did not answer; retry the request."}
}
