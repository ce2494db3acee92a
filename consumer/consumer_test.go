package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/sqs/sqstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sluicemq/sluice/consumer"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	srv "github.com/sluicemq/sluice/internal/sqs"
	st "github.com/sluicemq/sluice/sluicetype"
)

var ctx = context.Background()

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	b       *broker.Broker
	changed chan struct{} // an answer reached one of the env's clients
	client  *sqs.Client
	url     string // server
	clk     *clock.Fake
}

// start runs a real server over a real store; with fake set, the broker
// runs on a fake clock the test advances.
func start(t *testing.T, fake bool) *env {
	t.Helper()
	e := &env{changed: make(chan struct{}, 1)}
	cfg := broker.Config{Dir: t.TempDir()}
	if fake {
		e.clk = clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cfg.Clock = e.clk
	}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.NewServer(srv.ServerConfig{Logger: quiet}, b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	e.b, e.url = b, "http://"+ln.Addr().String()
	e.client = e.newClient(t, e.url)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s.Shutdown(sctx)
		b.Close()
	})
	return e
}

// newClient returns a client of the server at u whose answers wake
// waitFor.
func (e *env) newClient(t *testing.T, u string) *sqs.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(u),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), RetryMaxAttempts: 1,
		HTTPClient: &http.Client{Transport: signalling{base: tr, changed: e.changed}}})
}

func (e *env) queue(t *testing.T, name string, attrs map[string]string) string {
	t.Helper()
	out, err := e.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return *out.QueueUrl
}

func (e *env) send(t *testing.T, q, body, group string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)}
	if group != "" {
		in.MessageGroupId = aws.String(group)
	}
	if _, err := e.client.SendMessage(ctx, in); err != nil {
		t.Fatal(err)
	}
}

func (e *env) counts(t *testing.T, q string) (visible, inflight string) {
	t.Helper()
	a, err := e.b.GetQueueAttributes(q[strings.LastIndex(q, "/")+1:], []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"})
	if err != nil {
		t.Fatal(err)
	}
	return a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"]
}

// waitFor waits until cond holds. The consumer works on its own
// goroutines and changes the queue only through requests, so cond is
// looked at again each time one of the env's clients has had an answer
// (see signalling).
func (e *env) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-e.changed:
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// signalling is a client transport that signals each answer received.
type signalling struct {
	base    http.RoundTripper
	changed chan struct{}
}

func (s signalling) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	select {
	case s.changed <- struct{}{}:
	default: // a signal is pending already
	}
	return resp, err
}

func TestProcessesAndDeletes(t *testing.T) {
	e := start(t, false)
	q := e.queue(t, "work", nil)
	for i := 0; i < 25; i++ {
		e.send(t, q, fmt.Sprint(i), "")
	}
	var n atomic.Int64
	c, err := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		n.Add(1)
		return nil
	}, consumer.Options{WaitTime: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	e.waitFor(t, "25 messages", func() bool { return n.Load() == 25 })
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if v, f := e.counts(t, q); v != "0" || f != "0" {
		t.Fatalf("left %s visible, %s in flight", v, f)
	}
}

// TestHeartbeatKeepsMessageInvisible: a handler that runs past the
// visibility timeout keeps its message: nobody else receives it, and it
// is deleted once done. Server and heartbeats run on one fake clock.
func TestHeartbeatKeepsMessageInvisible(t *testing.T) {
	e := start(t, true)
	q := e.queue(t, "slow", nil)
	e.send(t, q, "long job", "")
	release := make(chan struct{})
	started := make(chan struct{})
	c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		close(started)
		<-release
		return nil
	}, consumer.Options{VisibilityTimeout: 3 * time.Second, WaitTime: time.Second, Clock: e.clk, Logger: quiet})
	c.Start()
	<-started
	other := e.newClient(t, e.url)
	for i := 0; i < 10; i++ { // 10 s of fake time: three timeouts' worth
		e.clk.Advance(time.Second)
		out, err := other.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 0 {
			t.Fatalf("after %ds the message was delivered to another consumer", i+1)
		}
	}
	close(release)
	e.waitFor(t, "the delete", func() bool { v, f := e.counts(t, q); return v == "0" && f == "0" })
	c.Close()
}

// TestLeaseLostCancelsHandler: when the message is delivered elsewhere,
// the next heartbeat fails and the handler's context ends with
// ErrLeaseLost.
func TestLeaseLostCancelsHandler(t *testing.T) {
	e := start(t, true)
	q := e.queue(t, "lease", nil)
	e.send(t, q, "job", "")
	handles := make(chan string, 1)
	cause := make(chan error, 1)
	c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		handles <- m.ReceiptHandle
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, consumer.Options{Concurrency: 1, VisibilityTimeout: 3 * time.Second, WaitTime: time.Second, Clock: e.clk, Logger: quiet})
	c.Start()
	defer c.Close()
	h := <-handles
	other := e.newClient(t, e.url)
	if _, err := other.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String(h), VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	out, err := other.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q)})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("stealing the message: %v %v", out, err)
	}
	e.clk.Advance(time.Second) // a heartbeat
	select {
	case err := <-cause:
		if !errors.Is(err, consumer.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
}

// TestTenantConcurrency: the per-tenant cap is never exceeded, and every
// message is processed.
func TestTenantConcurrency(t *testing.T) {
	e := start(t, false)
	q := e.queue(t, "tenants", nil)
	for i := 0; i < 60; i++ {
		e.send(t, q, fmt.Sprint(i), fmt.Sprint("t", i%3))
	}
	var mu sync.Mutex
	now, peak := map[string]int{}, map[string]int{}
	var done atomic.Int64
	c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		mu.Lock()
		now[m.Tenant]++
		peak[m.Tenant] = max(peak[m.Tenant], now[m.Tenant])
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		now[m.Tenant]--
		mu.Unlock()
		done.Add(1)
		return nil
	}, consumer.Options{Concurrency: 10, TenantConcurrency: 2, WaitTime: time.Second, Logger: quiet})
	c.Start()
	e.waitFor(t, "60 messages", func() bool { return done.Load() == 60 })
	c.Shutdown(ctx)
	for tn, p := range peak {
		if p > 2 {
			t.Errorf("tenant %s had %d handlers at once, cap 2", tn, p)
		}
	}
	if len(peak) != 3 {
		t.Errorf("tenants seen: %v", peak)
	}
}

// TestOutcomes: a panic is a retryable failure, Permanent goes to the
// dead-letter queue with its reason, Defer comes back without counting.
func TestOutcomes(t *testing.T) {
	e := start(t, false)
	dlq := e.queue(t, "dlq", nil)
	dlqArn := "arn:aws:sqs:us-east-1:000000000000:dlq"
	q := e.queue(t, "outcomes", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, dlqArn)})
	e.send(t, q, "panic-once", "")
	e.send(t, q, "poison", "")
	e.send(t, q, "defer-once", "")
	var mu sync.Mutex
	seen := map[string][]consumer.Outcome{}
	var deferredOnce atomic.Bool
	c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		switch m.Body {
		case "panic-once":
			if m.ReceiveCount == 1 {
				panic("boom")
			}
		case "poison":
			return consumer.Permanent(errors.New("cannot parse"))
		case "defer-once":
			if deferredOnce.CompareAndSwap(false, true) {
				return consumer.Defer(0)
			}
			if m.ReceiveCount != 1 {
				return fmt.Errorf("a deferral counted as a receive: %d", m.ReceiveCount)
			}
		}
		return nil
	}, consumer.Options{WaitTime: time.Second, Logger: quiet, OnFinish: func(m *consumer.Message, o consumer.Outcome, d time.Duration, err error) {
		mu.Lock()
		seen[m.Body] = append(seen[m.Body], o)
		mu.Unlock()
	}})
	c.Start()
	e.waitFor(t, "all outcomes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen["panic-once"]) == 2 && len(seen["poison"]) == 1 && len(seen["defer-once"]) == 2
	})
	c.Shutdown(ctx)
	mu.Lock()
	for _, o := range seen { // a retried message may finish again before its first OnFinish
		sort.Slice(o, func(i, j int) bool { return o[i] < o[j] })
	}
	got := fmt.Sprint(seen["panic-once"], seen["poison"], seen["defer-once"])
	mu.Unlock()
	if got != "[deleted retried] [rejected] [deferred deleted]" {
		t.Errorf("outcomes %s", got)
	}
	peek, _, err := e.b.Peek("dlq", broker.PeekFilter{})
	if err != nil || len(peek) != 1 || peek[0].Body != "poison" || peek[0].Reason != "Reject" || peek[0].LastError != "cannot parse" {
		t.Fatalf("dead-letter queue: %+v %v", peek, err)
	}
	_ = dlq
}

// TestFallbackWithoutExtensions: against a server that does not know
// Sluice's actions (as Amazon SQS), Permanent falls back to a visibility
// change and the redrive policy dead-letters the message.
func TestFallbackWithoutExtensions(t *testing.T) {
	e := start(t, false)
	target, _ := url.Parse(e.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	var refused atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Amz-Target") {
		case "AmazonSQS.RetryMessage", "AmazonSQS.RejectMessage", "AmazonSQS.DeferMessage":
			refused.Add(1)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("x-amzn-query-error", "InvalidAction;Sender")
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"com.amazon.coral.service#UnknownOperationException","message":"unknown operation"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	client := e.newClient(t, front.URL)
	e.queue(t, "dlq", nil)
	q := e.queue(t, "plain", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`})
	e.send(t, q, "poison", "")
	c, _ := consumer.New(client, q, func(ctx context.Context, m *consumer.Message) error {
		return consumer.Permanent(errors.New("bad"))
	}, consumer.Options{WaitTime: time.Second, Logger: quiet})
	c.Start()
	e.waitFor(t, "the dead-letter queue", func() bool {
		a, _ := e.b.GetQueueAttributes("dlq", []string{"ApproximateNumberOfMessages"})
		return a["ApproximateNumberOfMessages"] == "1"
	})
	c.Shutdown(ctx)
	if refused.Load() != 1 {
		t.Errorf("extension calls tried %d times, want once (then remembered)", refused.Load())
	}
}

// TestGracefulShutdown: Shutdown waits for running handlers and deletes
// their messages. It runs in a synctest bubble (a broker in memory, the
// server and the client over in-memory pipes), so "Shutdown is waiting"
// is seen (every goroutine blocked), not guessed after a pause.
func TestGracefulShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startInBubble(t)
		q := e.queue(t, "grace", nil)
		e.send(t, q, "a", "")
		started := make(chan struct{})
		release := make(chan struct{})
		c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
			close(started)
			<-release
			return nil
		}, consumer.Options{WaitTime: time.Second, Logger: quiet})
		c.Start()
		<-started
		done := make(chan error, 1)
		go func() { done <- c.Shutdown(ctx) }()
		synctest.Wait() // Shutdown is blocked (or has returned)
		select {
		case <-done:
			t.Fatal("Shutdown returned while a handler ran")
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if v, f := e.counts(t, q); v != "0" || f != "0" {
			t.Fatalf("after shutdown: %s visible, %s in flight", v, f)
		}
	})
}

// startInBubble runs a real server over a broker in memory, client and
// server joined by in-memory pipes, so the whole exchange can run in a
// synctest bubble.
func startInBubble(t *testing.T) *env {
	t.Helper()
	p := sqstest.ServePipe(t, broker.Config{InMemory: true})
	e := &env{b: p.Broker, url: p.URL}
	e.client = sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), RetryMaxAttempts: 1, HTTPClient: p.HTTP})
	return e
}

// TestTraceHeaders: AWSTraceHeader and traceparent reach the handler.
func TestTraceHeaders(t *testing.T) {
	e := start(t, false)
	q := e.queue(t, "trace", nil)
	_, err := e.b.Send(ctx, "trace", st.SendInput{Body: "x", TraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793",
		Attributes: map[string]st.AttributeValue{"traceparent": {DataType: "String", StringValue: aws.String("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan consumer.Trace, 1)
	c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		got <- consumer.TraceFrom(ctx)
		return nil
	}, consumer.Options{WaitTime: time.Second, Logger: quiet})
	c.Start()
	tr := <-got
	c.Shutdown(ctx)
	if tr.AWSTraceHeader != "Root=1-5759e988-bd862e3fe1be46a994272793" || !strings.HasPrefix(tr.TraceParent, "00-4bf92f") {
		t.Fatalf("trace %+v", tr)
	}
}

// TestPoisonClimbsLadder: a message that always fails climbs the queue's
// retry ladder with its delays (fake clock), lands in the dead-letter
// queue with its reason, and a redrive brings it back.
func TestPoisonClimbsLadder(t *testing.T) {
	e := start(t, true)
	e.queue(t, "dlq", nil)
	q := e.queue(t, "ladder", map[string]string{"RetryDelays": "1s,10s",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":100}`})
	e.send(t, q, "poison", "")
	var attempts atomic.Int64
	var levels sync.Map
	c, _ := consumer.New(e.client, q, func(ctx context.Context, m *consumer.Message) error {
		levels.Store(attempts.Add(1), m.RetryLevel)
		return errors.New("upstream said no")
	}, consumer.Options{WaitTime: time.Second, Clock: e.clk, Logger: quiet})
	c.Start()
	defer c.Close()
	delayed := func() bool {
		a, _ := e.b.GetQueueAttributes("ladder", []string{"ApproximateNumberOfMessagesDelayed"})
		return a["ApproximateNumberOfMessagesDelayed"] == "1"
	}
	e.waitFor(t, "the first attempt", func() bool { return attempts.Load() == 1 && delayed() })
	e.clk.Advance(time.Second)
	e.waitFor(t, "the second attempt", func() bool { return attempts.Load() == 2 && delayed() })
	e.clk.Advance(9 * time.Second)
	if attempts.Load() != 2 {
		t.Fatal("third attempt before its 10 s delay")
	}
	e.clk.Advance(time.Second)
	e.waitFor(t, "the dead-letter queue", func() bool {
		a, _ := e.b.GetQueueAttributes("dlq", []string{"ApproximateNumberOfMessages"})
		return a["ApproximateNumberOfMessages"] == "1"
	})
	for i, want := range []int{0, 1, 2} {
		if l, _ := levels.Load(int64(i + 1)); l != want {
			t.Errorf("attempt %d at level %v, want %d", i+1, l, want)
		}
	}
	peek, _, _ := e.b.Peek("dlq", broker.PeekFilter{})
	if len(peek) != 1 || peek[0].Reason != "Retry" || peek[0].LastError != "upstream said no" {
		t.Fatalf("dead-lettered: %+v", peek)
	}
	if n, err := e.b.RedriveFiltered(ctx, "dlq", broker.PeekFilter{}, ""); n != 1 || err != nil {
		t.Fatalf("redrive: %d %v", n, err)
	}
	e.waitFor(t, "the attempt after redrive", func() bool { return attempts.Load() == 4 })
	if l, _ := levels.Load(int64(4)); l != 0 {
		t.Errorf("after redrive at level %v, want 0", l)
	}
}
