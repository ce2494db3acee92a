package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// TestClusterChecksSettingsOnTheOwner: when a queue's owner is not the
// node that writes the catalog (where CreateQueue runs), CreateQueue of
// that queue again compares the attributes its owner holds, and a
// RedrivePolicy naming it is checked against its RedriveAllowPolicy.
func TestClusterChecksSettingsOnTheOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	nodes := startCluster(t, 3)
	c := nodes[0].client
	const allow = `{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:000000000000:allowed"]}`
	attrs := map[string]string{"VisibilityTimeout": "17", "RedriveAllowPolicy": allow}
	const n = 6
	for i := range n {
		if _, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("dead%d", i)), Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	// A queue starts on the catalog's owner and moves to its preferred
	// node once settled (about 10 s): wait for one that moved.
	var dlq string
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for dlq == "" {
		cs := nodes[0].b.ClusterStatus()
		for i := range n {
			name := fmt.Sprintf("dead%d", i)
			if o := cs.Owners[name]; o != "" && o != cs.CatalogOwner {
				dlq = name
				break
			}
		}
		if dlq != "" {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no dead-letter queue left the catalog's owner: %+v", cs)
		}
	}
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return fmt.Sprint(err)
	}
	// The same attributes: the queue's URL.
	if _, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(dlq), Attributes: attrs}); err != nil {
		t.Fatalf("CreateQueue of %s with its own attributes: %v", dlq, err)
	}
	// Another value: refused, naming the attribute.
	_, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(dlq), Attributes: map[string]string{"VisibilityTimeout": "18"}})
	if code(err) != "QueueAlreadyExists" || !strings.Contains(err.Error(), "VisibilityTimeout") {
		t.Fatalf("CreateQueue of %s with another VisibilityTimeout: %v, want QueueAlreadyExists naming it", dlq, err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:%s","maxReceiveCount":"3"}`, dlq)
	_, err = c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("stranger"), Attributes: map[string]string{"RedrivePolicy": policy}})
	if code(err) != "InvalidAttributeValue" || !strings.Contains(err.Error(), "RedriveAllowPolicy") {
		t.Fatalf("a source %s's RedriveAllowPolicy does not allow: %v, want InvalidAttributeValue naming it", dlq, err)
	}
	if _, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("allowed"), Attributes: map[string]string{"RedrivePolicy": policy}}); err != nil {
		t.Fatalf("a source %s's RedriveAllowPolicy allows: %v", dlq, err)
	}
}
