package broker_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

var ctx = context.Background()

func ptr[T any](v T) *T { return &v }

// stores runs f against the memory store and the disk store.
func stores(t *testing.T, f func(t *testing.T, open func() *broker.Broker, clk *clock.Fake)) {
	for _, kind := range []string{"memory", "disk"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var open []*broker.Broker
			t.Cleanup(func() {
				for _, b := range open {
					b.Close()
				}
			})
			f(t, func() *broker.Broker {
				b, err := broker.Open(broker.Config{Dir: dir, InMemory: kind == "memory", Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, b)
				return b
			}, clk)
		})
	}
}

// storesInBubble is stores with each run inside a testing/synctest bubble:
// time is the bubble's (it moves only when every goroutine is blocked),
// and synctest.Wait tells when the broker has nothing left to do.
func storesInBubble(t *testing.T, f func(t *testing.T, b *broker.Broker)) {
	for _, kind := range []string{"memory", "disk"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			synctest.Test(t, func(t *testing.T) {
				b, err := broker.Open(broker.Config{Dir: dir, InMemory: kind == "memory"})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				f(t, b)
			})
		})
	}
}

func code(err error) st.Code {
	if err == nil {
		return ""
	}
	return st.CodeOf(err)
}

func TestSendReceiveDelete(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		if _, err := b.CreateQueue(ctx, "q1", map[string]string{"VisibilityTimeout": "10"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateQueue(ctx, "q1", map[string]string{"VisibilityTimeout": "10"}, nil); err != nil {
			t.Fatalf("idempotent create: %v", err)
		}
		if _, err := b.CreateQueue(ctx, "q1", map[string]string{"VisibilityTimeout": "11"}, nil); code(err) != st.CodeQueueNameExists {
			t.Fatalf("create with other attrs: %v", err)
		}
		for i := 0; i < 3; i++ {
			if _, err := b.Send(ctx, "q1", st.SendInput{Body: fmt.Sprint("m", i)}); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := b.Receive(ctx, "q1", st.ReceiveInput{MaxMessages: 10})
		if err != nil || len(msgs) != 3 {
			t.Fatalf("receive: %v %d", err, len(msgs))
		}
		for _, m := range msgs {
			if sum := md5.Sum([]byte(m.Body)); m.MD5OfBody != hex.EncodeToString(sum[:]) {
				t.Fatalf("MD5OfBody %q of %q", m.MD5OfBody, m.Body)
			}
		}
		again, _ := b.Receive(ctx, "q1", st.ReceiveInput{MaxMessages: 10})
		if len(again) != 0 {
			t.Fatalf("in-flight messages delivered again: %d", len(again))
		}
		if err := b.Delete(ctx, "q1", msgs[0].ReceiptHandle); err != nil {
			t.Fatal(err)
		}
		clk.Advance(11 * time.Second)
		back, _ := b.Receive(ctx, "q1", st.ReceiveInput{MaxMessages: 10})
		if len(back) != 2 {
			t.Fatalf("after visibility timeout: got %d, want 2", len(back))
		}
		for _, m := range back {
			if m.ReceiveCount != 2 {
				t.Fatalf("receive count %d, want 2", m.ReceiveCount)
			}
		}
		// Fencing: the first delivery's handle can no longer change visibility.
		if err := b.ChangeVisibility(ctx, "q1", msgs[1].ReceiptHandle, 0); err == nil {
			t.Fatal("stale handle changed visibility")
		}
		if err := b.Delete(ctx, "q1", "garbage"); code(err) != st.CodeReceiptHandleIsInvalid {
			t.Fatalf("garbage handle: %v", err)
		}
	})
}

func TestDurableAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := broker.Open(broker.Config{Dir: dir, Clock: clk, CheckpointBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b.CreateQueue(ctx, "dlq", nil, map[string]string{"team": "a"})
	b.CreateQueue(ctx, "q", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"2"}`}, nil)
	for i := 0; i < 200; i++ {
		if _, err := b.Send(ctx, "q", st.SendInput{Body: fmt.Sprint("body-", i), Attributes: map[string]st.AttributeValue{"n": {DataType: "Number", StringValue: ptr(fmt.Sprint(i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptr(100)})
	for _, m := range got[:5] {
		if err := b.Delete(ctx, "q", m.ReceiptHandle); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	b, err = broker.Open(broker.Config{Dir: dir, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	attrs, err := b.GetQueueAttributes("q", []string{"All"})
	if err != nil {
		t.Fatal(err)
	}
	if attrs["ApproximateNumberOfMessages"] != "190" || attrs["ApproximateNumberOfMessagesNotVisible"] != "5" {
		t.Fatalf("after reopen: %v", attrs)
	}
	if tags, _ := b.ListQueueTags("dlq"); tags["team"] != "a" {
		t.Fatalf("tags lost: %v", tags)
	}
	clk.Advance(101 * time.Second)
	seen := 0
	for {
		ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			seen++
			if m.Body == got[0].Body && m.ReceiveCount != 2 {
				t.Fatalf("receive count went back: %d", m.ReceiveCount)
			}
			b.Delete(ctx, "q", m.ReceiptHandle)
		}
	}
	if seen != 195 {
		t.Fatalf("saw %d messages after reopen, want 195", seen)
	}
}

func TestDeadLetterAfterMaxReceives(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		b.CreateQueue(ctx, "dlq", nil, nil)
		if _, err := b.CreateQueue(ctx, "src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":2}`}, nil); err != nil {
			t.Fatal(err)
		}
		b.Send(ctx, "src", st.SendInput{Body: "poison"})
		for i := 0; i < 2; i++ {
			ms, _ := b.Receive(ctx, "src", st.ReceiveInput{VisibilityTimeout: ptr(0)})
			if len(ms) != 1 {
				t.Fatalf("receive %d: %d messages", i, len(ms))
			}
		}
		if ms, _ := b.Receive(ctx, "src", st.ReceiveInput{}); len(ms) != 0 {
			t.Fatal("message not moved after maxReceiveCount")
		}
		ms, _ := b.Receive(ctx, "dlq", st.ReceiveInput{VisibilityTimeout: ptr(0)})
		if len(ms) != 1 || ms[0].DeadLetterSourceArn != "arn:aws:sqs:us-east-1:000000000000:src" || ms[0].ReceiveCount != 3 {
			t.Fatalf("dlq message: %+v", ms)
		}
		srcs, _, _ := b.ListDeadLetterSourceQueues("dlq", 0, "")
		if len(srcs) != 1 || srcs[0] != "src" {
			t.Fatalf("sources: %v", srcs)
		}
	})
}

func TestFIFOOrderAndGroupLock(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		if _, err := b.CreateQueue(ctx, "f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}, nil); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			b.Send(ctx, "f.fifo", st.SendInput{Body: fmt.Sprint("a", i), GroupID: "A"})
		}
		b.Send(ctx, "f.fifo", st.SendInput{Body: "b0", GroupID: "B"})
		r1, _ := b.Send(ctx, "f.fifo", st.SendInput{Body: "dup", GroupID: "B"})
		r2, _ := b.Send(ctx, "f.fifo", st.SendInput{Body: "dup", GroupID: "B"})
		if r1.MessageID != r2.MessageID {
			t.Fatal("duplicate within the window was enqueued")
		}
		ms, _ := b.Receive(ctx, "f.fifo", st.ReceiveInput{MaxMessages: 2})
		if len(ms) != 2 || ms[0].Body != "a0" || ms[1].Body != "a1" {
			t.Fatalf("first receive: %v", bodies(ms))
		}
		ms2, _ := b.Receive(ctx, "f.fifo", st.ReceiveInput{MaxMessages: 10})
		if len(ms2) != 2 || ms2[0].Body != "b0" {
			t.Fatalf("group A locked, expected group B: %v", bodies(ms2))
		}
		if _, err := b.Send(ctx, "f.fifo", st.SendInput{Body: "x"}); code(err) != st.CodeMissingParameter {
			t.Fatalf("missing group id: %v", err)
		}
	})
}

func bodies(ms []st.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Body)
	}
	return out
}

// TestLongPollWakesOnSend: a long poll on an empty queue waits (in a
// synctest bubble: it is seen blocked, not guessed blocked after a pause)
// until a send wakes it, long before its 20 s are up.
func TestLongPollWakesOnSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := broker.Open(broker.Config{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		b.CreateQueue(ctx, "q", nil, nil)
		done := make(chan []st.Message, 1)
		start := time.Now()
		go func() {
			ms, _ := b.Receive(ctx, "q", st.ReceiveInput{WaitTimeSeconds: ptr(20)})
			done <- ms
		}()
		synctest.Wait() // the poll is blocked
		select {
		case ms := <-done:
			t.Fatalf("long poll on an empty queue returned at once with %d messages", len(ms))
		default:
		}
		b.Send(ctx, "q", st.SendInput{Body: "hi"})
		if ms := <-done; len(ms) != 1 {
			t.Fatalf("long poll returned %d messages", len(ms))
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the poll returned after %s of fake time, not when the send woke it", waited)
		}
	})
}

func TestRedriveAllowPolicy(t *testing.T) {
	b, _ := broker.Open(broker.Config{InMemory: true})
	defer b.Close()
	b.CreateQueue(ctx, "dlq", map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:000000000000:ok"]}`}, nil)
	rp := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}`}
	if _, err := b.CreateQueue(ctx, "ok", rp, nil); err != nil {
		t.Fatalf("allowed source refused: %v", err)
	}
	if _, err := b.CreateQueue(ctx, "other", rp, nil); code(err) != st.CodeInvalidAttributeValue {
		t.Fatalf("source not in the allow list accepted: %v", err)
	}
}

func TestReceiveRequestAttemptID(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		b.CreateQueue(ctx, "a.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}, nil)
		b.Send(ctx, "a.fifo", st.SendInput{Body: "one", GroupID: "g"})
		b.Send(ctx, "a.fifo", st.SendInput{Body: "two", GroupID: "g"})
		first, _ := b.Receive(ctx, "a.fifo", st.ReceiveInput{MaxMessages: 10, AttemptID: "try-1"})
		if len(first) != 2 {
			t.Fatalf("first attempt: %d", len(first))
		}
		clk.Advance(10 * time.Second)
		retry, err := b.Receive(ctx, "a.fifo", st.ReceiveInput{MaxMessages: 10, AttemptID: "try-1"})
		if err != nil || len(retry) != 2 || retry[0].ReceiptHandle != first[0].ReceiptHandle || retry[1].Body != "two" {
			t.Fatalf("retried attempt: %v %+v", err, retry)
		}
		// Another attempt id gets nothing: the group is in flight.
		if other, _ := b.Receive(ctx, "a.fifo", st.ReceiveInput{MaxMessages: 10, AttemptID: "try-2"}); len(other) != 0 {
			t.Fatalf("other attempt: %d", len(other))
		}
		// Once a message of the attempt is deleted, the attempt is not replayed.
		b.Delete(ctx, "a.fifo", first[0].ReceiptHandle)
		if again, _ := b.Receive(ctx, "a.fifo", st.ReceiveInput{MaxMessages: 10, AttemptID: "try-1"}); len(again) != 0 {
			t.Fatalf("stale attempt replayed: %d", len(again))
		}
		if _, err := b.Receive(ctx, "a.fifo", st.ReceiveInput{AttemptID: "bad id"}); code(err) != st.CodeInvalidParameterValue {
			t.Fatalf("bad attempt id: %v", err)
		}
	})
}

func TestOverLimitInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 120,000 messages")
	}
	b, _ := broker.Open(broker.Config{InMemory: true})
	defer b.Close()
	b.CreateQueue(ctx, "busy", map[string]string{"VisibilityTimeout": "3600"}, nil)
	batch := make([]st.SendInput, 10)
	for i := range batch {
		batch[i] = st.SendInput{Body: "x"}
	}
	for i := 0; i < 12001; i++ {
		if _, _, err := b.SendBatch(ctx, "busy", batch); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < 120000 {
		ms, err := b.Receive(ctx, "busy", st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatalf("after %d in flight: %v", got, err)
		}
		got += len(ms)
	}
	if _, err := b.Receive(ctx, "busy", st.ReceiveInput{MaxMessages: 10}); code(err) != st.CodeOverLimit {
		t.Fatalf("receive past 120,000 in flight: %v", err)
	}
}
