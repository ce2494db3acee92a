package sqs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/sqs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// fuzzActions are the actions FuzzServeHTTP drives, by index.
var fuzzActions = []string{
	"CreateQueue", "DeleteQueue", "GetQueueUrl", "ListQueues", "GetQueueAttributes", "SetQueueAttributes",
	"SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch",
	"ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "PurgeQueue", "ListDeadLetterSourceQueues",
	"TagQueue", "UntagQueue", "ListQueueTags", "AddPermission", "RemovePermission",
	"StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask",
	"RetryMessage", "RejectMessage", "DeferMessage",
}

// FuzzServeHTTP sends whatever a careless or hostile client might to every
// action, in both protocols, against a real broker (the memory store, or
// the disk store when disk is set) holding a standard queue, a FIFO queue
// and a dead-letter queue, on a clock that stands still. "$RH" in the
// input becomes a live receipt handle. No input may get a 500 (a panic
// turned into InternalError, or an error without a catalogue code), the
// broker must go on serving, and a disk store must reopen holding what it
// held before: whatever a client sends, it never writes a record that
// recovery cannot read.
func FuzzServeHTTP(f *testing.F) {
	seeds := map[string][]string{
		"CreateQueue":                  {`{"QueueName":"n","Attributes":{"VisibilityTimeout":"-1"}}`, `{"QueueName":"x.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"yes"}}`},
		"GetQueueAttributes":           {`{"QueueUrl":"q","AttributeNames":["All"]}`, `{"QueueUrl":"f.fifo","AttributeNames":[1,{"a":2}]}`},
		"SetQueueAttributes":           {`{"QueueUrl":"q","Attributes":{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:dlq\",\"maxReceiveCount\":\"x\"}"}}`},
		"SendMessage":                  {`{"QueueUrl":"q","MessageBody":"x","DelaySeconds":900,"MessageAttributes":{"a":{"DataType":"Number","StringValue":"1e999"}}}`, `{"QueueUrl":"f.fifo","MessageBody":"x","MessageGroupId":"g","MessageSystemAttributes":{"AWSTraceHeader":{"DataType":"Binary","BinaryValue":"@@"}}}`},
		"SendMessageBatch":             {`{"QueueUrl":"q","Entries":[{"Id":"a","MessageBody":""},{"Id":"a","MessageBody":"y"}]}`, `{"QueueUrl":"f.fifo","Entries":[{"Id":"a","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}]}`},
		"ReceiveMessage":               {`{"QueueUrl":"q","MaxNumberOfMessages":11,"WaitTimeSeconds":1,"VisibilityTimeout":0,"MessageAttributeNames":["All"],"MessageSystemAttributeNames":["All"]}`},
		"DeleteMessage":                {`{"QueueUrl":"q","ReceiptHandle":"$RH"}`, `{"QueueUrl":"q","ReceiptHandle":"$RHx"}`},
		"DeleteMessageBatch":           {`{"QueueUrl":"q","Entries":[{"Id":"a","ReceiptHandle":"$RH"},{"Id":"b","ReceiptHandle":"junk"}]}`},
		"ChangeMessageVisibility":      {`{"QueueUrl":"q","ReceiptHandle":"$RH","VisibilityTimeout":43201}`},
		"ChangeMessageVisibilityBatch": {`{"QueueUrl":"q","Entries":[{"Id":"a","ReceiptHandle":"$RH","VisibilityTimeout":"10"}]}`},
		"StartMessageMoveTask":         {`{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:dlq","MaxNumberOfMessagesPerSecond":0}`},
		"CancelMessageMoveTask":        {`{"TaskHandle":"eyJ0YXNrSWQiOiJ4In0="}`},
		"TagQueue":                     {`{"QueueUrl":"q","Tags":{"":"v"}}`},
		"AddPermission":                {`{"QueueUrl":"q","Label":"l","AWSAccountIds":["1"],"Actions":["*"]}`},
		"RetryMessage":                 {`{"QueueUrl":"q","ReceiptHandle":"$RH"}`},
		"DeferMessage":                 {`{"QueueUrl":"q","ReceiptHandle":"$RH","DelaySeconds":-5}`},
	}
	for i, a := range fuzzActions {
		bodies := append(seeds[a], `{"QueueUrl":"q"}`, `{"QueueUrl":"nope","QueueName":"q"}`, `[]`, `{"QueueUrl":{"a":[]}}`)
		for _, b := range bodies {
			f.Add(uint8(i), false, b, i%2 == 0)
		}
		f.Add(uint8(i), true, "QueueUrl=q&Entries.1.Id=a&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=String&ReceiptHandle=$RH", i%2 == 1)
	}

	f.Fuzz(func(t *testing.T, ai uint8, query bool, in string, disk bool) {
		action := fuzzActions[int(ai)%len(fuzzActions)]
		// A broker of its own for each input, so that a failure replays.
		cfg := broker.Config{InMemory: true, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
		if disk {
			cfg = broker.Config{Dir: t.TempDir(), Sync: broker.SyncNone, NoPreallocate: true, Clock: cfg.Clock}
		}
		b, err := broker.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { b.Close() }()
		srv := sqs.NewServer(sqs.ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, b)
		ctx := context.Background()
		for _, q := range []struct {
			name  string
			attrs map[string]string
		}{{"dlq", nil}, {"q", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"2"}`}}, {"f.fifo", map[string]string{"FifoQueue": "true"}}} {
			if _, err := b.CreateQueue(ctx, q.name, q.attrs, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Send(ctx, "q", st.SendInput{Body: "m"}); err != nil {
			t.Fatal(err)
		}
		ms, err := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 1})
		if err != nil || len(ms) != 1 {
			t.Fatalf("setting up the message in flight: %v, %d messages", err, len(ms))
		}
		rh := ms[0].ReceiptHandle
		if _, err := b.Send(ctx, "q", st.SendInput{Body: "waiting"}); err != nil {
			t.Fatal(err)
		}

		var r *http.Request
		var cancel context.CancelFunc
		if query {
			r, cancel = fuzzRequest("Action="+action+"&"+strings.ReplaceAll(in, "$RH", url.QueryEscape(rh)), "application/x-www-form-urlencoded", "")
		} else {
			r, cancel = fuzzRequest(strings.ReplaceAll(in, "$RH", rh), "application/x-amz-json-1.0", "AmazonSQS."+action)
		}
		defer cancel()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s (query %v) %q: %d %s", action, query, in, w.Code, w.Body)
		}
		// (The input may have made "after" itself, with other attributes.)
		if _, err := b.CreateQueue(ctx, "after", nil, nil); err != nil && st.CodeOf(err) != st.CodeQueueNameExists {
			t.Fatalf("the broker stopped serving after %s %q: %v", action, in, err)
		}
		if _, err := b.Send(ctx, "after", st.SendInput{Body: "x"}); err != nil {
			t.Fatalf("the broker stopped serving after %s %q: %v", action, in, err)
		}
		if !disk {
			return
		}
		before := holdings(t, b)
		b.Close()
		if b, err = broker.Open(cfg); err != nil {
			t.Fatalf("the store does not reopen after %s %q: %v", action, in, err)
		}
		if after := holdings(t, b); after != before {
			t.Fatalf("after %s %q the reopened store holds\n%s\nnot\n%s", action, in, after, before)
		}
	})
}

// fuzzRequest builds a POST to "/" whose long polls end within 50 ms (a
// fuzzed WaitTimeSeconds must not stall the run).
func fuzzRequest(body, contentType, target string) (*http.Request, context.CancelFunc) {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
	return r.WithContext(ctx), cancel
}

// holdings renders every queue with its message counts and attributes.
func holdings(t *testing.T, b *broker.Broker) string {
	names, _, err := b.ListQueues("", 1000, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, n := range names {
		a, err := b.GetQueueAttributes(n, []string{"All"})
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&out, "%s:", n)
		for _, k := range keys {
			fmt.Fprintf(&out, " %s=%s", k, a[k])
		}
		out.WriteString("\n")
	}
	return out.String()
}
