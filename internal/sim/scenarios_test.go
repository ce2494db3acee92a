package sim

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/examples/scenarios"
	"github.com/sluicemq/sluice/internal/sched"
)

// The shipped scenarios' key figures, asserted within a tolerance: each
// is a property of the model the scenario's comments derive (Little's
// law, the backlog's arithmetic, the combinatorics of shuffle sharding),
// not a timing of this machine.

// variant runs one variant of a shipped scenario. Under the race
// detector with -short it skips the variants served oldest first (fair)
// or with a fixed threshold (sideline): a run is one goroutine, the race
// detector finds nothing in a second configuration of it, and it makes
// each run some ten times slower.
func variant(t *testing.T, name, v string, opt Options) *Result {
	t.Helper()
	if raceEnabled && testing.Short() && (v == "fair" || v == "sideline") {
		t.Skipf("%s/%s: without -short or the race detector", name, v)
	}
	sc, err := Load(scenarios.FS(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sc.Expand() {
		if c.Variant == v {
			return run(t, c, opt)
		}
	}
	t.Fatalf("%s has no variant %q", name, v)
	return nil
}

// tenant is a run's figures for one tenant (or class).
func tenant(t *testing.T, res *Result, name string) TenantResult {
	t.Helper()
	for _, tr := range res.Tenants {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("%s: no tenant %q", res.Scenario.Title(), name)
	return TenantResult{}
}

// within fails unless lo <= got <= hi.
func within[T int | int64 | float64 | time.Duration](t *testing.T, what string, got, lo, hi T) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s: %v, want within [%v, %v]", what, got, lo, hi)
	}
}

// TestScenarioConsumerOutage: an hour without consumers, then twice the
// arrival rate. Under FIFO the first message served after the outage
// waited the hour; one sent ten minutes after it waits behind what is
// left of the backlog: (outage x arrivals - 10 min x spare capacity) /
// capacity = (3600 x 20 - 600 x 20) / 40 s = 25 minutes; the backlog is
// gone an hour after the outage (outage x arrivals / spare capacity).
// By default (the backlog mode) and sidelined, a message sent after the
// outage is served at once, and the backlog drains behind it in the same
// hour.
func TestScenarioConsumerOutage(t *testing.T) {
	const outageEnd = 70 * time.Minute
	for _, tc := range []struct {
		variant string
		// the waits of messages sent in the outage's first minute, and in
		// a minute ten minutes after it
		first, after [2]time.Duration
	}{
		{"default", [2]time.Duration{54 * time.Minute, 66 * time.Minute}, [2]time.Duration{0, time.Second}},
		{"fifo", [2]time.Duration{54 * time.Minute, 66 * time.Minute}, [2]time.Duration{22*time.Minute + 30*time.Second, 27*time.Minute + 30*time.Second}},
		{"fair", [2]time.Duration{54 * time.Minute, 66 * time.Minute}, [2]time.Duration{0, time.Hour}},
		{"sideline", [2]time.Duration{54 * time.Minute, 80 * time.Minute}, [2]time.Duration{0, 5 * time.Second}},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			var first, after []time.Duration
			opt := Options{FirstReceive: func(_ string, sent, waited time.Duration) {
				switch {
				case sent >= 10*time.Minute && sent < 11*time.Minute:
					first = append(first, waited)
				case sent >= outageEnd+10*time.Minute && sent < outageEnd+11*time.Minute:
					after = append(after, waited)
				}
			}}
			res := variant(t, "consumer-outage", tc.variant, opt)
			for _, c := range []struct {
				what  string
				waits []time.Duration
				lim   [2]time.Duration
			}{{"sent in the outage's first minute", first, tc.first}, {"sent ten minutes after the outage", after, tc.after}} {
				if len(c.waits) < 1000 {
					t.Fatalf("%s: %d messages, want about 1200", c.what, len(c.waits))
				}
				q := quantiles(c.waits)
				within(t, c.what+": the shortest wait", c.waits[0], c.lim[0], c.lim[1])
				within(t, c.what+": the longest wait", q.Max, c.lim[0], c.lim[1])
			}
			// Caught up (no message waiting over Standing at a sample from
			// then on) within 10% of an hour after the outage, whatever the
			// order.
			within(t, "caught up after the outage", res.CaughtUp-outageEnd, 54*time.Minute, 66*time.Minute)
			if tc.variant == "default" {
				// The figures: sent 10 s or more after the return,
				// a p99 wait under 1 s; the backlog all served within 10%
				// of an hour after the outage.
				within(t, "after return +10s: p99 wait", window(t, res, "after return +10s").Wait.P99, 0, time.Second)
				within(t, "the backlog: all served after the outage", window(t, res, "the backlog").AllServed-outageEnd, 54*time.Minute, 66*time.Minute)
			}
		})
	}
}

// window is a run's figures for one window.
func window(t *testing.T, res *Result, name string) WindowResult {
	t.Helper()
	for _, w := range res.Windows {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("%s: no window %q", res.Scenario.Title(), name)
	return WindowResult{}
}

// TestScenarioOutageCapacities: the same outage with consumers at 3x and
// at 1.1x the arrival rate. The backlog drains with the spare capacity,
// in outage x arrivals / (capacity - arrivals): 30 minutes at 3x, 10
// hours at 1.1x; the test wants every variant caught up within 10% of
// that (the backlog mode starves neither side), and by default the
// messages sent after the return served at once: a p99 wait under 1 s
// at 3x. At 1.1x it logs that p99 (issue 37 asks for under 1 s: see
// docs/simulator.md for what the run shows).
func TestScenarioOutageCapacities(t *testing.T) {
	const outageEnd = 70 * time.Minute
	for _, tc := range []struct {
		name  string
		drain time.Duration
	}{{"consumer-outage-3x", 30 * time.Minute}, {"consumer-outage-1.1x", 10 * time.Hour}} {
		for _, v := range []string{"default", "fair", "fifo"} {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				switch {
				case tc.drain > time.Hour && (testing.Short() || raceEnabled):
					t.Skip("a 12-hour run (860,000 messages): without -short and the race detector")
				case testing.Short() && v == "fair":
					t.Skip("without -short")
				}
				res := variant(t, tc.name, v, Options{})
				within(t, "caught up after the outage", res.CaughtUp-outageEnd, tc.drain*9/10, tc.drain*11/10)
				fresh := window(t, res, "after return +10s").Wait
				switch {
				case v == "default" && tc.drain < time.Hour:
					within(t, "after return +10s: p99 wait", fresh.P99, 0, time.Second)
				case v == "default":
					// At 91% load the queue's own floor, backlog or not, is
					// over a second ("after the drain"); fresh traffic must
					// not be sent behind the backlog for hours.
					within(t, "after return +10s: p99 wait", fresh.P99, 0, 10*time.Second)
				}
				t.Logf("%s: after return +10s: p50 %s, p99 %s; the backlog all served at %s; caught up at %s",
					res.Scenario.Title(), fresh.P50, fresh.P99, window(t, res, "the backlog").AllServed, res.CaughtUp)
			})
		}
	}
}

// TestScenarioHealthy: on a healthy queue the backlog mode never engages:
// by default, fewer than 1% of first receives are served ahead of an
// older message of their tenant (none: nothing is sidelined), and each
// tenant's p99 wait is within 5% of its p99 served oldest first (fair).
func TestScenarioHealthy(t *testing.T) {
	def, fair := variant(t, "healthy", "default", Options{}), variant(t, "healthy", "fair", Options{})
	if def.Queue.Sidelined != 0 {
		t.Errorf("default: %d messages sidelined, want none", def.Queue.Sidelined)
	}
	for i, tr := range def.Tenants {
		within(t, tr.Name+": share of first receives ahead", float64(tr.Ahead)/float64(tr.FirstReceives), 0, 0.01)
		p99 := fair.Tenants[i].Wait.P99
		within(t, tr.Name+": p99 wait", tr.Wait.P99, p99*95/100, p99*105/100)
	}
	// Each burst is served within a few seconds.
	within(t, "a burst: all served", window(t, def, "bursty's bursts").AllServed, 30*time.Second, 40*time.Second)
}

type backlogAt struct {
	at      time.Duration
	backlog int
}

// backlogOverTime sums the tenants' backlogs at each sample.
func backlogOverTime(res *Result) []backlogAt {
	var out []backlogAt
	for _, s := range res.Samples {
		if n := len(out); n > 0 && out[n-1].at == s.At {
			out[n-1].backlog += s.Backlog
		} else {
			out = append(out, backlogAt{s.At, s.Backlog})
		}
	}
	return out
}

// TestScenarioNoisyTenant: bulk sends 100 a second for 30 minutes to
// consumers that take 10. The backlog it leaves, (100 + 2 - 10) x 1800 =
// 165,600 messages, is 276 minutes of the consumers' work: under FIFO
// the quiet tenants' messages wait behind it, the longest about 4.6 h.
// Served fairly, the quiet tenants do not notice; with TenantSendRate the
// spike is refused at the door.
func TestScenarioNoisyTenant(t *testing.T) {
	quiet := []string{"acme", "globex", "initech"}
	const spikeBacklog = (100 + 2 - 10) * 1800 // messages; at 10 a second:
	longest := time.Duration(spikeBacklog/10) * time.Second
	t.Run("fifo", func(t *testing.T) {
		res := variant(t, "noisy-tenant", "fifo", Options{})
		peak := 0
		for _, s := range backlogOverTime(res) {
			peak = max(peak, s.backlog)
		}
		within(t, "the backlog at its peak", peak, spikeBacklog*9/10, spikeBacklog*11/10)
		for _, n := range quiet {
			within(t, n+": the longest wait", tenant(t, res, n).Wait.Max, longest*9/10, longest*11/10)
		}
	})
	t.Run("fair", func(t *testing.T) {
		res := variant(t, "noisy-tenant", "fair", Options{})
		within(t, "bulk: the longest wait", tenant(t, res, "bulk").Wait.Max, longest*9/10, longest*12/10)
		for _, n := range quiet {
			within(t, n+": p99 wait", tenant(t, res, n).Wait.P99, 0, time.Second)
		}
	})
	t.Run("default", func(t *testing.T) {
		// The quiet tenants' p99 within 1.2x of theirs without the spike;
		// bulk's messages sent after the spike served at once.
		sc, err := Load(scenarios.FS(), "noisy-tenant")
		if err != nil {
			t.Fatal(err)
		}
		sc.Tenants[0].Bursts = nil
		sc.Variants = nil
		calm := window(t, run(t, sc, Options{}), "quiet tenants").Wait.P99
		res := variant(t, "noisy-tenant", "default", Options{})
		quietP99 := window(t, res, "quiet tenants").Wait.P99
		within(t, "quiet tenants: p99 wait", quietP99, 0, calm*12/10)
		within(t, "bulk after the spike: p99 wait", window(t, res, "bulk after the spike").Wait.P99, 0, time.Second)
		t.Logf("quiet tenants' p99 wait: %s, without the spike %s", quietP99, calm)
	})
	t.Run("send-rate", func(t *testing.T) {
		res := variant(t, "noisy-tenant", "send-rate", Options{})
		// Refused: what bulk sent beyond 5 a second during the spike.
		within(t, "bulk: throttled", tenant(t, res, "bulk").Throttled, 95*1800*9/10, 95*1800*11/10)
		for _, n := range append([]string{"bulk"}, quiet...) {
			within(t, n+": p99 wait", tenant(t, res, n).Wait.P99, 0, 2*time.Second)
		}
	})
}

// TestScenarioSlowDependency: payments' dependency goes from 100 ms to
// 10 s; at 50 a second that is 500 busy workers of 200 (Little's law).
// Without a limit the other tenants wait for workers for minutes; with
// TenantMaxInFlight = 100 they keep theirs.
func TestScenarioSlowDependency(t *testing.T) {
	res := variant(t, "slow-dependency", "no-limit", Options{})
	within(t, "no limit: search's p99 wait", tenant(t, res, "search").Wait.P99, 2*time.Minute, time.Hour)
	if !testing.Short() {
		res = variant(t, "slow-dependency", "fair", Options{})
		within(t, "fair: search's p99 wait", tenant(t, res, "search").Wait.P99, 2*time.Minute, time.Hour)
	}
	res = variant(t, "slow-dependency", "max-in-flight", Options{})
	for _, n := range []string{"search", "email"} {
		within(t, "TenantMaxInFlight: "+n+"'s p99 wait", tenant(t, res, n).Wait.P99, 0, time.Second)
	}
	// payments gets its 100 workers: 10 messages a second at 10 s each,
	// of its 50; the rest waits.
	within(t, "TenantMaxInFlight: payments' longest wait", tenant(t, res, "payments").Wait.Max, 10*time.Minute, time.Hour)
}

// TestScenarioRetryStorm: failed messages retried at once crowd out
// first attempts; a retry ladder keeps them in a lane of their own.
func TestScenarioRetryStorm(t *testing.T) {
	res := variant(t, "retry-storm", "no-ladder", Options{})
	within(t, "no ladder: acme's p99 wait", tenant(t, res, "acme").Wait.P99, 2*time.Minute, time.Hour)
	storm := res.Queue.Retried
	if !testing.Short() {
		res = variant(t, "retry-storm", "fair", Options{})
		within(t, "fair: acme's p99 wait", tenant(t, res, "acme").Wait.P99, 2*time.Minute, time.Hour)
	}
	res = variant(t, "retry-storm", "ladder", Options{})
	for _, tr := range res.Tenants {
		within(t, "ladder: "+tr.Name+"'s p99 wait", tr.Wait.P99, 0, 10*time.Second)
	}
	if storm == 0 || res.Queue.Retried == 0 || res.Queue.DeadLettered == 0 {
		t.Errorf("retried %d and %d, dead-lettered %d: want each above 0", storm, res.Queue.Retried, res.Queue.DeadLettered)
	}
}

// TestScenarioSlowHandlers: with handlers slower than the visibility
// timeout, a message handled for longer than it (probability p) is
// delivered again while still in service, and so on: p / (1 - p)
// duplicate deliveries a message. Heartbeats make that none.
func TestScenarioSlowHandlers(t *testing.T) {
	sc, err := Load(scenarios.FS(), "slow-handlers")
	if err != nil {
		t.Fatal(err)
	}
	svc := sc.Consumers.Service
	sigma := math.Log(float64(svc.P99)/float64(svc.Median)) / 2.3263478740408408
	z := math.Log(float64(30*time.Second)/float64(svc.Median)) / sigma
	p := 0.5 * math.Erfc(z/math.Sqrt2) // P(service > 30 s)
	res := variant(t, "slow-handlers", "no-heartbeat", Options{})
	var sent, dup, late int64
	for _, tr := range res.Tenants {
		sent, dup, late = sent+tr.Sent, dup+tr.Duplicates, late+tr.Late
	}
	want := p / (1 - p)
	within(t, "no heartbeat: duplicates a message", float64(dup)/float64(sent), want*0.85, want*1.15)
	if late == 0 {
		t.Error("no heartbeat: no late delete")
	}
	res = variant(t, "slow-handlers", "heartbeat", Options{})
	for _, tr := range res.Tenants {
		if tr.Duplicates != 0 || tr.Late != 0 || tr.Received != tr.FirstReceives {
			t.Errorf("heartbeat: %s: %d duplicates, %d late, %d received of %d first: want every message delivered once", tr.Name, tr.Duplicates, tr.Late, tr.Received, tr.FirstReceives)
		}
	}
}

// TestScenarioShuffleSharding: the tenants hurt by the poison tenant are
// exactly those whose every partition is one of its partitions
// (sched.Shard, as the queue hashes them), and there are about as many
// as 1 / C(N, k) of them.
func TestScenarioShuffleSharding(t *testing.T) {
	sc, err := Load(scenarios.FS(), "shuffle-sharding")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sc.Expand() {
		t.Run(v.Variant, func(t *testing.T) {
			n, err1 := strconv.Atoi(v.Queue["Shards"])
			k, err2 := strconv.Atoi(v.Queue["ShardsPerTenant"])
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			waits := map[string][]time.Duration{}
			res := run(t, v, Options{FirstReceive: func(tn string, _, waited time.Duration) { waits[tn] = append(waits[tn], waited) }})
			poison := sched.Shard("poison", n, k)
			var hurt, exposed []string
			members := v.Members()
			for _, m := range members[1:] {
				if quantiles(waits[m]).P99 > v.Hurt.D() {
					hurt = append(hurt, m)
				}
				if !slices.ContainsFunc(sched.Shard(m, n, k), func(p int) bool { return !slices.Contains(poison, p) }) {
					exposed = append(exposed, m)
				}
			}
			if !slices.Equal(hurt, exposed) {
				t.Errorf("hurt %v, want the tenants whose partitions are all the poison tenant's: %v", hurt, exposed)
			}
			if got := tenant(t, res, "tenant").Hurt; got != len(hurt) {
				t.Errorf("the summary's HURT is %d, the test counts %d", got, len(hurt))
			}
			// 1 / C(n, k) of the others, within three standard deviations.
			q := 1 / binomial(n, k)
			others := float64(len(members) - 1)
			mean, sd := q*others, math.Sqrt(others*q*(1-q))
			within(t, "hurt", float64(len(hurt)), mean-3*sd-1, mean+3*sd+1)
			t.Logf("N=%d k=%d: %d of %.0f hurt, expected %.1f", n, k, len(hurt), others, mean)
		})
	}
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := range k {
		r = r * float64(n-i) / float64(i+1)
	}
	return r
}
