// Package gcheadroom gives the Go garbage collector a floor of headroom.
// Go's default (GOGC=100) lets the heap grow by as much as is live before
// it collects again. A server whose live heap is small and whose
// allocation rate is high collects many times a second: `sluice serve`
// under load holds about 16 MiB live and allocates about 300 MiB a
// second (each request's body, record and response), so it collects about
// 20 times a second; with the floor below its CPU a message fell by 8-13%
// in the lean workload's A/B runs (docs/benchmarks.md).
//
// A Tuner lets the heap grow by max(live, floor) instead: with a 64 MiB
// floor the same server collects about 5 times a second. Once the live
// heap is past the floor (a large backlog) the setting is Go's default
// again, so the memory it costs is at most the floor, never a multiple
// of what is live. The heap target is set again after every collection,
// from the heap that collection found live.
//
// The GC percent belongs to the process: only a program's main (the
// serve command) starts a Tuner, one at a time, and not when the user set
// GOGC.
package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// minLive is the live heap Percent assumes at the least: the runtime's
// own minimum heap target is 4 MiB, and a smaller live heap (before the
// first collection it reads as 0) would give an unbounded percent.
const minLive = 4 << 20

// maxPercent bounds the setting (the runtime keeps it in an int32, and a
// negative one would turn the collector off): with a live heap of 4 MiB
// it is a floor of about 41 GiB.
const maxPercent = 1 << 20

// Percent is the GOGC setting under which a heap with live bytes live
// may grow by max(live, floor) before the next collection: 100 (Go's
// default) once live reaches the floor, more below it, at most
// maxPercent.
func Percent(live, floor uint64) int {
	live = max(live, minLive)
	switch {
	case floor <= live:
		return 100
	case floor/live >= maxPercent/100:
		return maxPercent
	}
	// Rounded up (never less than the floor), without computing 100*floor,
	// which a floor of some exbibytes would overflow.
	return int(100*(floor/live) + (100*(floor%live)+live-1)/live)
}

// Tuner keeps the GC percent at Percent(live heap, floor), set again after
// each collection.
type Tuner struct {
	floor uint64
	live  func() uint64 // the heap the last collection found live
	set   func(int) int // sets the GC percent, returns the previous one

	mu        sync.Mutex
	stopped   bool
	afterStop func() // tests: called when a collection finds the tuner stopped
	prev      int    // the GC percent before Start, restored by Stop
	current   int
}

// Start sets the GC percent from the current live heap and follows every
// collection until Stop, which restores the percent it found.
func Start(floor uint64) *Tuner {
	return start(floor, liveHeap, debug.SetGCPercent)
}

func start(floor uint64, live func() uint64, set func(int) int) *Tuner {
	t := &Tuner{floor: floor, live: live, set: set}
	t.mu.Lock()
	t.current = Percent(live(), floor)
	t.prev = set(t.current)
	t.mu.Unlock()
	t.arm()
	return t
}

// sentinel is allocated for one collection to find unreachable: its
// cleanup runs after that collection. It holds a pointer and is larger
// than the runtime's tiny allocations, which may share a block (and so a
// lifetime) with others.
type sentinel struct {
	_ *byte
	_ [24]byte
}

func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), (*Tuner).collected, t)
}

// collected runs after each collection: it sets the percent for the heap
// that collection found live and waits for the next one.
func (t *Tuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		if t.afterStop != nil {
			t.afterStop()
		}
		return
	}
	t.arm() // before the setting: a collection that starts meanwhile finds it
	if p := Percent(t.live(), t.floor); p != t.current {
		t.current = p
		t.set(p)
	}
}

// Percent is the GC percent the tuner set last.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current
}

// Stop stops following collections and restores the GC percent Start
// found.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		t.set(t.prev)
	}
}

// Current is the process's GC percent now (GOGC, or what SetGCPercent
// last set).
func Current() int { return int(readUint("/gc/gogc:percent")) }

// liveHeap reads the heap the last collection marked live.
func liveHeap() uint64 { return readUint("/gc/heap/live:bytes") }

// readUint reads one of the runtime's integer metrics (0 if this runtime
// has no such metric).
func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
