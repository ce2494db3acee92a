// Package qcopy copies queues and their messages from one SQS endpoint
// (Sluice, Amazon SQS, ...) to another over the SQS API: the queues with
// their attributes and tags (dead-letter targets first, queue ARNs
// rewritten), and each message's body, attributes, group and deduplication
// ids and trace header, checked by MD5 and deleted from the source only
// once the destination holds it (Move). It is the upgrade path across a
// storage-format change, and a way in and out of Amazon SQS.
package qcopy

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/message"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Limits of the copy: a batch request holds at most 10 messages and, so that
// any SQS endpoint takes it, at most 256 KiB of them (a larger message goes
// alone); FIFO deduplication lasts 5 minutes, and a margin.
const (
	copyBatchBytes  = 256 << 10
	copyDedupWindow = 6 * time.Minute
	copyCallTimeout = 30 * time.Second
	// copyMaxCallErrors is how many failed send calls in a row make a
	// worker give a queue up (the destination is down, say).
	copyMaxCallErrors = 3
)

// Options say what to copy, from where to where.
type Options struct {
	// Source and Destination are clients of the two SQS endpoints.
	Source, Destination *awssqs.Client
	// Patterns are queue name globs (path.Match); a queue that matches
	// any is copied.
	Patterns []string
	// Move deletes from the source what the destination acknowledged
	// (with matching MD5s); without it the copies stay in flight at the
	// source for Visibility seconds.
	Move bool
	// Create creates the missing destination queues with the source's
	// attributes and tags, dead-letter targets first, their ARNs rewritten.
	Create bool
	// DryRun lists what would be created and how many messages there are,
	// and changes nothing.
	DryRun bool
	// Concurrency is how many receive-and-send loops run at once (a FIFO
	// queue gets one at most). Default 4.
	Concurrency int
	// Visibility is the visibility timeout of received source messages,
	// seconds. Default 60.
	Visibility int32
}

type copier struct {
	src, dst          *awssqs.Client
	patterns          []string
	move, create, dry bool
	concurrency       int
	visibility        int32
	mu                sync.Mutex // guards the queues' active, done and err
	queues            []*queue
	dstARNs           map[string]string // source ARN -> destination ARN, once known (set up before the workers start)
}

// Run copies (or with DryRun, surveys) the queues and reports per queue.
// The error is for what stops the whole copy (listing the source, a
// cancelled ctx); per-queue and per-message failures are in the report.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Visibility <= 0 {
		o.Visibility = 60
	}
	if len(o.Patterns) == 0 {
		o.Patterns = []string{"*"}
	}
	k := &copier{src: o.Source, dst: o.Destination, patterns: o.Patterns, move: o.Move, create: o.Create, dry: o.DryRun,
		concurrency: o.Concurrency, visibility: o.Visibility, dstARNs: map[string]string{}}
	return k.run(ctx)
}

// msgState is where one source message is in the copy.
type msgState uint8

const (
	msgSending   msgState = iota + 1
	msgSent               // acknowledged by the destination, MD5s match
	msgDeleted            // and deleted from the source (--move)
	msgUndeleted          // sent, but the source's delete failed: deleted if received again
	msgFailed             // not copied; left at the source
)

// queue is one source queue and what happened to it.
type queue struct {
	name, url, arn string
	attrs, tags    map[string]string
	fifo           bool
	contentDedup   bool
	groupDedup     bool   // DeduplicationScope=messageGroup
	dlqARN         string // the source's RedrivePolicy target

	dstURL, dstARN string
	destination    string // created, exists, missing, would create
	deferred       map[string]string

	active int   // workers on it (copier.mu)
	done   bool  // drained (copier.mu)
	err    error // the queue could not be copied (copier.mu)

	mu     sync.Mutex // guards what follows
	seen   map[string]msgState
	reason map[string]string // why a message is failed or undeleted
	dedup  map[string]time.Time
	added  int // dedup entries since the last prune

	visible, inFlight, delayed int // at the source, at the end
}

// QueueReport is what happened to one queue.
type QueueReport struct {
	Name           string            `json:"name"`
	Destination    string            `json:"destination"`
	DestinationURL string            `json:"destination_url,omitempty"`
	Copied         int               `json:"copied"`
	Failed         int               `json:"failed"`
	Error          string            `json:"error,omitempty"`
	Errors         []string          `json:"errors,omitempty"`
	Visible        int               `json:"visible"`
	InFlight       int               `json:"in_flight"`
	Delayed        int               `json:"delayed"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
}

// Report is what a copy did, per queue and in total.
type Report struct {
	Queues       []QueueReport `json:"queues"`
	Copied       int           `json:"copied"`
	Failed       int           `json:"failed"`
	FailedQueues int           `json:"failed_queues"`
	// Held counts the messages in flight or delayed at the source at the
	// end, which a receive could not reach.
	Held   int  `json:"held"`
	Move   bool `json:"move"`
	DryRun bool `json:"dry_run"`
}

func (k *copier) run(ctx context.Context) (Report, error) {
	qs, err := k.sourceQueues(ctx)
	if err != nil {
		return Report{}, err
	}
	k.queues = dlqFirst(qs)
	if k.dry {
		return k.dryRun(ctx)
	}
	k.destinations(ctx)
	var wg sync.WaitGroup
	for range k.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.work(ctx)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	for _, q := range k.queues {
		k.figures(ctx, q)
	}
	return k.report(), nil
}

// sourceQueues lists the source queues that match, with their attributes
// and tags.
func (k *copier) sourceQueues(ctx context.Context) ([]*queue, error) {
	var qs []*queue
	in := &awssqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	for {
		out, err := k.src.ListQueues(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("copy: listing the source's queues: %w", err)
		}
		for _, u := range out.QueueUrls {
			q := &queue{name: u[strings.LastIndex(u, "/")+1:], url: u}
			if k.match(q.name) {
				qs = append(qs, q)
			}
		}
		if out.NextToken == nil || *out.NextToken == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	for _, q := range qs {
		a, err := k.src.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &q.url, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			return nil, fmt.Errorf("copy: %s: attributes: %w", q.name, err)
		}
		t, err := k.src.ListQueueTags(ctx, &awssqs.ListQueueTagsInput{QueueUrl: &q.url})
		if err != nil {
			return nil, fmt.Errorf("copy: %s: tags: %w", q.name, err)
		}
		q.arn = a.Attributes["QueueArn"]
		q.attrs = map[string]string{}
		for n, v := range a.Attributes {
			if !copyReadOnly[n] {
				q.attrs[n] = v
			}
		}
		q.tags = t.Tags
		q.fifo = a.Attributes["FifoQueue"] == "true" || strings.HasSuffix(q.name, ".fifo")
		q.contentDedup = a.Attributes["ContentBasedDeduplication"] == "true"
		q.groupDedup = a.Attributes["DeduplicationScope"] == "messageGroup"
		if rp := a.Attributes["RedrivePolicy"]; rp != "" {
			var p struct {
				Target string `json:"deadLetterTargetArn"`
			}
			if err := json.Unmarshal([]byte(rp), &p); err != nil {
				return nil, fmt.Errorf("copy: %s: RedrivePolicy %q: %w", q.name, rp, err)
			}
			q.dlqARN = p.Target
		}
		atoi := func(n string) int { v, _ := strconv.Atoi(a.Attributes[n]); return v }
		q.visible, q.inFlight, q.delayed = atoi("ApproximateNumberOfMessages"), atoi("ApproximateNumberOfMessagesNotVisible"), atoi("ApproximateNumberOfMessagesDelayed")
	}
	return qs, nil
}

func (k *copier) match(name string) bool {
	for _, p := range k.patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// copyReadOnly are the attributes a queue answers but cannot be created
// with (SQS's and Sluice's computed ones).
var copyReadOnly = map[string]bool{
	"ApproximateNumberOfMessages": true, "ApproximateNumberOfMessagesNotVisible": true, "ApproximateNumberOfMessagesDelayed": true,
	"CreatedTimestamp": true, "LastModifiedTimestamp": true, "QueueArn": true,
	"ApproximateAgeOfOldestMessage": true, "ApproximateNumberOfTenants": true, "ApproximateNumberOfNoisyGroups": true,
	"ApproximateAgeOfOldestMessageInQuietGroups": true, "ApproximateNumberOfMessagesSidelined": true, "ApproximateNumberOfMessagesDropped": true,
}

// dlqFirst orders queues so that each dead-letter target comes before the
// queues that name it (name order otherwise; a cycle is broken anywhere).
func dlqFirst(qs []*queue) []*queue {
	byARN := map[string]*queue{}
	for _, q := range qs {
		byARN[q.arn] = q
	}
	placed := map[*queue]bool{}
	out := make([]*queue, 0, len(qs))
	var place func(q *queue)
	place = func(q *queue) {
		if placed[q] {
			return
		}
		placed[q] = true
		if t := byARN[q.dlqARN]; t != nil {
			place(t)
		}
		out = append(out, q)
	}
	for _, q := range qs {
		place(q)
	}
	return out
}

// arnAttrs are the attributes that name queues by ARN: rewritten to the
// destination's ARNs.
var arnAttrs = []string{"RedrivePolicy", "RedriveAllowPolicy", "Policy"}

// destinations finds or creates each destination queue, dead-letter
// targets first. A queue that already exists is used as it is.
func (k *copier) destinations(ctx context.Context) {
	for _, q := range k.queues {
		if err := k.destination(ctx, q); err != nil {
			q.err = err
		}
	}
	// What names queues by ARN is set once every ARN is known: a
	// RedriveAllowPolicy names its sources, which come after it.
	for _, q := range k.queues {
		if q.err != nil || len(q.deferred) == 0 {
			continue
		}
		attrs := map[string]string{}
		for n, v := range q.deferred {
			v, err := k.rewrite(ctx, v, n == "RedrivePolicy")
			if err != nil {
				q.err = fmt.Errorf("%s: %w", n, err)
				break
			}
			attrs[n] = v
		}
		if q.err != nil {
			continue
		}
		if _, err := k.dst.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &q.dstURL, Attributes: attrs}); err != nil {
			q.err = fmt.Errorf("setting %s at the destination: %w", strings.Join(slices.Sorted(maps.Keys(attrs)), ", "), err)
		}
	}
}

func (k *copier) destination(ctx context.Context, q *queue) error {
	out, err := k.dst.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: &q.name})
	switch {
	case err == nil:
		q.destination, q.dstURL = "exists", *out.QueueUrl
	case !isNotExist(err):
		return fmt.Errorf("destination: %w", err)
	case !k.create:
		q.destination = "missing"
		return errors.New("missing at the destination (use --create)")
	default:
		attrs := map[string]string{}
		q.deferred = map[string]string{}
		for n, v := range q.attrs {
			attrs[n] = v
		}
		for _, n := range arnAttrs {
			if v, ok := attrs[n]; ok {
				delete(attrs, n)
				q.deferred[n] = v
			}
		}
		// The dead-letter target was created before this queue: name it
		// now, so the queue never runs without it.
		if v, ok := q.deferred["RedrivePolicy"]; ok {
			if rp, err := k.rewrite(ctx, v, true); err == nil {
				attrs["RedrivePolicy"] = rp
				delete(q.deferred, "RedrivePolicy")
			}
		}
		in := &awssqs.CreateQueueInput{QueueName: &q.name, Attributes: attrs}
		if len(q.tags) > 0 {
			in.Tags = q.tags
		}
		out, err := k.dst.CreateQueue(ctx, in)
		if err != nil {
			return fmt.Errorf("creating at the destination: %w", err)
		}
		q.destination, q.dstURL = "created", *out.QueueUrl
	}
	a, err := k.dst.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &q.dstURL, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil {
		return fmt.Errorf("destination ARN: %w", err)
	}
	q.dstARN = a.Attributes["QueueArn"]
	k.dstARNs[q.arn] = q.dstARN
	return nil
}

func isNotExist(err error) bool {
	var nf *types.QueueDoesNotExist
	return errors.As(err, &nf) || strings.Contains(err.Error(), "NonExistentQueue") || strings.Contains(err.Error(), "QueueDoesNotExist")
}

// rewrite replaces the source ARNs of copied queues in a policy document by
// the destination's. For a RedrivePolicy the target must resolve: a target
// outside the copied set is looked up at the destination by name.
func (k *copier) rewrite(ctx context.Context, v string, redrive bool) (string, error) {
	if redrive {
		var p struct {
			Target string `json:"deadLetterTargetArn"`
		}
		if err := json.Unmarshal([]byte(v), &p); err != nil {
			return "", err
		}
		_, known := k.dstARNs[p.Target]
		if !known {
			if k.inSet(p.Target) {
				return "", fmt.Errorf("dead-letter queue %s is not at the destination yet", p.Target)
			}
			name := p.Target[strings.LastIndex(p.Target, ":")+1:]
			arn, err := k.dstARN(ctx, name)
			if err != nil {
				return "", fmt.Errorf("dead-letter queue %s is not copied (see --queues) and not at the destination: %w", name, err)
			}
			k.dstARNs[p.Target] = arn
		}
	}
	for src, dst := range k.dstARNs {
		v = strings.ReplaceAll(v, `"`+src+`"`, `"`+dst+`"`)
	}
	return v, nil
}

func (k *copier) inSet(arn string) bool {
	for _, q := range k.queues {
		if q.arn == arn {
			return true
		}
	}
	return false
}

func (k *copier) dstARN(ctx context.Context, name string) (string, error) {
	out, err := k.dst.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: &name})
	if err != nil {
		return "", err
	}
	a, err := k.dst.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil {
		return "", err
	}
	return a.Attributes["QueueArn"], nil
}

// work copies queues until none is left: it takes the queue with the fewest
// workers (a FIFO queue only when it has none, so its groups keep their
// order) and drains it.
func (k *copier) work(ctx context.Context) {
	for ctx.Err() == nil {
		q := k.pick()
		if q == nil {
			return
		}
		k.drain(ctx, q)
		k.mu.Lock()
		q.active--
		k.mu.Unlock()
	}
}

func (k *copier) pick() *queue {
	k.mu.Lock()
	defer k.mu.Unlock()
	var best *queue
	for _, q := range k.queues {
		if q.done || q.err != nil || q.dstURL == "" || (q.fifo && q.active > 0) {
			continue
		}
		if best == nil || q.active < best.active {
			best = q
		}
	}
	if best != nil {
		best.active++
	}
	return best
}

func (k *copier) finish(q *queue, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	q.done = true
	if err != nil && q.err == nil {
		q.err = err
	}
}

// drain receives from q until two receives in a row bring nothing new.
func (k *copier) drain(ctx context.Context, q *queue) {
	empty, callErrs := 0, 0
	for empty < 2 {
		k.mu.Lock()
		done := q.done
		k.mu.Unlock()
		if done || ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, copyCallTimeout)
		out, err := k.src.ReceiveMessage(cctx, &awssqs.ReceiveMessageInput{
			QueueUrl: &q.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: k.visibility,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
		})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				k.finish(q, fmt.Errorf("receive: %w", err))
			}
			return
		}
		fresh, err := k.copyBatch(ctx, q, out.Messages)
		if err != nil {
			if callErrs++; callErrs >= copyMaxCallErrors {
				k.finish(q, fmt.Errorf("giving up after %d failed calls in a row: %w", callErrs, err))
				return
			}
		} else {
			callErrs = 0
		}
		if fresh {
			empty = 0
		} else {
			empty++
		}
	}
	k.finish(q, nil)
}

// copyBatch sends one received batch to the destination and, with --move,
// deletes from the source what the destination acknowledged. fresh reports
// whether the batch held a message not seen before in this run; err is the
// last send call that failed as a whole.
func (k *copier) copyBatch(ctx context.Context, q *queue, msgs []types.Message) (fresh bool, err error) {
	var send, redelete []types.Message
	blocked := map[string]bool{} // FIFO groups with a message not copied: their later messages wait
	now := time.Now()
	q.mu.Lock()
	if q.seen == nil {
		q.seen, q.reason, q.dedup = map[string]msgState{}, map[string]string{}, map[string]time.Time{}
	}
	for _, m := range msgs {
		id, group := aws.ToString(m.MessageId), m.Attributes["MessageGroupId"]
		st, seen := q.seen[id]
		if !seen {
			fresh = true
		}
		switch {
		case st == msgUndeleted && k.move:
			redelete = append(redelete, m)
			continue
		case seen:
			// Sent already (copy leaves it at the source), on its way, or
			// failed: left at the source.
			if q.fifo && st == msgFailed {
				blocked[group] = true
			}
			continue
		case q.fifo && blocked[group]:
			q.failLocked(id, fmt.Sprintf("not sent: an earlier message of group %q was not copied (kept in order at the source)", group))
			continue
		}
		if q.fifo {
			key := k.dedupID(q, m)
			if q.groupDedup {
				key = group + "\x00" + key
			}
			if t, ok := q.dedup[key]; ok && now.Sub(t) < copyDedupWindow {
				q.failLocked(id, fmt.Sprintf("not sent: deduplication id %q was sent by this run less than 5 minutes ago; the destination would drop it (run again later)", k.dedupID(q, m)))
				blocked[group] = true
				continue
			}
			q.dedup[key] = now
			if q.added++; q.added > 10000 {
				q.added = 0
				for key, t := range q.dedup {
					if now.Sub(t) >= copyDedupWindow {
						delete(q.dedup, key)
					}
				}
			}
		}
		q.seen[id] = msgSending
		send = append(send, m)
	}
	q.mu.Unlock()

	var sent []types.Message
	for _, part := range splitBatch(send) {
		if q.fifo {
			// A group with a message not copied sends nothing more now.
			kept := part[:0:0]
			for _, m := range part {
				if g := m.Attributes["MessageGroupId"]; blocked[g] {
					q.fail(aws.ToString(m.MessageId), fmt.Sprintf("not sent: an earlier message of group %q was not copied (kept in order at the source)", g))
				} else {
					kept = append(kept, m)
				}
			}
			part = kept
		}
		if len(part) == 0 {
			continue
		}
		ok, callErr := k.send(ctx, q, part)
		if callErr != nil {
			err = callErr
		}
		sent = append(sent, ok...)
		if q.fifo {
			okIDs := map[string]bool{}
			for _, m := range ok {
				okIDs[aws.ToString(m.MessageId)] = true
			}
			for _, m := range part {
				if !okIDs[aws.ToString(m.MessageId)] {
					blocked[m.Attributes["MessageGroupId"]] = true
				}
			}
		}
	}
	if k.move {
		k.delete(ctx, q, append(redelete, sent...))
	}
	return fresh, err
}

func (q *queue) failLocked(id, why string) {
	q.seen[id] = msgFailed
	q.reason[id] = why
}

func (q *queue) fail(id, why string) {
	q.mu.Lock()
	q.failLocked(id, why)
	q.mu.Unlock()
}

// dedupID is the deduplication id a FIFO message is sent with: its own, or
// (content-based deduplication off) its source MessageId.
func (k *copier) dedupID(q *queue, m types.Message) string {
	if d := m.Attributes["MessageDeduplicationId"]; d != "" {
		return d
	}
	if q.contentDedup {
		return "md5:" + aws.ToString(m.MD5OfBody) // for the run's own check only
	}
	return aws.ToString(m.MessageId)
}

// splitBatch cuts messages into send batches of at most 10 and
// copyBatchBytes (a larger message alone), in order.
func splitBatch(ms []types.Message) [][]types.Message {
	var out [][]types.Message
	var cur []types.Message
	size := 0
	for _, m := range ms {
		n := messageSize(m)
		if len(cur) == 10 || (len(cur) > 0 && size+n > copyBatchBytes) {
			out, cur, size = append(out, cur), nil, 0
		}
		cur = append(cur, m)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// messageSize is SQS's size of a message: its body and its attributes'
// names, types and values.
func messageSize(m types.Message) int {
	n := len(aws.ToString(m.Body))
	for name, a := range m.MessageAttributes {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
		for _, s := range a.StringListValues {
			n += len(s)
		}
		for _, b := range a.BinaryListValues {
			n += len(b)
		}
	}
	return n
}

// send sends one batch and returns the messages the destination stored
// with matching MD5s; the others are marked failed.
func (k *copier) send(ctx context.Context, q *queue, part []types.Message) ([]types.Message, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(part))
	for i, m := range part {
		e := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: m.Body}
		if len(m.MessageAttributes) > 0 {
			e.MessageAttributes = m.MessageAttributes
		}
		if g := m.Attributes["MessageGroupId"]; g != "" {
			e.MessageGroupId = aws.String(g)
		}
		if q.fifo {
			if d := m.Attributes["MessageDeduplicationId"]; d != "" {
				e.MessageDeduplicationId = aws.String(d)
			} else if !q.contentDedup {
				e.MessageDeduplicationId = m.MessageId
			}
		}
		if th := m.Attributes["AWSTraceHeader"]; th != "" {
			e.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(th)}}
		}
		entries[i] = e
	}
	cctx, cancel := context.WithTimeout(ctx, copyCallTimeout)
	out, err := k.dst.SendMessageBatch(cctx, &awssqs.SendMessageBatchInput{QueueUrl: &q.dstURL, Entries: entries})
	cancel()
	if err != nil {
		for _, m := range part {
			q.fail(aws.ToString(m.MessageId), fmt.Sprintf("send: %v", err))
		}
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	done := make([]bool, len(part))
	for _, f := range out.Failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(part) {
			done[i] = true
			q.failLocked(aws.ToString(part[i].MessageId), fmt.Sprintf("destination refused it: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	var ok []types.Message
	for _, r := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(r.Id))
		if err != nil || i < 0 || i >= len(part) || done[i] {
			continue
		}
		done[i] = true
		m := part[i]
		if why := checkMD5s(m, r); why != "" {
			q.failLocked(aws.ToString(m.MessageId), why)
			continue
		}
		q.seen[aws.ToString(m.MessageId)] = msgSent
		ok = append(ok, m)
	}
	for i, d := range done {
		if !d {
			q.failLocked(aws.ToString(part[i].MessageId), "the destination's answer did not mention it")
		}
	}
	return ok, nil
}

// checkMD5s compares what the destination says it stored with the source
// message: "" when they match, else why not.
func checkMD5s(m types.Message, r types.SendMessageBatchResultEntry) string {
	body := md5.Sum([]byte(aws.ToString(m.Body)))
	if got := aws.ToString(r.MD5OfMessageBody); got != hex.EncodeToString(body[:]) {
		return fmt.Sprintf("stored at the destination with body MD5 %s, want %x (left at the source)", got, body)
	}
	want := attrsMD5(m.MessageAttributes)
	if src := aws.ToString(m.MD5OfMessageAttributes); src != "" && src != want {
		return fmt.Sprintf("received from the source with attributes MD5 %s, but they hash to %s (left at the source)", src, want)
	}
	if got := aws.ToString(r.MD5OfMessageAttributes); got != want {
		return fmt.Sprintf("stored at the destination with attributes MD5 %q, want %q (left at the source)", got, want)
	}
	if th := m.Attributes["AWSTraceHeader"]; th != "" {
		want := attrsMD5(map[string]types.MessageAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(th)}})
		if got := aws.ToString(r.MD5OfMessageSystemAttributes); got != want {
			return fmt.Sprintf("stored at the destination with system attributes MD5 %q, want %q (left at the source)", got, want)
		}
	}
	return ""
}

// attrsMD5 is MD5OfMessageAttributes as SQS computes it: "" for none.
func attrsMD5(attrs map[string]types.MessageAttributeValue) string {
	conv := make(map[string]st.AttributeValue, len(attrs))
	for n, a := range attrs {
		conv[n] = st.AttributeValue{DataType: aws.ToString(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue,
			StringListValues: a.StringListValues, BinaryListValues: a.BinaryListValues}
	}
	return message.AttributesMD5(conv)
}

// delete deletes from the source what the destination holds.
func (k *copier) delete(ctx context.Context, q *queue, ms []types.Message) {
	for len(ms) > 0 {
		part := ms[:min(10, len(ms))]
		ms = ms[len(part):]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(part))
		for i, m := range part {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		cctx, cancel := context.WithTimeout(ctx, copyCallTimeout)
		out, err := k.src.DeleteMessageBatch(cctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &q.url, Entries: entries})
		cancel()
		q.mu.Lock()
		if err != nil {
			for _, m := range part {
				q.undeletedLocked(aws.ToString(m.MessageId), fmt.Sprintf("copied, but not deleted from the source: %v", err))
			}
			q.mu.Unlock()
			continue
		}
		settled := make([]bool, len(part))
		for _, f := range out.Failed {
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(part) {
				settled[i] = true
				q.undeletedLocked(aws.ToString(part[i].MessageId), fmt.Sprintf("copied, but not deleted from the source: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
			}
		}
		for _, r := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(r.Id)); err == nil && i >= 0 && i < len(part) && !settled[i] {
				settled[i] = true
				id := aws.ToString(part[i].MessageId)
				q.seen[id] = msgDeleted
				delete(q.reason, id)
			}
		}
		for i, s := range settled {
			if !s {
				q.undeletedLocked(aws.ToString(part[i].MessageId), "copied, but the source's answer to the delete did not mention it")
			}
		}
		q.mu.Unlock()
	}
}

func (q *queue) undeletedLocked(id, why string) {
	q.seen[id] = msgUndeleted
	q.reason[id] = why
}

// figures reads the source's counts once the copy is over: what is still
// visible, in flight or delayed there was not copied (or, without --move,
// is the copied messages themselves).
func (k *copier) figures(ctx context.Context, q *queue) {
	a, err := k.src.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &q.url, AttributeNames: []types.QueueAttributeName{
		"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"}})
	if err != nil {
		q.visible, q.inFlight, q.delayed = -1, -1, -1
		return
	}
	atoi := func(n string) int { v, _ := strconv.Atoi(a.Attributes[n]); return v }
	q.visible, q.inFlight, q.delayed = atoi("ApproximateNumberOfMessages"), atoi("ApproximateNumberOfMessagesNotVisible"), atoi("ApproximateNumberOfMessagesDelayed")
}

// counts tallies a queue's messages: copied (moved with --move) and failed,
// with the reasons of the failed ones.
func (k *copier) counts(q *queue) (copied, failed int, reasons []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, st := range q.seen {
		switch {
		case st == msgDeleted || (st == msgSent && !k.move):
			copied++
		case st == msgFailed || st == msgUndeleted || st == msgSent || st == msgSending:
			failed++
			if r := q.reason[id]; r != "" {
				reasons = append(reasons, id+": "+r)
			} else {
				reasons = append(reasons, id+": not settled")
			}
		}
	}
	sort.Strings(reasons)
	if len(reasons) > 100 {
		reasons = append(reasons[:100], fmt.Sprintf("... and %d more", len(reasons)-100))
	}
	return copied, failed, reasons
}

// report sums up what happened to each queue.
func (k *copier) report() Report {
	rep := Report{Move: k.move, Queues: []QueueReport{}}
	for _, q := range k.queues {
		copied, failed, reasons := k.counts(q)
		r := QueueReport{Name: q.name, Destination: q.destination, DestinationURL: q.dstURL, Copied: copied, Failed: failed,
			Errors: reasons, Visible: q.visible, InFlight: q.inFlight, Delayed: q.delayed}
		if q.err != nil {
			r.Error = q.err.Error()
			rep.FailedQueues++
		}
		rep.Queues = append(rep.Queues, r)
		rep.Copied += copied
		rep.Failed += failed
		rep.Held += max(q.inFlight, 0) + max(q.delayed, 0)
	}
	return rep
}

// dryRun says what a copy would create and how many messages it would
// find, and changes nothing.
func (k *copier) dryRun(ctx context.Context) (Report, error) {
	rep := Report{DryRun: true, Move: k.move, Queues: []QueueReport{}}
	for _, q := range k.queues {
		r := QueueReport{Name: q.name, Visible: q.visible, InFlight: q.inFlight, Delayed: q.delayed}
		out, err := k.dst.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: &q.name})
		switch {
		case err == nil:
			r.Destination, r.DestinationURL = "exists", *out.QueueUrl
		case !isNotExist(err):
			return Report{}, fmt.Errorf("copy: %s: destination: %w", q.name, err)
		case k.create:
			r.Destination, r.Attributes, r.Tags = "would create", q.attrs, q.tags
		default:
			r.Destination = "missing (use --create)"
		}
		rep.Queues = append(rep.Queues, r)
	}
	return rep, nil
}
