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

// variant runs one variant of a shipped scenario.
func variant(t *testing.T, name, v string, opt Options) *Result {
	t.Helper()
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
// Sidelined, a message sent after the outage is served at once.
func TestScenarioConsumerOutage(t *testing.T) {
	const outageEnd = 70 * time.Minute
	for _, tc := range []struct {
		variant string
		// the waits of messages sent in the outage's first minute, and in
		// a minute ten minutes after it
		first, after [2]time.Duration
	}{
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
			if tc.variant == "fifo" {
				// Drained: the backlog back to what is in service, within
				// 10% of an hour after the outage.
				drained := time.Duration(-1)
				for _, s := range backlogOverTime(res) {
					if s.at > outageEnd && s.backlog < 50 {
						drained = s.at - outageEnd
						break
					}
				}
				within(t, "drained after the outage", drained, 54*time.Minute, 66*time.Minute)
			}
		})
	}
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
			n, err1 := strconv.Atoi(v.Queue["Partitions"])
			k, err2 := strconv.Atoi(v.Queue["PartitionsPerTenant"])
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
