package partition

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// sendTen sends ten messages in one batch.
func sendTen(t *testing.T, o *Owner) {
	t.Helper()
	in := make([]st.SendInput, 10)
	for i := range in {
		in[i] = st.SendInput{Body: "m" + strconv.Itoa(i)}
	}
	if _, errs, err := o.Send(context.Background(), in, true); err != nil {
		t.Fatal(err)
	} else {
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func receiveTen(t *testing.T, o *Owner) {
	t.Helper()
	msgs, err := o.Receive(context.Background(), st.ReceiveInput{MaxMessages: 10})
	if err != nil || len(msgs) != 10 {
		t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
}

// While consumers take messages off a backlog of at least the floor,
// sends beyond its worth of credit wait for consumers to take as many, at
// most the hold; without consumers, or with FlowControl=false, nothing
// waits. The held send is still stored, and counted.
func TestFlowControlHoldsSendsBehindConsumers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		h := testHost(t, store.NewMemory(), clk)
		h.FlowControl = true
		o := New(h, 1, record.QueueMeta{ID: 1, Name: "q"})
		if err := o.Create(); err != nil {
			t.Fatal(err)
		}
		// No consumer: 2,000 messages go at once.
		for range 2 * flowFloor / 10 {
			sendTen(t, o)
		}
		// A consumer takes ten: a floor's worth of sends goes on credit.
		receiveTen(t, o)
		for range flowFloor / 10 {
			sendTen(t, o)
		}
		// The next waits for the consumer.
		done := make(chan struct{})
		go func() { defer close(done); sendTen(t, o) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a send past the credit went without waiting")
		default:
		}
		receiveTen(t, o)
		<-done
		if got := o.ctr.SendsHeld.Load(); got != 1 {
			t.Fatalf("sends held %d, want 1", got)
		}
		// Held again; no consumer comes: the hold runs out and it goes.
		done = make(chan struct{})
		go func() { defer close(done); sendTen(t, o) }()
		synctest.Wait()
		clk.Advance(flowHold)
		<-done
		if held, out := o.ctr.SendsHeld.Load(), o.ctr.SendsHeldOut.Load(); held != 2 || out != 1 {
			t.Fatalf("held %d (want 2), of which timed out %d (want 1)", held, out)
		}
		// Turned off: nothing waits.
		if err := o.UpdateMeta(func(m *record.QueueMeta) error { m.Attrs["FlowControl"] = "false"; return nil }); err != nil {
			t.Fatal(err)
		}
		receiveTen(t, o)
		for range 2 * flowFloor / 10 {
			sendTen(t, o)
		}
		if got := o.ctr.SendsHeld.Load(); got != 2 {
			t.Fatalf("sends held %d with FlowControl=false, want still 2", got)
		}
		// Every message sent is there: 2,000 + 1,000 + 10 + 10 + 2,000,
		// less the 30 received.
		o.mu.Lock()
		ready := o.q.Ready()
		o.mu.Unlock()
		if want := 5020 - 30; ready != want {
			t.Fatalf("%d messages ready, want %d", ready, want)
		}
	})
}
