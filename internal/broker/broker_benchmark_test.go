package broker_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	st "github.com/sluicemq/sluice/sluicetype"
)

var (
	benchHistory = flag.Int("bench.history", 200000, "messages that pass through before the 'aged' measurement in BenchmarkHistoryIndependence")
	benchWaiting = flag.Int("bench.waiting", 200000, "messages left waiting in BenchmarkMemoryPerMessage and BenchmarkRecovery")
	benchRounds  = flag.Int("bench.rounds", 20, "alternating measured windows per store in BenchmarkHistoryIndependence")
)

var body1K = strings.Repeat("x", 1024)

func openBench(b *testing.B, dir string) *broker.Broker {
	b.Helper()
	br, err := broker.Open(broker.Config{Dir: dir, Sync: broker.SyncAlways})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateQueue(context.Background(), "bench", map[string]string{"VisibilityTimeout": "60"}, nil); err != nil {
		b.Fatal(err)
	}
	return br
}

// cycle runs send, receive and delete of 1 KiB messages from 64 callers
// for n operations and returns ops/s and the p99 latency of one operation.
func cycle(b *testing.B, br *broker.Broker, n int) (float64, time.Duration) {
	ctx := context.Background()
	const callers = 64
	var left atomic.Int64
	left.Store(int64(n))
	lat := make([][]time.Duration, callers)
	var ops atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for left.Add(-3) >= 0 {
				t0 := time.Now()
				if _, err := br.Send(ctx, "bench", st.SendInput{Body: body1K}); err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				ms, err := br.Receive(ctx, "bench", st.ReceiveInput{MaxMessages: 1})
				if err != nil {
					b.Error(err)
					return
				}
				t2 := time.Now()
				lat[c] = append(lat[c], t1.Sub(t0), t2.Sub(t1))
				ops.Add(2)
				for _, m := range ms {
					t3 := time.Now()
					if err := br.Delete(ctx, "bench", m.ReceiptHandle); err != nil {
						b.Error(err)
						return
					}
					lat[c] = append(lat[c], time.Since(t3))
					ops.Add(1)
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	p99 := time.Duration(0)
	if len(all) > 0 {
		p99 = all[len(all)*99/100]
	}
	return float64(ops.Load()) / elapsed.Seconds(), p99
}

// BenchmarkSendReceiveDelete: in-process throughput, 1 KiB messages,
// sync=always, 64 concurrent callers (each op is a send, a receive or a
// delete).
func BenchmarkSendReceiveDelete(b *testing.B) {
	br := openBench(b, b.TempDir())
	defer br.Close()
	b.ResetTimer()
	s0 := br.StoreStats()
	t0 := time.Now()
	opsPerSec, p99 := cycle(b, br, max(b.N, 3*64))
	s1 := br.StoreStats()
	b.ReportMetric(opsPerSec, "ops/s")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	reportFsyncs(b, s0, s1, time.Since(t0), opsPerSec)
}

// reportFsyncs reports how the time went on fsyncs: their mean latency,
// the share of the run spent in them and operations per fsync.
func reportFsyncs(b *testing.B, s0, s1 broker.StoreStats, elapsed time.Duration, opsPerSec float64) {
	n := float64(s1.Fsyncs - s0.Fsyncs)
	if n == 0 {
		return
	}
	secs := s1.FsyncSeconds - s0.FsyncSeconds
	b.ReportMetric(secs/n*1e6, "fsync-µs")
	b.ReportMetric(secs/elapsed.Seconds(), "fsync-busy")
	b.ReportMetric(opsPerSec*elapsed.Seconds()/n, "ops/fsync")
}

// BenchmarkPreallocate runs BenchmarkSendReceiveDelete's cycle with
// segments prepared full of zeros and with plain appends, alternately in
// the same process (-count for more rounds), and reports the ratio.
func BenchmarkPreallocate(b *testing.B) {
	var ops [2]float64
	var p99 [2]time.Duration
	for i, noPre := range []bool{false, true} {
		br, err := broker.Open(broker.Config{Dir: b.TempDir(), Sync: broker.SyncAlways, NoPreallocate: noPre})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.CreateQueue(context.Background(), "bench", map[string]string{"VisibilityTimeout": "60"}, nil); err != nil {
			b.Fatal(err)
		}
		ops[i], p99[i] = cycle(b, br, max(b.N, 3*64))
		br.Close()
	}
	b.ReportMetric(ops[0], "prealloc-ops/s")
	b.ReportMetric(ops[1], "append-ops/s")
	b.ReportMetric(ops[0]/ops[1], "ratio")
	b.ReportMetric(float64(p99[0].Microseconds()), "prealloc-p99-µs")
	b.ReportMetric(float64(p99[1].Microseconds()), "append-p99-µs")
}

func dirSize(dir string) int64 {
	var total int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
			total += fi.Size()
		}
	}
	return total
}

func timeReopen(b *testing.B, dir string) time.Duration {
	t0 := time.Now()
	br, err := broker.Open(broker.Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	br.Close()
	return d
}

// BenchmarkHistoryIndependence compares a fresh store with one that
// -bench.history messages have passed through (sent, received, deleted)
// while one message stayed unacknowledged all along. The disk's fsync
// latency wanders by tens of percent within minutes, so the two stores are
// measured in alternating windows (-bench.rounds of them each, the order
// switching every round); the ratios reported are geometric means of the
// rounds' ratios (one window's ops/s moves by a quarter either way, so it
// takes a few tens of rounds to see a 5% difference). Then the disk
// used, the heap and the reopen time of both (reopens alternate too).
func BenchmarkHistoryIndependence(b *testing.B) {
	ctx := context.Background()
	const window = 100000 // operations in one measured window
	fresh := b.TempDir()
	fb := openBench(b, fresh)
	cycle(b, fb, window) // a warm-up window; the aged store gets its history below
	freshHeap := heapInUse()

	aged := b.TempDir()
	ab := openBench(b, aged)
	if _, err := ab.Send(ctx, "bench", st.SendInput{Body: "stuck"}); err != nil {
		b.Fatal(err)
	}
	stuck, _ := ab.Receive(ctx, "bench", st.ReceiveInput{VisibilityTimeout: ptr(43200)})
	if len(stuck) != 1 {
		b.Fatal("no stuck message")
	}
	cycle(b, ab, 3**benchHistory) // each message: a send, a receive, a delete

	rounds := max(*benchRounds, 1)
	var fOps, aOps, fP99, aP99, ratios, p99Ratios []float64
	for r := 0; r < rounds; r++ {
		var fo, ao float64
		var fp, ap time.Duration
		if r%2 == 0 {
			fo, fp = cycle(b, fb, window)
			ao, ap = cycle(b, ab, window)
		} else {
			ao, ap = cycle(b, ab, window)
			fo, fp = cycle(b, fb, window)
		}
		fOps, aOps = append(fOps, fo), append(aOps, ao)
		fP99, aP99 = append(fP99, float64(fp.Microseconds())), append(aP99, float64(ap.Microseconds()))
		ratios = append(ratios, ao/fo)
		p99Ratios = append(p99Ratios, float64(ap)/float64(fp))
		fmt.Fprintf(os.Stderr, "round %d: fresh %.0f ops/s p99 %v, aged %.0f ops/s p99 %v\n", r+1, fo, fp, ao, ap)
	}
	fb.Close()
	agedHeap := heapInUse() // the history must not stay in memory either
	if a, err := ab.GetQueueAttributes("bench", []string{"ApproximateNumberOfMessagesNotVisible"}); err != nil || a["ApproximateNumberOfMessagesNotVisible"] != "1" {
		b.Fatalf("the stuck message is not in flight: %v, %v", a, err)
	}
	ab.Close()
	var fReopen, aReopen []float64
	for r := 0; r < rounds; r++ {
		fReopen = append(fReopen, float64(timeReopen(b, fresh).Microseconds()))
		aReopen = append(aReopen, float64(timeReopen(b, aged).Microseconds()))
	}
	b.ReportMetric(median(fOps), "fresh-ops/s")
	b.ReportMetric(median(aOps), "aged-ops/s")
	b.ReportMetric(geomean(ratios), "aged/fresh")
	b.ReportMetric(slices.Min(ratios), "aged/fresh-min")
	b.ReportMetric(slices.Max(ratios), "aged/fresh-max")
	b.ReportMetric(median(fP99), "fresh-p99-µs")
	b.ReportMetric(median(aP99), "aged-p99-µs")
	b.ReportMetric(geomean(p99Ratios), "aged/fresh-p99")
	b.ReportMetric(float64(dirSize(fresh)), "fresh-disk-B")
	b.ReportMetric(float64(dirSize(aged)), "aged-disk-B")
	b.ReportMetric(float64(freshHeap), "fresh-heap-B")
	b.ReportMetric(float64(agedHeap), "aged-heap-B")
	b.ReportMetric(median(fReopen), "fresh-reopen-µs")
	b.ReportMetric(median(aReopen), "aged-reopen-µs")
}

func geomean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(v)))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fill sends n 1 KiB messages in batches of 10 from 16 callers.
func fill(b *testing.B, br *broker.Broker, n int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]st.SendInput, 10)
			for next.Add(10) <= int64(n) {
				for i := range batch {
					// A body of its own, as messages from the network have.
					batch[i] = st.SendInput{Body: strings.Clone(body1K)}
				}
				if _, _, err := br.SendBatch(ctx, "bench", batch); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkMemoryPerMessage reports heap bytes per waiting 1 KiB message
// with -bench.waiting messages in the queue.
func BenchmarkMemoryPerMessage(b *testing.B) {
	dir := b.TempDir()
	br := openBench(b, dir)
	defer br.Close()
	before := heapInUse()
	fill(b, br, *benchWaiting)
	after := heapInUse()
	b.ReportMetric(float64(after-before)/float64(*benchWaiting), "heap-B/msg")
	b.ReportMetric(float64(*benchWaiting), "waiting")
}

// BenchmarkPeakRSS reports the peak resident size of the process per
// message after it filled a queue with -bench.waiting 1 KiB messages,
// the snapshots the store asked for on the way included (a snapshot once
// held the queue's whole encoded state at the heap's high point). Run it
// alone: the peak is the process's.
func BenchmarkPeakRSS(b *testing.B) {
	br := openBench(b, b.TempDir())
	defer br.Close()
	fill(b, br, *benchWaiting)
	b.ReportMetric(float64(procStatus(b, "VmHWM"))/float64(*benchWaiting), "peak-rss-B/msg")
	b.ReportMetric(float64(*benchWaiting), "waiting")
}

// procStatus reads a size in bytes from /proc/self/status.
func procStatus(b *testing.B, field string) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// BenchmarkRecovery reports the time to reopen a store holding
// -bench.waiting live 1 KiB messages.
func BenchmarkRecovery(b *testing.B) {
	dir := b.TempDir()
	br := openBench(b, dir)
	fill(b, br, *benchWaiting)
	br.Close()
	d := timeReopen(b, dir)
	b.ReportMetric(float64(d.Milliseconds()), "reopen-ms")
	b.ReportMetric(float64(*benchWaiting), "live-msgs")
	b.ReportMetric(float64(dirSize(dir)), "disk-B")
	fmt.Fprintf(os.Stderr, "recovery of %d live messages: %v\n", *benchWaiting, d)
}

var benchTenants = flag.Int("bench.tenants", 1000000, "distinct tenants in BenchmarkTenantsMemory")

// BenchmarkTenantsMemory: heap with -bench.tenants distinct tenants seen
// (each sent, received and deleted one message: idle tenants must cost
// nothing), and with each of them holding one waiting message (the cost
// of an active tenant on top of its message), against the same number of
// messages of one tenant.
func BenchmarkTenantsMemory(b *testing.B) {
	ctx := context.Background()
	n := *benchTenants
	var purgeTook time.Duration
	run := func(tenants, drain, purge bool) float64 {
		br, err := broker.Open(broker.Config{Dir: b.TempDir(), Sync: broker.SyncNone})
		if err != nil {
			b.Fatal(err)
		}
		defer br.Close()
		attrs := map[string]string{}
		if drain { // send buckets too: tenants with state to forget
			attrs["TenantSendRate"] = "1000"
		}
		br.CreateQueue(ctx, "bench", attrs, nil)
		before := heapInUse()
		batch := make([]st.SendInput, 10)
		for i := 0; i < n; i += 10 {
			for j := range batch {
				g := "one"
				if tenants {
					g = "tenant-" + strconv.Itoa(i+j)
				}
				batch[j] = st.SendInput{Body: "x", GroupID: g}
			}
			if _, errs, err := br.SendBatch(ctx, "bench", batch); err != nil || errs[0] != nil {
				b.Fatal(err, errs[0])
			}
			if drain {
				ms, _ := br.Receive(ctx, "bench", st.ReceiveInput{MaxMessages: 10})
				hs := make([]string, len(ms))
				for k, m := range ms {
					hs[k] = m.ReceiptHandle
				}
				if _, err := br.DeleteBatch(ctx, "bench", hs); err != nil {
					b.Fatal(err)
				}
			}
		}
		// Let the send buckets refill so idle tenants can be forgotten,
		// and a few operations sweep them.
		if drain { // the once-a-second maintenance forgets 250,000 idle tenants a pass
			time.Sleep(time.Duration(n/250_000+2) * time.Second)
		}
		if purge {
			t0 := time.Now()
			if err := br.Purge(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			purgeTook = time.Since(t0)
		}
		return float64(heapInUse()) - float64(before)
	}
	idle := run(true, true, false)
	active := run(true, false, false)
	single := run(false, false, false)
	purged := run(true, false, true)
	b.ReportMetric(idle, "heap-B-after-1M-tenants-came-and-went")
	b.ReportMetric(purged, "heap-B-after-1M-tenants-purged")
	b.ReportMetric(purgeTook.Seconds(), "purge-s")
	b.ReportMetric(active/float64(n), "heap-B/msg-1-per-tenant")
	b.ReportMetric(single/float64(n), "heap-B/msg-one-tenant")
	b.ReportMetric((active-single)/float64(n), "heap-B/active-tenant")
}
