package sqs_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/sqs"
)

// TestAntiBacklogAttributesThroughSDK: the Sluice attributes are set and
// read with the AWS SDK, throttled batch entries fail alone with
// RequestThrottled, fair delivery holds across the wire, and a receive can
// bind to a partition with the X-Sluice-Partition header.
func TestAntiBacklogAttributesThroughSDK(t *testing.T) {
	e := start(t, nil, "")
	c := e.client
	q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("tenants"), Attributes: map[string]string{
		"TenantSendRate": "3", "TenantSendBurst": "3", "TenantMaxInFlight": "4", "Partitions": "2", "PartitionsPerTenant": "1",
	}}))
	attrs := must(c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []types.QueueAttributeName{"TenantSendRate", "TenantMaxInFlight", "Partitions", "ApproximateNumberOfTenants"}}))
	if a := attrs.Attributes; a["TenantSendRate"] != "3" || a["TenantMaxInFlight"] != "4" || a["Partitions"] != "2" || a["ApproximateNumberOfTenants"] != "0" {
		t.Fatalf("attributes %v", a)
	}
	_, err := c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl, Attributes: map[string]string{"TenantMaxInFlight": "many"}})
	if apiCode(err) != "InvalidAttributeValue" {
		t.Fatalf("bad TenantMaxInFlight: %v", err)
	}
	hq := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("headroom"), Attributes: map[string]string{"TenantHeadroom": "2"}}))
	ha := must(c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: hq.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}}))
	if ha.Attributes["TenantHeadroom"] != "2" {
		t.Fatalf("TenantHeadroom: %v", ha.Attributes)
	}
	_, err = c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: hq.QueueUrl, Attributes: map[string]string{"TenantHeadroom": "1001"}})
	if apiCode(err) != "InvalidAttributeValue" {
		t.Fatalf("TenantHeadroom=1001: %v", err)
	}

	var entries []types.SendMessageBatchRequestEntry
	for i := 0; i < 5; i++ {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String("noisy"), MessageGroupId: aws.String("noisy")})
	}
	entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("q"), MessageBody: aws.String("quiet"), MessageGroupId: aws.String("quiet")})
	out := must(c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries}))
	if len(out.Successful) != 4 || len(out.Failed) != 2 {
		t.Fatalf("batch: %d ok, %d failed", len(out.Successful), len(out.Failed))
	}
	for _, f := range out.Failed {
		if aws.ToString(f.Code) != "RequestThrottled" || !f.SenderFault {
			t.Errorf("failed entry %s: %s %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	_, err = c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x"), MessageGroupId: aws.String("noisy")})
	if apiCode(err) != "RequestThrottled" {
		t.Fatalf("single throttled send: %v", err)
	}

	// Fair delivery across the wire: the quiet tenant's message comes
	// second, not after the noisy backlog; the noisy tenant stops at its cap.
	all := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"}}))
	var got []string
	for _, m := range all.Messages {
		got = append(got, m.Attributes["MessageGroupId"])
	}
	if len(got) != 4 || got[1] != "quiet" {
		t.Fatalf("received %v, want noisy quiet noisy noisy", got)
	}
	for _, m := range all.Messages { // back to visible for the next part
		must(c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}))
	}

	// Each tenant sits in one shard of two; a consumer bound to the quiet
	// tenant's shard gets only what that shard holds.
	info, err := e.broker.Tenant("tenants", "quiet")
	if err != nil || len(info.Shards) != 1 {
		t.Fatalf("quiet's shards: %+v %v", info, err)
	}
	noisy, _ := e.broker.Tenant("tenants", "noisy")
	bound := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10},
		header("X-Sluice-Shard", fmt.Sprint(info.Shards[0]))))
	for _, m := range bound.Messages {
		if aws.ToString(m.Body) == "noisy" && noisy.Shards[0] != info.Shards[0] {
			t.Errorf("a receive bound to shard %d got a message of shard %d", info.Shards[0], noisy.Shards[0])
		}
	}
	if len(bound.Messages) == 0 {
		t.Fatal("bound receive got nothing")
	}
	_, err = c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}, header("X-Sluice-Partition", "7"))
	if apiCode(err) != "InvalidParameterValue" {
		t.Fatalf("partition 7 of 2: %v", err)
	}
}

// header sets an HTTP header on one SDK call.
func header(k, v string) func(*awssqs.Options) {
	return func(o *awssqs.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(k, v))
	}
}

// TestTraceParentTravels: a send's W3C traceparent header comes back as
// the SluiceTraceParent system attribute, beside AWSTraceHeader.
func TestTraceParentTravels(t *testing.T) {
	e := start(t, nil, "")
	c := e.client
	q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("traced")}))
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	must(c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x"),
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793")}}},
		header("traceparent", tp)))
	out := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}))
	if len(out.Messages) != 1 || out.Messages[0].Attributes["SluiceTraceParent"] != tp || out.Messages[0].Attributes["AWSTraceHeader"] == "" {
		t.Fatalf("attributes %v", out.Messages[0].Attributes)
	}
}

// TestRequestIDInLogs: the id a response carries is on the request's log
// lines.
func TestRequestIDInLogs(t *testing.T) {
	b, err := broker.Open(broker.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var logs strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	srv := httptest.NewServer(sqs.NewServer(sqs.ServerConfig{Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))}, b))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/", "application/x-www-form-urlencoded", strings.NewReader("Action=GetQueueUrl&QueueName=nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("x-amzn-RequestId")
	mu.Lock()
	defer mu.Unlock()
	if id == "" || strings.Count(logs.String(), "request_id="+id) < 2 {
		t.Fatalf("request id %q not on the request's log lines:\n%s", id, logs.String())
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestExtensionsOverQuery: RetryMessage, DeferMessage and RejectMessage
// answer in the Query protocol too.
func TestExtensionsOverQuery(t *testing.T) {
	e := start(t, nil, "")
	c := e.client
	q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("ext")}))
	must(c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")}))
	post := func(form url.Values) (int, string) {
		resp, err := http.PostForm(e.url+"/", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	for _, action := range []string{"DeferMessage", "RetryMessage", "RejectMessage"} {
		m := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1}))
		if len(m.Messages) != 1 {
			t.Fatalf("%s: nothing to receive", action)
		}
		code, body := post(url.Values{"Action": {action}, "QueueUrl": {*q.QueueUrl}, "ReceiptHandle": {*m.Messages[0].ReceiptHandle},
			"DelaySeconds": {"0"}, "Reason": {"test"}})
		if code != 200 || !strings.Contains(body, "<"+action+"Response") {
			t.Fatalf("%s: %d %s", action, code, body)
		}
	}
	// Rejected without a dead-letter queue: gone.
	if a := must(c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})); a.Attributes["ApproximateNumberOfMessages"] != "0" || a.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Fatalf("after reject: %v", a.Attributes)
	}
	code, body := post(url.Values{"Action": {"RetryMessage"}, "QueueUrl": {*q.QueueUrl}})
	if code != 400 || !strings.Contains(body, "MissingParameter") {
		t.Fatalf("no handle: %d %s", code, body)
	}
}
