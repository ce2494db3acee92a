package cli

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// benchResult is what `sluice bench --json` prints.
type benchResult struct {
	DurationS float64 `json:"duration_seconds"`
	Sent      int64   `json:"sent"`
	Received  int64   `json:"received"`
	SendRate  float64 `json:"send_msgs_per_second"`
	// EndToEndRate counts messages received and deleted while producers
	// were sending, per second of that window.
	EndToEndRate  float64            `json:"end_to_end_msgs_per_second"`
	SendLatencyMS map[string]float64 `json:"send_latency_ms"`
	RecvLatencyMS map[string]float64 `json:"receive_latency_ms"`
	E2ELatencyMS  map[string]float64 `json:"send_to_receive_ms"`
	Errors        int64              `json:"errors"`
	// ReceiveCalls counts receive requests, EmptyReceives those that
	// returned nothing; MsgsPerReceive is messages per non-empty one.
	ReceiveCalls   int64   `json:"receive_calls"`
	EmptyReceives  int64   `json:"empty_receives"`
	MsgsPerReceive float64 `json:"messages_per_receive"`
}

type latencies struct {
	mu sync.Mutex
	v  []time.Duration
}

func (l *latencies) add(d time.Duration) { l.mu.Lock(); l.v = append(l.v, d); l.mu.Unlock() }

func (l *latencies) pcts() map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	if len(l.v) == 0 {
		return out
	}
	sort.Slice(l.v, func(i, j int) bool { return l.v[i] < l.v[j] })
	for _, p := range []float64{50, 90, 99, 99.9} {
		i := int(float64(len(l.v)-1) * p / 100)
		out["p"+strconv.FormatFloat(p, 'f', -1, 64)] = float64(l.v[i].Microseconds()) / 1000
	}
	out["max"] = float64(l.v[len(l.v)-1].Microseconds()) / 1000
	return out
}

func bench(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	endpoint := env.Getenv("SLUICE_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:9324"
	}
	fs.StringVar(&endpoint, "endpoint", endpoint, "server URL (loopback by default)")
	queue := fs.String("queue", "bench", "queue to use (created if missing, purged first)")
	producers := fs.Int("producers", 8, "concurrent senders")
	consumers := fs.Int("consumers", 8, "concurrent receivers")
	batch := fs.Int("batch", 10, "messages per send and receive call (1-10)")
	size := fs.Int("size", 1024, "message body bytes")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	tenants := fs.Int("tenants", 1, "distinct MessageGroupId values (tenants)")
	rate := fs.Int("rate", 0, "total send rate in messages/s (0: as fast as possible)")
	asJSON := fs.Bool("json", false, "print JSON")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's CPU profile to this file (to see what the client itself costs)")
	useSDK := fs.Bool("sdk", false, "drive the server with the AWS SDK (signed requests; uses much more client CPU) instead of the lean JSON client")
	stdHTTP := fs.Bool("stdhttp", false, "the lean JSON client over net/http's client instead of its own keep-alive connections (more client CPU per request)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *batch < 1 || *batch > 10 {
		return fmt.Errorf("--batch must be 1-10")
	}
	if *duration > time.Hour {
		return fmt.Errorf("--duration is capped at one hour")
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// Buffers that hold a whole batch: one write per request and fewer
	// reads per response (the default 4 KiB splits a batch of 1 KiB
	// messages into several system calls).
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *producers + *consumers + 4,
		WriteBufferSize: 64 << 10, ReadBufferSize: 64 << 10}}
	c := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), HTTPClient: hc,
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")})
	// A short visibility timeout: a batch whose response is lost (a reset
	// connection the SDK retries) comes back within the drain.
	q, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: queue, Attributes: map[string]string{"VisibilityTimeout": "5"}})
	if err != nil {
		return err
	}
	_, _ = c.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: q.QueueUrl})
	var p poster = &stdPoster{hc: hc, endpoint: strings.TrimRight(endpoint, "/")}
	if !*stdHTTP {
		if p, err = newPoster(strings.TrimRight(endpoint, "/"), hc, *producers+*consumers+4); err != nil {
			return err
		}
	}
	var api benchAPI = &leanBench{p: p, url: *q.QueueUrl}
	if *useSDK {
		api = &sdkBench{c: c, url: q.QueueUrl}
	}
	pad := strings.Repeat("x", max(0, *size-20))
	var sent, received, errs, recvCalls, emptyRecvs atomic.Int64
	var sendLat, recvLat, e2e latencies
	start := time.Now()
	stopSend := start.Add(*duration)
	var tick <-chan time.Time
	if *rate > 0 {
		per := time.Second * time.Duration(*batch) / time.Duration(*rate)
		t := time.NewTicker(max(per, time.Microsecond))
		defer t.Stop()
		tick = t.C
	}
	var wg sync.WaitGroup
	for p := 0; p < *producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			n := 0
			for time.Now().Before(stopSend) && ctx.Err() == nil {
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						return
					}
				}
				bodies := make([]string, *batch)
				var groups []string
				if *tenants > 1 {
					groups = make([]string, *batch)
				}
				now := strconv.FormatInt(time.Now().UnixNano(), 10)
				for i := range bodies {
					n++
					body := now + ":" + pad
					bodies[i] = body[:max(len(now)+1, *size)]
					if groups != nil {
						groups[i] = "t" + strconv.Itoa((p*7919+n)%*tenants)
					}
				}
				t0 := time.Now()
				ok, failed, err := api.sendBatch(ctx, bodies, groups)
				if err != nil {
					errs.Add(1)
					continue
				}
				sendLat.add(time.Since(t0))
				sent.Add(int64(ok))
				errs.Add(int64(failed))
			}
		}(p)
	}
	var cwg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	for i := 0; i < *consumers; i++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for cctx.Err() == nil {
				t0 := time.Now()
				msgs, err := api.receive(cctx, *batch)
				recvCalls.Add(1)
				if err != nil {
					if cctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				if len(msgs) == 0 {
					emptyRecvs.Add(1)
					continue
				}
				recvLat.add(time.Since(t0))
				now := time.Now()
				handles := make([]string, len(msgs))
				for j, m := range msgs {
					if ts, _, ok := strings.Cut(m.body, ":"); ok {
						if ns, err := strconv.ParseInt(ts, 10, 64); err == nil {
							e2e.add(now.Sub(time.Unix(0, ns)))
						}
					}
					handles[j] = m.handle
				}
				if err := api.deleteBatch(cctx, handles); err != nil {
					errs.Add(1)
				}
				received.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	sendElapsed := time.Since(start)
	receivedInWindow := received.Load()
	// Drain: give consumers until everything sent was received (bounded).
	drainUntil := time.Now().Add(30 * time.Second)
	for received.Load() < sent.Load() && time.Now().Before(drainUntil) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	cwg.Wait()
	res := benchResult{
		DurationS: elapsed.Seconds(), Sent: sent.Load(), Received: received.Load(),
		SendRate:      float64(sent.Load()) / sendElapsed.Seconds(),
		EndToEndRate:  float64(receivedInWindow) / sendElapsed.Seconds(),
		SendLatencyMS: sendLat.pcts(), RecvLatencyMS: recvLat.pcts(), E2ELatencyMS: e2e.pcts(), Errors: errs.Load(),
		ReceiveCalls: recvCalls.Load(), EmptyReceives: emptyRecvs.Load(),
	}
	if n := res.ReceiveCalls - res.EmptyReceives; n > 0 {
		res.MsgsPerReceive = float64(res.Received) / float64(n)
	}
	if *asJSON {
		return writeJSON(env.Stdout, res)
	}
	fmt.Fprintf(env.Stdout, "sent %d, received %d in %.1fs (errors %d)\n", res.Sent, res.Received, res.DurationS, res.Errors)
	fmt.Fprintf(env.Stdout, "send rate        %.0f msgs/s\nend-to-end rate  %.0f msgs/s\n", res.SendRate, res.EndToEndRate)
	for _, l := range []struct {
		name string
		v    map[string]float64
	}{{"send latency", res.SendLatencyMS}, {"receive latency", res.RecvLatencyMS}, {"send-to-receive", res.E2ELatencyMS}} {
		fmt.Fprintf(env.Stdout, "%-16s p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms\n", l.name, l.v["p50"], l.v["p90"], l.v["p99"], l.v["max"])
	}
	fmt.Fprintf(env.Stdout, "receive calls    %d (%d empty), %.1f messages per non-empty receive\n", res.ReceiveCalls, res.EmptyReceives, res.MsgsPerReceive)
	return nil
}
