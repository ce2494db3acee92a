package broker_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

var (
	topicModelOps  = flag.Int("tmodel.ops", 0, "operations in TestTopicModel (0: 600)")
	topicModelSeed = flag.Uint64("tmodel.seed", 0, "seed of TestTopicModel (0: 1 and 2)")
)

// TestTopicModel publishes to a topic with filtered, raw and enveloped
// subscriptions under random operations: batches of publishes whose
// bodies span many segments, receives and deletes, snapshots, compaction,
// graceful restarts and power losses (the store on a memory file system
// keeping only what was synced). After every restart, and at the end,
// each subscription's queue must have got every acknowledged publish its
// filter admits exactly once over the run (the origin marks keep a
// delivery resumed after a crash from taking one twice), and nothing
// else; a subscription made later gets only what was published after it.
// One queue's messages stay in flight, undeleted, so their bodies live
// through the whole run.
//
//	go test -run TestTopicModel -tmodel.ops 20000 -tmodel.seed 3 ./internal/broker
func TestTopicModel(t *testing.T) {
	ops := *topicModelOps
	if ops <= 0 {
		ops = 600
	}
	seeds := []uint64{1, 2}
	if *topicModelSeed != 0 {
		seeds = []uint64{*topicModelSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { topicModelRun(t, seed, ops) })
	}
}

// tSub is a subscription of the model: the queue it delivers to, the
// color its filter admits ("" for all), and what the queue must get.
type tSub struct {
	queue, color string
	raw          bool
	// keep: its queue's messages are received and left in flight (not
	// deleted) until release lets the oldest go, so that their bodies stay
	// stored across much of the run, through snapshots, compactions and
	// restarts.
	keep bool
	want map[string]bool   // publishes it must get
	got  map[string]string // publishes its queue gave: the message id
	held []string          // keep: the receipt handles of messages in flight, oldest first
}

// topicBroker is what TestTopicModel drives: one broker, or a cluster as
// one (clusterBroker: each call goes to the node that owns its queue or
// topic).
type topicBroker interface {
	CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (broker.QueueInfo, error)
	CreateTopic(ctx context.Context, info broker.TopicInfo) (broker.TopicInfo, bool, error)
	UpdateTopic(ctx context.Context, name string, f func(*broker.TopicInfo) error) error
	Publish(ctx context.Context, name string, in []broker.PublishInput) ([]broker.PublishResult, error)
	Receive(ctx context.Context, queue string, in st.ReceiveInput) ([]st.Message, error)
	Delete(ctx context.Context, queue, handle string) error
	Snapshot(ctx context.Context) error
	StoreStats() broker.StoreStats
	Close() error
}

type topicSim struct {
	t   *testing.T
	rng *rand.Rand
	mem *vfs.Mem
	clk *clock.Fake
	b   topicBroker
	// cl, for TestClusterTopicModel: the cluster b is (nil: one broker).
	cl *clusterSim
	// topicMoves and topicFailovers count the restarts and crashes of a
	// cluster after which another node owned the topic.
	topicMoves, topicFailovers int
	subs                       []*tSub
	n                          int // publishes so far
	stats                      struct{ publishes, restarts, crashes, snapshots, checks int }
	// removed and relocated sum the store's figures of the brokers closed.
	removed, relocated int64
	bodyOf             func(i int) string
}

func topicModelRun(t *testing.T, seed uint64, ops int) {
	t.Logf("seed %d, %d operations (again: go test -run TestTopicModel -tmodel.seed %d -tmodel.ops %d ./internal/broker)", seed, ops, seed, ops)
	s := newTopicSim(t, seed)
	s.open()
	defer func() { s.b.Close() }()
	s.run(ops)
	ss := s.b.StoreStats()
	removed, relocated := s.removed+ss.SegmentsRemoved, s.relocated+ss.Relocated
	t.Logf("%d publishes (%d deliveries due), %d restarts, %d power losses, %d snapshots, %d verifications; store: %d segments removed, %d bodies relocated, %d segments now",
		s.stats.publishes, s.due(), s.stats.restarts, s.stats.crashes, s.stats.snapshots, s.stats.checks, removed, relocated, ss.Segments)
	if s.stats.crashes == 0 || removed == 0 || relocated == 0 {
		t.Errorf("the run had %d power losses, removed %d segments and relocated %d bodies: it does not test what it should", s.stats.crashes, removed, relocated)
	}
}

func newTopicSim(t *testing.T, seed uint64) *topicSim {
	s := &topicSim{t: t, rng: rand.New(rand.NewPCG(seed, 0x70b1c)), mem: vfs.NewMem(),
		clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	filler := strings.Repeat("abcdefghij", 400)
	s.bodyOf = func(i int) string { return fmt.Sprintf("p%06d|%s", i, filler[:(i*7919)%len(filler)]) }
	return s
}

// due is how many deliveries the subscriptions must have got.
func (s *topicSim) due() int {
	var n int
	for _, sub := range s.subs {
		n += len(sub.want)
	}
	return n
}

// run creates the queues, the topic and its subscriptions, and runs ops
// random operations; restarts and power losses (a node's graceful
// restart and crash, in a cluster) are rarer in a cluster, where each
// waits for leases to move.
func (s *topicSim) run(ops int) {
	t := s.t
	for _, q := range []string{"all", "red", "blue-raw", "late"} {
		if _, err := s.b.CreateQueue(ctx, q, map[string]string{"MessageRetentionPeriod": "1209600"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.subs = []*tSub{{queue: "all", keep: true}, {queue: "red", color: "red"}, {queue: "blue-raw", color: "blue", raw: true}}
	info := broker.TopicInfo{Name: "events", Subs: map[string]broker.Subscription{}}
	for i, sub := range s.subs {
		info.Subs[fmt.Sprint("s", i)] = s.subscription(sub)
	}
	if _, _, err := s.b.CreateTopic(ctx, info); err != nil {
		t.Fatal(err)
	}
	for step := 0; step < ops; step++ {
		switch op := s.rng.IntN(100); {
		case op < 55:
			s.publish()
		case op < 80:
			s.receive(s.subs[s.rng.IntN(len(s.subs))], 10)
		case op < 82:
			s.release(s.subs[0], len(s.subs[0].held)/2+s.rng.IntN(60))
		case op < 84:
			if len(s.subs) == 3 {
				s.subscribeLate()
			}
		case op < 88:
			s.clk.Advance(time.Duration(s.rng.IntN(10)) * time.Second) // compaction, maintenance
		case op < 91:
			if err := s.b.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			s.stats.snapshots++
		case s.cl != nil && op < 97: // a cluster restarts less often
			s.publish()
		case op < 95, s.cl != nil && op < 99:
			s.restart(false)
		default:
			s.restart(true)
		}
	}
	if s.cl != nil {
		// Every cluster run restarts a node and crashes the topic's owner
		// at least once, whatever its operations drew.
		if s.stats.restarts == 0 {
			s.restart(false)
		}
		if s.stats.crashes == 0 {
			s.restart(true)
		}
	}
	s.verify()
}

func (s *topicSim) subscription(sub *tSub) broker.Subscription {
	sub.want, sub.got = map[string]bool{}, map[string]string{}
	attrs := map[string]string{}
	if sub.color != "" {
		attrs["FilterPolicy"] = fmt.Sprintf(`{"color":[%q]}`, sub.color)
	}
	if sub.raw {
		attrs["RawMessageDelivery"] = "true"
	}
	return broker.Subscription{Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:" + sub.queue, Attrs: attrs}
}

// subscribeLate subscribes the fourth queue: it must get what is
// published from now on, and nothing before.
func (s *topicSim) subscribeLate() {
	sub := &tSub{queue: "late"}
	err := s.b.UpdateTopic(ctx, "events", func(info *broker.TopicInfo) error {
		info.Subs["late"] = s.subscription(sub)
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.subs = append(s.subs, sub)
}

func (s *topicSim) publish() {
	n := 1 + s.rng.IntN(10)
	in := make([]broker.PublishInput, n)
	colors := make([]string, n)
	for i := range in {
		colors[i] = []string{"red", "blue", "green"}[s.rng.IntN(3)]
		c := colors[i]
		in[i] = broker.PublishInput{ID: fmt.Sprint("id", s.n+i), Message: s.bodyOf(s.n + i),
			Attrs: map[string]st.AttributeValue{"color": {DataType: "String", StringValue: &c}}}
	}
	if _, err := s.b.Publish(ctx, "events", in); err != nil {
		s.t.Fatalf("publish: %v", err)
	}
	for i := range in {
		for _, sub := range s.subs {
			if sub.color == "" || sub.color == colors[i] {
				sub.want[s.key(s.n+i)] = true
			}
		}
	}
	s.n += n
	s.stats.publishes += n
}

// key is how a body is known in the model: its publish number (the
// envelope wraps it, raw delivery does not).
func (s *topicSim) key(i int) string { return fmt.Sprintf("p%06d", i) }

// keyOf is the model's key of a delivered message: the publish number
// that starts the message, in the envelope's Message or raw.
func keyOf(body string, raw bool) string {
	if !raw {
		var env struct{ Message string }
		if json.Unmarshal([]byte(body), &env) != nil {
			return body
		}
		body = env.Message
	}
	return body[:min(len(body), 7)]
}

// receive takes up to max messages from a subscription's queue, deleting
// each, and notes them.
func (s *topicSim) receive(sub *tSub, max int) int {
	return s.receiveWait(ctx, sub, max, 0)
}

// receiveWait is receive with a long poll of wait seconds, cut short when
// c ends (then it returns 0).
func (s *topicSim) receiveWait(c context.Context, sub *tSub, max, wait int) int {
	in := st.ReceiveInput{MaxMessages: max}
	if wait > 0 {
		in.WaitTimeSeconds = &wait
	}
	if sub.keep {
		hold := 600 // back after 10 minutes of the model's time if not let go (its handle may not outlive a restart)
		in.VisibilityTimeout = &hold
	}
	ms, err := s.b.Receive(c, sub.queue, in)
	if c.Err() != nil {
		return 0
	}
	if err != nil {
		s.t.Fatalf("receive from %s: %v", sub.queue, err)
	}
	for _, m := range ms {
		k := keyOf(m.Body, sub.raw)
		if sub.raw && !strings.HasPrefix(m.Body, "p") {
			s.t.Fatalf("%s: a raw delivery is not the message: %.40q", sub.queue, m.Body)
		}
		if !sub.raw && !strings.HasPrefix(m.Body, "{\n  \"Type\" : \"Notification\"") {
			s.t.Fatalf("%s: not an envelope: %.60q", sub.queue, m.Body)
		}
		if id, ok := sub.got[k]; ok && id != m.MessageID {
			s.t.Fatalf("%s got %s twice: as messages %s and %s", sub.queue, k, id, m.MessageID)
		} else if ok {
			// The same message again: a kept one whose visibility ran
			// out. Any other was deleted, acknowledged, when first got.
			if !sub.keep {
				s.t.Fatalf("%s: %s (message %s) came back after its delete was acknowledged", sub.queue, k, m.MessageID)
			}
			sub.held = append(sub.held, m.ReceiptHandle)
			continue
		}
		sub.got[k] = m.MessageID
		if !sub.want[k] {
			s.t.Fatalf("%s got %s, which its filter does not admit or which was published before it subscribed", sub.queue, k)
		}
		if sub.keep {
			sub.held = append(sub.held, m.ReceiptHandle)
			continue
		}
		if err := s.b.Delete(ctx, sub.queue, m.ReceiptHandle); err != nil {
			s.t.Fatalf("delete from %s: %v", sub.queue, err)
		}
	}
	return len(ms)
}

// release deletes the oldest n messages a kept queue holds in flight, so
// that a long run's data stays bounded while bodies of every age live.
func (s *topicSim) release(sub *tSub, n int) {
	n = min(n, len(sub.held))
	for _, h := range sub.held[:n] {
		if err := s.b.Delete(ctx, sub.queue, h); err != nil && st.CodeOf(err) != st.CodeReceiptHandleIsInvalid {
			s.t.Fatalf("delete from %s: %v", sub.queue, err)
		}
	}
	sub.held = sub.held[n:]
}

// restart stops the broker, gracefully or by a power loss (the files
// keep what was synced), starts it again, and checks every queue. In a
// cluster, a node that owns a queue or the topic restarts or crashes.
func (s *topicSim) restart(powerLoss bool) {
	if s.cl != nil {
		// A crash stops the topic's owner, and the node stays down until
		// another one took the topic over; a graceful restart stops any
		// node that owns a queue.
		owner := s.cl.topicOwner("events")
		var stopped string
		if powerLoss {
			var n *simNode
			for _, m := range s.cl.nodes {
				if m.b == owner {
					n = m
				}
			}
			stopped = s.cl.restartOne(n, true, func(stopped string) bool {
				for _, m := range s.cl.nodes {
					if m.b != nil && m.name != stopped {
						if to, err := m.b.RouteTopic("events", "sqs"); err == nil && to == "" {
							return true
						}
					}
				}
				return false
			})
			s.topicMoves++
			s.topicFailovers++
		} else {
			before := s.cl.nodeOf(owner)
			stopped = s.cl.restartNode(false)
			if stopped == before {
				s.topicMoves++
			}
		}
		if powerLoss {
			s.stats.crashes++
		} else {
			s.stats.restarts++
		}
		s.verify()
		return
	}
	ss := s.b.StoreStats()
	s.removed += ss.SegmentsRemoved
	s.relocated += ss.Relocated
	if powerLoss {
		crashed := s.mem.Crash()
		s.b.Close() // its later writes go to the file system left behind
		s.mem = crashed
		s.stats.crashes++
	} else {
		s.b.Close()
		s.stats.restarts++
	}
	s.open()
	s.verify()
}

// open starts the broker (one node) on the file system.
func (s *topicSim) open() {
	s.t.Helper()
	b, err := broker.Open(broker.Config{Dir: "/data", FS: s.mem, Clock: s.clk, CheckReleases: true,
		SegmentBytes: modelSegment, CheckpointBytes: modelCheckpoint, CompactInterval: modelCompact,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		s.t.Fatalf("open: %v", err)
	}
	s.b = b
}

// verify waits until every subscription's queue got all it must (the
// topic delivers in the background), receiving and deleting all of it.
func (s *topicSim) verify() {
	s.stats.checks++
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, sub := range s.subs {
		for len(sub.got) < len(sub.want) {
			// A long poll: it returns as the topic delivers.
			if s.receiveWait(c, sub, 10, 20) == 0 && c.Err() != nil {
				var missing []string
				for k := range sub.want {
					if sub.got[k] == "" {
						missing = append(missing, k)
					}
				}
				slices.Sort(missing)
				s.t.Fatalf("%s: %d of %d delivered after 30 s; missing %v", sub.queue, len(sub.got), len(sub.want), missing[:min(10, len(missing))])
			}
		}
	}
}
