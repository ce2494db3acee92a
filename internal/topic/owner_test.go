package topic

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/disk"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// node is one broker's worth of a topic (partition 1) and the real queues
// it delivers to, on one store: what the engine will hold.
type node struct {
	t      *testing.T
	log    *disk.Log
	clk    *clock.Fake
	topic  *Owner
	queues map[string]*partition.Owner // by ARN
	parts  map[string]store.PartitionID
}

const arnPrefix = "arn:aws:sqs:us-east-1:000000000000:"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openNode opens the store on fs and rebuilds the topic and the queues
// from it (as recovery does), or creates them when it is empty.
func openNode(t *testing.T, fs vfs.FS, clk *clock.Fake, info record.TopicInfo, queues map[string]store.PartitionID) *node {
	t.Helper()
	l, err := disk.Open(fs, "/d", disk.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // idempotent: tests close it earlier to restart
	n := &node{t: t, log: l, clk: clk, queues: map[string]*partition.Owner{}, parts: queues}
	closing := make(chan struct{})
	t.Cleanup(func() { close(closing) })
	ph := &partition.Host{Store: l, Clock: clk, Log: quiet, Region: "us-east-1", AccountID: "000000000000", Rand: rand.Reader, Closing: closing}
	ph.Resolve = func(string) partition.Destination { return nil }
	th := &Host{Store: l, Clock: clk, Log: quiet, Queues: n, Format: plainFormat}
	byPart := map[store.PartitionID]*partition.Owner{}
	for name, p := range queues {
		o := partition.New(ph, p, record.QueueMeta{ID: uint64(p), Name: name})
		n.queues[arnPrefix+name] = o
		byPart[p] = o
	}
	n.topic = NewOwner(th, 1, info)
	last := map[store.PartitionID]uint64{}
	err = l.Replay(func(e store.Entry) error {
		last[e.P] = max(last[e.P], e.Pos)
		if e.P == 1 {
			if e.Reset {
				n.topic = NewOwner(th, 1, record.TopicInfo{})
			}
			return n.topic.Replayed(e)
		}
		o := byPart[e.P]
		if e.Reset {
			o = partition.New(ph, e.P, record.QueueMeta{ID: uint64(e.P)})
			byPart[e.P] = o
		}
		return o.Replayed(clk.Now(), e)
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range queues {
		o := byPart[p]
		n.queues[arnPrefix+name] = o
		if last[p] == 0 {
			if err := o.Create(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		o.Recovered(clk.Now(), last[p])
		o.Start()
	}
	if last[1] == 0 {
		if err := n.topic.Create(); err != nil {
			t.Fatal(err)
		}
	} else {
		n.topic.Recovered(last[1])
	}
	l.Recovered()
	return n
}

// Deliver and Marks: the queues of this node (Queues).
func (n *node) Deliver(ctx context.Context, arn string, in []st.SendInput, from []queue.Origin) ([]error, error) {
	o := n.queues[arn]
	if o == nil {
		return nil, ErrNoQueue
	}
	_, errs, err := o.Deliver(ctx, in, from)
	return errs, err
}

func (n *node) Marks(_ context.Context, arn string) (map[uint64]uint64, error) {
	o := n.queues[arn]
	if o == nil {
		return nil, ErrNoQueue
	}
	return o.OriginMarks()
}

// plainFormat delivers the message itself with its attributes (raw
// delivery, as far as this package cares).
func plainFormat(_ *record.TopicInfo, _ string, _ record.Subscription, pub *record.Record) (st.SendInput, error) {
	return st.SendInput{Body: pub.Payload.Body, Attributes: pub.Payload.Attrs}, nil
}

// drain runs delivery rounds until nothing is left to do.
func (n *node) drain() {
	n.t.Helper()
	for i := 0; n.topic.DeliverOnce(context.Background()); i++ {
		if i > 1000 {
			n.t.Fatal("delivery does not settle")
		}
	}
}

// bodies receives everything queue name holds (deleting it) and returns
// the bodies, sorted.
func (n *node) bodies(name string) []string {
	n.t.Helper()
	o := n.queues[arnPrefix+name]
	var out []string
	for {
		ms, err := o.Receive(context.Background(), st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			n.t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			out = append(out, m.Body)
			if errs, err := o.Delete(context.Background(), []string{m.ReceiptHandle}); err != nil || errs[0] != nil {
				n.t.Fatal(err, errs)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (n *node) publish(from, to int) {
	n.t.Helper()
	for i := from; i < to; i++ {
		color := "blue"
		if i%2 == 0 {
			color = "red"
		}
		spec := PublishSpec{ID: fmt.Sprint("id", i), Message: fmt.Sprintf("m%03d", i),
			Attrs: map[string]st.AttributeValue{"color": {DataType: "String", StringValue: &color}}}
		if _, err := n.topic.Publish(context.Background(), []PublishSpec{spec}); err != nil {
			n.t.Fatal(err)
		}
	}
}

func want(from, to, step int) []string {
	var out []string
	for i := from; i < to; i += step {
		out = append(out, fmt.Sprintf("m%03d", i))
	}
	return out
}

func subs() record.TopicInfo {
	return record.TopicInfo{ID: 1, Name: "orders", Subs: map[string]record.Subscription{
		"all":     {Protocol: "sqs", Endpoint: arnPrefix + "all"},
		"red":     {Protocol: "sqs", Endpoint: arnPrefix + "red", Attrs: map[string]string{"FilterPolicy": `{"color":["red"]}`}},
		"missing": {Protocol: "sqs", Endpoint: arnPrefix + "nowhere"},
		"dead":    {Protocol: "sqs", Endpoint: arnPrefix + "nowhere-either", Attrs: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arnPrefix + `dlq"}`}},
	}}
}

// Every publish reaches every subscription whose filter admits it, once;
// a subscription to a queue that does not exist drops it, or with a
// RedrivePolicy dead-letters it; the topic then lets the publishes go.
func TestDeliversToEverySubscription(t *testing.T) {
	clk := clock.NewFake(t0)
	n := openNode(t, vfs.NewMem(), clk, subs(), map[string]store.PartitionID{"all": 2, "red": 3, "dlq": 4})
	n.publish(0, 25)
	n.drain()
	if got := n.bodies("all"); !slices.Equal(got, want(0, 25, 1)) {
		t.Fatalf("the unfiltered subscription got %v", got)
	}
	if got := n.bodies("red"); !slices.Equal(got, want(0, 25, 2)) {
		t.Fatalf("the red subscription got %v", got)
	}
	if got := n.bodies("dlq"); !slices.Equal(got, want(0, 25, 1)) {
		t.Fatalf("the dead-letter queue got %v", got)
	}
	f := n.topic.Figures()
	if f.Delivered != 25+13 || f.Filtered != 12 || f.Refused != 25 || f.Dead != 25 {
		t.Fatalf("figures %+v, want 38 delivered, 12 filtered, 25 dropped, 25 dead-lettered", f)
	}
	if h := n.topic.t.Held(); h != 0 {
		t.Fatalf("the topic holds %d publishes every subscription went past", h)
	}
}

// After a power loss in the middle of a fan-out, the topic and its
// queues rebuilt from the log deliver the rest, and nothing twice: the
// cursors start at the queues' marks. The publish numbers go on after a
// snapshot of a trimmed topic.
func TestDeliveryResumesAfterAPowerLoss(t *testing.T) {
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	queues := map[string]store.PartitionID{"all": 2, "red": 3, "dlq": 4}
	n := openNode(t, fs, clk, subs(), queues)
	n.publish(0, 30)
	n.topic.DeliverOnce(context.Background()) // 10 of each
	crashed := fs.Crash()
	n.log.Close()
	n = openNode(t, crashed, clk, record.TopicInfo{}, queues)
	if got := n.topic.Info(); got.Name != "orders" || len(got.Subs) != 4 {
		t.Fatalf("the topic after the power loss: %+v", got)
	}
	n.drain()
	if got := n.bodies("all"); !slices.Equal(got, want(0, 30, 1)) {
		t.Fatalf("after the power loss the unfiltered subscription got %v", got)
	}
	if got := n.bodies("red"); !slices.Equal(got, want(0, 30, 2)) {
		t.Fatalf("after the power loss the red subscription got %v", got)
	}
	// Trimmed and snapshotted: a restart goes on numbering.
	if err := n.topic.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.log.Close()
	n = openNode(t, crashed.Crash(), clk, record.TopicInfo{}, queues)
	n.publish(30, 32)
	n.drain()
	if got := n.bodies("all"); !slices.Equal(got, want(30, 32, 1)) {
		t.Fatalf("after a snapshot and a restart the unfiltered subscription got %v", got)
	}
	if s := n.topic.t.LastNumber(); s != 32 {
		t.Fatalf("the last publish is number %d, want 32", s)
	}
}

// A subscription added later gets only what is published after (its
// queue has no mark of the topic, and the topic holds only what the
// others have not taken); one removed gets nothing more.
func TestSubscribeAndUnsubscribe(t *testing.T) {
	clk := clock.NewFake(t0)
	n := openNode(t, vfs.NewMem(), clk, record.TopicInfo{ID: 1, Name: "t", Subs: map[string]record.Subscription{
		"a": {Protocol: "sqs", Endpoint: arnPrefix + "a"}}}, map[string]store.PartitionID{"a": 2, "b": 3})
	n.publish(0, 3)
	n.drain()
	if err := n.topic.Update(func(info *record.TopicInfo) error {
		info.Subs["b"] = record.Subscription{Protocol: "sqs", Endpoint: arnPrefix + "b"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n.publish(3, 5)
	n.drain()
	if got := n.bodies("b"); !slices.Equal(got, want(3, 5, 1)) {
		t.Fatalf("the later subscription got %v", got)
	}
	if err := n.topic.Update(func(info *record.TopicInfo) error {
		delete(info.Subs, "a")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n.publish(5, 6)
	n.drain()
	if got := n.bodies("a"); !slices.Equal(got, want(0, 5, 1)) {
		t.Fatalf("the removed subscription got %v", got)
	}
}

// Run delivers after each publish by itself, and returns once the owner
// is relinquished.
func TestRunDeliversUntilRelinquished(t *testing.T) {
	clk := clock.NewFake(t0)
	n := openNode(t, vfs.NewMem(), clk, record.TopicInfo{ID: 1, Name: "t", Subs: map[string]record.Subscription{
		"a": {Protocol: "sqs", Endpoint: arnPrefix + "a"}}}, map[string]store.PartitionID{"a": 2})
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.topic.Run(context.Background(), 10*time.Millisecond)
	}()
	n.publish(0, 15)
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n.topic.Figures().Delivered < 15 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("Run delivered %d of 15", n.topic.Figures().Delivered)
		}
	}
	n.topic.Relinquish()
	<-done
	if got := n.bodies("a"); !slices.Equal(got, want(0, 15, 1)) {
		t.Fatalf("the queue got %v", got)
	}
}

// Publishes larger than a batch's bytes together reach the queue in as
// many calls as it takes (a queue refuses a call over 1 MiB).
func TestLargePublishesSplitIntoCalls(t *testing.T) {
	clk := clock.NewFake(t0)
	n := openNode(t, vfs.NewMem(), clk, record.TopicInfo{ID: 1, Name: "t", Subs: map[string]record.Subscription{
		"a": {Protocol: "sqs", Endpoint: arnPrefix + "a"}}}, map[string]store.PartitionID{"a": 2})
	big := strings.Repeat("x", 300<<10)
	for i := range 6 {
		if _, err := n.topic.Publish(context.Background(), []PublishSpec{{ID: fmt.Sprint(i), Message: fmt.Sprintf("m%03d%s", i, big)}}); err != nil {
			t.Fatal(err)
		}
	}
	n.drain()
	if f := n.topic.Figures(); f.Delivered != 6 || f.Refused != 0 {
		t.Fatalf("figures %+v, want 6 delivered", f)
	}
}

// Snapshots taken while publishes are written fence nothing: a publish
// made while a snapshot is in flight follows it (the owner stopped once,
// as fenced, when it counted the snapshot's records only once written).
func TestSnapshotsAmidPublishes(t *testing.T) {
	clk := clock.NewFake(t0)
	n := openNode(t, vfs.NewMem(), clk, record.TopicInfo{ID: 1, Name: "t", Subs: map[string]record.Subscription{
		"a": {Protocol: "sqs", Endpoint: arnPrefix + "a"}}}, map[string]store.PartitionID{"a": 2})
	done := make(chan error, 1)
	go func() {
		for i := range 300 {
			if _, err := n.topic.Publish(context.Background(), []PublishSpec{{ID: fmt.Sprint(i), Message: fmt.Sprintf("m%03d", i)}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 100 {
		if err := n.topic.Snapshot(); err != nil {
			t.Fatalf("a snapshot amid publishes: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("a publish amid snapshots: %v", err)
	}
	n.drain()
	if got := n.bodies("a"); !slices.Equal(got, want(0, 300, 1)) {
		t.Fatalf("the queue got %d of 300", len(got))
	}
}
