package loadgen

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sluicemq/sluice/internal/peers"
)

// benchMsg is a received message as the scenarios need it.
type benchMsg struct{ body, handle string }

// sdkSQS drives the bench through the AWS SDK (signed requests; heavy on
// the client's CPU).
type sdkSQS struct{ c *awssqs.Client }

func (s sdkSQS) CreateQueue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	out, err := s.c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", err
	}
	return *out.QueueUrl, nil
}

func (s sdkSQS) DeleteQueue(ctx context.Context, url string) error {
	_, err := s.c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	return err
}

func (s sdkSQS) SendBatch(ctx context.Context, url string, bodies, groups []string) (int, int, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i := range bodies {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(bodies[i])}
		if groups != nil {
			entries[i].MessageGroupId = aws.String(groups[i])
		}
	}
	out, err := s.c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		return 0, 0, err
	}
	return len(out.Successful), len(out.Failed), nil
}

func (s sdkSQS) Receive(ctx context.Context, url string, max int) ([]peers.SQSMessage, error) {
	out, err := s.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: int32(max), WaitTimeSeconds: 1})
	if err != nil {
		return nil, err
	}
	ms := make([]peers.SQSMessage, len(out.Messages))
	for i, m := range out.Messages {
		ms[i] = peers.SQSMessage{Body: *m.Body, Handle: *m.ReceiptHandle}
	}
	return ms, nil
}

func (s sdkSQS) DeleteBatch(ctx context.Context, url string, handles []string) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(handles))
	for i, h := range handles {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
	}
	out, err := s.c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("%d deletes failed", len(out.Failed))
	}
	return err
}

// leanSQS is leanBench for any queue, as the Sluice peer wants it.
type leanSQS struct{ p poster }

func (l leanSQS) CreateQueue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	in := struct {
		QueueName  string
		Attributes map[string]string
	}{name, attrs}
	var out struct {
		QueueURL string `json:"QueueUrl"`
	}
	if err := (&leanBench{p: l.p}).call(ctx, "CreateQueue", in, &out); err != nil {
		return "", err
	}
	return out.QueueURL, nil
}

func (l leanSQS) DeleteQueue(ctx context.Context, url string) error {
	in := struct {
		QueueURL string `json:"QueueUrl"`
	}{url}
	var out struct{}
	return (&leanBench{p: l.p}).call(ctx, "DeleteQueue", in, &out)
}

func (l leanSQS) SendBatch(ctx context.Context, url string, bodies, groups []string) (int, int, error) {
	return (&leanBench{p: l.p, url: url}).sendBatch(ctx, bodies, groups)
}

func (l leanSQS) Receive(ctx context.Context, url string, max int) ([]peers.SQSMessage, error) {
	ms, err := (&leanBench{p: l.p, url: url}).receive(ctx, max)
	out := make([]peers.SQSMessage, len(ms))
	for i, m := range ms {
		out[i] = peers.SQSMessage{Body: m.body, Handle: m.handle}
	}
	return out, err
}

func (l leanSQS) DeleteBatch(ctx context.Context, url string, handles []string) error {
	return (&leanBench{p: l.p, url: url}).deleteBatch(ctx, handles)
}

// leanBench speaks AWS JSON 1.0 directly (encoding/json/v2's semantics:
// member names match exactly, as the server writes them), over a poster.
type leanBench struct {
	p   poster
	url string
}

func (l *leanBench) call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	status, raw, err := l.p.post(ctx, op, body)
	if err != nil {
		return err
	}
	if status != 200 {
		return fmt.Errorf("%s: HTTP %d: %s", op, status, raw)
	}
	return json.Unmarshal(raw, out)
}

func (l *leanBench) sendBatch(ctx context.Context, bodies, groups []string) (int, int, error) {
	type entry struct {
		ID             string `json:"Id"`
		MessageBody    string
		MessageGroupID string `json:"MessageGroupId,omitempty"`
	}
	in := struct {
		QueueURL string `json:"QueueUrl"`
		Entries  []entry
	}{QueueURL: l.url, Entries: make([]entry, len(bodies))}
	for i := range bodies {
		in.Entries[i] = entry{ID: strconv.Itoa(i), MessageBody: bodies[i]}
		if groups != nil {
			in.Entries[i].MessageGroupID = groups[i]
		}
	}
	var out struct{ Successful, Failed []jsontext.Value }
	if err := l.call(ctx, "SendMessageBatch", in, &out); err != nil {
		return 0, 0, err
	}
	return len(out.Successful), len(out.Failed), nil
}

func (l *leanBench) receive(ctx context.Context, max int) ([]benchMsg, error) {
	in := struct {
		QueueURL            string `json:"QueueUrl"`
		MaxNumberOfMessages int
		WaitTimeSeconds     int
	}{l.url, max, 1}
	var out struct {
		Messages []struct{ Body, ReceiptHandle string }
	}
	if err := l.call(ctx, "ReceiveMessage", in, &out); err != nil {
		return nil, err
	}
	ms := make([]benchMsg, len(out.Messages))
	for i, m := range out.Messages {
		ms[i] = benchMsg{body: m.Body, handle: m.ReceiptHandle}
	}
	return ms, nil
}

func (l *leanBench) deleteBatch(ctx context.Context, handles []string) error {
	type entry struct {
		ID            string `json:"Id"`
		ReceiptHandle string
	}
	in := struct {
		QueueURL string `json:"QueueUrl"`
		Entries  []entry
	}{QueueURL: l.url, Entries: make([]entry, len(handles))}
	for i, h := range handles {
		in.Entries[i] = entry{strconv.Itoa(i), h}
	}
	var out struct{ Failed []jsontext.Value }
	if err := l.call(ctx, "DeleteMessageBatch", in, &out); err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("%d deletes failed", len(out.Failed))
	}
	return nil
}
