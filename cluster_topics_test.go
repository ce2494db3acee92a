package sluice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice"
)

// snsClient is an SNS client of node n (the SQS port serves SNS too).
func snsClient(n *clusterNode) *awssns.Client {
	return awssns.New(awssns.Options{Region: "us-east-1", BaseEndpoint: n.client.Options().BaseEndpoint, RetryMaxAttempts: 10,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
}

// topicOwner is the node that owns topic name (as each node's routing
// says), or nil.
func topicOwner(nodes []*clusterNode, name string) *clusterNode {
	for _, n := range nodes {
		if n.closed {
			continue
		}
		if to, err := n.b.RouteTopic(name, "sqs"); err == nil && to == "" {
			return n
		}
	}
	return nil
}

// TestClusterTopics: a topic on a three-node cluster, its subscriptions'
// queues owned by other nodes than the topic: every node serves every SNS
// action (forwarded to the topic's owner or the catalog's), each
// subscription's queue gets every publish its filter admits exactly once,
// and when the topic's owner crashes with deliveries under way, another
// node takes the topic over and delivers on from each queue's mark:
// nothing lost, nothing twice.
func TestClusterTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ctx := context.Background()
	nodes := startCluster(t, 3)
	sn := make([]*awssns.Client, len(nodes))
	for i, n := range nodes {
		sn[i] = snsClient(n)
	}
	ct, err := sn[2].CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String("events")})
	if err != nil {
		t.Fatal(err)
	}
	topicARN := *ct.TopicArn
	// Asked again on another node: the same topic.
	if again, err := sn[1].CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String("events")}); err != nil || *again.TopicArn != topicARN {
		t.Fatalf("CreateTopic again on another node: %v %v", again, err)
	}

	// Subscriptions, raw and enveloped, one with a filter. The catalog's
	// owner created the queues and the topic and owns them at first; the
	// cluster then hands each to its preferred node (rendezvous placement
	// by partition: the same every run), which puts a queue on another
	// node than the topic.
	type sub struct {
		name, url string
		raw, red  bool // raw delivery; only "red" messages
	}
	var subs []sub
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("fan-%d", i)
		q, err := nodes[i%3].client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		s := sub{name: name, url: *q.QueueUrl, raw: i%2 == 0, red: i == 1}
		attrs := map[string]string{}
		if s.raw {
			attrs["RawMessageDelivery"] = "true"
		}
		if s.red {
			attrs["FilterPolicy"] = `{"color":["red"]}`
		}
		if _, err := sn[(i+1)%3].Subscribe(ctx, &awssns.SubscribeInput{TopicArn: &topicARN, Protocol: aws.String("sqs"),
			Endpoint: aws.String("arn:aws:sqs:us-east-1:000000000000:" + name), Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	tick := time.NewTicker(50 * time.Millisecond) // polls the nodes' routing and views
	defer tick.Stop()
	for deadline := time.Now().Add(60 * time.Second); ; <-tick.C {
		to := topicOwner(nodes, "events")
		remote := ""
		for _, s := range subs {
			if qo := owner(t, nodes, s.name); to != nil && qo != to {
				remote = fmt.Sprintf("%s is owned by %s, the topic by %s", s.name, qo.name, to.name)
			}
		}
		if remote != "" {
			t.Log(remote)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("every subscribed queue is still owned by the topic's node")
		}
	}

	// Every node lists the topic and its subscriptions.
	for i, c := range sn {
		lt, err := c.ListTopics(ctx, &awssns.ListTopicsInput{})
		if err != nil || len(lt.Topics) != 1 || *lt.Topics[0].TopicArn != topicARN {
			t.Fatalf("node %d lists topics %v, %v", i+1, lt, err)
		}
		ls, err := c.ListSubscriptions(ctx, &awssns.ListSubscriptionsInput{})
		if err != nil || len(ls.Subscriptions) != len(subs) {
			t.Fatalf("node %d lists %d subscriptions, want %d: %v", i+1, len(ls.Subscriptions), len(subs), err)
		}
	}

	// Publishes through every node.
	want := map[string][]string{} // by queue: the messages it must get
	publish := func(round, n int, via []*awssns.Client) {
		t.Helper()
		for i := 0; i < n; i++ {
			color := []string{"red", "blue"}[i%2]
			body := fmt.Sprintf("r%d-m%03d-%s", round, i, color)
			attrs := map[string]snstypes.MessageAttributeValue{"color": {DataType: aws.String("String"), StringValue: aws.String(color)}}
			c := via[i%len(via)]
			if i%10 < 5 {
				if _, err := c.Publish(ctx, &awssns.PublishInput{TopicArn: &topicARN, Message: &body, MessageAttributes: attrs}); err != nil {
					t.Fatalf("publish %s: %v", body, err)
				}
			} else {
				out, err := c.PublishBatch(ctx, &awssns.PublishBatchInput{TopicArn: &topicARN, PublishBatchRequestEntries: []snstypes.PublishBatchRequestEntry{
					{Id: aws.String("e"), Message: &body, MessageAttributes: attrs}}})
				if err != nil || len(out.Successful) != 1 {
					t.Fatalf("publish batch %s: %v %v", body, out, err)
				}
			}
			for _, s := range subs {
				if !s.red || color == "red" {
					want[s.name] = append(want[s.name], body)
				}
			}
		}
	}
	// receive takes every message of each queue through varied nodes
	// until each has what it must, and fails on a duplicate or a
	// stranger.
	got := map[string]map[string]bool{}
	receive := func(phase string) {
		t.Helper()
		live := slices.DeleteFunc(slices.Clone(nodes), func(n *clusterNode) bool { return n.closed })
		for qi, s := range subs {
			if got[s.name] == nil {
				got[s.name] = map[string]bool{}
			}
			deadline := time.Now().Add(60 * time.Second)
			for len(got[s.name]) < len(want[s.name]) && time.Now().Before(deadline) {
				c := live[(qi+len(got[s.name]))%len(live)].client
				out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &s.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600})
				if err != nil {
					t.Logf("%s: receive from %s: %v", phase, s.name, err)
					continue
				}
				for _, m := range out.Messages {
					body := *m.Body
					if !s.raw {
						var env struct{ Type, Message, TopicArn string }
						if err := json.Unmarshal([]byte(body), &env); err != nil || env.Type != "Notification" || env.TopicArn != topicARN {
							t.Fatalf("%s: %s got %q, not an envelope of the topic", phase, s.name, body)
						}
						body = env.Message
					}
					if got[s.name][body] {
						t.Fatalf("%s: %s got %q twice", phase, s.name, body)
					}
					if !slices.Contains(want[s.name], body) {
						t.Fatalf("%s: %s got %q, which it should not", phase, s.name, body)
					}
					got[s.name][body] = true
				}
			}
			if len(got[s.name]) != len(want[s.name]) {
				t.Fatalf("%s: %s got %d of %d messages", phase, s.name, len(got[s.name]), len(want[s.name]))
			}
		}
	}
	publish(1, 60, sn)
	receive("steady")

	// A round is published, and the topic's owner crashes at once, its
	// deliveries of that round under way: the node that takes the topic
	// over (once the lease expires) delivers on from each queue's mark.
	own := topicOwner(nodes, "events")
	if own == nil {
		t.Fatal("no node owns the topic")
	}
	var via []*awssns.Client
	for i, n := range nodes {
		if n != own {
			via = append(via, sn[i])
		}
	}
	publish(2, 40, via)
	t.Logf("crashing %s, the topic's owner", own.name)
	own.closed = true
	sluice.Crash(own.b)
	shut, cancel := context.WithTimeout(ctx, 10*time.Second)
	own.srv.Shutdown(shut)
	cancel()
	publish(3, 40, via)
	receive("after the owner crashed")
	if to := topicOwner(nodes, "events"); to == nil || to == own {
		t.Fatalf("the topic is owned by %v after its owner crashed", to)
	} else {
		t.Logf("the topic moved to %s", to.name)
	}

	// Deleted through a node: no node lists it, and a publish is
	// refused as for a topic that never was.
	if _, err := via[0].DeleteTopic(ctx, &awssns.DeleteTopicInput{TopicArn: &topicARN}); err != nil {
		t.Fatal(err)
	}
	for i, c := range via {
		deadline := time.Now().Add(20 * time.Second)
		for {
			lt, err := c.ListTopics(ctx, &awssns.ListTopicsInput{})
			if err == nil && len(lt.Topics) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lists %v after the deletion, %v", i+1, lt, err)
			}
			<-tick.C
		}
		_, err := c.Publish(ctx, &awssns.PublishInput{TopicArn: &topicARN, Message: aws.String("late")})
		if err == nil || !strings.Contains(err.Error(), "NotFound") {
			t.Fatalf("publish to the deleted topic: %v", err)
		}
	}
}
