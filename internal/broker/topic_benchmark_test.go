package broker_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

// BenchmarkTopicFanOut publishes batches of ten 1 KiB messages (sync
// always, the default) to a topic with 1, 10 and 100 subscriptions
// (enveloped), beside SendMessageBatch of the same batches to one queue in
// the same run. It reports the publish rate and latency (a publish answers
// once the topic's one record is durable), and the fan-out: how many
// messages a second reached the subscriptions' queues until all had.
//
//	go test -run '^$' -bench TopicFanOut -benchtime 300x ./internal/broker
func BenchmarkTopicFanOut(b *testing.B) {
	body := strings.Repeat("x", 1024)
	open := func(b *testing.B) *broker.Broker {
		br, err := broker.Open(broker.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		return br
	}
	report := func(b *testing.B, lat []time.Duration, elapsed time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(b.N*10)/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("SendMessageBatch", func(b *testing.B) {
		br := open(b)
		if _, err := br.CreateQueue(ctx, "q", nil, nil); err != nil {
			b.Fatal(err)
		}
		in := make([]st.SendInput, 10)
		for i := range in {
			in[i] = st.SendInput{Body: body}
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			t0 := time.Now()
			if _, _, err := br.SendBatch(ctx, "q", in); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		report(b, lat, time.Since(start))
	})
	for _, subs := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("Publish/subscriptions=%d", subs), func(b *testing.B) {
			br := open(b)
			info := broker.TopicInfo{Name: "t", Subs: map[string]broker.Subscription{}}
			for i := range subs {
				q := fmt.Sprint("q", i)
				if _, err := br.CreateQueue(ctx, q, nil, nil); err != nil {
					b.Fatal(err)
				}
				info.Subs[q] = broker.Subscription{Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:" + q}
			}
			if _, _, err := br.CreateTopic(ctx, info); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				in := make([]broker.PublishInput, 10)
				for k := range in {
					in[k] = broker.PublishInput{ID: fmt.Sprint(i, "-", k), Message: body}
				}
				t0 := time.Now()
				if _, err := br.Publish(ctx, "t", in); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			published := time.Since(start)
			due := int64(b.N * 10 * subs)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				f, err := br.TopicFigures("t")
				if err != nil {
					b.Fatal(err)
				}
				if f.Delivered >= due {
					break
				}
				<-tick.C
			}
			fanned := time.Since(start)
			b.StopTimer()
			report(b, lat, published)
			b.ReportMetric(float64(due)/fanned.Seconds(), "deliveries/s")
		})
	}
}
