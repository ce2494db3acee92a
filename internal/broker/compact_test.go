package broker_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

func segments(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".seg") {
			n++
		}
	}
	return n
}

// TestDiskFollowsLiveData: after many messages pass through while one in
// ten stays, old segments are compacted and unlinked, and the survivors
// read back intact, also after a reopen.
func TestDiskFollowsLiveData(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := broker.Config{Dir: dir, Clock: clk, SegmentBytes: 64 << 10, CheckpointBytes: 128 << 10}
	b, err := broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.CreateQueue(ctx, "q", map[string]string{"VisibilityTimeout": "3600"}, nil)
	body := strings.Repeat("b", 900)
	kept := map[string]bool{}
	for i := 0; i < 3000; i++ {
		name := fmt.Sprintf("m%04d-%s", i, body)
		if _, err := b.Send(ctx, "q", st.SendInput{Body: name}); err != nil {
			t.Fatal(err)
		}
		ms, err := b.Receive(ctx, "q", st.ReceiveInput{})
		if err != nil || len(ms) != 1 {
			t.Fatalf("receive %d: %v %d", i, err, len(ms))
		}
		if i%10 == 0 {
			kept[ms[0].Body] = true // left in flight for an hour
			continue
		}
		if err := b.Delete(ctx, "q", ms[0].ReceiptHandle); err != nil {
			t.Fatal(err)
		}
	}
	before := segments(t, dir)
	for i := 0; i < 30; i++ {
		clk.Advance(time.Second) // compaction rounds
	}
	after := segments(t, dir)
	// 300 live 1 KiB messages fit in about five 64 KiB segments; ~3 MB went through.
	if after > before/3 {
		es, _ := os.ReadDir(dir)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Fatalf("segments: %d before compaction, %d after: %v", before, after, names)
	}
	b.Close()
	b, err = broker.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	clk.Advance(2 * time.Hour)
	got := 0
	for {
		ms, err := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if !kept[m.Body] {
				t.Fatalf("unexpected message %.10s", m.Body)
			}
			got++
			b.Delete(ctx, "q", m.ReceiptHandle)
		}
	}
	if got != len(kept) {
		t.Fatalf("read back %d of %d kept messages", got, len(kept))
	}
	t.Logf("segments: %d before compaction, %d after; all %d survivors intact after reopen", before, after, got)
}
