package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// The load both tests run.
const (
	batchSize = 10 // messages in a SendMessageBatch, and at most in a receive
	senders   = 6  // two a node
	receivers = 3  // one a node
	// loadVis is the receivers' visibility timeout: short, so that the
	// messages they leave come back, with a higher receive count, within
	// a round.
	loadVis = 3 * time.Second
	// A receiver leaves every keepEvery-th body to time out until its
	// receive count reaches keepUntil, and deletes the others at once.
	keepEvery = 4
	keepUntil = 3
)

// traffic is the load on the queue: senders and receivers, each through
// one node's SDK client, moving to another node while theirs is down (as
// behind a load balancer).
type traffic struct {
	c      *cluster
	failed *failures
	// The slowest acknowledged send and the slowest answered receive (with
	// its deletes), in nanoseconds.
	slowest, slowestReceive atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startTraffic starts the load on the queue at url through clients (one
// a node), -cluster.load messages a second.
func startTraffic(c *cluster, l *ledger, url string, clients []*sqs.Client) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{c: c, failed: newFailures(), cancel: cancel}
	limit := rate.Inf
	if *load > 0 {
		limit = rate.Limit(float64(*load) / batchSize)
	}
	lim := rate.NewLimiter(limit, 1)
	for i := range senders {
		tr.wg.Go(func() {
			for ctx.Err() == nil {
				if lim.Wait(ctx) != nil {
					return
				}
				n, ok := tr.pick(i)
				if !ok {
					backoff(ctx)
					continue
				}
				downs := c.nodes[n].downs.Load()
				begin := time.Now()
				if _, err := sendBatch(ctx, clients[n], url, l, batchSize, tr.failed); err != nil {
					tr.failed.add(err, c.nodes[n].downs.Load() != downs)
					backoff(ctx)
					continue
				}
				longest(&tr.slowest, time.Since(begin))
			}
		})
	}
	for i := range receivers {
		tr.wg.Go(func() {
			for ctx.Err() == nil {
				n, ok := tr.pick(i)
				if !ok {
					backoff(ctx)
					continue
				}
				downs := c.nodes[n].downs.Load()
				begin := time.Now()
				if _, err := consume(ctx, clients[n], url, l, loadVis, leave, tr.failed); err != nil {
					tr.failed.add(err, c.nodes[n].downs.Load() != downs)
					backoff(ctx)
					continue
				}
				longest(&tr.slowestReceive, time.Since(begin))
			}
		})
	}
	return tr
}

// longest raises slowest to took if took is longer.
func longest(slowest *atomic.Int64, took time.Duration) {
	for old := slowest.Load(); int64(took) > old && !slowest.CompareAndSwap(old, int64(took)); old = slowest.Load() {
	}
}

// slowestSince returns the slowest send and receive since the last call,
// and starts over.
func (tr *traffic) slowestSince() (send, receive time.Duration) {
	return time.Duration(tr.slowest.Swap(0)).Round(time.Millisecond), time.Duration(tr.slowestReceive.Swap(0)).Round(time.Millisecond)
}

// leave says whether a receiver leaves a message with body id and receive
// count n to time out instead of deleting it.
func leave(id, n int) bool { return id%keepEvery == 0 && n < keepUntil }

// pick is the node worker i sends through: its own (i mod 3), or the
// next one that serves while its own is down.
func (tr *traffic) pick(i int) (int, bool) {
	for k := range len(tr.c.nodes) {
		n := (i + k) % len(tr.c.nodes)
		if tr.c.nodes[n].serving.Load() {
			return n, true
		}
	}
	return 0, false
}

// stop stops the load and waits for its requests (a request the cluster
// did not answer fails and is counted).
func (tr *traffic) stop() {
	tr.cancel()
	tr.wg.Wait()
}

// backoff waits a little after a failed request, or until ctx is done.
func backoff(ctx context.Context) {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sendBatch sends n new messages in one SendMessageBatch and records each
// answer in l, and each entry the cluster failed in failed; it returns how
// many the cluster acknowledged.
func sendBatch(ctx context.Context, c *sqs.Client, url string, l *ledger, n int, failed *failures) (int, error) {
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
	for _, r := range out.Failed {
		failed.addEntry("SendMessageBatch", aws.ToString(r.Code))
	}
	for i, ok := range answered {
		if !ok {
			l.sendFailedFor(ids[i])
		}
	}
	return len(out.Successful), nil
}

// sendOne sends one new message with SendMessage and records the answer.
func sendOne(ctx context.Context, c *sqs.Client, url string, l *ledger) error {
	id := l.ids(1)[0]
	out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body(id))})
	if err != nil {
		l.sendFailedFor(id)
		return err
	}
	l.sendAcked(id, aws.ToString(out.MessageId))
	return nil
}

// consume receives up to batchSize messages with visibility timeout vis,
// checks each against l, and deletes in one DeleteMessageBatch those keep
// (nil: none) does not leave to time out; it counts the entries the
// cluster failed in failed. It returns how many it received.
func consume(ctx context.Context, c *sqs.Client, url string, l *ledger, vis time.Duration, keep func(id, count int) bool,
	failed *failures) (int, error) {
	begin := time.Now()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: batchSize,
		VisibilityTimeout: int32(vis / time.Second), WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		return 0, err
	}
	done := time.Now()
	var entries []types.DeleteMessageBatchRequestEntry
	var mids []uuid.UUID
	var nums []int
	for _, m := range out.Messages {
		count := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]
		mid, n, ok := l.receivedMsg(aws.ToString(m.MessageId), aws.ToString(m.Body), count, begin, done, vis)
		if !ok {
			continue
		}
		id, _ := bodyID(aws.ToString(m.Body))
		if cnt, _ := strconv.Atoi(count); keep != nil && keep(id, cnt) {
			continue
		}
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(mids))), ReceiptHandle: m.ReceiptHandle})
		mids = append(mids, mid)
		nums = append(nums, n)
	}
	if len(entries) == 0 {
		return len(out.Messages), nil
	}
	res, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	answered := make([]bool, len(mids))
	if err == nil {
		for _, r := range res.Successful {
			if i, aerr := strconv.Atoi(aws.ToString(r.Id)); aerr == nil && i >= 0 && i < len(mids) && !answered[i] {
				answered[i] = true
				l.deleted(mids[i], nums[i], true, begin, vis)
			}
		}
		for _, r := range res.Failed {
			failed.addEntry("DeleteMessageBatch", aws.ToString(r.Code))
		}
	}
	for i, ok := range answered {
		if !ok {
			l.deleted(mids[i], nums[i], false, begin, vis)
		}
	}
	return len(out.Messages), err
}

// finalVisibility keeps every message received in the final drain out of
// the way until the end of the test: each comes once.
const finalVisibility = 12 * time.Hour

// drainAll receives everything in the queue through every node that
// serves, deleting what it receives, and checks it against l. It stops
// once every message that must come back did and a receive finds nothing
// more, or once receives keep finding nothing after quietAfter (by when
// every message the load left in flight is visible again), or when ctx
// ends.
func drainAll(ctx context.Context, c *cluster, clients []*sqs.Client, url string, l *ledger, quietAfter time.Time) *failures {
	l.beginFinal()
	failed := newFailures()
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if !n.serving.Load() {
			continue
		}
		wg.Go(func() {
			for empty := 0; ctx.Err() == nil; {
				got, err := consume(ctx, clients[i], url, l, finalVisibility, nil, failed)
				if err != nil {
					failed.add(err, false)
					backoff(ctx)
					continue
				}
				if got > 0 {
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

// failures counts failed requests by kind, and those sent to a node that
// went down before it answered apart.
type failures struct {
	mu   sync.Mutex
	n    int
	down int // to a node stopped or killed while the request was out
	// entries counts the entries that failed in batches that succeeded
	// (each is in kinds too).
	entries int
	kinds   map[string]int
	first   []string
}

func newFailures() *failures { return &failures{kinds: map[string]int{}} }

func (f *failures) add(err error, down bool) {
	if errors.Is(err, context.Canceled) {
		return // the test stopped the load
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if down {
		f.down++
		return
	}
	f.kinds[errKind(err)]++
	if len(f.first) < 3 {
		msg := err.Error()
		if len(msg) > 240 { // the SDK's prefix; the cause is at the end
			msg = "…" + msg[len(msg)-200:]
		}
		f.first = append(f.first, msg)
	}
}

// addEntry counts an entry of a batch (action) that failed with code.
func (f *failures) addEntry(action, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries++
	f.kinds[action+" entry "+code]++
}

// count is the number of failed requests and batch entries, and of those
// to a node that served.
func (f *failures) count() (all, toServing int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n + f.entries, f.n - f.down + f.entries
}

// errKind names what a client saw: the SQS error code, or what happened
// to the connection.
func errKind(err error) string {
	var kind string
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae):
		kind = ae.ErrorCode()
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		kind = "connection closed"
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(err.Error(), "Timeout"):
		kind = "timeout"
	case strings.Contains(err.Error(), "quota"):
		kind = "retry quota exceeded"
	default:
		kind = "other"
	}
	var me *retry.MaxAttemptsError
	if errors.As(err, &me) {
		kind += fmt.Sprintf(" (after %d attempts)", me.Attempt)
	}
	return kind
}

func (f *failures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 && f.entries == 0 {
		return "0 failed requests"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d failed requests: %d to a node that went down while they were out, %d to nodes that served; %d failed batch entries",
		f.n, f.down, f.n-f.down, f.entries)
	for _, k := range slices.Sorted(maps.Keys(f.kinds)) {
		fmt.Fprintf(&b, "; %s: %d", k, f.kinds[k])
	}
	if len(f.first) > 0 {
		fmt.Fprintf(&b, "; the first: %s", strings.Join(f.first, " | "))
	}
	return b.String()
}
