package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/topic"
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
	// placement names the owners of the topic and the queues: the first
	// attempts are timed exactly when nothing moved meanwhile (the
	// figures are in memory, each on the node that owned its topic or
	// queue since).
	placement := func() string {
		var b strings.Builder
		b.WriteString(topicOwner(nodes, "events").name)
		for _, s := range subs {
			b.WriteString("," + owner(t, nodes, s.name).name)
		}
		return b.String()
	}
	before := placement()
	publish(1, 60, sn)
	receive("steady")
	// Each publish's first receive is timed once, by the topic's owner,
	// whichever nodes own the queues that received it (they send theirs
	// over NATS); each subscription's by its queue's owner.
	var n int64
	for deadline := time.Now().Add(20 * time.Second); n < 60 && time.Now().Before(deadline); <-tick.C {
		f, err := topicOwner(nodes, "events").b.TopicFigures("events")
		if err != nil {
			continue
		}
		n = 0
		for _, c := range f.FirstAttempt.Counts {
			n += c
		}
	}
	timed := map[string]int64{}
	for _, nd := range nodes {
		for _, a := range nd.b.SubscriptionFirstAttempts() {
			for _, c := range a.Age.Counts {
				timed[a.Queue] += c
			}
		}
	}
	if after := placement(); after != before {
		t.Logf("the topic or a queue moved during the round (%s, then %s): first attempts timed %d of 60, per subscription %v", before, after, n, timed)
	} else {
		if n != 60 {
			t.Fatalf("the topic timed %d first attempts of 60 publishes", n)
		}
		for _, s := range subs {
			if timed[s.name] != int64(len(want[s.name])) {
				t.Fatalf("%s: %d first attempts timed, want %d", s.name, timed[s.name], len(want[s.name]))
			}
		}
	}

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
	broker.Crash(own.b)
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

	// A signed topic: every node serves the certificate of the node that
	// signed (each signs with its own key).
	st, err := via[0].CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String("signed"), Attributes: map[string]string{"SignatureVersion": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	sq, err := nodes[0].client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("signed-q")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := via[1].Subscribe(ctx, &awssns.SubscribeInput{TopicArn: st.TopicArn, Protocol: aws.String("sqs"),
		Endpoint: aws.String("arn:aws:sqs:us-east-1:000000000000:signed-q")}); err != nil {
		t.Fatal(err)
	}
	if _, err := via[1].Publish(ctx, &awssns.PublishInput{TopicArn: st.TopicArn, Message: aws.String("signed")}); err != nil {
		t.Fatal(err)
	}
	var live []*clusterNode
	for _, n := range nodes {
		if !n.closed {
			live = append(live, n)
		}
	}
	var certPath string
	for deadline := time.Now().Add(30 * time.Second); certPath == "" && time.Now().Before(deadline); {
		out, err := live[0].client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: sq.QueueUrl, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		var env struct{ SigningCertURL, Signature string }
		if err := json.Unmarshal([]byte(*out.Messages[0].Body), &env); err != nil || env.Signature == "" {
			t.Fatalf("a signed topic's envelope %q: %v", *out.Messages[0].Body, err)
		}
		u, err := url.Parse(env.SigningCertURL)
		if err != nil {
			t.Fatal(err)
		}
		certPath = u.Path
	}
	var first []byte
	for _, n := range live {
		resp, err := http.Get(*n.client.Options().BaseEndpoint + certPath)
		if err != nil {
			t.Fatal(err)
		}
		pem, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(pem), "BEGIN CERTIFICATE") || first != nil && string(first) != string(pem) {
			t.Fatalf("node %s serves %q for %s: %d", n.name, pem, certPath, resp.StatusCode)
		}
		first = pem
	}
	if _, err := via[1].DeleteTopic(ctx, &awssns.DeleteTopicInput{TopicArn: st.TopicArn}); err != nil {
		t.Fatal(err)
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

var (
	clusterTopicModelOps  = flag.Int("ctmodel.ops", 0, "operations in TestClusterTopicModel (0: 300)")
	clusterTopicModelSeed = flag.Uint64("ctmodel.seed", 0, "seed of TestClusterTopicModel (0: 5)")
)

// TestClusterTopicModel is TestTopicModel on a three-node cluster in this
// process: the same publishes, receives, deletes, late subscription and
// snapshots, each sent to the node that owns its topic or queue, with
// graceful restarts of nodes and crashes of the topic's owner (its NATS
// server and connection go at once, its leases expire, and another node
// fences its topic and queues off and takes them over; at least one of
// each a run). Deliveries cross nodes
// whenever a subscription's queue and the topic have different owners.
// After every restart and crash, and at the end, each subscription's
// queue must have got every acknowledged publish its filter admits
// exactly once over the run, and nothing else. Streams are snapshotted
// every 128 KiB, so they are purged and long-lived bodies re-homed all
// along.
//
//	go test -run TestClusterTopicModel -ctmodel.ops 4000 -ctmodel.seed 6 ./internal/broker
func TestClusterTopicModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	ops, seed := *clusterTopicModelOps, *clusterTopicModelSeed
	if ops <= 0 {
		ops = 300
	}
	if seed == 0 {
		seed = 5
	}
	replay := fmt.Sprintf("go test -run TestClusterTopicModel -ctmodel.seed %d -ctmodel.ops %d ./internal/broker (not exactly: real time)", seed, ops)
	t.Logf("seed %d, %d operations (again: %s)", seed, ops, replay)
	s := newTopicSim(t, seed)
	base := &sim{t: t, seed: seed, rng: s.rng, clk: s.clk, logs: &logTail{}, test: "TestClusterTopicModel", replay: replay}
	base.cfg.Logger = slog.New(slog.NewTextHandler(base.logs, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: noTime}))
	s.cl = startClusterSim(base, seed)
	base.cl = s.cl
	s.b = clusterBroker{s.cl}
	defer s.b.Close()
	s.run(ops)
	now := s.b.StoreStats()
	t.Logf("%d publishes (%d deliveries due), %d graceful restarts, %d crashes, %d snapshots, %d verifications; the topic moved %d times (%d after a crash); streams: %d messages purged, %d bodies re-homed",
		s.stats.publishes, s.due(), s.stats.restarts, s.stats.crashes, s.stats.snapshots, s.stats.checks, s.topicMoves, s.topicFailovers,
		base.removedBefore+now.SegmentsRemoved, base.relocatedBefore+now.Relocated)
	if s.stats.restarts == 0 || s.stats.crashes == 0 || s.topicFailovers == 0 {
		t.Errorf("%d restarts, %d crashes, the topic taken over after a crash %d times: the run does not test the topic's ownership moving",
			s.stats.restarts, s.stats.crashes, s.topicFailovers)
	}
}

// topicOwner is the node that owns topic name.
func (c *clusterSim) topicOwner(name string) *broker.Broker {
	var b *broker.Broker
	if !c.await(func() bool {
		for _, n := range c.nodes {
			if n.b != nil {
				if to, err := n.b.RouteTopic(name, "sqs"); err == nil && to == "" {
					b = n.b
					return true
				}
			}
		}
		return false
	}) {
		c.s.fail("no node owns topic %s after %s", name, moveWait)
	}
	return b
}

// nodeOf names the node of a broker.
func (c *clusterSim) nodeOf(b *broker.Broker) string {
	for _, n := range c.nodes {
		if n.b == b {
			return n.name
		}
	}
	return ""
}

// callTopic runs f on the node that owns topic name, again on the next
// owner while the topic is moving (nothing was written).
func callTopic[T any](c *clusterSim, name string, f func(b *broker.Broker) (T, error)) (T, error) {
	deadline := time.Now().Add(moveWait)
	for {
		v, err := f(c.topicOwner(name))
		if !errors.Is(err, topic.ErrNotOwner) || time.Now().After(deadline) {
			return v, err
		}
		c.retried++
	}
}

func (r clusterBroker) CreateTopic(ctx context.Context, info broker.TopicInfo) (broker.TopicInfo, bool, error) {
	return r.c.catalog().CreateTopic(ctx, info)
}

func (r clusterBroker) UpdateTopic(ctx context.Context, name string, f func(*broker.TopicInfo) error) error {
	_, err := callTopic(r.c, name, func(b *broker.Broker) (struct{}, error) { return struct{}{}, b.UpdateTopic(ctx, name, f) })
	return err
}

func (r clusterBroker) Publish(ctx context.Context, name string, in []broker.PublishInput) ([]broker.PublishResult, error) {
	return callTopic(r.c, name, func(b *broker.Broker) ([]broker.PublishResult, error) { return b.Publish(ctx, name, in) })
}
