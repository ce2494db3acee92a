package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/sqs/sqstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs"
)

var ctx = context.Background()

type env struct {
	url    string
	client *awssqs.Client
	broker *broker.Broker
}

func start(t *testing.T, creds *sigv4.Credentials, dir string) *env {
	t.Helper()
	return startServer(t, sqs.ServerConfig{Credentials: creds}, dir)
}

func startServer(t *testing.T, scfg sqs.ServerConfig, dir string) *env {
	t.Helper()
	cfg := broker.Config{InMemory: dir == "", Dir: dir}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := sqs.NewServer(scfg, b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		b.Close()
	})
	url := "http://" + ln.Addr().String()
	return &env{url: url, broker: b, client: newClient(url, "AKID", "secret", "")}
}

func newClient(url, key, secret, token string) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(url),
		Credentials:      credentials.NewStaticCredentialsProvider(key, secret, token),
		RetryMaxAttempts: 1,
	})
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return "non-API error: " + err.Error()
	}
	return ""
}

// must unwraps a call's result; a failed call fails the test by panicking
// (Go cannot pass a multi-value call after another argument).
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func TestSDKStandardQueueLifecycle(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		e := start(t, nil, dir)
		c := e.client
		q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("orders"), Attributes: map[string]string{"VisibilityTimeout": "5"}, Tags: map[string]string{"team": "a"}}))
		if !strings.HasSuffix(*q.QueueUrl, "/000000000000/orders") || !strings.HasPrefix(*q.QueueUrl, e.url) {
			t.Fatalf("queue url %s", *q.QueueUrl)
		}
		u := must(c.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("orders")}))
		if *u.QueueUrl != *q.QueueUrl {
			t.Fatalf("GetQueueUrl %s", *u.QueueUrl)
		}
		sv := "v"
		sent := must(c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hello\r\nwörld"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"s": {DataType: aws.String("String"), StringValue: &sv},
				"n": {DataType: aws.String("Number.float"), StringValue: aws.String("1.5")},
				"b": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
			},
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")}},
		}))
		if *sent.MD5OfMessageSystemAttributes != "5ae4d5d7636402d80f4eb6d213245a88" {
			t.Fatalf("system attribute md5 %s", *sent.MD5OfMessageSystemAttributes)
		}
		got := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}))
		if len(got.Messages) != 1 || *got.Messages[0].Body != "hello\r\nwörld" {
			t.Fatalf("receive: %+v", got.Messages)
		}
		m := got.Messages[0]
		if *m.MD5OfMessageAttributes != *sent.MD5OfMessageAttributes || string(m.MessageAttributes["b"].BinaryValue) != "\x00\x01\x02" {
			t.Fatalf("attributes: %+v", m.MessageAttributes)
		}
		if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["AWSTraceHeader"] == "" || m.Attributes["SenderId"] != "AKID" {
			t.Fatalf("system attributes: %v", m.Attributes)
		}
		must(c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 100}))
		must(c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}))
		// Batches with a partial failure.
		bs := must(c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("a"), MessageBody: aws.String("one")},
			{Id: aws.String("b"), MessageBody: aws.String("two"), DelaySeconds: 1000},
			{Id: aws.String("c"), MessageBody: aws.String("three")},
		}}))
		if len(bs.Successful) != 2 || len(bs.Failed) != 1 || *bs.Failed[0].Id != "b" || *bs.Failed[0].Code != "InvalidParameterValue" || !bs.Failed[0].SenderFault {
			t.Fatalf("batch: %+v %+v", bs.Successful, bs.Failed)
		}
		rm := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10}))
		if len(rm.Messages) != 2 {
			t.Fatalf("got %d", len(rm.Messages))
		}
		db := must(c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("x"), ReceiptHandle: rm.Messages[0].ReceiptHandle}, {Id: aws.String("y"), ReceiptHandle: aws.String("garbage")},
		}}))
		if len(db.Successful) != 1 || len(db.Failed) != 1 || *db.Failed[0].Code != "ReceiptHandleIsInvalid" {
			t.Fatalf("delete batch: %+v", db)
		}
		cb := must(c.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: q.QueueUrl, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("x"), ReceiptHandle: rm.Messages[1].ReceiptHandle, VisibilityTimeout: 0},
		}}))
		if len(cb.Successful) != 1 {
			t.Fatalf("visibility batch: %+v", cb)
		}
		attrs := must(c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}}))
		if attrs.Attributes["ApproximateNumberOfMessages"] != "1" || attrs.Attributes["VisibilityTimeout"] != "5" || attrs.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:000000000000:orders" {
			t.Fatalf("attributes %v", attrs.Attributes)
		}
		must(c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl, Attributes: map[string]string{"DelaySeconds": "3"}}))
		must(c.TagQueue(ctx, &awssqs.TagQueueInput{QueueUrl: q.QueueUrl, Tags: map[string]string{"env": "test"}}))
		must(c.UntagQueue(ctx, &awssqs.UntagQueueInput{QueueUrl: q.QueueUrl, TagKeys: []string{"team"}}))
		tags := must(c.ListQueueTags(ctx, &awssqs.ListQueueTagsInput{QueueUrl: q.QueueUrl}))
		if len(tags.Tags) != 1 || tags.Tags["env"] != "test" {
			t.Fatalf("tags %v", tags.Tags)
		}
		must(c.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("l1"), AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage"}}))
		if _, err := c.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("l1"), AWSAccountIds: []string{"1"}, Actions: []string{"SendMessage"}}); apiCode(err) != "InvalidParameterValue" {
			t.Fatalf("duplicate label: %v", err)
		}
		must(c.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("l1")}))
		must(c.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: q.QueueUrl}))
		if _, err := c.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: q.QueueUrl}); apiCode(err) != "AWS.SimpleQueueService.PurgeQueueInProgress" {
			t.Fatalf("second purge: %v", err)
		}
		lq := must(c.ListQueues(ctx, &awssqs.ListQueuesInput{QueueNamePrefix: aws.String("ord")}))
		if len(lq.QueueUrls) != 1 {
			t.Fatalf("list %v", lq.QueueUrls)
		}
		must(c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: q.QueueUrl}))
		if _, err := c.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("orders")}); apiCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
			t.Fatalf("deleted queue: %v", err)
		}
		var qdne *types.QueueDoesNotExist
		if _, err := c.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("orders")}); !errors.As(err, &qdne) {
			t.Fatalf("typed error: %T %v", err, err)
		}
	}
}

func TestSDKErrors(t *testing.T) {
	e := start(t, nil, "")
	c := e.client
	q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("q")}))
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"max messages", func() error {
			_, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 11})
			return err
		}, "InvalidParameterValue"},
		{"wait time", func() error {
			_, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 21})
			return err
		}, "InvalidParameterValue"},
		{"empty body", func() error {
			_, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("")})
			return err
		}, "MissingParameter"},
		{"bad chars", func() error {
			_, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("a\x00b")})
			return err
		}, "InvalidMessageContents"},
		{"too big", func() error {
			_, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(strings.Repeat("x", 1048577))})
			return err
		}, "InvalidParameterValue"},
		{"unknown attribute", func() error {
			_, err := c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl, Attributes: map[string]string{"Foobar": "1"}})
			return err
		}, "InvalidAttributeName"},
		{"bad attribute value", func() error {
			_, err := c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl, Attributes: map[string]string{"VisibilityTimeout": "99999"}})
			return err
		}, "InvalidAttributeValue"},
		{"queue exists", func() error {
			_, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("q"), Attributes: map[string]string{"DelaySeconds": "5"}})
			return err
		}, "QueueAlreadyExists"},
		{"empty batch", func() error {
			_, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{}})
			return err
		}, "AWS.SimpleQueueService.EmptyBatchRequest"},
		{"too many entries", func() error {
			var es []types.SendMessageBatchRequestEntry
			for i := 0; i < 11; i++ {
				es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String("x")})
			}
			_, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: es})
			return err
		}, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"},
		{"ids not distinct", func() error {
			_, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
				{Id: aws.String("a"), MessageBody: aws.String("x")}, {Id: aws.String("a"), MessageBody: aws.String("y")}}})
			return err
		}, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"},
		{"bad entry id", func() error {
			_, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
				{Id: aws.String("a b"), MessageBody: aws.String("x")}}})
			return err
		}, "AWS.SimpleQueueService.InvalidBatchEntryId"},
		{"batch too long", func() error {
			_, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
				{Id: aws.String("a"), MessageBody: aws.String(strings.Repeat("x", 600000))}, {Id: aws.String("b"), MessageBody: aws.String(strings.Repeat("x", 600000))}}})
			return err
		}, "AWS.SimpleQueueService.BatchRequestTooLong"},
		{"garbage handle", func() error {
			_, err := c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: aws.String("garbage")})
			return err
		}, "ReceiptHandleIsInvalid"},
		{"no queue", func() error {
			_, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(e.url + "/000000000000/nope"), MessageBody: aws.String("x")})
			return err
		}, "AWS.SimpleQueueService.NonExistentQueue"},
		{"move task source not dlq", func() error {
			_, err := c.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:q")})
			return err
		}, "InvalidParameterValue"},
		{"move task no source", func() error {
			_, err := c.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:nope")})
			return err
		}, "ResourceNotFoundException"},
		{"fifo attr on standard", func() error {
			_, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("s2"), Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
			return err
		}, "InvalidAttributeName"},
	}
	// A queue deleted less than 60 s ago cannot be created again.
	must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("gone")}))
	gone := must(c.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("gone")}))
	must(c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: gone.QueueUrl}))
	cases = append(cases, struct {
		name string
		call func() error
		want string
	}{"deleted recently", func() error {
		_, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("gone")})
		return err
	}, "AWS.SimpleQueueService.QueueDeletedRecently"})
	// FIFO: a handle whose message is no longer in flight.
	f := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("e.fifo"), Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}}))
	must(c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: f.QueueUrl, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")}))
	fm := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: f.QueueUrl}))
	must(c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: f.QueueUrl, ReceiptHandle: fm.Messages[0].ReceiptHandle, VisibilityTimeout: 0}))
	cases = append(cases, struct {
		name string
		call func() error
		want string
	}{"not in flight", func() error {
		_, err := c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: f.QueueUrl, ReceiptHandle: fm.Messages[0].ReceiptHandle, VisibilityTimeout: 5})
		return err
	}, "AWS.SimpleQueueService.MessageNotInflight"}, struct {
		name string
		call func() error
		want string
	}{"expired fifo handle", func() error {
		_, err := c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: f.QueueUrl, ReceiptHandle: fm.Messages[0].ReceiptHandle})
		return err
	}, "InvalidParameterValue"})
	for _, tc := range cases {
		if got := apiCode(tc.call()); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestSDKFIFOAndDeadLetters runs in a synctest bubble (over in-memory
// pipes): nothing in it waits on the machine's clock.
func TestSDKFIFOAndDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := sqstest.ServePipe(t, broker.Config{InMemory: true})
		c := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(p.URL), HTTPClient: p.HTTP,
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), RetryMaxAttempts: 1})
		dlq := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("dlq.fifo"), Attributes: map[string]string{"FifoQueue": "true"}}))
		q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"), Attributes: map[string]string{
			"FifoQueue": "true", "ContentBasedDeduplication": "true",
			"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq.fifo","maxReceiveCount":1}`}}))
		r1 := must(c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("a"), MessageGroupId: aws.String("g")}))
		r2 := must(c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("a"), MessageGroupId: aws.String("g")}))
		if *r1.MessageId != *r2.MessageId || r1.SequenceNumber == nil || len(*r1.SequenceNumber) != 20 {
			t.Fatalf("dedup: %v %v", *r1.MessageId, *r2.MessageId)
		}
		if _, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("b")}); apiCode(err) != "MissingParameter" {
			t.Fatalf("missing group: %v", err)
		}
		m := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 0, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}))
		if len(m.Messages) != 1 || m.Messages[0].Attributes["MessageGroupId"] != "g" || m.Messages[0].Attributes["SequenceNumber"] == "" {
			t.Fatalf("fifo receive %+v", m.Messages)
		}
		// The Go SDK leaves out VisibilityTimeout=0 on receive; release it explicitly.
		must(c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.Messages[0].ReceiptHandle, VisibilityTimeout: 0}))
		// Second receive exceeds maxReceiveCount: the message moves to the DLQ.
		m2 := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}))
		if len(m2.Messages) != 0 {
			t.Fatal("message not dead-lettered")
		}
		src := must(c.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: dlq.QueueUrl}))
		if len(src.QueueUrls) != 1 || !strings.HasSuffix(src.QueueUrls[0], "/jobs.fifo") {
			t.Fatalf("sources %v", src.QueueUrls)
		}
		task := must(c.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:dlq.fifo")}))
		if _, err := p.Broker.WaitMoveTask(ctx, *task.TaskHandle); err != nil {
			t.Fatal(err)
		}
		lt := must(c.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:dlq.fifo")}))
		if len(lt.Results) != 1 || *lt.Results[0].Status != "COMPLETED" || lt.Results[0].ApproximateNumberOfMessagesMoved != 1 {
			t.Fatalf("move task: %+v", lt.Results)
		}
		if _, err := c.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: task.TaskHandle}); apiCode(err) == "" {
			t.Fatal("cancelled a finished task")
		}
		back := must(c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}))
		if len(back.Messages) != 1 || *back.Messages[0].Body != "a" {
			t.Fatalf("redriven message: %+v", back.Messages)
		}
	})
}

func TestSDKSigV4(t *testing.T) {
	creds, err := sigv4.ParseCredentials([]byte(`{"principals":[
		{"name":"alice","access_key_id":"AKALICE","secret_access_key":"s3cret","queues":["alice-*"]},
		{"name":"bob","access_key_id":"AKBOB","secret_access_key":"b0b","session_token":"tok","queues":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, creds, "")
	alice := newClient(e.url, "AKALICE", "s3cret", "")
	bob := newClient(e.url, "AKBOB", "b0b", "tok")
	must(alice.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("alice-q")}))
	must(bob.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bob-q")}))
	l := must(alice.ListQueues(ctx, &awssqs.ListQueuesInput{}))
	if len(l.QueueUrls) != 1 || !strings.HasSuffix(l.QueueUrls[0], "/alice-q") {
		t.Fatalf("alice sees %v", l.QueueUrls)
	}
	if _, err := alice.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(e.url + "/000000000000/bob-q"), MessageBody: aws.String("x")}); apiCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("alice touched bob's queue: %v", err)
	}
	if _, err := newClient(e.url, "AKALICE", "wrong", "").ListQueues(ctx, &awssqs.ListQueuesInput{}); apiCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := newClient(e.url, "AKBOB", "b0b", "").ListQueues(ctx, &awssqs.ListQueuesInput{}); apiCode(err) != "InvalidClientTokenId" {
		t.Fatalf("missing session token: %v", err)
	}
	if _, err := newClient(e.url, "AKNOBODY", "x", "").ListQueues(ctx, &awssqs.ListQueuesInput{}); apiCode(err) != "InvalidClientTokenId" {
		t.Fatalf("unknown key: %v", err)
	}
	resp, err := http.Post(e.url+"/", "application/x-www-form-urlencoded", strings.NewReader("Action=ListQueues"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("unsigned request: %d", resp.StatusCode)
	}
}

func TestSigV4Presigned(t *testing.T) {
	creds, err := sigv4.ParseCredentials([]byte(`{"principals":[{"name":"carol","access_key_id":"AKCAROL","secret_access_key":"c4rol","queues":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, creds, "")
	must(newClient(e.url, "AKCAROL", "c4rol", "").CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("presigned")}))
	presign := func(secret string, when time.Time) string {
		req, _ := http.NewRequest("GET", e.url+"/?Action=ListQueues&Version=2012-11-05", nil)
		signer := v4.NewSigner()
		url, _, err := signer.PresignHTTP(ctx, aws.Credentials{AccessKeyID: "AKCAROL", SecretAccessKey: secret}, req,
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sqs", "us-east-1", when)
		if err != nil {
			t.Fatal(err)
		}
		return url
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(presign("c4rol", time.Now())); code != 200 || !strings.Contains(body, "/000000000000/presigned</QueueUrl>") {
		t.Fatalf("presigned: %d %s", code, body)
	}
	if code, body := get(presign("wrong", time.Now())); code != 403 || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("presigned with a wrong secret: %d %s", code, body)
	}
	if code, body := get(presign("c4rol", time.Now().Add(-time.Hour))); code != 403 && code != 400 || strings.Contains(body, "<QueueUrl>") {
		t.Fatalf("presigned an hour ago: %d %s", code, body)
	}
}

// TestShutdownEndsLongPolls: a long poll in flight at shutdown returns at
// once, empty. It runs in a synctest bubble (client and server joined by
// in-memory pipes), so "the poll is waiting" is known, not guessed.
func TestShutdownEndsLongPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := sqstest.ServePipe(t, broker.Config{InMemory: true})
		srv := p.Server
		c := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(p.URL), HTTPClient: p.HTTP,
			Credentials: credentials.NewStaticCredentialsProvider("AK", "s", ""), RetryMaxAttempts: 1})
		q := must(c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("poll")}))
		type result struct {
			n   int
			err error
		}
		done := make(chan result)
		start := time.Now()
		go func() {
			out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
			if err != nil {
				done <- result{err: err}
				return
			}
			done <- result{n: len(out.Messages)}
		}()
		synctest.Wait() // the poll is parked on the queue
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		r := <-done
		if r.err != nil || r.n != 0 {
			t.Fatalf("long poll at shutdown: %d messages, %v", r.n, r.err)
		}
		if waited := time.Since(start); waited >= 20*time.Second {
			t.Fatalf("the long poll ran its full %v instead of ending at shutdown", waited)
		}
	})
}
