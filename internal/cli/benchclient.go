package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// benchMsg is a received message as the bench needs it.
type benchMsg struct{ body, handle string }

// benchAPI is the little of SQS the bench uses. Two implementations: the
// AWS SDK (signs requests; heavy on the client's CPU), and a lean one that
// speaks the same JSON protocol over its own keep-alive connections (unsigned; so that on a
// small machine the load generator does not starve the server).
type benchAPI interface {
	sendBatch(ctx context.Context, bodies, groups []string) (sent int, failed int, err error)
	receive(ctx context.Context, max int) ([]benchMsg, error)
	deleteBatch(ctx context.Context, handles []string) error
}

type sdkBench struct {
	c   *awssqs.Client
	url *string
}

func (s *sdkBench) sendBatch(ctx context.Context, bodies, groups []string) (int, int, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i := range bodies {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(bodies[i])}
		if groups != nil {
			entries[i].MessageGroupId = aws.String(groups[i])
		}
	}
	out, err := s.c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: s.url, Entries: entries})
	if err != nil {
		return 0, 0, err
	}
	return len(out.Successful), len(out.Failed), nil
}

func (s *sdkBench) receive(ctx context.Context, max int) ([]benchMsg, error) {
	out, err := s.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: s.url, MaxNumberOfMessages: int32(max), WaitTimeSeconds: 1})
	if err != nil {
		return nil, err
	}
	ms := make([]benchMsg, len(out.Messages))
	for i, m := range out.Messages {
		ms[i] = benchMsg{body: *m.Body, handle: *m.ReceiptHandle}
	}
	return ms, nil
}

func (s *sdkBench) deleteBatch(ctx context.Context, handles []string) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(handles))
	for i, h := range handles {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
	}
	_, err := s.c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: s.url, Entries: entries})
	return err
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
