package restart

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/traffic"
)

// sendAll sends n new messages from senders goroutines, in batches; it
// returns the failed requests.
func sendAll(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, n, senders int) *traffic.Failures {
	var left atomic.Int64
	left.Store(int64(n))
	failed := traffic.NewFailures()
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := min(traffic.BatchSize, left.Add(-traffic.BatchSize)+traffic.BatchSize)
				if k <= 0 {
					return
				}
				if _, err := traffic.SendBatch(ctx, c, url, l, int(k), failed); err != nil {
					failed.Add(err, false)
					traffic.Backoff(ctx)
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// receivePicked receives messages from consumers goroutines with
// visibility timeout vis, holding every one in flight, until every picked
// message was received (or the queue stays empty, or ctx ends). It makes
// those not picked visible again, and returns the picked ones it holds,
// the failed requests, and how many it could not make visible.
//
// With stream set (a drain larger than the messages a queue may have in
// flight), picked messages are deleted as they come and the others made
// visible again a batch at a time, so that no more than a few thousand
// are ever in flight.
func receivePicked(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, pick []bool, picked, consumers int,
	vis time.Duration, stream bool) (hold map[int]traffic.Received, failed *traffic.Failures, notBack int) {
	var mu sync.Mutex
	left := picked
	taken := make([]bool, len(pick))
	hold = map[int]traffic.Received{}
	var others []int
	// leave holds every message but, with stream, the picked ones.
	leave := func(m traffic.Received) bool {
		mu.Lock()
		defer mu.Unlock()
		mine := m.ID < len(pick) && pick[m.ID]
		if mine && !taken[m.ID] {
			taken[m.ID] = true
			left--
		}
		if stream && mine {
			return false
		}
		if _, again := hold[m.ID]; !again && !mine {
			others = append(others, m.ID)
		}
		hold[m.ID] = m
		return true
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return left == 0
	}
	failed = traffic.NewFailures()
	release := func(ids []int) {
		for from := 0; from < len(ids); from += traffic.BatchSize {
			var entries []types.ChangeMessageVisibilityBatchRequestEntry
			mu.Lock()
			for _, id := range ids[from:min(from+traffic.BatchSize, len(ids))] {
				entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(id)),
					ReceiptHandle: aws.String(hold[id].Handle), VisibilityTimeout: 0})
				delete(hold, id)
			}
			mu.Unlock()
			out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
			mu.Lock()
			if err != nil {
				failed.Add(err, false)
				notBack += len(entries)
			} else {
				notBack += len(out.Failed)
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			for empty := 0; ctx.Err() == nil && !done() && empty < 3; {
				n, err := traffic.Consume(ctx, c, url, l, vis, leave, failed)
				if err != nil {
					failed.Add(err, false)
					traffic.Backoff(ctx)
					continue
				}
				if n == 0 {
					empty++
				} else {
					empty = 0
				}
				if stream {
					mu.Lock()
					var back []int
					if len(others) >= 1000 {
						back, others = others, nil
					}
					mu.Unlock()
					release(back)
				}
			}
		})
	}
	wg.Wait()
	for from := 0; from < len(others); from += traffic.BatchSize {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for _, id := range others[from:min(from+traffic.BatchSize, len(others))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(id)),
				ReceiptHandle: aws.String(hold[id].Handle), VisibilityTimeout: 0})
			delete(hold, id)
		}
		out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			failed.Add(err, false)
			notBack += len(entries)
		} else {
			notBack += len(out.Failed)
		}
	}
	return hold, failed, notBack
}

// deleteHeld deletes the held messages, oldest first, in batches from
// consumers goroutines, and returns the failed requests.
func deleteHeld(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, hold map[int]traffic.Received, consumers int) *traffic.Failures {
	ids := slices.Sorted(maps.Keys(hold))
	var next atomic.Int64
	failed := traffic.NewFailures()
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			for ctx.Err() == nil {
				from := int(next.Add(traffic.BatchSize)) - traffic.BatchSize
				if from >= len(ids) {
					return
				}
				var batch []traffic.Received
				for _, id := range ids[from:min(from+traffic.BatchSize, len(ids))] {
					batch = append(batch, hold[id])
				}
				if err := traffic.DeleteBatch(ctx, c, url, l, batch, failed); err != nil {
					failed.Add(err, false)
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// drainAll receives everything in the queue from receivers goroutines,
// deleting what it receives, and checks it against l (see traffic.Drain).
func drainAll(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, quietAfter time.Time, receivers int) *traffic.Failures {
	return traffic.Drain(ctx, slices.Repeat([]*sqs.Client{c}, receivers), url, l, quietAfter)
}
