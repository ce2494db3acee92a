package loadgen

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/cmdkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The anti-backlog scenarios of docs/benchmarks.md, run against a server
// over HTTP. Consumers have a fixed capacity (messages/s, paced), so the
// scenarios are about who waits, not about raw speed.
//
//	noisy:  one tenant sends 10x capacity while nine quiet tenants send 45%
//	        of it; the quiet tenants' send-to-receive times, against a run
//	        without the spike, with FairDelivery on and off.
//	outage: consumers stop under steady load, then return with 2x
//	        headroom; the send-to-receive time of messages sent after the
//	        return, with SidelineAgeSeconds set and not.
//	cost:   receive throughput with 10,000 tenants against one tenant.
//
// Scenario is `sluice scenario`: the anti-backlog scenarios.
func Scenario(ctx context.Context, args []string, env cmdkit.Env) error {
	fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	endpoint := env.Getenv("SLUICE_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:9324"
	}
	fs.StringVar(&endpoint, "endpoint", endpoint, "server URL")
	capacity := fs.Int("capacity", 1000, "consumer capacity, messages/s")
	spike := fs.Duration("spike", 30*time.Second, "noisy: how long the noisy tenant sends")
	outage := fs.Duration("outage", 60*time.Second, "outage: how long consumers are away")
	recovery := fs.Duration("recovery", 60*time.Second, "outage: how long to measure after they return")
	cases := fs.String("cases", "baseline,fair,fifo,rate,headroom,both", "noisy: which runs, in order (the baseline is needed for the ratios): baseline, fair, fifo (FairDelivery=false), rate (fair + TenantSendRate), headroom (fair + TenantHeadroom), both (fair + TenantSendRate + TenantHeadroom)")
	headroom := fs.Int("headroom", 6, "noisy: TenantHeadroom of the headroom run (receivers kept waiting for tenants below their share)")
	sideline := fs.Int("sideline", 1, "outage: SidelineAgeSeconds of the sidelining run (the backlog younger than this stays ahead of fresh traffic)")
	tenants := fs.Int("tenants", 10000, "cost: number of tenants")
	messages := fs.Int("messages", 100000, "cost: messages preloaded per run")
	rest, err := cmdkit.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("usage: sluice scenario noisy|outage|cost|all [flags]")
	}
	if *capacity < 10 || *capacity > 100000 {
		return fmt.Errorf("--capacity must be 10-100000")
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, WriteBufferSize: 64 << 10, ReadBufferSize: 64 << 10}}
	p, err := newPoster(strings.TrimRight(endpoint, "/"), hc, 256)
	if err != nil {
		return err
	}
	s := &scn{p: p, out: env, capacity: *capacity,
		sdk: awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), HTTPClient: hc,
			Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")})}
	run := map[string]func(context.Context) error{
		"noisy":  func(ctx context.Context) error { return s.noisy(ctx, *spike, *headroom, strings.Split(*cases, ",")) },
		"outage": func(ctx context.Context) error { return s.outage(ctx, *outage, *recovery, *sideline) },
		"cost":   func(ctx context.Context) error { return s.cost(ctx, *tenants, *messages) },
	}
	if rest[0] == "all" {
		for _, n := range []string{"noisy", "outage", "cost"} {
			if err := run[n](ctx); err != nil {
				return err
			}
		}
		return nil
	}
	f, ok := run[rest[0]]
	if !ok {
		return fmt.Errorf("unknown scenario %q (noisy, outage, cost, all)", rest[0])
	}
	return f(ctx)
}

type scn struct {
	p        poster
	sdk      *awssqs.Client
	out      cmdkit.Env
	capacity int
}

func (s *scn) queue(ctx context.Context, name string, attrs map[string]string) (*leanBench, error) {
	name = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	q, err := s.sdk.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return nil, err
	}
	return &leanBench{p: s.p, url: *q.QueueUrl}, nil
}

func (s *scn) drop(l *leanBench) {
	_, _ = s.sdk.DeleteQueue(context.Background(), &awssqs.DeleteQueueInput{QueueUrl: aws.String(l.url)})
}

// body encodes the send time and tenant: "unixnano:tenant:".
func body(tenant string, at time.Time) string {
	return strconv.FormatInt(at.UnixNano(), 10) + ":" + tenant + ":" + strings.Repeat("x", 200)
}

func parseBody(b string) (sent time.Time, tenant string) {
	ts, rest, _ := strings.Cut(b, ":")
	tenant, _, _ = strings.Cut(rest, ":")
	ns, _ := strconv.ParseInt(ts, 10, 64)
	return time.Unix(0, ns), tenant
}

// producer sends n messages/s of one tenant in batches of up to 10 until
// stop is closed.
// sent, if not nil, counts the messages the server accepted.
// producer sends perSec messages a second of tenant until stop, timing
// the send calls into sendLat; sent, when not nil, counts the messages
// sent (acknowledged) whose send time is before until (the measured
// window: what the consumers will be waited for).
func producer(ctx context.Context, q *leanBench, tenant string, perSec float64, stop <-chan struct{}, sendLat *samples, sent *atomic.Int64, until time.Time) {
	batch := int(math.Max(1, math.Min(10, perSec/20))) // about 20 batches a second at most
	every := time.Duration(float64(time.Second) * float64(batch) / perSec)
	// Producers start out of step: independent tenants do not send in
	// the same millisecond, and a burst of them would measure the burst.
	clock.Sleep(ctx, clock.Real{}, time.Duration(rand.Int64N(int64(every))))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bodies := make([]string, batch)
		groups := make([]string, batch)
		t0 := time.Now()
		for i := range bodies {
			bodies[i], groups[i] = body(tenant, t0), tenant
		}
		ok, _, err := q.sendBatch(ctx, bodies, groups)
		if err == nil && sendLat != nil {
			sendLat.add(time.Since(t0))
		}
		if err == nil && sent != nil && t0.Before(until) {
			sent.Add(int64(ok))
		}
	}
}

// consumers receive with the scenario's capacity: each of n workers takes
// n/capacity seconds per message. seen is called for every message.
type consumers struct {
	recvLat samples // receive calls that returned messages
	paused  atomic.Bool
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

func (s *scn) consume(ctx context.Context, q *leanBench, seen func(sent time.Time, tenant string, at time.Time)) *consumers {
	workers := max(4, min(64, s.capacity/50))
	per := time.Duration(float64(time.Second) * float64(workers) / float64(s.capacity))
	cctx, cancel := context.WithCancel(ctx)
	c := &consumers{cancel: cancel}
	acks := make(chan string, 1024)
	for i := 0; i < workers; i++ {
		c.wg.Add(1)
		go func(i int) {
			defer c.wg.Done()
			// Workers start out of step, as independent consumers are:
			// in step, they would all ask at once and then all be busy.
			clock.Sleep(cctx, clock.Real{}, per*time.Duration(i)/time.Duration(workers))
			next := time.Now()
			for cctx.Err() == nil {
				if c.paused.Load() {
					time.Sleep(10 * time.Millisecond)
					next = time.Now()
					continue
				}
				// One message a receive: a worker busy with a batch would
				// hold messages in flight that others could serve.
				t0 := time.Now()
				msgs, err := q.receive(cctx, 1)
				if err != nil || len(msgs) == 0 {
					continue
				}
				now := time.Now()
				c.recvLat.add(now.Sub(t0))
				for _, m := range msgs {
					sent, tenant := parseBody(m.body)
					seen(sent, tenant, now)
				}
				// Processing takes per on average, give or take half:
				// consumers that take exactly the same time fall into step.
				next = next.Add(time.Duration(float64(per) * float64(len(msgs)) * (0.5 + rand.Float64())))
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				} else {
					next = time.Now()
				}
				for _, m := range msgs {
					select {
					case acks <- m.handle:
					case <-cctx.Done():
					}
				}
			}
		}(i)
	}
	// Deletes leave the workers' path, batched by ten or every 20 ms, as
	// package consumer acknowledges: a worker takes its next message while
	// the last one's delete is on its way.
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var hs []string
		flush := func() {
			if len(hs) > 0 {
				_ = q.deleteBatch(context.Background(), hs)
				hs = hs[:0]
			}
		}
		for {
			select {
			case h := <-acks:
				if hs = append(hs, h); len(hs) == 10 {
					flush()
				}
			case <-tick.C:
				flush()
			case <-cctx.Done():
				flush()
				return
			}
		}
	}()
	return c
}

func (c *consumers) stop() { c.cancel(); c.wg.Wait() }

type samples struct {
	mu sync.Mutex
	v  []float64 // seconds
}

func (s *samples) add(d time.Duration) { s.mu.Lock(); s.v = append(s.v, d.Seconds()); s.mu.Unlock() }

func (s *samples) pct(p float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.v) == 0 {
		return math.NaN()
	}
	v := append([]float64(nil), s.v...)
	sort.Float64s(v)
	return v[min(len(v)-1, int(p*float64(len(v))))]
}

func (s *samples) n() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.v) }

// noisy: baseline (quiet tenants only), then the spike with fair delivery
// on and off.
func (s *scn) noisy(ctx context.Context, spike time.Duration, headroom int, cases []string) error {
	w := s.out.Stdout
	fmt.Fprintf(w, "noisy neighbour: capacity %d/s; 9 quiet tenants send %d/s in all; the noisy one sends %d/s for %s\n",
		s.capacity, s.capacity*45/100, s.capacity*10, spike)
	type result struct {
		name                string
		p50, p99            float64
		received, unseen    int
		noisyReceived       int64
		quietShareOfCapcity float64
	}
	type noisyRun struct {
		name     string
		fair     string
		noisy    bool
		rate     bool
		headroom int
	}
	all := map[string]noisyRun{"baseline": {"baseline (no spike)", "true", false, false, 0}, "fair": {"spike, FairDelivery=true", "true", true, false, 0},
		"fifo": {"spike, FairDelivery=false", "false", true, false, 0}, "rate": {"spike, fair + TenantSendRate", "true", true, true, 0},
		"headroom": {fmt.Sprintf("spike, fair + TenantHeadroom=%d", headroom), "true", true, false, headroom},
		"both":     {fmt.Sprintf("spike, fair + rate + headroom %d", headroom), "true", true, true, headroom}}
	var runs []noisyRun
	for _, c := range cases {
		r, ok := all[strings.TrimSpace(c)]
		if !ok {
			return fmt.Errorf("unknown noisy case %q (baseline, fair, fifo, rate, headroom, both)", c)
		}
		runs = append(runs, r)
	}
	var results []result
	for _, run := range runs {
		attrs := map[string]string{"FairDelivery": run.fair, "VisibilityTimeout": "60"}
		if run.headroom > 0 {
			attrs["TenantHeadroom"] = strconv.Itoa(run.headroom)
		}
		if run.rate { // the noisy tenant's excess refused at the door, before it costs a write
			attrs["TenantSendRate"] = strconv.Itoa(s.capacity)
			attrs["TenantSendBurst"] = strconv.Itoa(s.capacity)
		}
		q, err := s.queue(ctx, "scn-noisy", attrs)
		if err != nil {
			return err
		}
		var lat, sendLat samples
		var sentQuiet, noisyGot atomic.Int64
		start := time.Now()
		end := start.Add(spike)
		cons := s.consume(ctx, q, func(sent time.Time, tenant string, at time.Time) {
			if tenant == "noisy" {
				noisyGot.Add(1)
				return
			}
			if !sent.Before(start) && sent.Before(end) {
				lat.add(at.Sub(sent))
			}
		})
		stop := make(chan struct{})
		var pw sync.WaitGroup
		for i := 0; i < 9; i++ {
			pw.Add(1)
			go func(i int) {
				defer pw.Done()
				producer(ctx, q, fmt.Sprintf("quiet-%d", i), float64(s.capacity)*0.45/9, stop, &sendLat, &sentQuiet, end)
			}(i)
		}
		if run.noisy {
			for i := 0; i < 4; i++ {
				pw.Add(1)
				go func() { defer pw.Done(); producer(ctx, q, "noisy", float64(s.capacity)*10/4, stop, nil, nil, end) }()
			}
		}
		clock.Sleep(ctx, clock.Real{}, spike)
		close(stop)
		pw.Wait()
		// Let the quiet messages sent in the window arrive: every one of
		// them (the wait is bounded; what is still missing then is
		// reported as unseen). Sends answered after the window are not
		// counted: only messages sent in it are measured.
		deadline := time.Now().Add(max(spike, 5*time.Second))
		for int64(lat.n()) < sentQuiet.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
			clock.Sleep(ctx, clock.Real{}, 50*time.Millisecond)
		}
		cons.stop()
		fmt.Fprintf(w, "    (receive calls: p50 %.4fs p99 %.4fs)\n", cons.recvLat.pct(0.5), cons.recvLat.pct(0.99))
		r := result{name: run.name, p50: lat.pct(0.5), p99: lat.pct(0.99), received: lat.n(), noisyReceived: noisyGot.Load()}
		r.unseen = int(sentQuiet.Load()) - r.received
		if r.unseen > int(sentQuiet.Load())/100 {
			// Quiet messages still waiting when we stopped: their wait is
			// at least the time since the window closed.
			r.p99 = math.Max(r.p99, time.Since(end).Seconds())
		}
		results = append(results, r)
		s.drop(q)
		fmt.Fprintf(w, "  %-28s quiet send-to-receive p50 %7.3fs  p99 %7.3fs  (quiet received %d of %d sent; noisy received %d; quiet send call p50 %.3fs p99 %.3fs)\n",
			r.name, r.p50, r.p99, r.received, sentQuiet.Load(), r.noisyReceived, sendLat.pct(0.5), sendLat.pct(0.99))
	}
	base := math.NaN()
	for _, r := range results {
		if r.name == all["baseline"].name {
			base = r.p99
		}
	}
	var ratios []string
	for _, r := range results {
		if r.name != all["baseline"].name {
			ratios = append(ratios, fmt.Sprintf("%s %.2fx", strings.TrimPrefix(r.name, "spike, "), r.p99/base))
		}
	}
	fmt.Fprintf(w, "  quiet p99 during the spike / baseline: %s (target: within 2x with fair delivery)\n", strings.Join(ratios, ", "))
	return nil
}

// outage: steady load at half capacity; consumers away, then back.
func (s *scn) outage(ctx context.Context, away, recovery time.Duration, sideline int) error {
	w := s.out.Stdout
	load := float64(s.capacity) / 2
	fmt.Fprintf(w, "outage: %0.f/s over 10 tenants, capacity %d/s; consumers away for %s, then measured for %s\n", load, s.capacity, away, recovery)
	for _, run := range []struct {
		name  string
		attrs map[string]string
	}{{fmt.Sprintf("SidelineAgeSeconds=%d", sideline), map[string]string{"SidelineAgeSeconds": strconv.Itoa(sideline)}}, {"no sideline", nil}} {
		attrs := map[string]string{"VisibilityTimeout": "60"}
		for k, v := range run.attrs {
			attrs[k] = v
		}
		q, err := s.queue(ctx, "scn-outage", attrs)
		if err != nil {
			return err
		}
		var back atomic.Int64 // unix nanos of the return
		var mu sync.Mutex
		perSecond := map[int]*samples{}
		var after samples
		var backlogDrained atomic.Int64
		cons := s.consume(ctx, q, func(sent time.Time, tenant string, at time.Time) {
			b := back.Load()
			if b == 0 {
				return
			}
			if sent.UnixNano() < b {
				backlogDrained.Store(at.UnixNano())
				return
			}
			sec := int(sent.Sub(time.Unix(0, b)).Seconds())
			mu.Lock()
			if perSecond[sec] == nil {
				perSecond[sec] = &samples{}
			}
			ps := perSecond[sec]
			mu.Unlock()
			ps.add(at.Sub(sent))
			after.add(at.Sub(sent))
		})
		stop := make(chan struct{})
		var pw sync.WaitGroup
		for i := 0; i < 10; i++ {
			pw.Add(1)
			go func(i int) {
				defer pw.Done()
				producer(ctx, q, fmt.Sprintf("t%d", i), load/10, stop, nil, nil, time.Time{})
			}(i)
		}
		clock.Sleep(ctx, clock.Real{}, 5*time.Second) // steady state
		cons.paused.Store(true)
		clock.Sleep(ctx, clock.Real{}, away)
		back.Store(time.Now().UnixNano())
		cons.paused.Store(false)
		clock.Sleep(ctx, clock.Real{}, recovery)
		close(stop)
		pw.Wait()
		clock.Sleep(ctx, clock.Real{}, 2*time.Second)
		cons.stop()
		s.drop(q)
		first := perSecond[0]
		var first10 samples
		for sec := 0; sec < 10; sec++ {
			if p := perSecond[sec]; p != nil {
				p.mu.Lock()
				first10.v = append(first10.v, p.v...)
				p.mu.Unlock()
			}
		}
		drain := "not drained in the window"
		if d := backlogDrained.Load(); d > 0 {
			drain = fmt.Sprintf("%.1fs after the return", time.Unix(0, d).Sub(time.Unix(0, back.Load())).Seconds())
		}
		p1 := math.NaN()
		if first != nil {
			p1 = first.pct(0.99)
		}
		fmt.Fprintf(w, "  %-22s messages sent after the return: p99 %.3fs in the first second, %.3fs in the first 10 s, %.3fs over the window (p50 %.3fs); last backlog message received %s\n",
			run.name, p1, first10.pct(0.99), after.pct(0.99), after.pct(0.5), drain)
	}
	return nil
}

// cost: receive throughput (receive 10 + delete batch, unpaced) with one
// tenant and with many.
func (s *scn) cost(ctx context.Context, tenants, messages int) error {
	w := s.out.Stdout
	fmt.Fprintf(w, "cost: %d messages preloaded, drained by 16 consumers (receive 10, delete batch)\n", messages)
	var rates []float64
	for _, n := range []int{1, tenants} {
		q, err := s.queue(ctx, "scn-cost", nil)
		if err != nil {
			return err
		}
		// preload
		var pw sync.WaitGroup
		var next atomic.Int64
		for p := 0; p < 8; p++ {
			pw.Add(1)
			go func() {
				defer pw.Done()
				for {
					i := next.Add(10) - 10
					if i >= int64(messages) || ctx.Err() != nil {
						return
					}
					bodies, groups := make([]string, 10), make([]string, 10)
					for j := range bodies {
						t := "t" + strconv.Itoa(int(i+int64(j))%n)
						bodies[j], groups[j] = body(t, time.Now()), t
					}
					_, _, _ = q.sendBatch(ctx, bodies, groups)
				}
			}()
		}
		pw.Wait()
		var got atomic.Int64
		start := time.Now()
		var cw sync.WaitGroup
		for c := 0; c < 16; c++ {
			cw.Add(1)
			go func() {
				defer cw.Done()
				for got.Load() < int64(messages) && ctx.Err() == nil && time.Since(start) < 5*time.Minute {
					ms, err := q.receive(ctx, 10)
					if err != nil || len(ms) == 0 {
						continue
					}
					h := make([]string, len(ms))
					for i, m := range ms {
						h[i] = m.handle
					}
					_ = q.deleteBatch(ctx, h)
					got.Add(int64(len(ms)))
				}
			}()
		}
		cw.Wait()
		rate := float64(got.Load()) / time.Since(start).Seconds()
		rates = append(rates, rate)
		s.drop(q)
		fmt.Fprintf(w, "  %6d tenant(s): %.0f msgs/s received and deleted\n", n, rate)
	}
	fmt.Fprintf(w, "  ratio many/one: %.2f (target: at least 0.80)\n", rates[1]/rates[0])
	return nil
}
