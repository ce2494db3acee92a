package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	simulator "github.com/sluicemq/sluice/internal/sim"
	"github.com/sluicemq/sluice/internal/sqs/sqstest"
)

// agreeScenario is small (three minutes, a few thousand calls) but gives
// the scheduler something to decide at every receive: three tenants of
// different rates, one with a burst over its send limit, a consumer
// outage whose backlog ages past SidelineAgeSeconds, a per-tenant
// in-flight cap, failures given back with RetryMessage up a retry ladder
// into a dead-letter queue, heartbeats extending slow messages'
// visibility, and consumers bound to one of two partitions each.
const agreeScenario = `
name = "agree"
seed = 7
duration = "3m"
sample = "30s"

[queue]
VisibilityTimeout = 4
FairDelivery = true
TenantMaxInFlight = 3
TenantSendRate = 12
SidelineAgeSeconds = 20
RetryDelays = "1s,3s"
RedrivePolicy = '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:sim-dlq","maxReceiveCount":3}'
Partitions = 2

[[tenant]]
name = "acme"
rate = 4

[[tenant]]
name = "globex"
arrivals = "constant"
rate = 2

[[tenant]]
name = "initech"
rate = 0.5
[[tenant.burst]]
at = "40s"
duration = "15s"
rate = 25

[consumers]
count = 4
batch = 3
concurrency = 8
idle_poll = "500ms"
failure = 0.15
on_failure = "retry"
heartbeat = "2s"
bind = true
outages = [["1m20s", "1m50s"]]

[consumers.service]
distribution = "lognormal"
median = "250ms"
p99 = "5s"
`

// TestSimAgreesWithServer: the simulator and the server agree. A small
// scenario runs through the simulator (internal/sim, the queue owner over
// the memory store); every call it made is then made again, at the same
// virtual time, against a real broker on disk on a fake clock, through
// the SQS HTTP server on loopback and the AWS SDK. Every receive must
// return the same bodies in the same order, every send the same error,
// and so each tenant sees the same delivery order.
//
// It runs twice: with SidelineAgeSeconds, and without, when the outage's
// backlog engages the backlog mode (the default) in both.
func TestSimAgreesWithServer(t *testing.T) {
	t.Run("sideline", func(t *testing.T) { agree(t, agreeScenario) })
	t.Run("backlog-mode", func(t *testing.T) {
		agree(t, strings.Replace(agreeScenario, "SidelineAgeSeconds = 20\n", "", 1))
	})
}

func agree(t *testing.T, scenario string) {
	sc, err := simulator.Parse("agree.toml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Queue["TenantKey"] == "Principal" {
		// The simulator sends as the tenant; the replay's one client
		// signs as nobody, so every message would be tenant "".
		t.Fatal("the replay cannot send as each tenant: TenantKey = Principal needs a client per tenant, with credentials the server knows")
	}
	var ops []simulator.Op
	res, err := simulator.Run(ctx, sc, simulator.Options{Trace: func(op simulator.Op) { ops = append(ops, op) }})
	if err != nil {
		t.Fatal(err)
	}

	clk := clock.NewFake(simulator.Epoch)
	// SyncBatch: durability is not what this test is about, and an fsync
	// a call would make it slow.
	url, b := sqstest.Serve(t, broker.Config{Dir: t.TempDir(), Clock: clk, Sync: broker.SyncBatch,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	client := awssqs.New(awssqs.Options{Region: simulator.Region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		Retryer:     aws.NopRetryer{}}) // a retry would be a second call at the same virtual time
	r := &replay{t: t, client: client, handles: map[string]string{}}
	r.createQueues(sc)

	// The clock is set only at the ops' times: the simulator also set it
	// at events that make no call (samples, failures left to time out,
	// polls in an outage), so the engine's timers (maintenance each
	// second, compaction) fire at other instants here, and a disk store
	// under them, not the memory one. The order must not depend on either.
	got := make([]simulator.Op, len(ops))
	for i, op := range ops {
		clk.Set(simulator.Epoch.Add(op.At))
		got[i] = r.do(op)
		if d := diffOp(op, got[i]); d != "" {
			t.Fatalf("op %d at %s (%s): the simulator and the server disagree: %s", i, op.At, opName(op), d)
		}
	}
	clk.Set(simulator.Epoch.Add(sc.Duration.D()))

	want, have := deliveryOrder(ops), deliveryOrder(got)
	for _, tn := range sc.Tenants {
		if i, ok := firstDiff(want[tn.Name], have[tn.Name]); ok {
			t.Errorf("tenant %s: delivery %d differs: simulator %v, server %v", tn.Name, i, nth(want[tn.Name], i), nth(have[tn.Name], i))
		}
	}
	found := false
	for _, qs := range b.Stats() {
		if qs.Name != simulator.QueueName {
			continue
		}
		found = true
		sq := res.Queue
		if qs.Sent != sq.Sent || qs.Throttled != sq.Throttled || qs.Received != sq.Received || qs.Deleted != sq.Deleted ||
			qs.DeadLettered != sq.DeadLettered || qs.Retried != sq.Retried || qs.Sidelined != sq.Sidelined ||
			qs.Visible != sq.Visible || qs.InFlight != sq.InFlight || qs.Delayed != sq.Delayed {
			t.Errorf("the queue's figures at the end differ:\nsimulator %s\nserver    %s", queueFigures(sq), queueFigures(qs))
		}
	}
	if !found {
		t.Errorf("the server has no queue %s", simulator.QueueName)
	}

	// The run must have been worth comparing.
	s := summarize(ops, res)
	t.Logf("%d ops (%d sends, %d throttled, %d receives, %d empty, %d deletes), %d deliveries (%d again), %d receives of several tenants, %d after the outage older than it",
		len(ops), s.sends, s.throttled, s.receives, s.empty, s.deletes, s.deliveries, s.redeliveries, s.mixed, s.backlog)
	t.Logf("queue: %s", queueFigures(res.Queue))
	for _, c := range []struct {
		what    string
		n, want int64
	}{
		{"deliveries", int64(s.deliveries), 1000},
		{"redeliveries", int64(s.redeliveries), 10},
		{"receives returning several tenants", int64(s.mixed), 50},
		{"deliveries after the outage of messages sent before its end", int64(s.backlog), 100},
		{"throttled sends", int64(s.throttled), 10},
		{"sidelined messages", int64(res.Queue.Sidelined), 10},
		{"dead-lettered messages", res.Queue.DeadLettered, 1},
		{"RetryMessage calls", count(ops, simulator.OpRetry), 50},
		{"heartbeats (ChangeMessageVisibility)", count(ops, simulator.OpChangeVisibility), 20},
		{"receives bound to shard 1", countIf(ops, func(op simulator.Op) bool { return op.Kind == simulator.OpReceive && op.Shard == 1 }), 50},
	} {
		if c.n < c.want {
			t.Errorf("trivial run: %d %s, want at least %d", c.n, c.what, c.want)
		}
	}
}

// replay makes a simulator's calls through the SDK.
type replay struct {
	t       *testing.T
	client  *awssqs.Client
	url     string
	handles map[string]string // a body's receipt handle, of its latest receive
}

// createQueues creates the scenario's queue, and first its dead-letter
// queue if it names one.
func (r *replay) createQueues(sc *simulator.Scenario) {
	if rp := sc.Queue["RedrivePolicy"]; rp != "" {
		var p struct{ DeadLetterTargetArn string }
		if err := json.Unmarshal([]byte(rp), &p); err != nil {
			r.t.Fatal(err)
		}
		name := p.DeadLetterTargetArn[strings.LastIndexByte(p.DeadLetterTargetArn, ':')+1:]
		if _, err := r.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
			r.t.Fatal(err)
		}
	}
	out, err := r.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(simulator.QueueName), Attributes: sc.Queue})
	if err != nil {
		r.t.Fatal(err)
	}
	r.url = aws.ToString(out.QueueUrl)
}

// do makes op's call and returns what the server answered, as an Op.
func (r *replay) do(op simulator.Op) simulator.Op {
	got := simulator.Op{At: op.At, Kind: op.Kind, Tenant: op.Tenant, Body: op.Body, Max: op.Max, Shard: op.Shard, Visibility: op.Visibility}
	var err error
	switch op.Kind {
	case simulator.OpSend:
		_, err = r.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &r.url, MessageBody: aws.String(op.Body),
			MessageGroupId: aws.String(op.Tenant)})
	case simulator.OpReceive:
		var opts []func(*awssqs.Options)
		if op.Shard >= 0 {
			opts = append(opts, withHeader("X-Sluice-Shard", strconv.Itoa(op.Shard)))
		}
		var out *awssqs.ReceiveMessageOutput
		out, err = r.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &r.url,
			MaxNumberOfMessages: int32(op.Max), WaitTimeSeconds: 0}, opts...)
		if err == nil {
			for _, m := range out.Messages {
				body := aws.ToString(m.Body)
				got.Bodies = append(got.Bodies, body)
				r.handles[body] = aws.ToString(m.ReceiptHandle)
			}
		}
	case simulator.OpDelete:
		_, err = r.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &r.url, ReceiptHandle: r.handle(op.Body)})
	case simulator.OpChangeVisibility:
		_, err = r.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &r.url,
			ReceiptHandle: r.handle(op.Body), VisibilityTimeout: int32(op.Visibility)})
	case simulator.OpRetry:
		err = r.extension("RetryMessage", map[string]any{"QueueUrl": r.url, "ReceiptHandle": aws.ToString(r.handle(op.Body))})
	default:
		r.t.Fatalf("an op of unknown kind %d", op.Kind)
	}
	if err != nil {
		var ae smithy.APIError
		if !errors.As(err, &ae) {
			r.t.Fatalf("%s at %s: %v", opName(op), op.At, err)
		}
		got.Err = ae.ErrorCode()
	}
	return got
}

// handle is the receipt handle of body's latest receive.
func (r *replay) handle(body string) *string {
	h, ok := r.handles[body]
	if !ok {
		r.t.Fatalf("%s settled, but the server never delivered it", body)
	}
	return &h
}

// extension calls one of Sluice's own actions (which the SDK has no
// operation for) over the JSON protocol: the SDK's ChangeMessageVisibility
// with its target and body swapped, so that it is signed and sent like
// any other call.
func (r *replay) extension(action string, in map[string]any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	swap := middleware.BuildMiddlewareFunc("SluiceExtension", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
		if req, ok := in.Request.(*smithyhttp.Request); ok {
			req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
			sr, err := req.SetStream(bytes.NewReader(body))
			if err != nil {
				return middleware.BuildOutput{}, middleware.Metadata{}, err
			}
			in.Request = sr
		}
		return next.HandleBuild(ctx, in)
	})
	_, err = r.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &r.url, ReceiptHandle: aws.String("-")},
		func(o *awssqs.Options) {
			o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error { return s.Build.Add(swap, middleware.Before) })
		})
	return err
}

// withHeader sets an HTTP header on one SDK call.
func withHeader(k, v string) func(*awssqs.Options) {
	return func(o *awssqs.Options) { o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(k, v)) }
}

// diffOp says how the server's answer differs from the simulator's ("":
// it does not).
func diffOp(want, got simulator.Op) string {
	if want.Err != got.Err {
		return fmt.Sprintf("error: simulator %q, server %q", want.Err, got.Err)
	}
	if !slices.Equal(want.Bodies, got.Bodies) {
		return fmt.Sprintf("received:\nsimulator %v\nserver    %v", want.Bodies, got.Bodies)
	}
	return ""
}

func opName(op simulator.Op) string {
	switch op.Kind {
	case simulator.OpSend:
		return "send " + op.Body
	case simulator.OpReceive:
		return fmt.Sprintf("receive max %d shard %d", op.Max, op.Shard)
	case simulator.OpDelete:
		return "delete " + op.Body
	case simulator.OpChangeVisibility:
		return fmt.Sprintf("change visibility of %s to %ds", op.Body, op.Visibility)
	case simulator.OpRetry:
		return "retry " + op.Body
	}
	return fmt.Sprintf("op of kind %d", op.Kind)
}

// deliveryOrder is each tenant's deliveries, in order (a body names its
// tenant: "acme#17").
func deliveryOrder(ops []simulator.Op) map[string][]string {
	by := map[string][]string{}
	for _, op := range ops {
		for _, body := range op.Bodies {
			tn, _, _ := strings.Cut(body, "#")
			by[tn] = append(by[tn], body)
		}
	}
	return by
}

func firstDiff(a, b []string) (int, bool) {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i, true
		}
	}
	return 0, false
}

func nth(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

func queueFigures(q broker.QueueStats) string {
	return fmt.Sprintf("sent %d, throttled %d, received %d, deleted %d, dead-lettered %d, retried %d, sidelined %d; %d visible, %d in flight, %d delayed",
		q.Sent, q.Throttled, q.Received, q.Deleted, q.DeadLettered, q.Retried, q.Sidelined, q.Visible, q.InFlight, q.Delayed)
}

// agreeSummary counts what a run did.
type agreeSummary struct {
	sends, throttled, receives, empty, deletes int
	deliveries, redeliveries                   int
	mixed                                      int // receives returning messages of more than one tenant
	backlog                                    int // deliveries after the outage of messages sent before its end
}

func summarize(ops []simulator.Op, res *simulator.Result) agreeSummary {
	var s agreeSummary
	outageEnd := res.Scenario.Consumers.Outages[0][1].D()
	sentAt := map[string]int64{}
	seen := map[string]bool{}
	for _, op := range ops {
		switch op.Kind {
		case simulator.OpSend:
			s.sends++
			if op.Err != "" {
				s.throttled++
			}
			sentAt[op.Body] = int64(op.At)
		case simulator.OpReceive:
			s.receives++
			if len(op.Bodies) == 0 {
				s.empty++
			}
			tenants := map[string]bool{}
			for _, body := range op.Bodies {
				s.deliveries++
				if seen[body] {
					s.redeliveries++
				}
				seen[body] = true
				tn, _, _ := strings.Cut(body, "#")
				tenants[tn] = true
				if op.At >= outageEnd && sentAt[body] < int64(outageEnd) {
					s.backlog++
				}
			}
			if len(tenants) > 1 {
				s.mixed++
			}
		case simulator.OpDelete:
			s.deletes++
		}
	}
	return s
}

// count counts the ops of kind k.
func count(ops []simulator.Op, k simulator.OpKind) int64 {
	return countIf(ops, func(op simulator.Op) bool { return op.Kind == k })
}

func countIf(ops []simulator.Op, f func(simulator.Op) bool) int64 {
	var n int64
	for _, op := range ops {
		if f(op) {
			n++
		}
	}
	return n
}
