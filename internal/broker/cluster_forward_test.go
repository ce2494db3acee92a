package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/forward"
)

// TestClusterForwardOutlivesACrashedOwner: two long polls forwarded
// through another node wait on a queue's owner when it crashes (its NATS
// server dies with it, so no answer can come). The one sent by an SDK
// client is idempotent: it is sent again to the next owner and gets the
// message sent there. The other is forwarded as not idempotent: it ends
// with ErrOwnerLost rather than waiting out its 30 s for an answer.
func TestClusterForwardOutlivesACrashedOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	nodes := startCluster(t, 3)
	q, err := nodes[0].client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("crashing")})
	if err != nil {
		t.Fatal(err)
	}
	own := owner(t, nodes, "crashing")
	var via, other *clusterNode
	for _, n := range nodes {
		switch {
		case n == own:
		case via == nil:
			via = n
		default:
			other = n
		}
	}
	route, err := via.b.Route("crashing", "sqs")
	if err != nil || route == "" {
		t.Fatalf("%s routes the queue to %q (%v), want another node", via.name, route, err)
	}

	type polled struct {
		out *awssqs.ReceiveMessageOutput
		err error
	}
	sdkPoll := make(chan polled, 1)
	go func() {
		// No retry by the client: the node that took the call must
		// find the queue's next owner itself.
		out, err := via.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20},
			func(o *awssqs.Options) { o.RetryMaxAttempts = 1 })
		sdkPoll <- polled{out, err}
	}()
	oncePoll := make(chan error, 1)
	go func() {
		body := fmt.Sprintf(`{"QueueUrl":%q,"WaitTimeSeconds":20}`, *q.QueueUrl)
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := via.b.Forward(fctx, route, r, []byte(body), forward.How{})
		if err == nil {
			err = fmt.Errorf("answered %d: %s", resp.Status, resp.Body)
		}
		oncePoll <- err
	}()
	if !pollUntil(20*time.Second, func() bool { return broker.ForwardsInFlight(own.b) >= 2 }) {
		t.Fatalf("the two long polls do not both wait on the owner %s", own.name)
	}

	crashed := time.Now()
	broker.Crash(own.b)
	own.closed = true
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	own.srv.Shutdown(sctx)
	cancel()

	err = <-oncePoll
	t.Logf("%s crashed; the request forwarded as not idempotent ended %v later", own.name, time.Since(crashed).Round(time.Millisecond))
	if !errors.Is(err, forward.ErrOwnerLost) {
		t.Errorf("the long poll forwarded as not idempotent: %v, want ErrOwnerLost", err)
	}
	// The SDK client retries while the queue is between owners.
	if _, err := other.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("after the crash")}); err != nil {
		t.Fatalf("send via %s after the crash: %v", other.name, err)
	}
	got := <-sdkPoll
	t.Logf("the SDK's long poll answered %v after the crash", time.Since(crashed).Round(time.Millisecond))
	switch {
	case got.err != nil:
		t.Errorf("the SDK's long poll through %s: %v, want the message sent after the crash", via.name, got.err)
	case len(got.out.Messages) != 1 || aws.ToString(got.out.Messages[0].Body) != "after the crash":
		t.Errorf("the SDK's long poll through %s got %d messages, want the one sent after the crash", via.name, len(got.out.Messages))
	}
	if cs := via.b.ClusterStatus(); cs.OwnerLost < 2 {
		t.Errorf("%s counts %d forwarded requests whose node went away, want 2", via.name, cs.OwnerLost)
	}
}
