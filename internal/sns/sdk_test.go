package sns_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/sqs/sqstest"
)

var ctx = context.Background()

func clients(t *testing.T) (*awssns.Client, *awssqs.Client) {
	t.Helper()
	url, _ := sqstest.Serve(t, broker.Config{Dir: t.TempDir()})
	creds := credentials.NewStaticCredentialsProvider("AKID", "secret", "")
	return awssns.New(awssns.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: creds}),
		awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: creds})
}

func queue(t *testing.T, q *awssqs.Client, name string) (url, arn string) {
	t.Helper()
	out, err := q.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return *out.QueueUrl, "arn:aws:sqs:us-east-1:000000000000:" + name
}

// receiveN receives until n messages came (deleting them), or fails.
func receiveN(t *testing.T, q *awssqs.Client, url string, n int) []sqstypes.Message {
	t.Helper()
	var got []sqstypes.Message
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := q.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			got = append(got, m)
			if _, err := q.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != n {
		t.Fatalf("%s: %d messages, want %d", url, len(got), n)
	}
	return got
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// The Go SDK drives a topic with three subscriptions: the JSON envelope,
// raw delivery with the attributes as SQS attributes, and a filter policy;
// idempotent creations and subscriptions, batches, attributes, errors.
func TestSDKFanOut(t *testing.T) {
	sn, sq := clients(t)
	envURL, envARN := queue(t, sq, "envelope")
	rawURL, rawARN := queue(t, sq, "raw")
	redURL, redARN := queue(t, sq, "red")

	ct, err := sn.CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String("orders")})
	if err != nil {
		t.Fatal(err)
	}
	topic := *ct.TopicArn
	if topic != "arn:aws:sns:us-east-1:000000000000:orders" {
		t.Fatalf("topic ARN %s", topic)
	}
	if again, err := sn.CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String("orders")}); err != nil || *again.TopicArn != topic {
		t.Fatalf("CreateTopic again: %v %v", again, err)
	}
	if _, err := sn.CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String("orders"), Attributes: map[string]string{"DisplayName": "other"}}); apiCode(err) != "InvalidParameter" ||
		!strings.Contains(err.Error(), "Topic already exists with different attributes") {
		t.Fatalf("CreateTopic again with other attributes: %v", err)
	}
	subscribe := func(endpoint string, attrs map[string]string) string {
		t.Helper()
		out, err := sn.Subscribe(ctx, &awssns.SubscribeInput{TopicArn: &topic, Protocol: aws.String("sqs"), Endpoint: &endpoint,
			Attributes: attrs, ReturnSubscriptionArn: true})
		if err != nil {
			t.Fatal(err)
		}
		return *out.SubscriptionArn
	}
	envSub := subscribe(envARN, nil)
	subscribe(rawARN, map[string]string{"RawMessageDelivery": "true"})
	redSub := subscribe(redARN, map[string]string{"FilterPolicy": `{"color":["red"]}`})
	if again := subscribe(envARN, map[string]string{"RawMessageDelivery": "false"}); again != envSub {
		t.Fatalf("Subscribe again with the default: %s, want %s", again, envSub)
	}
	if !strings.HasPrefix(envSub, topic+":") {
		t.Fatalf("subscription ARN %s", envSub)
	}
	lst, err := sn.ListSubscriptionsByTopic(ctx, &awssns.ListSubscriptionsByTopicInput{TopicArn: &topic})
	if err != nil || len(lst.Subscriptions) != 3 {
		t.Fatalf("ListSubscriptionsByTopic: %v %v", lst, err)
	}

	color := func(c string) map[string]snstypes.MessageAttributeValue {
		return map[string]snstypes.MessageAttributeValue{"color": {DataType: aws.String("String"), StringValue: aws.String(c)}}
	}
	pub, err := sn.Publish(ctx, &awssns.PublishInput{TopicArn: &topic, Message: aws.String(`order <1> & "more"`), Subject: aws.String("new order"),
		MessageAttributes: color("red")})
	if err != nil || pub.MessageId == nil {
		t.Fatalf("Publish: %v %v", pub, err)
	}
	batch, err := sn.PublishBatch(ctx, &awssns.PublishBatchInput{TopicArn: &topic, PublishBatchRequestEntries: []snstypes.PublishBatchRequestEntry{
		{Id: aws.String("a"), Message: aws.String("blue one"), MessageAttributes: color("blue")},
		{Id: aws.String("b"), Message: aws.String("red two"), MessageAttributes: color("red")},
	}})
	if err != nil || len(batch.Successful) != 2 || len(batch.Failed) != 0 {
		t.Fatalf("PublishBatch: %+v %v", batch, err)
	}

	var envelopes []map[string]any
	for _, m := range receiveN(t, sq, envURL, 3) {
		var env map[string]any
		if err := json.Unmarshal([]byte(*m.Body), &env); err != nil {
			t.Fatalf("the envelope is not JSON: %q", *m.Body)
		}
		envelopes = append(envelopes, env)
	}
	slices.SortFunc(envelopes, func(a, b map[string]any) int { return strings.Compare(a["Message"].(string), b["Message"].(string)) })
	first := envelopes[1] // "order ..." sorts between "blue one" and "red two"
	if first["Type"] != "Notification" || first["TopicArn"] != topic || first["Message"] != `order <1> & "more"` ||
		first["Subject"] != "new order" || first["MessageId"] != *pub.MessageId {
		t.Fatalf("envelope %v", first)
	}
	if a, ok := first["MessageAttributes"].(map[string]any)["color"].(map[string]any); !ok || a["Value"] != "red" || a["Type"] != "String" {
		t.Fatalf("envelope attributes %v", first["MessageAttributes"])
	}
	var raw []string
	for _, m := range receiveN(t, sq, rawURL, 3) {
		if a, ok := m.MessageAttributes["color"]; !ok || a.StringValue == nil {
			t.Fatalf("a raw delivery without its attribute: %+v", m)
		}
		raw = append(raw, *m.Body)
	}
	slices.Sort(raw)
	if want := []string{"blue one", `order <1> & "more"`, "red two"}; !slices.Equal(raw, want) {
		t.Fatalf("raw bodies %q, want %q", raw, want)
	}
	var reds []string
	for _, m := range receiveN(t, sq, redURL, 2) {
		var env map[string]any
		if err := json.Unmarshal([]byte(*m.Body), &env); err != nil {
			t.Fatal(err)
		}
		reds = append(reds, env["Message"].(string))
	}
	slices.Sort(reds)
	if want := []string{`order <1> & "more"`, "red two"}; !slices.Equal(reds, want) {
		t.Fatalf("the filtered subscription got %q", reds)
	}

	ta, err := sn.GetTopicAttributes(ctx, &awssns.GetTopicAttributesInput{TopicArn: &topic})
	if err != nil || ta.Attributes["SubscriptionsConfirmed"] != "3" || ta.Attributes["TopicArn"] != topic {
		t.Fatalf("GetTopicAttributes: %v %v", ta, err)
	}
	sa, err := sn.GetSubscriptionAttributes(ctx, &awssns.GetSubscriptionAttributesInput{SubscriptionArn: &redSub})
	if err != nil || sa.Attributes["FilterPolicy"] != `{"color":["red"]}` || sa.Attributes["FilterPolicyScope"] != "MessageAttributes" {
		t.Fatalf("GetSubscriptionAttributes: %v %v", sa, err)
	}

	// Bad input: SNS's codes, nothing changed.
	_, err = sn.Subscribe(ctx, &awssns.SubscribeInput{TopicArn: &topic, Protocol: aws.String("sqs"), Endpoint: aws.String(envARN + "x"),
		Attributes: map[string]string{"FilterPolicy": `{"a":[{"bogus":1}]}`}})
	if apiCode(err) != "InvalidParameter" || !strings.Contains(err.Error(), "Unrecognized match type bogus") {
		t.Fatalf("an invalid filter policy: %v", err)
	}
	if _, err := sn.Publish(ctx, &awssns.PublishInput{TopicArn: aws.String(topic + "-nope"), Message: aws.String("m")}); apiCode(err) != "NotFound" {
		t.Fatalf("a publish to a missing topic: %v", err)
	}
	if _, err := sn.Publish(ctx, &awssns.PublishInput{TopicArn: &topic, Message: aws.String("")}); apiCode(err) != "InvalidParameter" {
		t.Fatalf("an empty message: %v", err)
	}
	if _, err := sn.Publish(ctx, &awssns.PublishInput{TopicArn: &topic, Message: aws.String(strings.Repeat("x", 256<<10+1))}); apiCode(err) != "InvalidParameter" {
		t.Fatalf("a message of 256 KiB + 1: %v", err)
	}

	if _, err := sn.Unsubscribe(ctx, &awssns.UnsubscribeInput{SubscriptionArn: &envSub}); err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Unsubscribe(ctx, &awssns.UnsubscribeInput{SubscriptionArn: &envSub}); err != nil {
		t.Fatalf("Unsubscribe again: %v", err)
	}
	if _, err := sn.DeleteTopic(ctx, &awssns.DeleteTopicInput{TopicArn: &topic}); err != nil {
		t.Fatal(err)
	}
	if lt, err := sn.ListTopics(ctx, &awssns.ListTopicsInput{}); err != nil || len(lt.Topics) != 0 {
		t.Fatalf("ListTopics after the deletion: %v %v", lt, err)
	}
}
