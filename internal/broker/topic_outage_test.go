package broker_test

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/charts"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

var (
	outageFor   = flag.Duration("outage.for", 0, "TestSubscriberOutage: how long one subscription's consumers are away (0: 20s; the docs' chart: 60s)")
	outageChart = flag.String("outage.chart", "", "TestSubscriberOutage: write its chart (PATH.png, PATH.svg) and figures (PATH.csv)")
)

// TestSubscriberOutage: a topic with two subscriptions, published to at
// 100 messages a second; one subscription's consumers keep up, the
// other's are away for a while (outage.for), then drain their backlog at
// five times the rate. The topic's AgeOfFirstSubscriberFirstAttempt and
// the healthy subscription's age at first attempt stay flat through the
// outage; the stalled one's grows to the outage's length. It runs a real
// broker on disk, on a fake clock stepped 100 ms at a time (so its ages
// are exact, whatever the machine's load): the chart in
// docs/operations.md is `go test -run TestSubscriberOutage -outage.for
// 60s -outage.chart $PWD/docs/topic-outage ./internal/broker`.
func TestSubscriberOutage(t *testing.T) {
	outage := *outageFor
	if outage <= 0 {
		outage = 20 * time.Second
	}
	const (
		step    = 100 * time.Millisecond
		perStep = 10 // 100 messages a second
	)
	start, total := outage/2, 2*outage+outage/2 // the outage, then time to drain and settle
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(epoch)
	b, err := broker.Open(broker.Config{Dir: t.TempDir(), Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, q := range []string{"billing", "analytics"} {
		if _, err := b.CreateQueue(ctx, q, map[string]string{"VisibilityTimeout": "600"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	info := broker.TopicInfo{Name: "orders", Subs: map[string]broker.Subscription{
		"billing":   {Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:billing", Attrs: map[string]string{"RawMessageDelivery": "true"}},
		"analytics": {Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:analytics", Attrs: map[string]string{"RawMessageDelivery": "true"}},
	}}
	if _, _, err := b.CreateTopic(ctx, info); err != nil {
		t.Fatal(err)
	}
	// oldest is the age of the oldest message analytics received first in
	// the current second, exact: each body names its publish step.
	var oldest time.Duration
	// consume receives and deletes up to limit messages of a queue.
	consume := func(q string, limit int) {
		for limit > 0 {
			ms, err := b.Receive(ctx, q, st.ReceiveInput{MaxMessages: min(10, limit)})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				return
			}
			handles := make([]string, len(ms))
			for i, m := range ms {
				handles[i] = m.ReceiptHandle
				var n int
				if _, err := fmt.Sscanf(m.Body, "order %d", &n); err != nil {
					t.Fatalf("a body that is no order: %q", m.Body)
				}
				if sent := epoch.Add(time.Duration(n/perStep) * step); q == "analytics" {
					oldest = max(oldest, clk.Now().Sub(sent))
				}
			}
			if errs, err := b.DeleteBatch(ctx, q, handles); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
			limit -= len(ms)
		}
	}
	delivered := func(n int64) {
		tick := time.NewTicker(time.Millisecond) // the topic delivers in the background: polled, bounded
		defer tick.Stop()
		for deadline := time.Now().Add(20 * time.Second); ; <-tick.C {
			f, err := b.TopicFigures("orders")
			if err == nil && f.Delivered >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the topic delivered %d of %d", f.Delivered, n)
			}
		}
	}
	// Each second: the mean age at first attempt of the messages first
	// received in it (NaN: none), for the topic and each subscription.
	var samples []outageSample
	var prev [3]st.AgeHistogram
	mean := func(now, before st.AgeHistogram) float64 {
		var n int64
		for i, c := range now.Counts {
			if i < len(before.Counts) {
				c -= before.Counts[i]
			}
			n += c
		}
		if n == 0 {
			return math.NaN()
		}
		return (now.Sum - before.Sum).Seconds() / float64(n)
	}
	published := 0
	for at := time.Duration(0); at < total; at += step {
		in := make([]broker.PublishInput, perStep)
		for i := range in {
			in[i] = broker.PublishInput{ID: fmt.Sprint("m", published), Message: fmt.Sprintf("order %d", published)}
			published++
		}
		if _, err := b.Publish(ctx, "orders", in); err != nil {
			t.Fatal(err)
		}
		delivered(2 * int64(published))
		clk.Advance(step)
		consume("billing", perStep)
		if away := at >= start && at < start+outage; !away {
			consume("analytics", 5*perStep) // back: five times the rate until it caught up
		}
		if (at+step)%time.Second == 0 {
			f, err := b.TopicFigures("orders")
			if err != nil {
				t.Fatal(err)
			}
			var now [3]st.AgeHistogram
			now[0] = f.FirstAttempt
			for _, a := range b.SubscriptionFirstAttempts() {
				switch a.Queue {
				case "billing":
					now[1] = a.Age
				case "analytics":
					now[2] = a.Age
				}
			}
			s := outageSample{at: (at + step).Seconds(), topic: mean(now[0], prev[0]),
				billing: mean(now[1], prev[1]), analytics: mean(now[2], prev[2]), oldest: math.NaN()}
			if !math.IsNaN(s.analytics) {
				s.oldest = oldest.Seconds()
			}
			samples = append(samples, s)
			prev, oldest = now, 0
		}
	}
	var worstTopic, worstBilling, worstAnalytics, worstOldest float64
	for _, s := range samples {
		worstTopic = max(worstTopic, nanZero(s.topic))
		worstBilling = max(worstBilling, nanZero(s.billing))
		worstAnalytics = max(worstAnalytics, nanZero(s.analytics))
		worstOldest = max(worstOldest, nanZero(s.oldest))
	}
	t.Logf("%d published; mean age at first attempt, worst second: topic (first subscriber) %.2f s, billing %.2f s, analytics (away %s) %.2f s, "+
		"its oldest %.2f s", published, worstTopic, worstBilling, outage, worstAnalytics, worstOldest)
	// One step is the consumers' pace: the healthy subscription and the
	// topic wait one step; the stalled one's oldest about the outage (its
	// mean less: its queue's backlog mode serves what is published after
	// the consumers return first, and drains the held messages behind).
	if worstTopic > step.Seconds() || worstBilling > step.Seconds() {
		t.Errorf("the healthy subscription's age at first attempt rose to %.2f s (the topic's first subscriber's %.2f s) while the other's consumers were away", worstBilling, worstTopic)
	}
	if worstOldest < 0.8*outage.Seconds() || worstAnalytics < 0.5*outage.Seconds() {
		t.Errorf("the stalled subscription's first attempts were at most %.2f s old (the mean of a second at most %.2f s); its consumers were away %s",
			worstOldest, worstAnalytics, outage)
	}
	if *outageChart != "" {
		writeOutage(t, *outageChart, outage, start, samples)
	}
}

// outageSample is one second of TestSubscriberOutage: the mean age at
// first attempt (s) of what was first received in it (NaN: nothing).
// oldest is the age of analytics' oldest first attempt in that second.
type outageSample struct{ at, topic, billing, analytics, oldest float64 }

func nanZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// writeOutage writes TestSubscriberOutage's figures as CSV and its chart.
func writeOutage(t *testing.T, base string, outage, start time.Duration, samples []outageSample) {
	t.Helper()
	f, err := os.Create(base + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	_ = w.Write([]string{"second", "topic_first_subscriber_s", "billing_s", "analytics_s", "analytics_oldest_s"})
	var at, topic, billing, analytics, oldest []float64
	for _, v := range samples {
		_ = w.Write([]string{num(v.at), num(v.topic), num(v.billing), num(v.analytics), num(v.oldest)})
		at, topic, billing, analytics = append(at, v.at), append(topic, v.topic), append(billing, v.billing), append(analytics, v.analytics)
		oldest = append(oldest, v.oldest)
	}
	w.Flush()
	if err := errors.Join(w.Error(), f.Close()); err != nil {
		t.Fatal(err)
	}
	files, err := charts.Lines(base, "Age at first attempt while one subscriber's consumers are away",
		fmt.Sprintf("topic orders, 100 msgs/s, two subscriptions; analytics' consumers away %.0f s, then at 5x the rate (mean of each second)", outage.Seconds()),
		"time (s)", "publish to first receive (s, log scale)", true,
		[]charts.Series{{Name: "topic: AgeOfFirstSubscriberFirstAttempt", X: at, Y: topic}, {Name: "billing (keeps up)", X: at, Y: billing},
			{Name: "analytics (consumers away)", X: at, Y: analytics}, {Name: "analytics: oldest of the second", X: at, Y: oldest}},
		[]charts.Span{{From: start.Seconds(), To: (start + outage).Seconds(), Label: "analytics' consumers away"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s.csv and %v", base, files)
}
