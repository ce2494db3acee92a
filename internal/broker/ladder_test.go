package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TestRetryLadder: a poison message climbs the ladder with the configured
// delays (visibility timeouts and RetryMessage both count), lands in the
// dead-letter queue with its reason, and redrive brings it back to the
// bottom of the ladder. The ladder state survives a reopen.
func TestRetryLadder(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
		if _, err := b.CreateQueue(ctx, "work", map[string]string{"RetryDelays": "1s,10s,1m", "VisibilityTimeout": "5",
			"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":100}`, dlq.ARN)}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Send(ctx, "work", st.SendInput{Body: "poison"}); err != nil {
			t.Fatal(err)
		}
		recv := func() []st.Message {
			t.Helper()
			ms, err := b.Receive(ctx, "work", st.ReceiveInput{})
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
		m := recv()[0]
		clk.Advance(5 * time.Second) // visibility expires: a failure, level 1, 1 s
		if ms := recv(); len(ms) != 0 {
			t.Fatal("visible before its retry delay")
		}
		clk.Advance(time.Second)
		ms := recv()
		if len(ms) != 1 || ms[0].RetryLevel != 1 || ms[0].FailReason != "VisibilityTimeout" || ms[0].Failures != 1 {
			t.Fatalf("after the first failure: %+v", ms)
		}
		if err := b.RetryMessage(ctx, "work", m.ReceiptHandle, nil, "stale"); code(err) != st.CodeReceiptHandleIsInvalid {
			t.Fatalf("retry with a stale handle: %v", err)
		}
		if err := b.RetryMessage(ctx, "work", ms[0].ReceiptHandle, nil, "boom: upstream 503"); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(t.Name(), "/disk") {
			b.Close()
			b = open()
		}
		clk.Advance(9 * time.Second)
		if ms := recv(); len(ms) != 0 {
			t.Fatal("visible before its level-2 delay")
		}
		clk.Advance(time.Second)
		ms = recv()
		if len(ms) != 1 || ms[0].RetryLevel != 2 || ms[0].FailReason != "Retry" || ms[0].LastError != "boom: upstream 503" {
			t.Fatalf("at level 2: %+v", ms)
		}
		// An explicit delay overrides the level's.
		if err := b.RetryMessage(ctx, "work", ms[0].ReceiptHandle, ptr(2), "again"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		ms = recv()
		if len(ms) != 1 || ms[0].RetryLevel != 3 {
			t.Fatalf("at level 3: %+v", ms)
		}
		// Past the last level: the dead-letter queue, with the reason.
		if err := b.RetryMessage(ctx, "work", ms[0].ReceiptHandle, nil, "last"); err != nil {
			t.Fatal(err)
		}
		peek, _, err := b.Peek("dlq", broker.PeekFilter{Reason: "Retry"})
		if err != nil || len(peek) != 1 || peek[0].LastError != "last" || peek[0].Body != "poison" || !strings.HasSuffix(peek[0].Source, ":work") {
			t.Fatalf("dead-letter queue: %+v %v", peek, err)
		}
		if n, err := b.RedriveFiltered(ctx, "dlq", broker.PeekFilter{}, ""); err != nil || n != 1 {
			t.Fatalf("redrive: %d %v", n, err)
		}
		ms = recv()
		if len(ms) != 1 || ms[0].RetryLevel != 0 || ms[0].ReceiveCount != 1 {
			t.Fatalf("after redrive: %+v", ms)
		}
	})
}

// TestRejectAndDefer: a rejected message goes straight to the dead-letter
// queue; a deferred one comes back later without counting as a receive.
func TestRejectAndDefer(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
		b.CreateQueue(ctx, "work", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":2}`, dlq.ARN)}, nil)
		b.CreateQueue(ctx, "nodlq", nil, nil)
		b.Send(ctx, "work", st.SendInput{Body: "bad"})
		b.Send(ctx, "work", st.SendInput{Body: "later"})
		ms, _ := b.Receive(ctx, "work", st.ReceiveInput{MaxMessages: 2})
		if len(ms) != 2 {
			t.Fatalf("received %d", len(ms))
		}
		if err := b.RejectMessage(ctx, "work", ms[0].ReceiptHandle, "schema mismatch"); err != nil {
			t.Fatal(err)
		}
		if err := b.RejectMessage(ctx, "work", ms[0].ReceiptHandle, "twice"); code(err) != st.CodeReceiptHandleIsInvalid {
			t.Fatalf("reject again: %v", err)
		}
		peek, _, _ := b.Peek("dlq", broker.PeekFilter{})
		if len(peek) != 1 || peek[0].Reason != "Reject" || peek[0].LastError != "schema mismatch" {
			t.Fatalf("dead-letter queue: %+v", peek)
		}
		// Deferred three times: receives do not pile up toward maxReceiveCount 2.
		h := ms[1].ReceiptHandle
		for i := 0; i < 3; i++ {
			if err := b.DeferMessage(ctx, "work", h, 30); err != nil {
				t.Fatal(err)
			}
			if again, _ := b.Receive(ctx, "work", st.ReceiveInput{}); len(again) != 0 {
				t.Fatal("a deferred message came back early")
			}
			clk.Advance(30 * time.Second)
			again, _ := b.Receive(ctx, "work", st.ReceiveInput{})
			if len(again) != 1 || again[0].ReceiveCount != 1 {
				t.Fatalf("deferral %d: %+v", i, again)
			}
			h = again[0].ReceiptHandle
		}
		if err := b.DeferMessage(ctx, "work", h, 99999); code(err) != st.CodeInvalidParameterValue {
			t.Fatalf("defer too long: %v", err)
		}
		// Without a dead-letter queue a rejected message is dropped.
		b.Send(ctx, "nodlq", st.SendInput{Body: "x"})
		ms, _ = b.Receive(ctx, "nodlq", st.ReceiveInput{})
		if err := b.RejectMessage(ctx, "nodlq", ms[0].ReceiptHandle, ""); err != nil {
			t.Fatal(err)
		}
		a, _ := b.GetQueueAttributes("nodlq", []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"})
		if a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
			t.Fatalf("nodlq after reject: %v", a)
		}
	})
}

// TestPacedFilteredRedrive: a redrive of one tenant's dead letters runs as
// a move task at its rate, with progress, and leaves the others.
func TestPacedFilteredRedrive(t *testing.T) {
	storesInBubble(t, func(t *testing.T, b *broker.Broker) {
		dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
		b.CreateQueue(ctx, "src", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlq.ARN)}, nil)
		for i := 0; i < 3; i++ {
			b.Send(ctx, "src", st.SendInput{Body: "a", GroupID: "a"})
			b.Send(ctx, "src", st.SendInput{Body: "b", GroupID: "b"})
		}
		for i := 0; i < 2; i++ {
			b.Receive(ctx, "src", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptr(0)})
		}
		h, err := b.StartRedrive(ctx, "dlq", broker.PeekFilter{Tenant: "a"}, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.StartRedrive(ctx, "dlq", broker.PeekFilter{Tenant: "b"}, "", 1); code(err) != st.CodeUnsupportedOperation {
			t.Fatalf("a second task: %v", err)
		}
		task := func() broker.MoveTask {
			ts, err := b.ListMoveTasks(ctx, dlq.ARN, 1)
			if err != nil || len(ts) != 1 {
				t.Fatalf("tasks %+v %v", ts, err)
			}
			return ts[0]
		}
		if tk := task(); tk.ApproximateNumberOfMessagesToMove != 3 || tk.TaskHandle != h {
			t.Fatalf("task %+v", tk)
		}
		// At one message a second, three take three seconds of the
		// bubble's time.
		start := time.Now()
		tk, err := b.WaitMoveTask(ctx, h)
		if err != nil || tk.Status != "COMPLETED" || tk.ApproximateNumberOfMessagesMoved != 3 {
			t.Fatalf("task %+v %v", tk, err)
		}
		if took := time.Since(start); took != 3*time.Second {
			t.Fatalf("three messages at one a second took %v", took)
		}
		if tk := task(); tk.Status != "COMPLETED" {
			t.Fatalf("listed %+v", tk)
		}
		if _, err := b.WaitMoveTask(ctx, "no such task"); code(err) != st.CodeResourceNotFound {
			t.Fatalf("waiting for an unknown task: %v", err)
		}
		h2, err := b.StartRedrive(ctx, "dlq", broker.PeekFilter{Tenant: "b"}, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		if _, err := b.WaitMoveTask(wctx, h2); err != context.DeadlineExceeded {
			t.Fatalf("a wait whose context ends: %v", err)
		}
		if moved, err := b.CancelMoveTask(ctx, h2); err != nil || moved != 2 {
			t.Fatalf("cancel: %d %v", moved, err)
		}
		if tk, err := b.WaitMoveTask(ctx, h2); err != nil || tk.Status != "CANCELLED" {
			t.Fatalf("the cancelled task: %+v %v", tk, err)
		}
		peek, _, _ := b.Peek("dlq", broker.PeekFilter{})
		if len(peek) != 1 || peek[0].Tenant != "b" {
			t.Fatalf("left in the DLQ: %+v", peek)
		}
	})
}

// TestRetryLadderFIFO: on a FIFO queue a retried message keeps its place:
// its group waits for it (strict order), other groups go on.
func TestRetryLadderFIFO(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		if _, err := b.CreateQueue(ctx, "f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true", "RetryDelays": "5s"}, nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct{ body, group string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
			if _, err := b.Send(ctx, "f.fifo", st.SendInput{Body: m.body, GroupID: m.group}); err != nil {
				t.Fatal(err)
			}
		}
		ms, _ := b.Receive(ctx, "f.fifo", st.ReceiveInput{MaxMessages: 1})
		if len(ms) != 1 || ms[0].Body != "a1" {
			t.Fatalf("first: %+v", ms)
		}
		if err := b.RetryMessage(ctx, "f.fifo", ms[0].ReceiptHandle, nil, "later"); err != nil {
			t.Fatal(err)
		}
		ms, _ = b.Receive(ctx, "f.fifo", st.ReceiveInput{MaxMessages: 10})
		if got := bodies(ms); len(got) != 1 || got[0] != "b1" {
			t.Fatalf("while a1 waits its retry delay: %v (a2 must not overtake a1)", got)
		}
		clk.Advance(5 * time.Second)
		ms, _ = b.Receive(ctx, "f.fifo", st.ReceiveInput{MaxMessages: 10})
		if got := bodies(ms); len(got) != 2 || got[0] != "a1" || got[1] != "a2" || ms[0].RetryLevel != 1 {
			t.Fatalf("after the delay: %v %+v", got, ms)
		}
	})
}
