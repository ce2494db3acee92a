package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/sluicemq/sluice/internal/clock"
)

// Clock and Timer are the time source the heartbeats use (tests pass a
// fake one).
type (
	Clock = clock.Clock
	Timer = clock.Timer
)

// Handler processes one message. Its context ends when the consumer is
// closed, or with cause ErrLeaseLost when the message was delivered again
// elsewhere (context.Cause tells which).
type Handler func(ctx context.Context, m *Message) error

// Message is a received message.
type Message struct {
	ID            string
	Body          string
	ReceiptHandle string
	GroupID       string
	// Tenant is what Options.TenantOf returned (by default the group id).
	Tenant       string
	ReceiveCount int
	// RetryLevel, FailureReason and LastError are Sluice's failure
	// attributes (zero on Amazon SQS).
	RetryLevel    int
	FailureReason string
	LastError     string
	// Attributes are the system attributes; MessageAttributes the user's.
	Attributes        map[string]string
	MessageAttributes map[string]types.MessageAttributeValue
}

// TraceHeader returns the AWSTraceHeader system attribute, or "".
func (m *Message) TraceHeader() string { return m.Attributes["AWSTraceHeader"] }

// TraceParent returns the W3C traceparent: the message attribute of that
// name, else the traceparent header its send carried (Sluice), or "".
func (m *Message) TraceParent() string {
	if v, ok := m.MessageAttributes["traceparent"]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return m.Attributes["SluiceTraceParent"] // the send request's traceparent header

}

type traceKey struct{}

// Trace is what travelled with a message for tracing.
type Trace struct{ AWSTraceHeader, TraceParent string }

// TraceFrom returns the trace headers of the message a handler runs for.
func TraceFrom(ctx context.Context) Trace {
	t, _ := ctx.Value(traceKey{}).(Trace)
	return t
}

// ErrLeaseLost is the cause of a handler's context when its message was
// delivered again (its visibility could not be extended).
var ErrLeaseLost = errors.New("consumer: lease lost: the message was delivered again")

// Outcome is what became of a message.
type Outcome string

const (
	Deleted  Outcome = "deleted"
	Retried  Outcome = "retried"
	Rejected Outcome = "rejected"
	Deferred Outcome = "deferred"
	Lost     Outcome = "lease-lost"
	Released Outcome = "released" // not run: shutting down, or no room to wait
)

type verdict struct {
	kind  Outcome
	err   error
	delay time.Duration // < 0: the queue's
}

func (v *verdict) Error() string {
	if v.err == nil {
		return string(v.kind)
	}
	return fmt.Sprintf("%s: %v", v.kind, v.err)
}
func (v *verdict) Unwrap() error { return v.err }

// Retry marks a retryable failure; the message is retried after delay
// (negative: the queue's retry ladder decides).
func Retry(err error, delay time.Duration) error {
	return &verdict{kind: Retried, err: err, delay: delay}
}

// Permanent marks a failure that retrying cannot fix: the message goes to
// the dead-letter queue.
func Permanent(err error) error { return &verdict{kind: Rejected, err: err} }

// Defer puts the message off for delay without counting a failure.
func Defer(delay time.Duration) error { return &verdict{kind: Deferred, delay: delay} }

// Options configure a Consumer. Zero values mean the documented default.
type Options struct {
	// Concurrency is how many handlers run at once. Default 10.
	Concurrency int
	// TenantConcurrency caps the handlers of one tenant (0: no cap).
	// Messages of a tenant at its cap wait locally, their visibility kept
	// up by the heartbeat, and are released when that wait is full.
	TenantConcurrency int
	// MaxWaiting bounds the messages waiting locally for their tenant.
	// Default 2 x Concurrency.
	MaxWaiting int
	// TenantOf names a message's tenant. Default: its MessageGroupId.
	TenantOf func(*Message) string
	// VisibilityTimeout is the lease each receive and heartbeat asks for;
	// heartbeats run every third of it. Default 30s.
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll time of receives. Default 20s.
	WaitTime time.Duration
	// DeleteEvery flushes batched deletes at least this often. Default 100ms.
	DeleteEvery time.Duration
	// OnStart and OnFinish are metric hooks; Tracer may wrap a handler's
	// context (start a span from TraceFrom(ctx)).
	OnStart  func(m *Message)
	OnFinish func(m *Message, o Outcome, d time.Duration, err error)
	Tracer   func(ctx context.Context, m *Message) context.Context
	// Clock is the time source for heartbeats. Default: the real clock.
	Clock  Clock
	Logger *slog.Logger
}

// Consumer runs a handler over a queue's messages.
type Consumer struct {
	client *sqs.Client
	url    string
	h      Handler
	o      Options

	ctx    context.Context // ends on Close: cancels handlers
	cancel context.CancelFunc
	recv   context.Context // ends on Shutdown: stops receiving
	stopRx context.CancelFunc

	mu       sync.Mutex
	cond     *sync.Cond
	running  int
	byTenant map[string]int
	waiting  []*lease
	leases   map[string]*lease // by receipt handle
	deletes  []string
	noExt    bool // the server does not know Sluice's extensions
	started  bool

	wg     sync.WaitGroup // receiver, heartbeat, flusher
	hwg    sync.WaitGroup // handlers
	hbTick Timer
}

type lease struct {
	m      *Message
	cancel context.CancelCauseFunc
	lost   bool
}

// New returns a consumer of the queue at queueURL. Start begins it.
func New(client *sqs.Client, queueURL string, h Handler, o Options) (*Consumer, error) {
	if client == nil || queueURL == "" || h == nil {
		return nil, errors.New("consumer: a client, a queue URL and a handler are required")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 10
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = 2 * o.Concurrency
	}
	if o.TenantOf == nil {
		o.TenantOf = func(m *Message) string { return m.GroupID }
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 30 * time.Second
	}
	if o.VisibilityTimeout < 3*time.Second {
		return nil, errors.New("consumer: VisibilityTimeout must be at least 3s (heartbeats run every third of it)")
	}
	if o.WaitTime <= 0 {
		o.WaitTime = 20 * time.Second
	}
	if o.DeleteEvery <= 0 {
		o.DeleteEvery = 100 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Consumer{client: client, url: queueURL, h: h, o: o, byTenant: map[string]int{}, leases: map[string]*lease{}}
	c.cond = sync.NewCond(&c.mu)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.recv, c.stopRx = context.WithCancel(c.ctx)
	return c, nil
}

// Start begins receiving. It returns at once.
func (c *Consumer) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return
	}
	c.started = true
	c.wg.Add(2)
	go c.receiver()
	go c.flusher()
	c.scheduleHeartbeatLocked()
}

// Shutdown stops receiving, waits for running handlers to finish (and
// releases messages still waiting for their tenant), flushes deletes, and
// returns. If ctx ends first, handlers are cancelled as by Close.
func (c *Consumer) Shutdown(ctx context.Context) error {
	c.stopRx()
	c.mu.Lock()
	waiting := c.waiting
	c.waiting = nil
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, l := range waiting { // back to the queue for other consumers
		c.finish(l, Released, nil, 0)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.visibility(rctx, l.m.ReceiptHandle, 0)
		cancel()
	}
	done := make(chan struct{})
	go func() { c.hwg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		c.cancel()
		<-done
	}
	c.cancel()
	c.mu.Lock()
	if c.hbTick != nil {
		c.hbTick.Stop()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.flush(fctx)
	return err
}

// Close stops at once: handlers' contexts are cancelled (their messages
// come back when their visibility expires).
func (c *Consumer) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Shutdown(ctx)
}

// Run starts the consumer and shuts it down gracefully when ctx ends.
func (c *Consumer) Run(ctx context.Context) error {
	c.Start()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), c.o.VisibilityTimeout)
	defer cancel()
	return c.Shutdown(sctx)
}

// receiver asks for as many messages as there are free handler slots.
func (c *Consumer) receiver() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		for c.running+len(c.waiting) >= c.o.Concurrency && c.recv.Err() == nil {
			c.cond.Wait()
		}
		free := c.o.Concurrency - c.running - len(c.waiting)
		c.mu.Unlock()
		if c.recv.Err() != nil {
			return
		}
		out, err := c.client.ReceiveMessage(c.recv, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(c.url), MaxNumberOfMessages: int32(min(10, max(1, free))),
			WaitTimeSeconds: int32(c.o.WaitTime / time.Second), VisibilityTimeout: int32(c.o.VisibilityTimeout / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			if c.recv.Err() != nil {
				return
			}
			c.o.Logger.Warn("consumer: receive failed", "queue", c.url, "err", err)
			c.sleep(time.Second)
			continue
		}
		for _, sm := range out.Messages {
			c.dispatch(toMessage(sm, c.o.TenantOf))
		}
	}
}

func (c *Consumer) sleep(d time.Duration) {
	done := make(chan struct{})
	t := c.o.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
	case <-c.recv.Done():
		t.Stop()
	}
}

func toMessage(sm types.Message, tenantOf func(*Message) string) *Message {
	m := &Message{ID: aws.ToString(sm.MessageId), Body: aws.ToString(sm.Body), ReceiptHandle: aws.ToString(sm.ReceiptHandle),
		Attributes: sm.Attributes, MessageAttributes: sm.MessageAttributes}
	if m.Attributes == nil {
		m.Attributes = map[string]string{}
	}
	m.GroupID = m.Attributes["MessageGroupId"]
	m.ReceiveCount, _ = strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	m.RetryLevel, _ = strconv.Atoi(m.Attributes["SluiceRetryLevel"])
	m.FailureReason, m.LastError = m.Attributes["SluiceFailureReason"], m.Attributes["SluiceLastError"]
	m.Tenant = tenantOf(m)
	return m
}

// dispatch runs a message now, or has it wait for its tenant.
func (c *Consumer) dispatch(m *Message) {
	l := &lease{m: m}
	c.mu.Lock()
	c.leases[m.ReceiptHandle] = l
	if c.roomLocked(m.Tenant) {
		c.startLocked(l)
		c.mu.Unlock()
		return
	}
	if len(c.waiting) < c.o.MaxWaiting {
		c.waiting = append(c.waiting, l)
		c.mu.Unlock()
		return
	}
	delete(c.leases, m.ReceiptHandle)
	c.mu.Unlock()
	c.finish(l, Released, nil, 0)
	c.visibility(c.ctx, m.ReceiptHandle, 0)
}

func (c *Consumer) roomLocked(tenant string) bool {
	return c.running < c.o.Concurrency && (c.o.TenantConcurrency == 0 || c.byTenant[tenant] < c.o.TenantConcurrency)
}

func (c *Consumer) startLocked(l *lease) {
	c.running++
	c.byTenant[l.m.Tenant]++
	ctx, cancel := context.WithCancelCause(c.ctx)
	l.cancel = cancel
	c.hwg.Add(1)
	go c.run(ctx, l)
}

func (c *Consumer) run(ctx context.Context, l *lease) {
	defer c.hwg.Done()
	m := l.m
	ctx = context.WithValue(ctx, traceKey{}, Trace{AWSTraceHeader: m.TraceHeader(), TraceParent: m.TraceParent()})
	if c.o.Tracer != nil {
		ctx = c.o.Tracer(ctx, m)
	}
	if c.o.OnStart != nil {
		c.o.OnStart(m)
	}
	start := c.o.Clock.Now()
	err := c.call(ctx, m)
	d := c.o.Clock.Now().Sub(start)
	c.mu.Lock()
	lost := l.lost
	c.mu.Unlock()
	switch {
	case lost:
		c.finish(l, Lost, err, d)
	case err == nil:
		c.mu.Lock()
		c.deletes = append(c.deletes, m.ReceiptHandle)
		full := len(c.deletes) >= 10
		c.mu.Unlock()
		if full {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.flush(fctx)
			cancel()
		}
		c.finish(l, Deleted, nil, d)
	default:
		v := &verdict{kind: Retried, err: err, delay: -1}
		errors.As(err, &v)
		c.settle(m, v)
		c.finish(l, v.kind, err, d)
	}
	l.cancel(nil)
}

// call runs the handler, turning a panic into a retryable failure.
func (c *Consumer) call(ctx context.Context, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.o.Logger.Error("consumer: handler panicked", "message_id", m.ID, "panic", r, "stack", string(debug.Stack()))
			err = Retry(fmt.Errorf("handler panicked: %v", r), -1)
		}
	}()
	return c.h(ctx, m)
}

// finish ends a lease: frees its slot and starts a waiting message whose
// tenant now has room.
func (c *Consumer) finish(l *lease, o Outcome, err error, d time.Duration) {
	c.mu.Lock()
	delete(c.leases, l.m.ReceiptHandle)
	if l.cancel != nil { // it ran
		c.running--
		c.byTenant[l.m.Tenant]--
		if c.byTenant[l.m.Tenant] == 0 {
			delete(c.byTenant, l.m.Tenant)
		}
		for i, w := range c.waiting {
			if c.roomLocked(w.m.Tenant) {
				c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
				c.startLocked(w)
				break
			}
		}
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	if c.o.OnFinish != nil {
		c.o.OnFinish(l.m, o, d, err)
	}
}

// settle tells the queue a failed message's fate.
func (c *Consumer) settle(m *Message, v *verdict) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reason := ""
	if v.err != nil {
		reason = v.err.Error()
		if len(reason) > 4096 {
			reason = reason[:4096]
		}
	}
	in := map[string]any{"QueueUrl": c.url, "ReceiptHandle": m.ReceiptHandle}
	op := ""
	switch v.kind {
	case Retried:
		op = "RetryMessage"
		in["Reason"] = reason
		if v.delay >= 0 {
			in["DelaySeconds"] = int(v.delay / time.Second)
		}
	case Rejected:
		op = "RejectMessage"
		in["Reason"] = reason
	case Deferred:
		op = "DeferMessage"
		in["DelaySeconds"] = int(max(v.delay, 0) / time.Second)
	}
	err := c.extension(ctx, op, in)
	if err == nil {
		return
	}
	if !errors.Is(err, errNoExtension) {
		c.o.Logger.Warn("consumer: could not settle a message", "op", op, "message_id", m.ID, "err", err)
		return
	}
	// Amazon SQS: the nearest it offers.
	switch v.kind {
	case Rejected:
		// SQS cannot dead-letter on demand: make it visible now so the
		// redrive policy's maxReceiveCount takes it there soon.
		c.visibility(ctx, m.ReceiptHandle, 0)
	default:
		c.visibility(ctx, m.ReceiptHandle, max(v.delay, 0))
	}
}

var errNoExtension = errors.New("consumer: the server does not support Sluice's extensions")

// extension calls one of Sluice's actions over the client's own endpoint,
// signer and credentials (the SDK has no operation for them).
func (c *Consumer) extension(ctx context.Context, op string, in map[string]any) error {
	c.mu.Lock()
	no := c.noExt
	c.mu.Unlock()
	if no {
		return errNoExtension
	}
	err := callExtension(ctx, c.client, c.url, op, in)
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "InvalidAction" || ae.ErrorCode() == "UnknownOperationException" ||
		ae.ErrorCode() == "AWS.SimpleQueueService.UnsupportedOperation") {
		c.mu.Lock()
		c.noExt = true
		c.mu.Unlock()
		c.o.Logger.Info("consumer: the server has no Sluice extensions; using SQS visibility changes instead", "queue", c.url)
		return errNoExtension
	}
	return err
}

func (c *Consumer) visibility(ctx context.Context, handle string, d time.Duration) {
	_, err := c.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(c.url),
		ReceiptHandle: aws.String(handle), VisibilityTimeout: int32(d / time.Second)})
	if err != nil && ctx.Err() == nil {
		c.o.Logger.Debug("consumer: visibility change failed", "err", err)
	}
}

// ---- deletes and heartbeats ----

func (c *Consumer) flusher() {
	defer c.wg.Done()
	t := time.NewTicker(c.o.DeleteEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.flush(c.ctx)
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *Consumer) flush(ctx context.Context) {
	c.mu.Lock()
	hs := c.deletes
	c.deletes = nil
	c.mu.Unlock()
	for len(hs) > 0 {
		n := min(10, len(hs))
		var es []types.DeleteMessageBatchRequestEntry
		for i, h := range hs[:n] {
			es = append(es, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)})
		}
		hs = hs[n:]
		out, err := c.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.url), Entries: es})
		if err != nil {
			c.o.Logger.Warn("consumer: delete failed; the messages will be delivered again", "err", err)
			continue
		}
		for _, f := range out.Failed {
			c.o.Logger.Warn("consumer: delete failed", "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
		}
	}
}

func (c *Consumer) scheduleHeartbeatLocked() {
	c.hbTick = c.o.Clock.AfterFunc(c.o.VisibilityTimeout/3, func() {
		if c.ctx.Err() != nil {
			return
		}
		c.heartbeat()
		c.mu.Lock()
		if c.ctx.Err() == nil {
			c.scheduleHeartbeatLocked()
		}
		c.mu.Unlock()
	})
}

// heartbeat extends the lease of every message held (running or
// waiting); a message whose extension fails was delivered again: its
// handler is cancelled with ErrLeaseLost.
func (c *Consumer) heartbeat() {
	c.mu.Lock()
	var ls []*lease
	for _, l := range c.leases {
		if !l.lost {
			ls = append(ls, l)
		}
	}
	c.mu.Unlock()
	secs := int32(c.o.VisibilityTimeout / time.Second)
	for len(ls) > 0 {
		n := min(10, len(ls))
		batch := ls[:n]
		ls = ls[n:]
		es := make([]types.ChangeMessageVisibilityBatchRequestEntry, n)
		for i, l := range batch {
			es[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(l.m.ReceiptHandle), VisibilityTimeout: secs}
		}
		out, err := c.client.ChangeMessageVisibilityBatch(c.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(c.url), Entries: es})
		if err != nil {
			c.o.Logger.Warn("consumer: heartbeat failed", "err", err)
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			if i < 0 || i >= n {
				continue
			}
			l := batch[i]
			c.mu.Lock()
			l.lost = true
			var wasWaiting bool
			for j, w := range c.waiting {
				if w == l {
					c.waiting = append(c.waiting[:j], c.waiting[j+1:]...)
					wasWaiting = true
					break
				}
			}
			cancel := l.cancel
			c.mu.Unlock()
			c.o.Logger.Info("consumer: lease lost", "message_id", l.m.ID, "code", aws.ToString(f.Code))
			if cancel != nil {
				cancel(ErrLeaseLost)
			}
			if wasWaiting {
				c.finish(l, Lost, ErrLeaseLost, 0)
			}
		}
	}
}

// ---- Sluice extension calls ----

// callExtension sends a JSON-protocol request for op through the client's
// own middleware (endpoint, signing, retries), as a custom operation.
func callExtension(ctx context.Context, client *sqs.Client, url, op string, in map[string]any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return invokeJSON(ctx, client, url, op, bytes.NewReader(body))
}
