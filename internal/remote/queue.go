package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

// A topic's deliveries into a queue another node owns are two more calls
// between owners: Deliver (messages, each from its origin: the topic's
// partition and the publish's position, fenced on the queue's mark) and
// Marks (how far the queue took each origin). Both are safe to repeat: a
// delivery the queue took already is answered as a duplicate by its mark,
// and one that does not follow the mark is refused (a gap). Neither
// retries: the topic's delivery loop tries again, from the marks, after a
// refusal for a while (ServiceUnavailable while the queue has no owner).

// QueueServer is a queue this node owns, as a topic's deliveries reach
// it.
type QueueServer interface {
	Deliver(ctx context.Context, in []st.SendInput, from []queue.Origin) ([]error, error)
	Marks(ctx context.Context) (map[uint64]uint64, error)
}

// wireError is an st.Error as it crosses between nodes.
type wireError struct {
	Code       st.Code `json:"code"`
	Message    string  `json:"message"`
	RetryAfter int64   `json:"retry_after_ms,omitempty"`
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	var se *st.Error
	if !errors.As(err, &se) {
		se = &st.Error{Code: st.CodeInternal, Message: err.Error()}
	}
	return &wireError{Code: se.Code, Message: se.Message, RetryAfter: se.RetryAfter.Milliseconds()}
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	return &st.Error{Code: w.Code, Message: w.Message, RetryAfter: time.Duration(w.RetryAfter) * time.Millisecond}
}

type deliverRequest struct {
	In   []st.SendInput `json:"in"`
	From []queue.Origin `json:"from,omitempty"`
}

type deliverReply struct {
	Errs []*wireError `json:"errs,omitempty"`
	Err  *wireError   `json:"err,omitempty"`
}

type marksReply struct {
	Marks map[uint64]uint64 `json:"marks,omitempty"`
	Err   *wireError        `json:"err,omitempty"`
}

// callTimeout bounds one call between owners.
const callTimeout = 5 * time.Second

// unreachable is the refusal for a while of a call no owner answered.
func unreachable(queueName string, err error) error {
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
		Message: fmt.Sprintf("The cluster could not reach the queue %s; retry.", queueName), Cause: err}
}

func request(ctx context.Context, nc *nats.Conn, subject string, data []byte) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return nc.RequestWithContext(ctx, subject, data)
}

// Deliver sends in (each from from[i], when from is not nil) into the
// queue that the owner on subject serves: errs[i] is in[i]'s refusal, err
// the whole call's.
func Deliver(ctx context.Context, nc *nats.Conn, subject, queueName string, in []st.SendInput, from []queue.Origin) ([]error, error) {
	data, err := json.Marshal(deliverRequest{In: in, From: from})
	if err != nil {
		return nil, err
	}
	m, err := request(ctx, nc, subject, data)
	if err != nil {
		return nil, unreachable(queueName, err)
	}
	var rep deliverReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, unreachable(queueName, fmt.Errorf("an answer that does not decode: %w", err))
	}
	if rep.Err != nil {
		return nil, rep.Err.err()
	}
	if len(rep.Errs) != len(in) {
		return nil, unreachable(queueName, fmt.Errorf("%d answers to %d messages", len(rep.Errs), len(in)))
	}
	errs := make([]error, len(in))
	for i, e := range rep.Errs {
		errs[i] = e.err()
	}
	return errs, nil
}

// Marks reads the marks of the queue that the owner on subject serves.
func Marks(ctx context.Context, nc *nats.Conn, subject, queueName string) (map[uint64]uint64, error) {
	m, err := request(ctx, nc, subject, nil)
	if err != nil {
		return nil, unreachable(queueName, err)
	}
	var rep marksReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, unreachable(queueName, fmt.Errorf("an answer that does not decode: %w", err))
	}
	if rep.Err != nil {
		return nil, rep.Err.err()
	}
	if rep.Marks == nil {
		rep.Marks = map[uint64]uint64{}
	}
	return rep.Marks, nil
}

// ServeQueue answers Deliver on deliverSubject and Marks on marksSubject
// for q (queue groups, as Serve), until the subscriptions are drained.
func ServeQueue(nc *nats.Conn, deliverSubject, marksSubject string, q QueueServer) ([]*nats.Subscription, error) {
	d, err := nc.QueueSubscribe(deliverSubject, "owners", func(m *nats.Msg) {
		go func() {
			var req deliverRequest
			var rep deliverReply
			if err := json.Unmarshal(m.Data, &req); err != nil || len(req.In) == 0 || (req.From != nil && len(req.From) != len(req.In)) {
				rep.Err = toWire(st.Errorf(st.CodeInvalidParameterValue, "A delivery that does not decode: %v", err))
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				errs, err := q.Deliver(ctx, req.In, req.From)
				cancel()
				if rep.Err = toWire(err); err == nil {
					rep.Errs = make([]*wireError, len(errs))
					for i, e := range errs {
						rep.Errs[i] = toWire(e)
					}
				}
			}
			respond(m, rep)
		}()
	})
	if err != nil {
		return nil, err
	}
	k, err := nc.QueueSubscribe(marksSubject, "owners", func(m *nats.Msg) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			marks, err := q.Marks(ctx)
			cancel()
			respond(m, marksReply{Marks: marks, Err: toWire(err)})
		}()
	})
	if err != nil {
		_ = d.Unsubscribe()
		return nil, err
	}
	return []*nats.Subscription{d, k}, nil
}

func respond(m *nats.Msg, v any) {
	if data, err := json.Marshal(v); err == nil {
		_ = m.Respond(data)
	}
}
