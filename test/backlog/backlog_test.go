// Package backlog checks, from the outside, that a backlog after a
// consumer outage is not insurmountable out of the box: it runs the real
// `sluice serve`, sends at a steady rate into a queue with default
// attributes and one with OldestFirst, takes messages off each with four
// consumers at about twice the send rate, stops the consumers for a
// while, and measures how long the messages sent after they return
// waited for their first receive (the server's own SentTimestamp and
// ApproximateFirstReceiveTimestamp).
package backlog

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/test/process"
	"github.com/sluicemq/sluice/test/testkit"
)

// The shape of the run: -backlog.outage 1h runs the long version.
var (
	outage = flag.Duration("backlog.outage", 20*time.Second, "how long the consumers stop")
	before = flag.Duration("backlog.before", 8*time.Second, "how long the consumers keep up before the outage")
	after  = flag.Duration("backlog.after", 0, "how long the run goes on after the consumers return (0: until the backlog is gone, at most three outages)")
	rate   = flag.Int("backlog.rate", 40, "messages sent a second into each queue")
)

// The consumers: four, each receiving up to ten messages at once and
// taking work per message, so that together they take about twice the
// send rate.
const consumers = 4

func TestMain(m *testing.M) { testkit.Main(m, "sluice-backlog-", true, &bin) }

var bin string

// run is one queue's traffic: a sender at rate, four consumers that stop
// during the outage, and what every first receive waited.
type run struct {
	name, url string
	cl        *sqs.Client
	mu        sync.Mutex
	sent      int
	waits     map[string]wait // by message id, first receives
}

type wait struct{ sent, first time.Time }

func (r *run) send(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(time.Second / time.Duration(*rate/5))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var in []types.SendMessageBatchRequestEntry
		for i := range 5 {
			in = append(in, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprintf("%s %d-%d", r.name, n, i))})
		}
		out, err := r.cl.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.url), Entries: in})
		if ctx.Err() != nil {
			return
		}
		if err != nil || len(out.Failed) > 0 {
			t.Errorf("send to %s: %v %v", r.name, err, out)
			return
		}
		r.mu.Lock()
		r.sent += len(out.Successful)
		r.mu.Unlock()
	}
}

// consume takes messages off until ctx ends, five at a time, each taking
// work, and waits before each receive while hold returns a channel (the
// outage), until it is closed.
func (r *run) consume(ctx context.Context, t *testing.T, work time.Duration, hold func() <-chan struct{}) {
	timer := time.NewTimer(0)
	<-timer.C
	for ctx.Err() == nil {
		if h := hold(); h != nil {
			select {
			case <-h:
			case <-ctx.Done():
				return
			}
		}
		out, err := r.cl.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.url), MaxNumberOfMessages: 5, WaitTimeSeconds: 1,
			VisibilityTimeout: 120, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			t.Errorf("receive from %s: %v", r.name, err)
			return
		}
		var del []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			// The work a message takes: a timer, not a sleep, so that a
			// stop ends it at once.
			timer.Reset(work)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			if m.Attributes["ApproximateReceiveCount"] == "1" {
				r.mu.Lock()
				r.waits[*m.MessageId] = wait{millis(m.Attributes["SentTimestamp"]), millis(m.Attributes["ApproximateFirstReceiveTimestamp"])}
				r.mu.Unlock()
			}
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := r.cl.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.url), Entries: del}); err != nil && ctx.Err() == nil {
				t.Errorf("delete from %s: %v", r.name, err)
				return
			}
		}
	}
}

func millis(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n)
}

// since are the waits of the first receives of messages sent at from or
// later, in order.
func (r *run) since(from time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, w := range r.waits {
		if !w.sent.Before(from) {
			out = append(out, w.first.Sub(w.sent))
		}
	}
	slices.Sort(out)
	return out
}

func (r *run) received() (sent, got int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent, len(r.waits)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// TestOutageBacklog: a queue with default attributes serves the messages
// sent after a 20 s consumer outage within p99 1 s, while the backlog
// drains behind them (and the queue said, during the outage, that a
// backlog stands); the same queue with OldestFirst makes them wait behind
// the backlog, for comparison.
func TestOutageBacklog(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5**outage+2*time.Minute)
	defer cancel()
	p, err := process.Start(process.Config{Bin: bin, Args: []string{"serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--preallocate=false"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	at, err := p.AwaitServing(tr, 2*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, p.Tail())
	}
	cl := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(at.SQS), Credentials: credentials.NewStaticCredentialsProvider("b", "b", ""),
		HTTPClient: &http.Client{Transport: testkit.BufferedBodies{Next: tr}, Timeout: time.Minute}})
	runs := []*run{{name: "default"}, {name: "oldest-first"}}
	for _, r := range runs {
		in := &sqs.CreateQueueInput{QueueName: aws.String(r.name)}
		if r.name == "oldest-first" {
			in.Attributes = map[string]string{"OldestFirst": "true"}
		}
		out, err := cl.CreateQueue(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		r.url, r.cl, r.waits = *out.QueueUrl, cl, map[string]wait{}
	}

	// Four consumers take work (1 s / rate × 4 / 2 each message) so
	// that together they take about twice the send rate.
	work := time.Second * consumers / time.Duration(2**rate)
	var mu sync.Mutex
	var paused chan struct{} // nil: the consumers run
	hold := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return paused }
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r.send(rctx, t) })
		for range consumers {
			wg.Go(func() { r.consume(rctx, t, work, hold) })
		}
	}
	defer func() { stop(); wg.Wait() }()

	wait := func(d time.Duration) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			t.Fatal("the run took too long")
		}
	}
	wait(*before)
	mu.Lock()
	paused = make(chan struct{})
	mu.Unlock()
	outageAt := time.Now()
	wait(*outage)
	// The backlog has stood for the whole outage but its first 11 s
	// (sched.StandingTarget + StandingInterval): the queue says so,
	// though no consumer came.
	since := freshFirst(ctx, t, tr, at.Admin, "default")
	mu.Lock()
	close(paused)
	paused = nil
	mu.Unlock()
	back := time.Now()
	if *after > 0 {
		wait(*after)
	} else {
		// Until every message sent is received, at most three outages
		// (at twice the rate, the backlog drains in about one).
		deadline := time.Now().Add(3 * *outage)
		for tick := time.NewTicker(250 * time.Millisecond); ; {
			<-tick.C
			done := true
			for _, r := range runs {
				sent, got := r.received()
				done = done && got >= sent-*rate
			}
			if done || time.Now().After(deadline) {
				tick.Stop()
				break
			}
		}
	}
	stop()
	wg.Wait()

	for _, r := range runs {
		fresh, all := r.since(back), r.since(time.Time{})
		sent, got := r.received()
		t.Logf("%s: %d sent, %d received; sent after the consumers came back (%s after a %s outage): %d, waits p50 %v, p99 %v, max %v; all: p99 %v",
			r.name, sent, got, time.Since(back).Round(time.Second), *outage, len(fresh), quantile(fresh, 0.5), quantile(fresh, 0.99), quantile(fresh, 1), quantile(all, 0.99))
	}
	def, old := runs[0], runs[1]
	fresh := def.since(back)
	if len(fresh) < *rate {
		t.Fatalf("only %d first receives of messages sent after the outage", len(fresh))
	}
	if p99 := quantile(fresh, 0.99); p99 >= time.Second {
		t.Errorf("default attributes: messages sent after a %v outage waited p99 %v, want under 1 s", *outage, p99)
	}
	if sent, got := def.received(); got < sent-2**rate {
		t.Errorf("default attributes: %d of %d messages received by the end: the old backlog did not drain behind", got, sent)
	}
	if since.IsZero() {
		t.Errorf("during the outage the queue did not say that its backlog stands (fresh_first_tenants)")
	}
	// The comparison: oldest first, they wait behind the backlog (about
	// the outage, at twice the rate, for the first of them).
	t.Logf("the backlog mode took the p99 of messages sent after the outage from %v (oldest first) to %v; it engaged %v after the outage began",
		quantile(old.since(back), 0.99), quantile(fresh, 0.99), since.Sub(outageAt).Round(100*time.Millisecond))
}

// freshFirst returns since when the admin API says queue q serves fresh
// traffic first (a standing backlog; zero: it does not), and logs what it
// says.
func freshFirst(ctx context.Context, t *testing.T, tr http.RoundTripper, admin, q string) time.Time {
	req, _ := http.NewRequestWithContext(ctx, "GET", admin+"/api/queues/"+q, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		FreshFirst int        `json:"fresh_first_tenants"`
		Since      *time.Time `json:"fresh_first_since"`
		Old        int        `json:"old_messages"`
		OldOldest  float64    `json:"old_oldest_age_seconds"`
		Visible    int        `json:"visible"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	t.Logf("queue %s at the end of the outage: %d visible, %d tenants fresh first since %v", q, s.Visible, s.FreshFirst, s.Since)
	if s.FreshFirst == 0 || s.Since == nil {
		return time.Time{}
	}
	return *s.Since
}
