package peers_test

import (
	"context"
	"crypto/sha256"
	"math"
	"os"
	"testing"

	"github.com/sluicemq/sluice/internal/peers"
)

// A process's CPU time from /proc agrees with what the process itself
// measures (getrusage), after it has spent some.
func TestProcessCPU(t *testing.T) {
	ctx := context.Background()
	self := peers.ProcessCPU(os.Getpid())
	before, ok := self.CPUSeconds(ctx)
	if !ok {
		t.Skip("no /proc here")
	}
	start, ok := peers.ProcessCPUTime()
	if !ok {
		t.Fatal("getrusage: no CPU time")
	}
	sum := sha256.Sum256(nil)
	// Ten of /proc's ticks of CPU at least, by getrusage; bounded, so that
	// a getrusage that does not move fails below instead of hanging.
	for i, spent := 0, 0.0; spent < 0.1 && i < 5_000; i++ {
		for range 10_000 {
			sum = sha256.Sum256(sum[:])
		}
		now, _ := peers.ProcessCPUTime()
		spent = now - start
	}
	proc, ok1 := self.CPUSeconds(ctx)
	rusage, ok2 := peers.ProcessCPUTime()
	if !ok1 || !ok2 {
		t.Fatalf("CPU time unreadable: /proc %v, getrusage %v", ok1, ok2)
	}
	if rusage-start < 0.1 {
		t.Errorf("getrusage: %.3f s of CPU after the work, want 0.1 s at least", rusage-start)
	}
	if proc <= before {
		t.Errorf("CPU time from /proc %.3f s after %.3f s of work: want it to grow", proc, before)
	}
	// /proc counts in ticks of 10 ms; the two readings are a moment apart.
	if math.Abs(proc-rusage) > 0.05 {
		t.Errorf("CPU time: /proc %.3f s, getrusage %.3f s: want the same within 50 ms", proc, rusage)
	}
	for _, p := range []peers.ProcessCPU{0, -1, 1 << 30} {
		if s, ok := p.CPUSeconds(ctx); ok {
			t.Errorf("PID %d: %v s, want none", p, s)
		}
	}
}
