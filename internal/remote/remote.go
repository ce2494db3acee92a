// Package remote reaches a queue owned by another node of a cluster: the
// hand-over of a message into it (partition.Destination's Enter, for
// dead-letter moves and redrives) as a NATS request to the subject its
// owner serves, and a topic's deliveries into it (queue.go). Requests
// from clients (SQS, SNS, admin) are forwarded whole by package forward;
// these are the calls between owners.
//
// The request is the hand-over key in a header and the message as a Send
// record (record.Encode) in the data; the reply is empty on success or
// carries the error (an SQS code and message). Enter is idempotent under
// its key (see partition.Destination), so a request whose answer was lost
// is retried safely.
package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

const (
	hdrKey  = "Sluice-Enter-Key"
	hdrCode = "Sluice-Error-Code"
)

// Destination is a queue owned by another node.
type Destination struct {
	Conn    *nats.Conn
	Subject string // what the queue's owner serves (Serve)
	Queue   string // the queue's name
	// Wait bounds one hand-over, retries included (the queue may be
	// moving between owners). Default 20 s.
	Wait time.Duration
}

// Name is the queue's name.
func (d Destination) Name() string { return d.Queue }

// Enter hands the message over to the queue's owner, retrying while no
// owner answers (a partition between owners) until Wait ends.
func (d Destination) Enter(ctx context.Context, key string, m *record.Msg, p *record.Payload) error {
	wait := d.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg := nats.NewMsg(d.Subject)
	msg.Header.Set(hdrKey, key)
	msg.Data = record.Encode(&record.Record{Type: record.Send, Msg: m, Payload: p})
	backoff := 50 * time.Millisecond
	for {
		attempt, stop := context.WithTimeout(ctx, 5*time.Second)
		reply, err := d.Conn.RequestMsgWithContext(attempt, msg)
		stop()
		if err == nil {
			return replyError(reply)
		}
		if ctx.Err() != nil {
			return &st.Error{Code: st.CodeServiceUnavailable, Message: fmt.Sprintf("The queue %s did not answer a hand-over in time; retry.", d.Queue), Cause: err}
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return &st.Error{Code: st.CodeServiceUnavailable, Message: "The cluster could not reach the queue " + d.Queue + "; retry.", Cause: err}
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

func replyError(m *nats.Msg) error {
	code := m.Header.Get(hdrCode)
	if code == "" {
		return nil
	}
	e := &st.Error{Code: st.Code(code), Message: string(m.Data)}
	if e.Code == st.CodeServiceUnavailable {
		e.RetryAfter = time.Second
	}
	return e
}

// Serve answers hand-overs into dst on subject (a queue group, so each is
// entered by one subscriber even while ownership moves), until the
// subscription is drained or unsubscribed.
func Serve(nc *nats.Conn, subject string, dst partition.Destination) (*nats.Subscription, error) {
	return nc.QueueSubscribe(subject, "owners", func(m *nats.Msg) {
		go handle(m, dst)
	})
}

func handle(m *nats.Msg, dst partition.Destination) {
	reply := nats.NewMsg(m.Reply)
	err := enter(m, dst)
	if err != nil {
		var se *st.Error
		if !errors.As(err, &se) {
			se = &st.Error{Code: st.CodeInternal, Message: err.Error()}
		}
		reply.Header.Set(hdrCode, string(se.Code))
		reply.Data = []byte(se.Message)
	}
	_ = m.RespondMsg(reply)
}

func enter(m *nats.Msg, dst partition.Destination) error {
	key := m.Header.Get(hdrKey)
	if key == "" {
		return st.Errorf(st.CodeInvalidParameterValue, "A hand-over without its key.")
	}
	r, err := record.Decode(m.Data, true)
	if err != nil || r.Type != record.Send || r.Msg == nil || r.Payload == nil {
		return st.Errorf(st.CodeInvalidParameterValue, "A hand-over whose message does not decode: %v", err)
	}
	return dst.Enter(context.Background(), key, r.Msg, r.Payload)
}
