package restart

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// batchSize is the number of messages in a SendMessageBatch, and at most
// in a receive.
const batchSize = 10

// sendBatch sends n (at most batchSize) new messages in one
// SendMessageBatch and records each answer in l; it returns how many the
// server acknowledged.
func sendBatch(ctx context.Context, c *sqs.Client, url string, l *ledger, n int) (int, error) {
	ids := l.ids(n)
	entries := make([]types.SendMessageBatchRequestEntry, n)
	for i, id := range ids {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body(id))}
	}
	out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		for _, id := range ids {
			l.sendFailedFor(id)
		}
		return 0, err
	}
	answered := make([]bool, n)
	for _, r := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(r.Id))
		if err != nil || i < 0 || i >= n || answered[i] {
			continue // not an entry of this batch: it stays unanswered, so unknown
		}
		answered[i] = true
		l.sendAcked(ids[i], aws.ToString(r.MessageId))
	}
	for i, ok := range answered {
		if !ok {
			l.sendFailedFor(ids[i])
		}
	}
	return len(out.Successful), nil
}

// consume receives up to batchSize messages with visibility timeout vis,
// checks each against l, and deletes in one DeleteMessageBatch those del
// says to (nil: all of them); it hands the others to hold with their
// receipt handles and when the receive was sent. It returns how many it
// received.
func consume(ctx context.Context, c *sqs.Client, url string, l *ledger, vis time.Duration,
	del func(id int) bool, hold func(id int, handle string, received time.Time)) (int, error) {
	begin := time.Now()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: batchSize,
		VisibilityTimeout: int32(vis / time.Second), WaitTimeSeconds: 1})
	if err != nil {
		return 0, err
	}
	var entries []types.DeleteMessageBatchRequestEntry
	var ids []int
	for _, m := range out.Messages {
		id, ok := l.receivedMsg(aws.ToString(m.MessageId), aws.ToString(m.Body), begin)
		if !ok {
			continue
		}
		if del != nil && !del(id) {
			hold(id, aws.ToString(m.ReceiptHandle), begin)
			continue
		}
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(ids))), ReceiptHandle: m.ReceiptHandle})
		ids = append(ids, id)
	}
	if len(entries) == 0 {
		return len(out.Messages), nil
	}
	return len(out.Messages), deleteBatch(ctx, c, url, l, ids, entries, begin, vis)
}

// deleteBatch deletes messages ids in one DeleteMessageBatch (entries,
// whose Ids are the indexes in ids) and records each answer in l: the
// messages were received by a receive sent at received, with visibility
// timeout vis.
func deleteBatch(ctx context.Context, c *sqs.Client, url string, l *ledger, ids []int, entries []types.DeleteMessageBatchRequestEntry,
	received time.Time, vis time.Duration) error {
	res, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	since := time.Since(received)
	answered := make([]bool, len(ids))
	if err == nil {
		for _, r := range res.Successful {
			if i, aerr := strconv.Atoi(aws.ToString(r.Id)); aerr == nil && i >= 0 && i < len(ids) && !answered[i] {
				answered[i] = true
				l.deleted(ids[i], true, since, vis)
			}
		}
	}
	for i, ok := range answered {
		if !ok {
			l.deleted(ids[i], false, since, vis)
		}
	}
	return err
}

// backoff waits a little after a failed request (the server may be
// gone until the next start), or until ctx is done.
func backoff(ctx context.Context) {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sendAll sends n new messages from senders goroutines, in batches; it
// returns the failed requests.
func sendAll(ctx context.Context, c *sqs.Client, url string, l *ledger, n, senders int) *failures {
	var left atomic.Int64
	left.Store(int64(n))
	failed := &failures{}
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := min(int64(batchSize), left.Add(-batchSize)+batchSize)
				if k <= 0 {
					return
				}
				if _, err := sendBatch(ctx, c, url, l, int(k)); err != nil {
					failed.add(err)
					backoff(ctx)
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// held is a message received and held in flight.
type held struct {
	handle   string
	received time.Time // when its receive was sent
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
func receivePicked(ctx context.Context, c *sqs.Client, url string, l *ledger, pick []bool, picked, consumers int,
	vis time.Duration, stream bool) (hold map[int]held, failed *failures, notBack int) {
	var mu sync.Mutex
	left := picked
	taken := make([]bool, len(pick))
	hold = map[int]held{}
	var others []int
	keep := func(id int) bool {
		mu.Lock()
		defer mu.Unlock()
		mine := id < len(pick) && pick[id]
		if mine && !taken[id] {
			taken[id] = true
			left--
		}
		return stream && mine
	}
	put := func(id int, handle string, received time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if _, again := hold[id]; !again && (id >= len(pick) || !pick[id]) {
			others = append(others, id)
		}
		hold[id] = held{handle, received}
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return left == 0
	}
	failed = &failures{}
	release := func(ids []int) {
		for from := 0; from < len(ids); from += batchSize {
			var entries []types.ChangeMessageVisibilityBatchRequestEntry
			mu.Lock()
			for _, id := range ids[from:min(from+batchSize, len(ids))] {
				entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(id)),
					ReceiptHandle: aws.String(hold[id].handle), VisibilityTimeout: 0})
				delete(hold, id)
			}
			mu.Unlock()
			out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
			mu.Lock()
			if err != nil {
				failed.add(err)
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
				n, err := consume(ctx, c, url, l, vis, keep, put)
				if err != nil {
					failed.add(err)
					backoff(ctx)
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
	for from := 0; from < len(others); from += batchSize {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for _, id := range others[from:min(from+batchSize, len(others))] {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(id)),
				ReceiptHandle: aws.String(hold[id].handle), VisibilityTimeout: 0})
			delete(hold, id)
		}
		out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			failed.add(err)
			notBack += len(entries)
		} else {
			notBack += len(out.Failed)
		}
	}
	return hold, failed, notBack
}

// deleteHeld deletes the held messages, oldest first, in batches from
// consumers goroutines, and returns the failed requests.
func deleteHeld(ctx context.Context, c *sqs.Client, url string, l *ledger, hold map[int]held, consumers int, vis time.Duration) *failures {
	ids := slices.Sorted(maps.Keys(hold))
	var next atomic.Int64
	failed := &failures{}
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			for ctx.Err() == nil {
				from := int(next.Add(batchSize)) - batchSize
				if from >= len(ids) {
					return
				}
				batch := ids[from:min(from+batchSize, len(ids))]
				entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
				received := time.Now()
				for i, id := range batch {
					entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(hold[id].handle)}
					if at := hold[id].received; at.Before(received) {
						received = at
					}
				}
				if err := deleteBatch(ctx, c, url, l, batch, entries, received, vis); err != nil {
					failed.add(err)
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// finalVisibility keeps every message received in the final drain out of
// the way until the end of the test: each comes once.
const finalVisibility = 12 * time.Hour

// drainAll receives everything in the queue, without deleting, from
// receivers goroutines, and checks it against l. It stops once every
// message that must come back did and a receive finds nothing more, or
// once receives keep finding nothing after quietAfter (by when every
// message received before a kill is visible again), or when ctx ends.
func drainAll(ctx context.Context, c *sqs.Client, url string, l *ledger, quietAfter time.Time, receivers int) *failures {
	l.beginFinal()
	failed := &failures{}
	var wg sync.WaitGroup
	for range receivers {
		wg.Go(func() {
			for empty := 0; ctx.Err() == nil; {
				// Each message is deleted once seen: a queue may have at most
				// 120,000 in flight, and the final drain may see millions.
				n, err := consume(ctx, c, url, l, finalVisibility, nil, nil)
				if err != nil {
					failed.add(err)
					backoff(ctx)
					continue
				}
				if n > 0 {
					empty = 0
					continue
				}
				empty++
				if l.allSeen() || (empty >= 3 && time.Now().After(quietAfter)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// failures counts failed requests and keeps the first errors.
type failures struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (f *failures) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.first) < 2 {
		msg := err.Error()
		if len(msg) > 200 { // the SDK's prefix; the cause is at the end
			msg = "…" + msg[len(msg)-160:]
		}
		f.first = append(f.first, msg)
	}
}

func (f *failures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return "0 failed requests"
	}
	return fmt.Sprintf("%d failed requests, the first: %s", f.n, strings.Join(f.first, "; "))
}
