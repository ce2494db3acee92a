// Package loadgen is `sluice bench` and `sluice scenario`: load against a
// running server over the SQS JSON protocol (a lean client of its own, or
// the AWS SDK), the same workload against a Sluice cluster, RabbitMQ and
// NATS JetStream (internal/peers), the charts of the results, and the
// anti-backlog scenarios.
package loadgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/cmdkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/charts"
	"github.com/sluicemq/sluice/internal/peers"
)

const benchUsage = `Usage:
  sluice bench [flags]                     load test Sluice (the server at --endpoint)
  sluice bench --peers rabbitmq,nats,sluice --rounds 3
                                           the same workload against each, alternating
  sluice bench --peers sluice,sluice-cluster,rabbitmq --rounds 3
                                           sluice-cluster: a three-node cluster, each call
                                           to the next of --cluster-endpoints
  sluice bench chart --in FILE[,FILE] --out DIR
                                           draw the charts from --json results

Every message counts as sent once the broker acknowledged it as durable,
and as received once a consumer received and acknowledged (deleted) it.
Start the peers with scripts/peers.sh start, the cluster with
scripts/peers.sh start-cluster (docs/benchmarks.md).

Flags:
`

// Bench is `sluice bench`: load over the SQS JSON protocol against a
// running server, or the same workload against a Sluice cluster, RabbitMQ
// and NATS.
func Bench(ctx context.Context, args []string, env cmdkit.Env) error {
	if len(args) > 0 && args[0] == "chart" {
		return benchChart(args[1:], env)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	endpoint := env.Getenv("SLUICE_ENDPOINT")
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	fs.StringVar(&endpoint, "endpoint", endpoint, "Sluice's SQS endpoint (default $SLUICE_ENDPOINT or loopback)")
	clusterEndpoints := env.Getenv("SLUICE_CLUSTER_ENDPOINTS")
	if clusterEndpoints == "" {
		clusterEndpoints = defaultClusterEndpoints
	}
	fs.StringVar(&clusterEndpoints, "cluster-endpoints", clusterEndpoints,
		"sluice-cluster: the SQS endpoints of the cluster's nodes, comma-separated; each call goes to the next (default $SLUICE_CLUSTER_ENDPOINTS or scripts/peers.sh start-cluster's)")
	adminURL := fs.String("admin", "", "Sluice's admin address, where the server's CPU time is read (process_cpu_seconds_total) for its CPU per message (default: http://127.0.0.1:9325 when --endpoint is the default one, else not measured)")
	amqpURL := fs.String("amqp-url", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ's address")
	natsURL := fs.String("nats-url", "nats://127.0.0.1:4222", "NATS's address")
	rabbitPID := fs.Int("rabbitmq-pid", 0, "RabbitMQ's server process (beam.smp) when it runs on this machine: its CPU time (Linux /proc) gives RabbitMQ's server CPU a message (0: not measured)")
	natsPID := fs.Int("nats-pid", 0, "the nats-server process when it runs on this machine, for NATS's server CPU a message (0: not measured)")
	peer := fs.String("peer", "", "one peer: rabbitmq, nats, sluice or sluice-cluster (same as --peers with one name)")
	peerList := fs.String("peers", "sluice", "peers to run, comma-separated, in this order each round: rabbitmq, nats, sluice (--endpoint), sluice-cluster (--cluster-endpoints)")
	rounds := fs.Int("rounds", 1, "rounds: each runs every peer once, alternating")
	queue := fs.String("queue", "bench", "prefix of the Sluice queues each run creates (NAME-RUN-i) and deletes at its end")
	producers := fs.Int("producers", 8, "concurrent producers")
	consumers := fs.Int("consumers", 4, "concurrent consumers")
	inFlight := fs.Int("inflight", 32, "messages each producer keeps unacknowledged (and each consumer holds); Sluice: inflight/batch calls at once")
	batch := fs.Int("batch", 10, "Sluice: messages per send, receive and delete call (1-10)")
	size := fs.Int("size", 1024, "message body bytes")
	sizeList := fs.String("sizes", "", "message sizes to sweep, comma-separated bytes (overrides --size)")
	queueList := fs.String("queues", "1", "spread the load over N queues; comma-separated to sweep")
	duration := fs.Duration("duration", 10*time.Second, "how long producers publish, each run")
	tenants := fs.Int("tenants", 1, "Sluice: distinct MessageGroupId values (tenants)")
	rate := fs.Int("rate", 0, "total send rate in messages/s (0: as fast as possible)")
	jsonOut := fs.String("json", "", "write machine-readable results to this file (- for standard output, instead of the table)")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's CPU profile to this file (to see what the client itself costs)")
	useSDK := fs.Bool("sdk", false, "Sluice: drive the server with the AWS SDK (signed requests; uses much more client CPU) instead of the lean JSON client")
	stdHTTP := fs.Bool("stdhttp", false, "Sluice: the lean JSON client over net/http's client instead of its own keep-alive connections (more client CPU per request)")
	if _, err := cmdkit.ParseFlags(fs, args); err != nil {
		return err
	}
	if *batch < 1 || *batch > 10 {
		return fmt.Errorf("--batch must be 1-10")
	}
	names := splitList(*peerList)
	if *peer != "" {
		names = []string{*peer}
	}
	sizes := []int{*size}
	if *sizeList != "" {
		var err error
		if sizes, err = intList("--sizes", *sizeList); err != nil {
			return err
		}
	}
	queueCounts, err := intList("--queues", *queueList)
	if err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("--rounds must be at least 1")
	}
	w := peers.Workload{Producers: *producers, Consumers: *consumers, InFlight: *inFlight, Duration: *duration, Rate: *rate}
	for _, s := range sizes {
		w.Size = s
		if err := w.WithDefaults().Validate(); err != nil {
			return err
		}
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
	client := "lean"
	switch {
	case *useSDK:
		client = "sdk"
	case *stdHTTP:
		client = "stdhttp"
	}
	byName := map[string]peers.Peer{}
	for _, n := range names {
		switch n {
		case "rabbitmq":
			byName[n] = peers.RabbitMQ{URL: *amqpURL, Server: peers.ProcessCPU(*rabbitPID)}
		case "nats":
			byName[n] = peers.NATS{URL: *natsURL, Server: peers.ProcessCPU(*natsPID)}
		case "sluice":
			api, err := newBenchSQS(endpoint, client, *producers+*consumers)
			if err != nil {
				return err
			}
			admin := *adminURL
			if admin == "" && strings.TrimRight(endpoint, "/") == defaultEndpoint {
				admin = defaultAdmin // the admin address of the server at the default endpoint
			}
			byName[n] = peers.Sluice{API: api, Batch: *batch, Tenants: *tenants, Queue: *queue, Metrics: metricsURL(admin)}
		case "sluice-cluster":
			api, err := newClusterSQS(splitList(clusterEndpoints), client, *producers+*consumers)
			if err != nil {
				return err
			}
			byName[n] = peers.SluiceCluster{Sluice: peers.Sluice{API: api, Batch: *batch, Tenants: *tenants, Queue: *queue}}
		default:
			return fmt.Errorf("unknown peer %q (rabbitmq, nats, sluice or sluice-cluster)", n)
		}
	}
	rep := peers.Report{Version: 1, Date: time.Now().UTC().Format(time.RFC3339),
		Host: peers.Host{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()},
		Config: peers.Config{Workload: w.WithDefaults(), DurationS: duration.Seconds(), Peers: names, Rounds: *rounds,
			Sizes: sizes, QueueCnts: queueCounts, Batch: *batch, Client: client, Tenants: *tenants,
			Command: "sluice bench " + strings.Join(args, " ")}}
	rep.Config.Size, rep.Config.Queues = sizes[0], queueCounts[0]
	for _, s := range sizes {
		for _, qn := range queueCounts {
			for r := 1; r <= *rounds; r++ {
				for _, n := range names {
					w.Size, w.Queues = s, qn
					res, err := peers.Run(ctx, byName[n], w)
					res.Round = r
					if err != nil {
						return err
					}
					cpu := ""
					if res.ServerCPUMicros > 0 {
						cpu = fmt.Sprintf(", server CPU %.1f µs/msg", res.ServerCPUMicros)
					}
					if res.ClientCPUMicros > 0 {
						cpu += fmt.Sprintf(", client CPU %.1f µs/msg", res.ClientCPUMicros)
					}
					fmt.Fprintf(env.Stderr, "round %d  %-14s  %7d B  %2d queues  %9.0f msgs/s  (sent %d, received %d, backlog at window end %d, errors %d%s)\n",
						r, n, s, qn, res.Rate, res.Sent, res.Received, res.Backlog, res.Errors, cpu)
					rep.Results = append(rep.Results, res)
				}
			}
		}
	}
	if *jsonOut == "-" {
		return cmdkit.WriteJSON(env.Stdout, rep)
	}
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return err
		}
		if err := cmdkit.WriteJSON(f, rep); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if len(rep.Results) == 1 {
		printRun(env, rep.Results[0])
		return nil
	}
	printTable(env, rep)
	return nil
}

// The SQS and admin addresses of `sluice serve` with its defaults.
const (
	defaultEndpoint = "http://127.0.0.1:9324"
	defaultAdmin    = "http://127.0.0.1:9325"
)

// metricsURL is the Prometheus endpoint of an admin address ("" for none).
func metricsURL(admin string) string {
	if admin == "" {
		return ""
	}
	return strings.TrimSuffix(admin, "/") + "/metrics"
}

// printRun prints one run in full.
func printRun(env cmdkit.Env, res peers.Result) {
	fmt.Fprintf(env.Stdout, "%s: sent %d, received %d in %.1fs (errors %d)\n", res.Peer, res.Sent, res.Received, res.DurationS, res.Errors)
	fmt.Fprintf(env.Stdout, "send rate        %.0f msgs/s\nend-to-end rate  %.0f msgs/s\n", res.SendRate, res.Rate)
	fmt.Fprintf(env.Stdout, "backlog          %d messages sent and not yet through at the window's end\n", res.Backlog)
	if res.ServerCPUMicros > 0 {
		fmt.Fprintf(env.Stdout, "server CPU       %.1f µs per message through\n", res.ServerCPUMicros)
	}
	if res.ClientCPUMicros > 0 {
		fmt.Fprintf(env.Stdout, "client CPU       %.1f µs per message through (this load generator's)\n", res.ClientCPUMicros)
	}
	for _, l := range []struct {
		name string
		v    map[string]float64
	}{{"send latency", res.SendLatencyMS}, {"receive latency", res.ReceiveLatencyMS}, {"send-to-receive", res.E2ELatencyMS}} {
		if len(l.v) == 0 {
			continue
		}
		fmt.Fprintf(env.Stdout, "%-16s p50 %.2fms  p90 %.2fms  p99 %.2fms  p99.9 %.2fms  max %.2fms\n", l.name, l.v["p50"], l.v["p90"], l.v["p99"], l.v["p999"], l.v["max"])
	}
	if res.ReceiveCalls > 0 {
		fmt.Fprintf(env.Stdout, "receive calls    %d (%d empty), %.1f messages per non-empty receive\n", res.ReceiveCalls, res.EmptyReceives, res.MsgsPerReceive)
	}
	fmt.Fprintf(env.Stdout, "durability       %s\n", res.Durability)
}

// micros formats a CPU time per message ("-" when not measured).
func micros(v float64) string {
	if v <= 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// printTable prints one row per peer, size and queue count: msgs/s each
// round, the median, Sluice's median over the row's, and latencies.
func printTable(env cmdkit.Env, rep peers.Report) {
	sums := peers.Summaries(rep.Results)
	sluiceAt := map[[2]int]float64{}
	for _, s := range sums {
		if s.Peer == "sluice" {
			sluiceAt[[2]int{s.Size, s.Queues}] = s.Median
		}
	}
	header := []string{"peer", "size", "queues"}
	for r := 1; r <= rep.Config.Rounds; r++ {
		header = append(header, "round "+strconv.Itoa(r))
	}
	header = append(header, "median msgs/s", "sluice/peer", "send p50/p99 ms", "e2e p50/p99 ms", "backlog at window end", "server CPU µs/msg", "client CPU µs/msg", "durability")
	var rows [][]string
	for _, s := range sums {
		row := []string{s.Peer, charts.SizeLabel(s.Size), strconv.Itoa(s.Queues)}
		for r := range rep.Config.Rounds {
			v := "-"
			if r < len(s.Rates) {
				v = thousands(s.Rates[r])
			}
			row = append(row, v)
		}
		ratio := "-"
		if sl, ok := sluiceAt[[2]int{s.Size, s.Queues}]; ok && s.Median > 0 {
			ratio = strconv.FormatFloat(sl/s.Median, 'f', 2, 64) + "x"
		}
		backlogs := make([]string, len(s.Backlogs))
		for i, b := range s.Backlogs {
			backlogs[i] = thousands(float64(b))
		}
		row = append(row, thousands(s.Median), ratio,
			fmt.Sprintf("%.1f / %.1f", s.SendMS["p50"], s.SendMS["p99"]),
			fmt.Sprintf("%.1f / %.1f", s.E2EMS["p50"], s.E2EMS["p99"]), strings.Join(backlogs, ", "),
			micros(s.CPUMicros), micros(s.ClientCPUMicros), s.Durability)
		rows = append(rows, row)
	}
	cmdkit.Table(env.Stdout, header, rows)
}

// thousands formats a rate as a whole number with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: want positive whole numbers, got %q", flagName, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New(flagName + ": empty")
	}
	return out, nil
}

// defaultClusterEndpoints are the SQS ports of the three-node cluster
// scripts/peers.sh start-cluster runs.
const defaultClusterEndpoints = "http://127.0.0.1:9424,http://127.0.0.1:9434,http://127.0.0.1:9444"

// newClusterSQS returns the client the sluice-cluster peer drives a
// cluster with: one client a node, each call to the next node.
func newClusterSQS(endpoints []string, client string, conns int) (*peers.Spread, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("--cluster-endpoints: empty")
	}
	apis := make([]peers.SQS, len(endpoints))
	for i, ep := range endpoints {
		api, err := newBenchSQS(ep, client, conns)
		if err != nil {
			return nil, err
		}
		apis[i] = api
	}
	return peers.NewSpread(apis...), nil
}

// newBenchSQS returns the client the Sluice peer drives the server with.
func newBenchSQS(endpoint, client string, conns int) (peers.SQS, error) {
	endpoint = strings.TrimRight(endpoint, "/")
	// Buffers that hold a whole batch: one write per request and fewer
	// reads per response (the default 4 KiB splits a batch of 1 KiB
	// messages into several system calls).
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * conns,
		WriteBufferSize: 64 << 10, ReadBufferSize: 64 << 10}}
	switch client {
	case "sdk":
		return sdkSQS{awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), HTTPClient: hc,
			Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")})}, nil
	case "stdhttp":
		return leanSQS{&stdPoster{hc: hc, endpoint: endpoint}}, nil
	}
	p, err := newPoster(endpoint, hc, 4*conns)
	if err != nil {
		return nil, err
	}
	return leanSQS{p}, nil
}
