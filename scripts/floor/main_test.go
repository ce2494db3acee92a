package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAnswersTheBench: the answers have the shape the lean bench reads
// (internal/loadgen's leanBench), so that scripts/compare.sh --floor
// measures a bench that runs: a send batch's entries acknowledged, that
// many messages received in tens, a delete batch's entries acknowledged,
// and a receive of an empty queue waits and answers none.
func TestAnswersTheBench(t *testing.T) {
	s := newServer()
	call := func(ctx context.Context, op, body string, out any) {
		t.Helper()
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", op, w.Code, w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s: %v in %s", op, err, w.Body)
		}
	}
	ctx := context.Background()
	var q struct{ QueueUrl string }
	call(ctx, "CreateQueue", `{"QueueName":"bench"}`, &q)
	if q.QueueUrl == "" {
		t.Fatal("CreateQueue: no QueueUrl")
	}
	entries := func(n int, member string) string {
		var b strings.Builder
		b.WriteString(`{"QueueUrl":"` + q.QueueUrl + `","Entries":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"Id":"` + string(rune('a'+i)) + `","` + member + `":"x"}`)
		}
		return b.String() + "]}"
	}
	var sent struct{ Successful, Failed []json.RawMessage }
	call(ctx, "SendMessageBatch", entries(10, "MessageBody"), &sent)
	call(ctx, "SendMessageBatch", entries(3, "MessageBody"), &sent)
	if len(sent.Successful) != 3 || len(sent.Failed) != 0 {
		t.Fatalf("SendMessageBatch of 3: %d successful, %d failed", len(sent.Successful), len(sent.Failed))
	}
	var got []int
	for range 2 {
		var rcv struct {
			Messages []struct{ Body, ReceiptHandle string }
		}
		call(ctx, "ReceiveMessage", `{"MaxNumberOfMessages":10}`, &rcv)
		got = append(got, len(rcv.Messages))
		for _, m := range rcv.Messages {
			if len(m.Body) != 1024 || m.ReceiptHandle == "" {
				t.Fatalf("a received message of %d bytes, handle %q", len(m.Body), m.ReceiptHandle)
			}
		}
	}
	if got[0] != 10 || got[1] != 3 {
		t.Fatalf("received %v messages, want [10 3]", got)
	}
	var deleted struct{ Successful, Failed []json.RawMessage }
	call(ctx, "DeleteMessageBatch", entries(3, "ReceiptHandle"), &deleted)
	if len(deleted.Successful) != 3 || len(deleted.Failed) != 0 {
		t.Fatalf("DeleteMessageBatch of 3: %d successful, %d failed", len(deleted.Successful), len(deleted.Failed))
	}
	// An empty queue: the receive waits (here until its request ends).
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var none struct{ Messages []json.RawMessage }
	call(short, "ReceiveMessage", `{"MaxNumberOfMessages":10}`, &none)
	if len(none.Messages) != 0 || short.Err() == nil {
		t.Fatalf("a receive of an empty queue answered %d messages before its request ended", len(none.Messages))
	}
}
