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
	want := []string{"consumer-outage", "noisy-tenant", "retry-storm", "shuffle-sharding", "slow-dependency", "slow-handlers"}
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
