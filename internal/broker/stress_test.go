package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TestConcurrentDrain sends batches from several goroutines while others
// receive and delete, then checks every message was delivered and the
// queue is empty.
func TestConcurrentDrain(t *testing.T) {
	for _, mem := range []bool{true, false} {
		b, err := broker.Open(broker.Config{InMemory: mem, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		b.CreateQueue(ctx, "q", nil, nil)
		const producers, batches = 8, 300
		var wg sync.WaitGroup
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				for i := 0; i < batches; i++ {
					in := make([]st.SendInput, 10)
					for j := range in {
						in[j] = st.SendInput{Body: fmt.Sprint(p, "-", i, "-", j)}
					}
					if _, errs, err := b.SendBatch(ctx, "q", in); err != nil || errs[0] != nil {
						t.Error(err, errs)
						return
					}
				}
			}(p)
		}
		var got atomic.Int64
		seen := sync.Map{}
		var cwg sync.WaitGroup
		done := make(chan struct{})
		for c := 0; c < 8; c++ {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					ms, err := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
					if err != nil {
						t.Error(err)
						return
					}
					var hs []string
					for _, m := range ms {
						if _, dup := seen.LoadOrStore(m.Body, true); dup {
							t.Errorf("delivered twice: %s", m.Body)
						}
						hs = append(hs, m.ReceiptHandle)
					}
					if len(hs) > 0 {
						if _, err := b.DeleteBatch(ctx, "q", hs); err != nil {
							t.Error(err)
						}
						got.Add(int64(len(hs)))
					}
					if got.Load() == producers*batches*10 {
						return
					}
				}
			}()
		}
		wg.Wait()
		cwg.Wait()
		close(done)
		attrs, _ := b.GetQueueAttributes("q", []string{"All"})
		if got.Load() != producers*batches*10 || attrs["ApproximateNumberOfMessages"] != "0" {
			t.Fatalf("memory=%v: received %d of %d; attributes %v", mem, got.Load(), producers*batches*10, attrs)
		}
		b.Close()
	}
}
