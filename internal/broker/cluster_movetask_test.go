package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/broker"
)

// TestClusterMoveTaskOutlivesItsOwner: a move task started through one
// node runs on the node that owns its dead-letter queue; that node
// crashes mid-task; the node that takes the queue over resumes the task,
// which completes. Every node lists it; every message arrives once.
func TestClusterMoveTaskOutlivesItsOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	nodes := startCluster(t, 3)
	const n = 200
	arn := func(q string) string { return "arn:aws:sqs:us-east-1:000000000000:" + q }
	c := nodes[0].client
	for _, q := range []string{"dlq", "dest"} {
		if _, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(q)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("src"), Attributes: map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, arn("dlq"))}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 10 {
		var batch []types.SendMessageBatchRequestEntry
		for j := i; j < i+10; j++ {
			batch = append(batch, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprintf("m%03d", j))})
		}
		out, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String("dlq"), Entries: batch})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v %+v", err, out)
		}
	}

	own := owner(t, nodes, "dlq")
	var others []*clusterNode
	for _, nd := range nodes {
		if nd != own {
			others = append(others, nd)
		}
	}
	started, err := others[0].client.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("dlq")),
		DestinationArn: aws.String(arn("dest")), MaxNumberOfMessagesPerSecond: aws.Int32(50)})
	if err != nil {
		t.Fatal(err)
	}
	// task lists the task through node nd, until ok says so (polled,
	// within a deadline: the cluster runs on the real clock).
	task := func(nd *clusterNode, ok func(types.ListMessageMoveTasksResultEntry) bool) types.ListMessageMoveTasksResultEntry {
		t.Helper()
		deadline := time.After(60 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var last types.ListMessageMoveTasksResultEntry
		for {
			out, err := nd.client.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(arn("dlq")), MaxResults: aws.Int32(10)})
			if err == nil && len(out.Results) == 1 {
				if last = out.Results[0]; ok(last) {
					return last
				}
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("through %s: %s, %d moved (%v)", nd.name, aws.ToString(last.Status), last.ApproximateNumberOfMessagesMoved, err)
			}
		}
	}
	// Every node lists it: the owner from its partition, the others by
	// asking the owner.
	for _, nd := range nodes {
		mt := task(nd, func(mt types.ListMessageMoveTasksResultEntry) bool {
			return aws.ToString(mt.Status) == "RUNNING" && mt.ApproximateNumberOfMessagesMoved >= 40
		})
		if aws.ToString(mt.TaskHandle) != aws.ToString(started.TaskHandle) || mt.ApproximateNumberOfMessagesToMove == nil || *mt.ApproximateNumberOfMessagesToMove != n {
			t.Fatalf("through %s: %+v", nd.name, mt)
		}
	}

	// The owner crashes: its lease expires, another node takes the queue
	// over and resumes the task.
	own.closed = true
	broker.Crash(own.b)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	own.srv.Shutdown(sctx)
	cancel()
	next := owner(t, others, "dlq")
	t.Logf("dlq moved from %s to %s", own.name, next.name)
	for _, nd := range others {
		mt := task(nd, func(mt types.ListMessageMoveTasksResultEntry) bool { return aws.ToString(mt.Status) != "RUNNING" })
		if aws.ToString(mt.Status) != "COMPLETED" || mt.ApproximateNumberOfMessagesMoved > n || mt.ApproximateNumberOfMessagesMoved < n-100 {
			t.Fatalf("through %s: the task ended %+v", nd.name, mt)
		}
	}

	// Every message is in dest once, none left in dlq.
	got := map[string]int{}
	for len(got) < n {
		out, err := others[1].client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String("dest"), MaxNumberOfMessages: 10,
			VisibilityTimeout: 3600, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)]++
		}
	}
	for i := 0; i < n; i++ {
		if b := fmt.Sprintf("m%03d", i); got[b] != 1 {
			t.Fatalf("%s arrived %d times", b, got[b])
		}
	}
	if len(got) != n {
		t.Fatalf("%d distinct messages in dest, want %d", len(got), n)
	}
	attrs, err := others[0].client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String("dlq"),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil || attrs.Attributes["ApproximateNumberOfMessages"] != "0" || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Fatalf("dlq after the task: %v %v", attrs, err)
	}
}
