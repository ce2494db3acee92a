package engine

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// MaxBatchBytes is the most a batch's messages may hold together.
const MaxBatchBytes = 1 << 20

// diskAlarm is the error sends get while free disk space is below the
// reserve (nil otherwise).
func (e *Engine) diskAlarm() error {
	d := e.st.Disk()
	if !d.Alarm {
		return nil
	}
	return &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: 5 * time.Second, Message: fmt.Sprintf(
		"The server is short of disk space: %s free, below its reserve of %s. New messages are refused until space is freed; receives, deletes and purges still work.",
		mib(d.Free), mib(d.Reserve))}
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// Send sends one message; it returns once the message is durable.
func (e *Engine) Send(ctx context.Context, name string, in st.SendInput) (st.SendResult, error) {
	res, errs, err := e.send(ctx, name, []st.SendInput{in}, false)
	if err != nil {
		return st.SendResult{}, err
	}
	if errs[0] != nil {
		return st.SendResult{}, errs[0]
	}
	return res[0], nil
}

// SendBatch sends messages in one durable write; errs[i] is nil when entry
// i succeeded. (The number of entries is the wire's concern: SQS allows
// 1 to 10, which the SQS front checks; their total size is the broker's.)
func (e *Engine) SendBatch(ctx context.Context, name string, in []st.SendInput) ([]st.SendResult, []error, error) {
	total := 0
	for i := range in {
		total += messageSize(&in[i])
	}
	if total > MaxBatchBytes {
		return nil, nil, st.Errorf(st.CodeBatchRequestTooLong, "Batch requests cannot be longer than %d bytes. You have sent %d bytes.", MaxBatchBytes, total)
	}
	return e.send(ctx, name, in, true)
}

func (e *Engine) send(ctx context.Context, name string, in []st.SendInput, batch bool) ([]st.SendResult, []error, error) {
	if err := e.diskAlarm(); err != nil {
		e.catchUp()
		if err := e.diskAlarm(); err != nil {
			return nil, nil, err
		}
	}
	o, err := e.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	// Everything that needs no lock first: the queue's rules (read under
	// the lock briefly), each message's checks, its MD5 and its payload.
	o.mu.Lock()
	cfg := o.cfg
	o.mu.Unlock()
	res := make([]st.SendResult, len(in))
	errs := make([]error, len(in))
	specs := make([]*queue.SendSpec, len(in))
	for i := range in {
		m := &in[i]
		if err := validateMessage(m, cfg.Queue.FIFO, cfg.Queue.ContentDedup, cfg.MaxMessageSize, batch); err != nil {
			errs[i] = err
			continue
		}
		sum := md5.Sum([]byte(m.Body))
		p := &record.Payload{ID: e.NewID(), Body: m.Body, Attrs: m.Attributes, Trace: m.TraceHeader, TraceParent: m.TraceParent,
			Sender: m.SenderID, MD5: string(sum[:])}
		delay := cfg.Queue.Delay
		if !cfg.Queue.FIFO && m.DelaySeconds != nil {
			delay = time.Duration(*m.DelaySeconds) * time.Second
		}
		spec := &queue.SendSpec{Group: m.GroupID, Tenant: cfg.Tenant(m), Dedup: m.DedupID, Delay: delay, Payload: p}
		if !cfg.Queue.FIFO {
			spec.Raw = record.EncodePayload(p) // FIFO payloads get their sequence number under the lock
		}
		specs[i] = spec
		res[i].MD5OfBody = hex.EncodeToString(sum[:])
	}
	o.lock()
	if o.deleted {
		o.mu.Unlock()
		return nil, nil, noQueue()
	}
	if o.cfg.Queue.FIFO != cfg.Queue.FIFO {
		cfg = o.cfg // cannot change, but stay on the safe side
	}
	now := e.clock.Now()
	var recs []*record.Record
	var sent []int
	for i, spec := range specs {
		if spec == nil {
			continue
		}
		r := o.q.Send(now, spec)
		switch {
		case r.Throttled:
			o.ctr.throttled.Add(1)
			errs[i] = &st.Error{Code: st.CodeRequestThrottled, RetryAfter: r.RetryAfter,
				Message: fmt.Sprintf("Request is throttled: tenant %q is over its send limit; retry after %s.", spec.Tenant, r.RetryAfter)}
		case r.Dup:
			res[i].MessageID, res[i].SequenceNumber = r.DupID, r.SeqNum
		default:
			res[i].MessageID, res[i].SequenceNumber = spec.Payload.ID, r.SeqNum
			recs = append(recs, r.Record)
			sent = append(sent, i)
		}
	}
	if len(recs) == 0 {
		o.mu.Unlock()
		if !batch && errs[0] != nil {
			return nil, nil, errs[0]
		}
		return res, errs, nil
	}
	// Messages become deliverable once durable: the first to take the lock
	// after the write applies them (and wakes waiting receivers).
	werr := o.persistLocked(recs)
	o.unlock()
	if werr == nil {
		o.ctr.sent.Add(int64(len(recs)))
		return res, errs, nil
	}
	if !batch {
		return nil, nil, werr
	}
	for _, i := range sent {
		errs[i] = werr
	}
	return res, errs, nil
}
