package engine

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store/disk"
	"github.com/sluicemq/sluice/internal/topic"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

func rawFormat(_ *record.TopicInfo, _ string, _ record.Subscription, pub *record.Record) (st.SendInput, error) {
	return st.SendInput{Body: pub.Payload.Body, Attributes: pub.Payload.Attrs}, nil
}

func openTopicsEngine(t *testing.T, dir string, clk *clock.Fake) *Engine {
	t.Helper()
	l, err := disk.Open(vfs.OS{}, dir, disk.Options{SegmentBytes: 64 << 10, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{Store: l, Region: "us-east-1", AccountID: "000000000000", MaxQueues: 100, Clock: clk,
		Logger: slog.New(slog.DiscardHandler), TopicFormat: rawFormat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// waitDelivered waits until topic name delivered n messages in all.
func waitDelivered(t *testing.T, e *Engine, name string, n int64) {
	t.Helper()
	tp, err := e.Topic(name)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for tp.Figures().Delivered < n {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("topic %s delivered %d of %d", name, tp.Figures().Delivered, n)
		}
	}
}

func publishColors(t *testing.T, e *Engine, name string, from, to int) {
	t.Helper()
	tp, err := e.Topic(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		color := []string{"red", "blue"}[i%2]
		if _, err := tp.Publish(ctx, []topic.PublishSpec{{ID: fmt.Sprint(i), Message: fmt.Sprintf("m%03d", i),
			Attrs: map[string]st.AttributeValue{"color": {DataType: "String", StringValue: &color}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func receiveAll(t *testing.T, e *Engine, q string) []string {
	t.Helper()
	o, err := e.Queue(q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		ms, err := o.Receive(ctx, st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			out = append(out, m.Body)
			if errs, err := o.Delete(ctx, []string{m.ReceiptHandle}); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
		}
	}
	slices.Sort(out)
	return out
}

func bodies(from, to, step int) []string {
	var out []string
	for i := from; i < to; i += step {
		out = append(out, fmt.Sprintf("m%03d", i))
	}
	return out
}

// A topic is created in the catalog with its own partition, delivers into
// the engine's queues by itself, survives restarts (and a catalog
// snapshot), and once deleted is gone with its partition and the queues'
// marks of it.
func TestTopicLifecycle(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := openTopicsEngine(t, dir, clk)
	for _, q := range []string{"a", "b"} {
		if _, err := e.CreateQueue(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	info := record.TopicInfo{Name: "t", Subs: map[string]record.Subscription{
		"sa": {Protocol: "sqs", Endpoint: e.ARN("a")},
		"sb": {Protocol: "sqs", Endpoint: e.ARN("b"), Attrs: map[string]string{"FilterPolicy": `{"color":["red"]}`}},
	}}
	if _, created, err := e.CreateTopic(info); err != nil || !created {
		t.Fatalf("CreateTopic: %v %v", created, err)
	}
	if _, created, err := e.CreateTopic(record.TopicInfo{Name: "t"}); err != nil || created {
		t.Fatalf("CreateTopic again: created %v %v, want the existing one", created, err)
	}
	publishColors(t, e, "t", 0, 20)
	waitDelivered(t, e, "t", 30)
	if err := e.Snapshot(); err != nil {
		t.Fatal(err)
	}
	e.Close()

	e = openTopicsEngine(t, dir, clk)
	if got := e.Topics(); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("topics after a restart: %v", got)
	}
	publishColors(t, e, "t", 20, 25)
	waitDelivered(t, e, "t", 8) // since the restart: 5 + 3
	if got := receiveAll(t, e, "a"); !slices.Equal(got, bodies(0, 25, 1)) {
		t.Fatalf("queue a holds %v", got)
	}
	if got := receiveAll(t, e, "b"); !slices.Equal(got, bodies(0, 25, 2)) {
		t.Fatalf("queue b holds %v", got)
	}
	if err := e.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteTopic(ctx, "t"); err != nil {
		t.Fatalf("deleting a deleted topic: %v", err)
	}
	e.Close()

	e = openTopicsEngine(t, dir, clk)
	if got := e.Topics(); len(got) != 0 {
		t.Fatalf("topics after the deletion and a restart: %v", got)
	}
	a, _ := e.Queue("a")
	if m, err := a.OriginMarks(); err != nil || len(m) != 0 {
		t.Fatalf("queue a's marks after the topic's deletion: %v %v", m, err)
	}
	if _, _, err := e.CreateTopic(record.TopicInfo{Name: "t"}); err != nil {
		t.Fatalf("a topic of the deleted one's name: %v", err)
	}
}

// TestFirstAttemptFigures: each publish is timed from its publish to its
// first receive once for the topic (its first subscriber's, however many
// subscriptions receive it later), and once per subscription.
func TestFirstAttemptFigures(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := openTopicsEngine(t, t.TempDir(), clk)
	for _, q := range []string{"fast", "slow"} {
		if _, err := e.CreateQueue(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	info := record.TopicInfo{Name: "t", Subs: map[string]record.Subscription{
		"f": {Protocol: "sqs", Endpoint: e.ARN("fast")}, "s": {Protocol: "sqs", Endpoint: e.ARN("slow")}}}
	if _, _, err := e.CreateTopic(info); err != nil {
		t.Fatal(err)
	}
	publishColors(t, e, "t", 0, 4)
	waitDelivered(t, e, "t", 8)
	clk.Advance(3 * time.Second)
	if got := receiveAll(t, e, "fast"); len(got) != 4 {
		t.Fatalf("fast got %v", got)
	}
	clk.Advance(60 * time.Second)
	if got := receiveAll(t, e, "slow"); len(got) != 4 {
		t.Fatalf("slow got %v", got)
	}
	tp, _ := e.Topic("t")
	f := tp.Figures().FirstAttempt
	if f.Sum != 4*3*time.Second || sum(f.Counts) != 4 {
		t.Fatalf("the first subscriber's first attempts: %d, %v in all; want 4 of 3 s", sum(f.Counts), f.Sum)
	}
	ages := e.OriginAges()
	if len(ages) != 2 || ages[0].Queue != "fast" || ages[1].Queue != "slow" || ages[0].Topic != "t" {
		t.Fatalf("per subscription: %+v", ages)
	}
	if a := ages[0].Age; a.Sum != 4*3*time.Second || sum(a.Counts) != 4 {
		t.Fatalf("fast: %d, %v", sum(a.Counts), a.Sum)
	}
	if a := ages[1].Age; a.Sum != 4*63*time.Second || sum(a.Counts) != 4 {
		t.Fatalf("slow: %d, %v", sum(a.Counts), a.Sum)
	}
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
