package broker

import (
	"runtime"
	"testing"
	"time"
)

// A closed broker must not stay reachable through its periodic timers
// (maintenance, compaction): whoever opens and closes brokers in one
// process would keep each one's caches until the timers fired.
func TestClosedBrokerIsCollected(t *testing.T) {
	collected := make(chan struct{})
	func() {
		br, err := Open(Config{Dir: t.TempDir(), CompactInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		runtime.AddCleanup(br.e, func(ch chan struct{}) { close(ch) }, collected)
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the closed broker is still reachable a second after Close")
}
