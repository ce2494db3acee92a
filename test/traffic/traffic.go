// Package traffic is the SQS requests a black-box test makes against its
// queue, each answer recorded in the test's ledger.Ledger: batches of
// sends, receives that delete what they take (or leave some of it in
// flight), a load of senders and receivers that runs until stopped, the
// final drain, and the count of the requests that failed.
//
// It reaches the server only through the SDK clients it is given; where
// they point, and what a failed request means for the test, is the
// test's.
package traffic

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
	"golang.org/x/time/rate"

	"github.com/sluicemq/sluice/test/ledger"
)

// BatchSize is the number of messages in a SendMessageBatch, and at most
// in a receive.
const BatchSize = 10

// backoffTime is how long a worker waits after a failed request: the
// server may be down until the test starts it again.
const backoffTime = 50 * time.Millisecond

// Backoff waits a little after a failed request, or until ctx is done.
func Backoff(ctx context.Context) {
	t := time.NewTimer(backoffTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// SendBatch sends n (at most BatchSize) new messages in one
// SendMessageBatch and records each answer in l, and each entry the
// server failed in failed; it returns how many the server acknowledged.
func SendBatch(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, n int, failed *Failures) (int, error) {
	ids := l.IDs(n)
	entries := make([]types.SendMessageBatchRequestEntry, n)
	for i, id := range ids {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(l.Body(id))}
	}
	out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		for _, id := range ids {
			l.SendFailed(id)
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
		l.SendAcked(ids[i], aws.ToString(r.MessageId))
	}
	for _, r := range out.Failed {
		failed.AddEntry("SendMessageBatch", aws.ToString(r.Code))
	}
	for i, ok := range answered {
		if !ok {
			l.SendFailed(ids[i])
		}
	}
	return len(out.Successful), nil
}

// SendOne sends one new message with SendMessage and records the answer.
func SendOne(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger) error {
	id := l.IDs(1)[0]
	out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(l.Body(id))})
	if err != nil {
		l.SendFailed(id)
		return err
	}
	l.SendAcked(id, aws.ToString(out.MessageId))
	return nil
}

// Received is a message a receive took, with its receipt handle.
type Received struct {
	ledger.Receive
	Handle string
}

// Consume receives up to BatchSize messages with visibility timeout vis,
// checks each against l, and deletes in one DeleteMessageBatch those
// leave (nil: none) does not leave in flight; it counts the entries the
// server failed in failed. It returns how many it received.
func Consume(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, vis time.Duration, leave func(Received) bool,
	failed *Failures) (int, error) {
	begin := time.Now()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: BatchSize,
		VisibilityTimeout: int32(vis / time.Second), WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		return 0, err
	}
	done := time.Now()
	var del []Received
	for _, m := range out.Messages {
		count := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]
		r, ok := l.Received(aws.ToString(m.MessageId), aws.ToString(m.Body), count, begin, done, vis)
		if !ok {
			continue
		}
		got := Received{Receive: r, Handle: aws.ToString(m.ReceiptHandle)}
		if leave != nil && leave(got) {
			continue
		}
		del = append(del, got)
	}
	if len(del) == 0 {
		return len(out.Messages), nil
	}
	return len(out.Messages), DeleteBatch(ctx, c, url, l, del, failed)
}

// DeleteBatch deletes ms (at most BatchSize) in one DeleteMessageBatch
// and records each answer in l, and each entry the server failed in
// failed.
func DeleteBatch(ctx context.Context, c *sqs.Client, url string, l *ledger.Ledger, ms []Received, failed *Failures) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(ms))
	for i, m := range ms {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Handle)}
	}
	res, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	answered := make([]bool, len(ms))
	if err == nil {
		for _, r := range res.Successful {
			if i, aerr := strconv.Atoi(aws.ToString(r.Id)); aerr == nil && i >= 0 && i < len(ms) && !answered[i] {
				answered[i] = true
				l.Deleted(ms[i].Receive, true)
			}
		}
		for _, r := range res.Failed {
			failed.AddEntry("DeleteMessageBatch", aws.ToString(r.Code))
		}
	}
	for i, ok := range answered {
		if !ok {
			l.Deleted(ms[i].Receive, false)
		}
	}
	return err
}

// FinalVisibility keeps every message received in the final drain out of
// the way until the end of the test: each comes once.
const FinalVisibility = 12 * time.Hour

// Drain receives everything in the queue through clients, one goroutine
// each, deleting what it receives (a queue may have only so many in
// flight, and a drain may see millions), and checks it against l. It
// stops once every message that must come back did and a receive finds
// nothing more, or once receives keep finding nothing after quietAfter
// (by when every message received before is visible again), or when ctx
// ends.
func Drain(ctx context.Context, clients []*sqs.Client, url string, l *ledger.Ledger, quietAfter time.Time) *Failures {
	l.BeginFinal()
	failed := NewFailures()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for empty := 0; ctx.Err() == nil; {
				got, err := Consume(ctx, c, url, l, FinalVisibility, nil, failed)
				if err != nil {
					failed.Add(err, false)
					Backoff(ctx)
					continue
				}
				if got > 0 {
					empty = 0
					continue
				}
				empty++
				if l.AllSeen() || (empty >= 3 && time.Now().After(quietAfter)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// A Route is where a worker's next request goes.
type Route struct {
	Client *sqs.Client
	// Down says whether the server behind Client went down since the
	// route was picked: a request that failed meanwhile is counted apart.
	// Nil: never.
	Down func() bool
}

func (r Route) down() bool { return r.Down != nil && r.Down() }

// Config is a load.
type Config struct {
	// Senders and Receivers are how many of each run, each sending one
	// batch of BatchSize, or receiving (up to BatchSize) and deleting, at
	// a time.
	Senders, Receivers int
	// Rate is the messages a second the senders send, over all of them.
	// Default 0: as fast as they go.
	Rate float64
	// Vis is the receivers' visibility timeout (whole seconds).
	Vis time.Duration
	// Leave says which messages the receivers leave to time out instead of
	// deleting them. Default nil: none.
	Leave func(Received) bool
	// Route is where sender or receiver i (of its kind) sends its next
	// request; ok false: nowhere now (it waits a little and asks again).
	// Required.
	Route func(i int) (r Route, ok bool)
	// Sent, if set, is called with how many sends of a batch the server
	// acknowledged, after each batch that did not fail.
	Sent func(acked int)
}

// Load is senders and receivers running against one queue until
// stopped.
type Load struct {
	failed *Failures
	// The slowest acknowledged send and the slowest answered receive (with
	// its deletes) since the last Slowest, in nanoseconds.
	slowest, slowestReceive atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts the load of cfg on the queue at url, recorded in l, until
// Stop or until ctx ends.
func Start(ctx context.Context, url string, l *ledger.Ledger, cfg Config) *Load {
	ctx, cancel := context.WithCancel(ctx)
	ld := &Load{failed: NewFailures(), cancel: cancel}
	limit := rate.Inf
	if cfg.Rate > 0 {
		limit = rate.Limit(cfg.Rate / BatchSize)
	}
	lim := rate.NewLimiter(limit, 1)
	for i := range cfg.Senders {
		ld.wg.Go(func() {
			for ctx.Err() == nil {
				if lim.Wait(ctx) != nil {
					return
				}
				r, ok := cfg.Route(i)
				if !ok {
					Backoff(ctx)
					continue
				}
				begin := time.Now()
				n, err := SendBatch(ctx, r.Client, url, l, BatchSize, ld.failed)
				if err != nil {
					ld.failed.Add(err, r.down())
					Backoff(ctx)
					continue
				}
				longest(&ld.slowest, time.Since(begin))
				if cfg.Sent != nil {
					cfg.Sent(n)
				}
			}
		})
	}
	for i := range cfg.Receivers {
		ld.wg.Go(func() {
			for ctx.Err() == nil {
				r, ok := cfg.Route(i)
				if !ok {
					Backoff(ctx)
					continue
				}
				begin := time.Now()
				if _, err := Consume(ctx, r.Client, url, l, cfg.Vis, cfg.Leave, ld.failed); err != nil {
					ld.failed.Add(err, r.down())
					Backoff(ctx)
					continue
				}
				longest(&ld.slowestReceive, time.Since(begin))
			}
		})
	}
	return ld
}

// longest raises slowest to took if took is longer.
func longest(slowest *atomic.Int64, took time.Duration) {
	for old := slowest.Load(); int64(took) > old && !slowest.CompareAndSwap(old, int64(took)); old = slowest.Load() {
	}
}

// Slowest returns the slowest acknowledged send and answered receive
// since the last call, and starts over.
func (ld *Load) Slowest() (send, receive time.Duration) {
	return time.Duration(ld.slowest.Swap(0)).Round(time.Millisecond), time.Duration(ld.slowestReceive.Swap(0)).Round(time.Millisecond)
}

// Failed is the load's failed requests so far.
func (ld *Load) Failed() *Failures { return ld.failed }

// Stop stops the load and waits for its requests (a request the server
// did not answer fails and is counted). It may be called again.
func (ld *Load) Stop() {
	ld.cancel()
	ld.wg.Wait()
}

// Failures counts failed requests by kind, and those sent to a server
// that went down before it answered apart.
type Failures struct {
	mu   sync.Mutex
	n    int
	down int // to a server stopped or killed while the request was out
	// entries counts the entries that failed in batches that succeeded
	// (each is in kinds too).
	entries int
	kinds   map[string]int
	first   []string
}

// NewFailures returns an empty count.
func NewFailures() *Failures { return &Failures{kinds: map[string]int{}} }

// Add counts a failed request; down says that its server went down while
// it was out. A request the test cancelled is not counted.
func (f *Failures) Add(err error, down bool) {
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
	f.kinds[ErrKind(err)]++
	if len(f.first) < 3 {
		msg := err.Error()
		if len(msg) > 240 { // the SDK's prefix; the cause is at the end
			msg = "…" + msg[len(msg)-200:]
		}
		f.first = append(f.first, msg)
	}
}

// AddEntry counts an entry of a batch (action) that failed with code.
func (f *Failures) AddEntry(action, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries++
	f.kinds[action+" entry "+code]++
}

// Count is the number of failed requests and batch entries, and of those
// to a server that served.
func (f *Failures) Count() (all, toServing int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n + f.entries, f.n - f.down + f.entries
}

// ErrKind names what a client saw: the SQS error code, or what happened
// to the connection.
func ErrKind(err error) string {
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

func (f *Failures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 && f.entries == 0 {
		return "0 failed requests"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d failed requests: %d to a server that went down while they were out, %d to servers that served; %d failed batch entries",
		f.n, f.down, f.n-f.down, f.entries)
	for _, k := range slices.Sorted(maps.Keys(f.kinds)) {
		fmt.Fprintf(&b, "; %s: %d", k, f.kinds[k])
	}
	if len(f.first) > 0 {
		fmt.Fprintf(&b, "; the first: %s", strings.Join(f.first, " | "))
	}
	return b.String()
}
