package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/examples/scenarios"
)

// mixed exercises every part of the format in a short run: Poisson and
// constant arrivals, a ramp, on/off periods, a burst, a send limit, a
// concurrency limit, lognormal service times, failures going through a
// retry ladder to a dead-letter queue, and an outage.
const mixed = `
name = "mixed"
seed = 42
duration = "20m"
sample = "1m"

[queue]
VisibilityTimeout = 5
RetryDelays = "1s,5s"
RedrivePolicy = '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:sim-dlq","maxReceiveCount":3}'
TenantSendRate = 30
SidelineAgeSeconds = 60

[[tenant]]
name = "steady"
arrivals = "constant"
rate = 5

[[tenant]]
name = "ramping"
rate = 1
ramp_to = 20
start = "2m"
stop = "15m"

[[tenant]]
name = "flappy"
rate = 8
on = "1m"
off = "2m"
[[tenant.burst]]
at = "5m"
duration = "30s"
rate = 100

[consumers]
count = 6
batch = 3
concurrency = 10
idle_poll = "250ms"
failure = 0.1
outages = [["8m", "10m"]]

[consumers.service]
distribution = "lognormal"
median = "150ms"
p99 = "2s"
`

func run(t testing.TB, sc *Scenario, opt Options) *Result {
	t.Helper()
	res, err := Run(context.Background(), sc, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func parse(t testing.TB, text string) *Scenario {
	t.Helper()
	sc, err := Parse("test.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func outputs(t *testing.T, res *Result) (string, string) {
	t.Helper()
	var sum, series bytes.Buffer
	if err := res.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteCSV(&series); err != nil {
		t.Fatal(err)
	}
	return sum.String(), series.String()
}

// TestDeterministic: the same scenario and seed give the same summary and
// time series, byte for byte; another seed gives others.
func TestDeterministic(t *testing.T) {
	sum1, csv1 := outputs(t, run(t, parse(t, mixed), Options{}))
	sum2, csv2 := outputs(t, run(t, parse(t, mixed), Options{}))
	if sum1 != sum2 {
		t.Fatalf("two runs, two summaries:\n%s\n%s", sum1, sum2)
	}
	if csv1 != csv2 {
		t.Fatal("two runs, two time series")
	}
	other := parse(t, mixed)
	other.Seed = 43
	sum3, _ := outputs(t, run(t, other, Options{}))
	if sum3 == sum1 {
		t.Fatal("seeds 42 and 43 gave the same summary")
	}
	t.Logf("\n%s", sum1)
}

// TestFiguresAreTheQueues: what the run counts per tenant adds up to the
// queue's own counters, and the mixed scenario's features all happened.
func TestFiguresAreTheQueues(t *testing.T) {
	res := run(t, parse(t, mixed), Options{})
	var sent, deleted, received, throttled, failed int64
	for _, tr := range res.Tenants {
		sent += tr.Sent
		deleted += tr.Deleted
		received += tr.Received
		throttled += tr.Throttled
		failed += tr.Failed
	}
	q := res.Queue
	if sent != q.Sent || deleted != q.Deleted || received != q.Received || throttled != q.Throttled {
		t.Fatalf("tenants: sent %d deleted %d received %d throttled %d; queue: %d %d %d %d", sent, deleted, received, throttled, q.Sent, q.Deleted, q.Received, q.Throttled)
	}
	var dead, dropped, queueDropped int64
	for _, tr := range res.Tenants {
		dead += int64(tr.DeadLettered)
		dropped += tr.Dropped
	}
	for _, n := range q.Dropped {
		queueDropped += int64(n)
	}
	if dead != q.DeadLettered || dead == 0 || dropped != queueDropped {
		t.Fatalf("tenants: dead-lettered %d, dropped %d; queue: %d, %d (want them equal, and some dead-lettered)", dead, dropped, q.DeadLettered, queueDropped)
	}
	if throttled == 0 || failed == 0 || q.Sidelined == 0 || q.Retried == 0 {
		t.Fatalf("throttled %d, failed %d, sidelined %d, retried %d: want each above 0", throttled, failed, q.Sidelined, q.Retried)
	}
	if want := int64(len(res.Tenants)) * int64(20); int64(len(res.Samples)) != want {
		t.Fatalf("%d samples, want %d (20 a tenant)", len(res.Samples), want)
	}
}

// TestBadScenarios: each mistake is refused, naming the field (and the
// line, when the TOML decoder gives it).
func TestBadScenarios(t *testing.T) {
	base := "duration = \"1h\"\n[[tenant]]\nname = \"a\"\nrate = 1\n[consumers]\ncount = 1\n"
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"syntax", "duration = \"1h\"\n[[tenant]\nname = \"a\"\n", []string{"line 3", "expected end of table array name"}},
		{"unknown key", base + "rte = 3\n", []string{"line 7", "unknown key consumers.rte"}},
		{"unknown top key", "colour = 1\n" + base, []string{"line 1", "unknown key colour"}},
		{"unknown tenant key", strings.Replace(base, "rate = 1", "rate = 1\nburst_rate = 3", 1), []string{"line 5", "unknown key tenant.burst_rate"}},
		{"invalid attribute", base + "[queue]\nVisibilityTimeout = -1\n", []string{"line 8", "queue.VisibilityTimeout:", "Invalid value for the parameter VisibilityTimeout."}},
		{"unknown attribute", base + "[queue]\nVisibiltyTimeout = 30\n", []string{"line 8", "queue.VisibiltyTimeout:", "Unknown Attribute VisibiltyTimeout."}},
		{"bad retry delays", base + "[queue]\nRetryDelays = \"1s,forever\"\n", []string{"line 8", "Invalid value for the parameter RetryDelays."}},
		{"negative rate", strings.Replace(base, "rate = 1", "rate = -5", 1), []string{"line 4", "tenant[0].rate:", "-5"}},
		{"wrong type", strings.Replace(base, "rate = 1", "rate = \"fast\"", 1), []string{"line 4", "rate"}},
		{"bad duration", strings.Replace(base, `"1h"`, `"an hour"`, 1), []string{"line 1", "duration", `"an hour" is not a duration`}},
		{"no duration", strings.Replace(base, `duration = "1h"`, "", 1), []string{"duration: required"}},
		{"no tenant", "duration = \"1h\"\n", []string{"at least one [[tenant]]"}},
		{"duplicate tenant", base + "[[tenant]]\nname = \"a\"\n", []string{"line 8", "tenant[1].name", `"a"`, "used by another"}},
		{"class and tenant", base + "[[tenant]]\nname = \"b\"\ncount = 3\n[[tenant]]\nname = \"b-2\"\n", []string{`two tenants are named "b-2"`}},
		{"stop after the end", strings.Replace(base, "rate = 1", "rate = 1\nstop = \"2h\"", 1), []string{"line 5", "tenant[0].stop", "start < stop"}},
		{"on without off", strings.Replace(base, "rate = 1", "rate = 1\non = \"1m\"", 1), []string{"line 5", "tenant[0].on", "on and off"}},
		{"burst", base + "[[tenant]]\nname = \"b\"\n[[tenant.burst]]\nat = \"1m\"\nduration = \"1m\"\nrate = 1\n[[tenant.burst]]\nat = \"2m\"\nduration = \"1m\"\nrate = -1\n",
			[]string{"line 16", "tenant[1].burst[1].rate"}},
		{"failure above 1", base + "failure = 1.5\n", []string{"line 7", "consumers.failure"}},
		{"bad batch", base + "batch = 11\n", []string{"line 7", "consumers.batch"}},
		{"bad outage", base + "outages = [[\"2m\", \"1m\"]]\n", []string{"line 7", "consumers.outages[0]"}},
		{"bad on_failure", base + "on_failure = \"panic\"\n", []string{"line 7", "consumers.on_failure", "RetryMessage"}},
		{"short heartbeat", base + "heartbeat = \"10ms\"\n", []string{"line 7", "consumers.heartbeat"}},
		{"wrong service parameter", base + "[consumers.service]\ndistribution = \"exponential\"\ntime = \"1s\"\n", []string{"line 9", "consumers.service.time", "exponential"}},
		{"dependency tenant", base + "[[consumers.dependency]]\nfrom = \"1m\"\nto = \"2m\"\ntenants = [\"zed\"]\n", []string{"line 10", "consumers.dependency[0].tenants", `"zed"`}},
		{"dependency period", base + "[[consumers.dependency]]\nfrom = \"3m\"\nto = \"2m\"\n", []string{"line 9", "consumers.dependency[0].to"}},
		{"fifo false", base + "[queue]\nFifoQueue = false\n", []string{"line 8", "queue.FifoQueue", "leave it out"}},
		{"fifo attribute on a standard queue", base + "[queue]\nContentBasedDeduplication = true\n", []string{"line 8", "queue.ContentBasedDeduplication"}},
		{"variant without a name", base + "[[variant]]\n[variant.queue]\nFairDelivery = false\n", []string{"line 7", "variant[0].name: required"}},
		{"variant attribute", base + "[[variant]]\nname = \"x\"\n[[variant]]\nname = \"y\"\n[variant.queue]\nTenantMaxInFlight = -3\n",
			[]string{"line 12", "variant[1].queue.TenantMaxInFlight", "Invalid value"}},
		{"variant consumers", base + "[[variant]]\nname = \"x\"\n[variant.consumers]\nbatch = 20\n", []string{"line 10", "variant[0].consumers.batch"}},
		{"variant unknown key", base + "[[variant]]\nname = \"x\"\n[variant.consumers]\nbatchsize = 2\n", []string{"line 10", "unknown key variant.consumers.batchsize"}},
		{"window without a name", base + "[[window]]\nfrom = \"1m\"\n", []string{"line 7", "window[0].name: required"}},
		{"window past the end", base + "[[window]]\nname = \"w\"\nfrom = \"2h\"\n", []string{"line 7", "window[0].to", "from < to <= duration"}},
		{"same windows", base + "[[window]]\nname = \"w\"\n[[window]]\nname = \"w\"\n", []string{"line 10", "window[1].name", "used by another"}},
		{"window tenant", base + "[[window]]\nname = \"w\"\ntenants = [\"zed\"]\n", []string{"line 9", "window[0].tenants", `"zed"`}},
		{"burst every", strings.Replace(base, "rate = 1", "rate = 1\n[[tenant.burst]]\nat = \"1m\"\nduration = \"2s\"\nrate = 5\nevery = \"1s\"", 1), []string{"line 9", "tenant[0].burst[0].every", "longer than the burst's duration"}},
		{"same variants", base + "[[variant]]\nname = \"x\"\n[[variant]]\nname = \"x\"\n", []string{"line 10", "variant[1].name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.toml", []byte(tc.text))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrScenario) {
				t.Errorf("%v: not ErrScenario", err)
			}
			for _, w := range append(tc.want, "bad.toml") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: does not say %q", err, w)
				}
			}
		})
	}
}

// TestMissingDeadLetterQueueTarget: a RedrivePolicy naming another
// account's queue is refused when the run starts.
func TestForeignDeadLetterQueue(t *testing.T) {
	sc := parse(t, strings.Replace(mixed, "000000000000:sim-dlq", "111111111111:sim-dlq", 1))
	_, err := Run(context.Background(), sc, Options{})
	if err == nil || !errors.Is(err, ErrScenario) || !strings.Contains(err.Error(), "RedrivePolicy") {
		t.Fatalf("got %v, want an error about the RedrivePolicy", err)
	}
}

// TestShipped: every shipped scenario parses, under its file's name.
func TestShipped(t *testing.T) {
	list, err := Shipped(scenarios.FS())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range list {
		names = append(names, sc.Name)
		if len(sc.Variants) < 2 {
			t.Errorf("%s: %d variants, want two or more to compare", sc.Name, len(sc.Variants))
		}
	}
	want := []string{"consumer-outage", "consumer-outage-1.1x", "consumer-outage-3x", "healthy", "noisy-tenant", "retry-storm", "shuffle-sharding", "slow-dependency", "slow-handlers"}
	if !slices.Equal(names, want) {
		t.Fatalf("shipped: %v, want %v", names, want)
	}
}

// TestCancel: a cancelled context ends a run.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sc := parse(t, mixed)
	if _, err := Run(ctx, sc, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// TestLateHeartbeats: heartbeats further apart than the visibility
// timeout, and failures given back after it ran out, are refused by the
// queue; the run goes on, and counts the duplicates they let through.
func TestLateHeartbeats(t *testing.T) {
	sc := parse(t, `
duration = "10m"
[queue]
VisibilityTimeout = 5
[[tenant]]
name = "a"
rate = 2
[consumers]
count = 50
heartbeat = "8s"
failure = 0.3
on_failure = "retry"
[consumers.service]
distribution = "lognormal"
median = "3s"
p99 = "20s"
`)
	refused := 0
	res := run(t, sc, Options{Trace: func(op Op) {
		if op.Err != "" && (op.Kind == OpChangeVisibility || op.Kind == OpRetry) {
			refused++
		}
	}})
	a := res.Tenants[0]
	if refused == 0 || a.Duplicates == 0 || a.Late == 0 {
		t.Fatalf("%d calls refused, %d duplicates, %d late: want each above 0", refused, a.Duplicates, a.Late)
	}
}

// TestFIFO: a FIFO queue (sim.fifo, its dead-letter queue FIFO too) keeps
// each tenant's (message group's) messages in order: first receives come
// in send order, whatever the failures; and a group whose messages are
// slow (one in flight at a time) holds back only itself.
func TestFIFO(t *testing.T) {
	sc := parse(t, `
duration = "20m"
[queue]
FifoQueue = true
VisibilityTimeout = 5
RedrivePolicy = '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:sim-dlq.fifo","maxReceiveCount":2}'
[[tenant]]
name = "slow"
rate = 1
[[tenant]]
name = "fast"
rate = 1
[[tenant]]
name = "other"
rate = 0.5
[consumers]
count = 6
failure = 0.05
[consumers.service]
distribution = "exponential"
mean = "100ms"
[[consumers.dependency]]
from = "10m"
to = "14m"
latency = "2s"
tenants = ["slow"]
`)
	if sc.QueueName() != "sim.fifo" {
		t.Fatalf("queue %q", sc.QueueName())
	}
	last := map[string]int{}
	var order []string
	res := run(t, sc, Options{Trace: func(op Op) {
		if op.Kind != OpReceive {
			return
		}
		for _, b := range op.Bodies {
			tn, n, _ := strings.Cut(b, "#")
			k, _ := strconv.Atoi(n)
			if k > last[tn] {
				if k != last[tn]+1 { // a first receive of a later message: one skipped
					order = append(order, fmt.Sprintf("%s: %s after #%d", op.At, b, last[tn]))
				}
				last[tn] = k
			}
		}
	}})
	if len(order) > 0 {
		t.Fatalf("first receives out of send order: %v", order[:min(5, len(order))])
	}
	if res.Queue.DeadLettered == 0 {
		t.Error("no message dead-lettered")
	}
	slow, fast := tenant(t, res, "slow"), tenant(t, res, "fast")
	if slow.Wait.P99 < time.Minute || fast.Wait.P99 > 15*time.Second {
		t.Errorf("slow's p99 wait %s, fast's %s: want the slow group held back, the fast one not", slow.Wait.P99, fast.Wait.P99)
	}
	t.Logf("\n%s", func() string { var b strings.Builder; res.WriteSummary(&b); return b.String() }())
}

// TestDropped: a retry ladder without a dead-letter queue drops what it
// exhausts; each tenant's DROPPED is what it sent and neither deleted,
// held nor dead-lettered, and adds up to the queue's own count.
func TestDropped(t *testing.T) {
	res := run(t, parse(t, `
duration = "10m"
[queue]
VisibilityTimeout = 2
RetryDelays = "1s"
[[tenant]]
name = "a"
rate = 5
[[tenant]]
name = "b"
rate = 2
[consumers]
count = 4
failure = 0.3
`), Options{})
	var dropped, queueDropped int64
	for _, tr := range res.Tenants {
		if tr.Dropped == 0 {
			t.Errorf("%s: nothing dropped", tr.Name)
		}
		dropped += tr.Dropped
	}
	for _, n := range res.Queue.Dropped {
		queueDropped += int64(n)
	}
	if dropped != queueDropped {
		t.Fatalf("tenants dropped %d, the queue %d", dropped, queueDropped)
	}
}

// ordered is a scenario whose runs serve messages out of their tenant's
// send order: an outage engages the backlog mode, each tenant's messages
// spread over two shards, and failures are given back at once.
const ordered = `
duration = "10m"
sample = "1m"
[queue]
VisibilityTimeout = 10
Partitions = 2
PartitionsPerTenant = 2
[[tenant]]
name = "a"
rate = 8
[[tenant]]
name = "b"
arrivals = "constant"
rate = 3
[consumers]
count = 4
batch = 3
failure = 0.1
on_failure = "release"
outages = [["1m", "3m"]]
[consumers.service]
distribution = "exponential"
mean = "200ms"
[[window]]
name = "outage"
from = "1m"
to = "3m"
[[window]]
name = "b after"
from = "3m"
tenants = ["b"]
[[window]]
name = "all"
`

// TestAhead: each tenant's AHEAD is what a naive replay of the run's
// calls counts: the first receives of a message sent after one of the
// same tenant that the queue took and had not delivered yet (counting
// the messages of one receive as received together). On a FIFO queue,
// none.
func TestAhead(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		text := ordered
		if fifo {
			text = strings.Replace(text, "Partitions = 2\nPartitionsPerTenant = 2", "FifoQueue = true", 1)
		}
		took := map[string][]bool{} // by tenant, by body number - 1
		got := map[string][]bool{}
		ahead := map[string]int64{}
		res := run(t, parse(t, text), Options{Trace: func(op Op) {
			switch op.Kind {
			case OpSend:
				took[op.Tenant] = append(took[op.Tenant], op.Err == "")
				got[op.Tenant] = append(got[op.Tenant], false)
			case OpReceive:
				type msg struct {
					tenant string
					k      int
				}
				var firsts []msg
				for _, b := range op.Bodies {
					tn, n, _ := strings.Cut(b, "#")
					k, _ := strconv.Atoi(n)
					if !got[tn][k-1] {
						got[tn][k-1] = true
						firsts = append(firsts, msg{tn, k})
					}
				}
				for _, m := range firsts {
					for j := range m.k - 1 {
						if took[m.tenant][j] && !got[m.tenant][j] {
							ahead[m.tenant]++
							break
						}
					}
				}
			}
		}})
		for _, tr := range res.Tenants {
			if tr.Ahead != ahead[tr.Name] {
				t.Errorf("fifo %v: %s: AHEAD %d, the replay counts %d", fifo, tr.Name, tr.Ahead, ahead[tr.Name])
			}
			if fifo != (tr.Ahead == 0) {
				t.Errorf("fifo %v: %s: %d ahead", fifo, tr.Name, tr.Ahead)
			}
			var sum int64
			for _, s := range res.Samples {
				if s.Tenant == tr.Name {
					sum += s.Ahead
				}
			}
			if sum != tr.Ahead {
				t.Errorf("fifo %v: %s: the samples count %d ahead, the run %d", fifo, tr.Name, sum, tr.Ahead)
			}
		}
	}
}

// TestWindows: a window's figures are those of the first receives of the
// messages sent in it (the owner's timestamps), and every sample's waits
// by send time those of the messages sent since the sample before.
func TestWindows(t *testing.T) {
	type first struct {
		tenant       string
		sent, waited time.Duration
	}
	var firsts []first
	sc := parse(t, ordered)
	res := run(t, sc, Options{FirstReceive: func(tn string, sent, waited time.Duration) { firsts = append(firsts, first{tn, sent, waited}) }})
	if len(res.Windows) != 3 {
		t.Fatalf("%d windows, want 3", len(res.Windows))
	}
	var held int64
	for _, tr := range res.Tenants {
		held += int64(tr.Backlog)
	}
	for _, w := range res.Windows {
		var waits []time.Duration
		last := time.Duration(-1)
		for _, f := range firsts {
			if f.sent >= w.From.D() && (f.sent < w.To.D() || w.To == sc.Duration) && (len(w.Tenants) == 0 || slices.Contains(w.Tenants, f.tenant)) {
				waits = append(waits, f.waited)
				last = max(last, f.sent+f.waited)
			}
		}
		if w.FirstReceives != int64(len(waits)) || w.Wait != quantiles(waits) {
			t.Errorf("%s: %d received, %+v; the first receives say %d, %+v", w.Name, w.FirstReceives, w.Wait, len(waits), quantiles(waits))
		}
		if open := w.Sent - w.FirstReceives; open < 0 || open > held || (open == 0) != (w.AllServed == last) || (open > 0) != (w.AllServed < 0) {
			t.Errorf("%s: %d sent, %d received, all served at %s; the last first receive at %s, %d held at the end", w.Name, w.Sent, w.FirstReceives, w.AllServed, last, held)
		}
	}
	if w := res.Windows[2]; w.To != sc.Duration || w.Sent != res.Tenants[0].Sent+res.Tenants[1].Sent {
		t.Errorf("all: to %s, %d sent; want the whole run's %d", w.To.D(), w.Sent, res.Tenants[0].Sent+res.Tenants[1].Sent)
	}
	if w := res.Windows[1]; w.Sent < 7*60*3 || w.Sent > 7*60*3+1 {
		t.Errorf("b after: %d sent, want 1260 (constant arrivals, and one at the end)", w.Sent)
	}
	if w := res.Windows[0]; w.AllServed < 3*time.Minute || w.AllServed > 10*time.Minute {
		t.Errorf("outage: all served at %s, want after the outage", w.AllServed)
	}
	// Waits by send time: the samples of tenant a.
	checked := 0
	for i, s := range res.Samples {
		if s.Tenant != "a" {
			continue
		}
		var waits []time.Duration
		for _, f := range firsts {
			if f.tenant == "a" && f.sent >= s.At-sc.Sample.D() && f.sent < s.At {
				waits = append(waits, f.waited)
			}
		}
		want := openQuantiles(waits, s.SentOpen)
		if s.SentWait != want || int64(len(waits))+s.SentOpen != s.Sent {
			t.Errorf("sample %d at %s: by send time %+v of %d (%d open), want %+v of %d", i, s.At, s.SentWait, s.Sent, s.SentOpen, want, len(waits))
		}
		checked++
	}
	if checked != 10 {
		t.Fatalf("%d samples of a, want 10", checked)
	}
}

// TestOpenQuantiles: waits that never ended rank above every other; a
// quantile that falls on one is unknown (-1).
func TestOpenQuantiles(t *testing.T) {
	s := time.Second
	ds := func() []time.Duration { return []time.Duration{3 * s, 1 * s, 2 * s} }
	for _, tc := range []struct {
		open int64
		want Quantiles
	}{
		{0, Quantiles{P50: 2 * s, P99: 3 * s, Max: 3 * s}},
		{1, Quantiles{P50: 2 * s, P99: -1, Max: -1}},
		{3, Quantiles{P50: 3 * s, P99: -1, Max: -1}},
		{4, Quantiles{P50: -1, P99: -1, Max: -1}},
	} {
		if got := openQuantiles(ds(), tc.open); got != tc.want {
			t.Errorf("open %d: %+v, want %+v", tc.open, got, tc.want)
		}
	}
	if got := openQuantiles(nil, 0); got != (Quantiles{}) {
		t.Errorf("nothing: %+v", got)
	}
}
