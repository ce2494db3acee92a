package gcheadroom

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentGivesTheFloorOrTheLiveHeapAsHeadroom(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{16 * mib, 64 * mib, 400},
		{48 * mib, 64 * mib, 134}, // 133.3, rounded up
		{64 * mib, 64 * mib, 100},
		{1 << 30, 64 * mib, 100},
		{1 * mib, 64 * mib, 1600}, // a live heap under the runtime's 4 MiB minimum counts as 4 MiB
		{0, 64 * mib, 1600},       // before the first collection
		{16 * mib, 0, 100},
		{4 * mib, 64 << 30, maxPercent}, // bounded: the runtime keeps an int32
		{4 * mib, 1 << 62, maxPercent},  // 100 x floor would overflow
	} {
		if got := Percent(c.live, c.floor); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
	// The heap may grow by at least max(live, floor), and by less than
	// one percent point more.
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		live, floor := minLive+r.Uint64N(4<<30), r.Uint64N(1<<30)
		p := uint64(Percent(live, floor))
		want := max(live, floor)
		if live*p/100 < want-1 || (p > 100 && live*(p-1)/100 >= want) {
			t.Fatalf("Percent(%d, %d) = %d: the heap may grow by %d, want just %d", live, floor, p, live*p/100, want)
		}
	}
}

// TestTunerSetsThePercentAfterEachCollection follows real collections
// (runtime.GC) with a live heap the test sets.
func TestTunerSetsThePercentAfterEachCollection(t *testing.T) {
	var live atomic.Uint64
	live.Store(16 * mib)
	sets := make(chan int, 64)
	set := func(p int) int { sets <- p; return 90 }
	tu := start(64*mib, live.Load, set)
	stoppedSeen := make(chan struct{})
	tu.mu.Lock()
	tu.afterStop = func() { close(stoppedSeen) }
	tu.mu.Unlock()
	if p := <-sets; p != 400 {
		t.Fatalf("Start set %d, want 400", p)
	}
	for _, c := range []struct {
		live uint64
		want int
	}{{32 * mib, 200}, {1 << 30, 100}, {8 * mib, 800}} {
		live.Store(c.live)
		if p := collectUntilSet(t, sets); p != c.want {
			t.Fatalf("after a collection with %d MiB live: set %d, want %d", c.live/mib, p, c.want)
		}
		if tu.Percent() != c.want {
			t.Fatalf("Percent() = %d, want %d", tu.Percent(), c.want)
		}
	}
	tu.Stop()
	if p := <-sets; p != 90 {
		t.Fatalf("Stop set %d, want the percent Start found (90)", p)
	}
	tu.Stop() // twice: nothing more
	// The next collection's cleanup finds the tuner stopped, sets nothing
	// (the live heap now asks for 400) and arms no other.
	live.Store(16 * mib)
	runtime.GC()
	select {
	case <-stoppedSeen:
	case <-time.After(time.Minute):
		t.Fatal("no collection found the tuner stopped within a minute")
	}
	select {
	case p := <-sets:
		t.Fatalf("a stopped tuner set %d", p)
	default:
	}
}

// collectUntilSet runs a collection and waits for the percent the tuner
// sets after it (the cleanup that calls it runs on its own goroutine).
// The tuner arms each next collection's sentinel before it sets, so the
// collection finds one.
func collectUntilSet(t *testing.T, sets <-chan int) int {
	t.Helper()
	runtime.GC()
	select {
	case p := <-sets:
		return p
	case <-time.After(time.Minute):
		t.Fatal("no percent set a minute after a collection")
		return 0
	}
}

func TestStartAndStopSetTheProcesssGCPercent(t *testing.T) {
	before := Current()
	tu := Start(256 * mib)
	// This test's live heap is far under 256 MiB. (The exact percent may
	// change with each collection, which can come at any time.)
	if got := Current(); got <= 100 {
		t.Fatalf("GC percent %d after Start (the tuner set %d), want it above 100", got, tu.Percent())
	}
	tu.Stop()
	if got := Current(); got != before {
		t.Fatalf("GC percent %d after Stop, want %d as before Start", got, before)
	}
}
