package broker_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

var memoryMessages = flag.Int("memory.messages", 20000, "messages sent and deleted in TestInMemoryReleasesBodies (the issue's run: 1000000)")

// TestInMemoryReleasesBodies: an InMemory broker lets go of every body
// once its message is deleted. Its heap after many messages passed through
// is what it was empty (it once kept every body ever sent: 592 MiB per
// 500,000 messages of 1 KiB).
func TestInMemoryReleasesBodies(t *testing.T) {
	b, err := broker.Open(broker.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("m", 1024)
	round := func(n int) {
		for sent := 0; sent < n; {
			var in []st.SendInput
			for range 10 {
				in = append(in, st.SendInput{Body: body})
			}
			if _, _, err := b.SendBatch(ctx, "q", in); err != nil {
				t.Fatal(err)
			}
			sent += len(in)
			ms, err := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			var hs []string
			for _, m := range ms {
				hs = append(hs, m.ReceiptHandle)
			}
			if _, err := b.DeleteBatch(ctx, "q", hs); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Snapshot(ctx); err != nil { // what the maintenance does each second
			t.Fatal(err)
		}
	}
	round(1000) // warm: the queue's structures at their working size
	before := heapInUse()
	round(*memoryMessages)
	after := heapInUse()
	s := b.StoreStats()
	t.Logf("%d messages of 1 KiB sent and deleted: heap %.0f KiB before, %.0f KiB after; %d bodies kept, %d bad releases",
		*memoryMessages, float64(before)/(1<<10), float64(after)/(1<<10), s.LiveMessages, s.BadReleases)
	if s.LiveMessages != 0 || s.BadReleases != 0 {
		t.Fatalf("after every message was deleted the store keeps %d bodies (%d bad releases)", s.LiveMessages, s.BadReleases)
	}
	// Bodies alone would be 1 KiB a message.
	if grew := int64(after) - int64(before); grew > int64(*memoryMessages)*1024/4 {
		t.Fatalf("heap grew by %d bytes over %d messages sent and deleted", grew, *memoryMessages)
	}
}
