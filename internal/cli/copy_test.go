package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/cmdkit"
	"github.com/sluicemq/sluice/test/testkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/qcopy"
)

// sentMsg is what a test sent to the source, to find at the destination.
type sentMsg struct {
	attrsMD5, trace, group, dedup string
}

// testClient is the CLI's own SQS client for ep, its request bodies
// buffered (testkit.BufferedBodies: the SDK's bodies can make net/http
// close a connection under a receive's answer, once in thousands; the
// SDK then receives again, and the lost answer's messages stay in
// flight, which the drain below would count as missing).
func testClient(ep string) *awssqs.Client {
	o := cmdkit.NewSQS(ep, "us-east-1", Env{Getenv: func(string) string { return "" }}).Options()
	o.HTTPClient = &http.Client{Transport: testkit.BufferedBodies{Next: http.DefaultTransport.(*http.Transport).Clone()}}
	return awssqs.New(o)
}

func mustURL(t *testing.T, c *awssqs.Client, name string, attrs, tags map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: &name, Attributes: attrs, Tags: tags})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return *out.QueueUrl
}

func queueAttrs(t *testing.T, c *awssqs.Client, url string) map[string]string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatalf("attributes of %s: %v", url, err)
	}
	return out.Attributes
}

// depth is a queue's visible, in-flight and delayed messages.
func depth(t *testing.T, c *awssqs.Client, url string) [3]int {
	a := queueAttrs(t, c, url)
	n := func(k string) int { v, _ := strconv.Atoi(a[k]); return v }
	return [3]int{n("ApproximateNumberOfMessages"), n("ApproximateNumberOfMessagesNotVisible"), n("ApproximateNumberOfMessagesDelayed")}
}

// sendAll sends entries in batches of 10 and records what was sent by body.
func sendAll(t *testing.T, c *awssqs.Client, url string, entries []types.SendMessageBatchRequestEntry, sent map[string]sentMsg) {
	t.Helper()
	for len(entries) > 0 {
		part := entries[:min(10, len(entries))]
		entries = entries[len(part):]
		for i := range part {
			part[i].Id = aws.String(strconv.Itoa(i))
		}
		out, err := c.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: part})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v %+v", err, out)
		}
		for _, r := range out.Successful {
			e := part[mustAtoi(t, *r.Id)]
			m := sentMsg{attrsMD5: aws.ToString(r.MD5OfMessageAttributes), group: aws.ToString(e.MessageGroupId), dedup: aws.ToString(e.MessageDeduplicationId)}
			if th, ok := e.MessageSystemAttributes["AWSTraceHeader"]; ok {
				m.trace = *th.StringValue
			}
			sent[*e.MessageBody] = m
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// drain receives and deletes every message of a destination queue and
// checks it against what was sent: each body exactly once, with its
// attributes (by MD5), trace header, group and deduplication id. It returns
// the bodies in the order received, by group.
func drain(t *testing.T, c *awssqs.Client, url string, want map[string]sentMsg) map[string][]string {
	t.Helper()
	ctx := context.Background()
	got := map[string]int{}
	order := map[string][]string{}
	for len(got) < len(want) {
		out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			body := *m.Body
			w, ok := want[body]
			switch {
			case !ok:
				t.Errorf("%s: message %q was never sent", url, body)
			case got[body] > 0:
				t.Errorf("%s: message %q copied twice", url, body)
			case aws.ToString(m.MD5OfMessageAttributes) != w.attrsMD5:
				t.Errorf("%s: %q attributes MD5 %q, sent %q (%v)", url, body, aws.ToString(m.MD5OfMessageAttributes), w.attrsMD5, m.MessageAttributes)
			case m.Attributes["AWSTraceHeader"] != w.trace:
				t.Errorf("%s: %q trace header %q, sent %q", url, body, m.Attributes["AWSTraceHeader"], w.trace)
			case m.Attributes["MessageGroupId"] != w.group:
				t.Errorf("%s: %q group %q, sent %q", url, body, m.Attributes["MessageGroupId"], w.group)
			case w.dedup != "" && m.Attributes["MessageDeduplicationId"] != w.dedup:
				t.Errorf("%s: %q deduplication id %q, sent %q", url, body, m.Attributes["MessageDeduplicationId"], w.dedup)
			}
			got[body]++
			order[m.Attributes["MessageGroupId"]] = append(order[m.Attributes["MessageGroupId"]], body)
			if _, err := c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var missing []string
	for body := range want {
		if got[body] == 0 {
			missing = append(missing, body)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d messages missing, e.g. %q", url, len(missing), len(want), missing[0])
	}
	if d := depth(t, c, url); d != [3]int{} {
		t.Errorf("%s: after receiving every message once, %v (visible, in flight, delayed) left: duplicates", url, d)
	}
	return order
}

func runCopy(t *testing.T, args ...string) (qcopy.Report, string, int) {
	t.Helper()
	out, code := sluiceCmd(t, "", append([]string{"copy", "--json"}, args...)...)
	var rep qcopy.Report
	if code == 0 {
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("copy --json: %v\n%s", err, out)
		}
	}
	return rep, out, code
}

// TestCopyMove moves a standard queue, a FIFO queue and a dead-letter queue
// between two servers: dry run first (nothing changes), then --create
// --move (every message exactly once with its attributes, FIFO order per
// group, the dead-letter relation pointing at the destination's queue, the
// source empty).
func TestCopyMove(t *testing.T) {
	from := startServer(t)
	to, _ := serveBroker(t, broker.Config{InMemory: true, AccountID: "111111111111"})
	src, dst := testClient(from), testClient(to)
	ctx := context.Background()

	dlqURL := mustURL(t, src, "copy-dlq", nil, map[string]string{"team": "ops"})
	srcDLQARN := queueAttrs(t, src, dlqURL)["QueueArn"]
	jobsURL := mustURL(t, src, "copy-jobs", map[string]string{"VisibilityTimeout": "45",
		"RedrivePolicy": `{"deadLetterTargetArn":"` + srcDLQARN + `","maxReceiveCount":5}`}, map[string]string{"team": "jobs"})
	fifoURL := mustURL(t, src, "copy-orders.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}, nil)
	mustURL(t, src, "other", nil, nil) // not matched by --queues

	want := map[string]map[string]sentMsg{"copy-dlq": {}, "copy-jobs": {}, "copy-orders.fifo": {}}
	var entries []types.SendMessageBatchRequestEntry
	for i := range 45 {
		e := types.SendMessageBatchRequestEntry{MessageBody: aws.String(fmt.Sprintf("job %d %s", i, strings.Repeat("x", i))),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"n":    {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i))},
				"kind": {DataType: aws.String("String.custom"), StringValue: aws.String("kind-" + strconv.Itoa(i%4))},
				"blob": {DataType: aws.String("Binary"), BinaryValue: []byte{byte(i), 0, 255}},
			}}
		if i%3 == 0 {
			e.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("Root=1-5759e988-bd862e3fe1be46a99427%04d", i))}}
		}
		if i%5 == 0 {
			e.MessageGroupId = aws.String("tenant-" + strconv.Itoa(i%2)) // a tenant on a standard queue
		}
		entries = append(entries, e)
	}
	sendAll(t, src, jobsURL, entries, want["copy-jobs"])
	entries = nil
	for i := range 5 {
		entries = append(entries, types.SendMessageBatchRequestEntry{MessageBody: aws.String("dead " + strconv.Itoa(i))})
	}
	sendAll(t, src, dlqURL, entries, want["copy-dlq"])
	entries = nil
	groups := []string{"g-a", "g-b", "g-c"}
	for i := range 10 {
		for _, g := range groups {
			body := fmt.Sprintf("%s order %02d", g, i)
			entries = append(entries, types.SendMessageBatchRequestEntry{MessageBody: &body, MessageGroupId: aws.String(g),
				MessageDeduplicationId: aws.String("dedup-" + body[:3] + strconv.Itoa(i)),
				MessageAttributes:      map[string]types.MessageAttributeValue{"seq": {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i))}}})
		}
	}
	sendAll(t, src, fifoURL, entries, want["copy-orders.fifo"])
	srcURLs := map[string]string{"copy-dlq": dlqURL, "copy-jobs": jobsURL, "copy-orders.fifo": fifoURL}

	// The dry run lists what it would create, and changes nothing.
	rep, out, code := runCopy(t, "--from", from, "--to", to, "--queues", "copy-*", "--create", "--move", "--dry-run")
	if code != 0 || !rep.DryRun || len(rep.Queues) != 3 {
		t.Fatalf("dry run: %d\n%s", code, out)
	}
	if rep.Queues[0].Name != "copy-dlq" {
		t.Errorf("dead-letter queue not first: %+v", rep.Queues)
	}
	for _, q := range rep.Queues {
		if q.Destination != "would create" || q.Visible != len(want[q.Name]) || q.Attributes == nil {
			t.Errorf("dry run %s: %+v", q.Name, q)
		}
	}
	if l, err := dst.ListQueues(ctx, &awssqs.ListQueuesInput{}); err != nil || len(l.QueueUrls) != 0 {
		t.Fatalf("the dry run created %v (%v)", l.QueueUrls, err)
	}
	for name, u := range srcURLs {
		if d := depth(t, src, u); d != [3]int{len(want[name]), 0, 0} {
			t.Fatalf("the dry run touched %s: %v", name, d)
		}
	}
	if out, _ := sluiceCmd(t, "", "copy", "--from", from, "--to", to, "--queues", "copy-*", "--dry-run"); !strings.Contains(out, "missing (use --create)") {
		t.Errorf("dry run without --create:\n%s", out)
	}

	// The move.
	rep, out, code = runCopy(t, "--from", from, "--to", to, "--queues", "copy-*", "--create", "--move", "--concurrency", "3")
	if code != 0 {
		t.Fatalf("copy --move: exit %d\n%s", code, out)
	}
	total := 0
	for _, q := range rep.Queues {
		if q.Destination != "created" || q.Copied != len(want[q.Name]) || q.Failed != 0 || q.Error != "" {
			t.Errorf("report for %s: %+v", q.Name, q)
		}
		total += q.Copied
	}
	if len(rep.Queues) != 3 || rep.Copied != 80 || total != 80 || rep.Failed != 0 {
		t.Errorf("report: %s", out)
	}
	for name, u := range srcURLs {
		if d := depth(t, src, u); d != [3]int{} {
			t.Errorf("source %s after the move: %v (visible, in flight, delayed)", name, d)
		}
	}
	dstURLs := map[string]string{}
	for name := range want {
		u, err := dst.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatalf("destination %s: %v", name, err)
		}
		dstURLs[name] = *u.QueueUrl
	}
	if _, err := dst.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("other")}); err == nil {
		t.Error("--queues copy-* copied other")
	}

	// Queue attributes and tags, the dead-letter target rewritten.
	dlqARN := queueAttrs(t, dst, dstURLs["copy-dlq"])["QueueArn"]
	if !strings.Contains(dlqARN, "111111111111") {
		t.Fatalf("destination ARN %q", dlqARN)
	}
	ja := queueAttrs(t, dst, dstURLs["copy-jobs"])
	if ja["VisibilityTimeout"] != "45" || !strings.Contains(ja["RedrivePolicy"], `"`+dlqARN+`"`) || !strings.Contains(ja["RedrivePolicy"], "5") {
		t.Errorf("destination copy-jobs attributes: %v", ja)
	}
	if fa := queueAttrs(t, dst, dstURLs["copy-orders.fifo"]); fa["FifoQueue"] != "true" || fa["ContentBasedDeduplication"] != "false" {
		t.Errorf("destination FIFO attributes: %v", fa)
	}
	for name, team := range map[string]string{"copy-dlq": "ops", "copy-jobs": "jobs"} {
		tags, err := dst.ListQueueTags(ctx, &awssqs.ListQueueTagsInput{QueueUrl: aws.String(dstURLs[name])})
		if err != nil || tags.Tags["team"] != team {
			t.Errorf("destination %s tags: %v %v", name, tags, err)
		}
	}

	// Every message once, with what it was sent with; FIFO groups in order.
	drain(t, dst, dstURLs["copy-dlq"], want["copy-dlq"])
	drain(t, dst, dstURLs["copy-jobs"], want["copy-jobs"])
	order := drain(t, dst, dstURLs["copy-orders.fifo"], want["copy-orders.fifo"])
	for _, g := range groups {
		var w []string
		for i := range 10 {
			w = append(w, fmt.Sprintf("%s order %02d", g, i))
		}
		if strings.Join(order[g], "|") != strings.Join(w, "|") {
			t.Errorf("group %s arrived as %q, sent %q", g, order[g], w)
		}
	}
}

// TestCopyWithoutMove: the source keeps its messages (in flight), and
// messages that reappear there while the copy runs (a one-second
// visibility) are not copied twice. A missing destination without
// --create fails the command.
func TestCopyWithoutMove(t *testing.T) {
	from, to := startServer(t), startServer(t)
	src, dst := testClient(from), testClient(to)
	u := mustURL(t, src, "plain", nil, nil)
	want := map[string]sentMsg{}
	var entries []types.SendMessageBatchRequestEntry
	for i := range 25 {
		entries = append(entries, types.SendMessageBatchRequestEntry{MessageBody: aws.String("m" + strconv.Itoa(i))})
	}
	sendAll(t, src, u, entries, want)

	if out, code := sluiceCmd(t, "", "copy", "--from", from, "--to", to); code == 0 || !strings.Contains(out, "missing at the destination (use --create)") {
		t.Fatalf("copy to a missing queue: %d\n%s", code, out)
	}
	rep, out, code := runCopy(t, "--from", from, "--to", to, "--create", "--visibility", "1", "--concurrency", "2")
	if code != 0 || rep.Copied != 25 || rep.Failed != 0 || rep.Move {
		t.Fatalf("copy: %d\n%s", code, out)
	}
	if d := depth(t, src, u); d[0]+d[1] != 25 {
		t.Errorf("source after copy: %v (visible, in flight, delayed), want all 25 still there", d)
	}
	du, err := dst.GetQueueUrl(context.Background(), &awssqs.GetQueueUrlInput{QueueName: aws.String("plain")})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, dst, *du.QueueUrl, want)
}

func TestCopyFlags(t *testing.T) {
	for _, args := range [][]string{
		{"copy"},
		{"copy", "--from", "http://a", "--to", "http://a"},
		{"copy", "--from", "http://a", "--to", "http://b", "--concurrency", "0"},
		{"copy", "--from", "http://a", "--to", "http://b", "--queues", "["},
	} {
		if out, code := sluiceCmd(t, "", args...); code == 0 {
			t.Errorf("%v succeeded: %s", args, out)
		}
	}
}
