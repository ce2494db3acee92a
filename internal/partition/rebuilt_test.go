package partition

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TestRebuiltFIFO: a FIFO queue's records replayed into an owner that did
// not know it is one (a salvage that lost its settings), rebuilt with its
// settings, serves each group in order, as the queue did.
func TestRebuiltFIFO(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := testHost(t, store.NewMemory(), clk)
	fifo := record.QueueMeta{ID: 1, Name: "q.fifo", FIFO: true}
	o := New(h, 1, fifo)
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	for i, g := range []string{"a", "b", "a", "a", "b"} {
		in := st.SendInput{Body: string(rune('1' + i)), GroupID: g, DedupID: string(rune('1' + i))}
		if _, _, err := o.Send(ctx, []st.SendInput{in}, false); err != nil {
			t.Fatal(err)
		}
	}
	// Replayed without the Meta record, as after its loss.
	blind := New(h, 1, record.QueueMeta{ID: 1})
	var last uint64
	if err := h.Store.ReplayPartition(1, 0, func(e store.Entry) error {
		last = max(last, e.Pos)
		if r, _ := record.Decode(e.Data, false); r != nil && r.Type == record.Meta {
			return nil
		}
		return blind.Replayed(clk.Now(), e)
	}); err != nil {
		t.Fatal(err)
	}
	n, err := blind.Rebuilt(clk.Now(), fifo)
	if err != nil {
		t.Fatal(err)
	}
	n.Recovered(clk.Now(), last)
	n.Start()
	if err := n.UpdateMeta(func(m *record.QueueMeta) error {
		m.Attrs = map[string]string{"VisibilityTimeout": "30", "MessageRetentionPeriod": "1209600"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	order := map[string]string{}
	zero := 0
	for range 5 {
		ms, err := n.Receive(ctx, st.ReceiveInput{MaxMessages: 10, WaitTimeSeconds: &zero})
		if err != nil {
			t.Fatal(err)
		}
		var hs []string
		for _, m := range ms {
			order[m.GroupID] += m.Body
			hs = append(hs, m.ReceiptHandle)
		}
		if _, err := n.Delete(ctx, hs); err != nil {
			t.Fatal(err)
		}
	}
	if order["a"] != "134" || order["b"] != "25" {
		t.Fatalf("groups served in the order %v, want a 134, b 25", order)
	}
}
