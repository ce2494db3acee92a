package peers_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sluicemq/sluice/internal/peers"
)

// A short run: every message the broker acknowledged was consumed and
// acknowledged, and the figures are filled in.
func check(t *testing.T, p peers.Peer, w peers.Workload) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := peers.Run(ctx, p, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %+v", p.Name(), res)
	if res.Sent == 0 || res.Received < res.Sent || res.Errors != 0 {
		t.Fatalf("%s: sent %d, received %d, errors %d: want every acknowledged message received", p.Name(), res.Sent, res.Received, res.Errors)
	}
	if res.Rate <= 0 || res.SendLatencyMS["p999"] <= 0 || res.E2ELatencyMS["p50"] <= 0 || res.Durability == "" || res.ClientCPUMicros <= 0 {
		t.Fatalf("%s: figures missing: %+v", p.Name(), res)
	}
	if sc, ok := p.(peers.ServerCPU); ok {
		if _, measured := sc.CPUSeconds(ctx); measured && res.ServerCPUMicros <= 0 {
			t.Fatalf("%s: no server CPU a message: %+v", p.Name(), res)
		}
	}
}

// startNATS runs nats-server in process with JetStream on a temp store,
// fsyncing every write (sync_interval: always), on a free loopback port.
func startNATS(t *testing.T) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		SyncAlways: true, NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

func TestNATS(t *testing.T) {
	url := startNATS(t)
	for _, queues := range []int{1, 3} {
		// The server runs in this process, so its CPU is this process's.
		check(t, peers.NATS{URL: url, Server: peers.ProcessCPU(os.Getpid())}, peers.Workload{Producers: 2, Consumers: 2, InFlight: 8, Size: 256, Queues: queues,
			Duration: time.Second, Drain: 30 * time.Second})
	}
}

// RabbitMQ when one listens (scripts/peers.sh start); CI has none.
func TestRabbitMQ(t *testing.T) {
	url := os.Getenv("SLUICE_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:5672", time.Second)
	if err != nil {
		t.Skipf("no AMQP server on 127.0.0.1:5672 (%v): start one with scripts/peers.sh start", err)
	}
	c.Close()
	check(t, peers.RabbitMQ{URL: url, Prefix: "sluice-bench-test"}, peers.Workload{Producers: 2, Consumers: 2, InFlight: 8, Size: 256, Queues: 2,
		Duration: time.Second, Drain: 30 * time.Second})
}

// A summary's CPU figures are the medians of the rounds that measured
// them: a round without one (0) is left out, not counted as free.
func TestSummariesCPU(t *testing.T) {
	rs := []peers.Result{
		{Peer: "sluice", Round: 2, Rate: 300, ServerCPUMicros: 30, ClientCPUMicros: 12},
		{Peer: "rabbitmq", Round: 1, Rate: 100, ClientCPUMicros: 9},
		{Peer: "sluice", Round: 1, Rate: 200, ServerCPUMicros: 20, ClientCPUMicros: 0},
		{Peer: "sluice", Round: 3, Rate: 400, ServerCPUMicros: 40, ClientCPUMicros: 14},
	}
	sums := peers.Summaries(rs)
	if len(sums) != 2 || sums[0].Peer != "sluice" || sums[1].Peer != "rabbitmq" {
		t.Fatalf("summaries %+v: want sluice, then rabbitmq", sums)
	}
	if s := sums[0]; s.Median != 300 || s.CPUMicros != 30 || s.ClientCPUMicros != 13 || s.Rates[0] != 200 {
		t.Errorf("sluice: median %v, server CPU %v, client CPU %v, rates %v: want 300, 30, 13 (the mean of 12 and 14), rounds in order", s.Median, s.CPUMicros, s.ClientCPUMicros, s.Rates)
	}
	if s := sums[1]; s.CPUMicros != 0 || s.ClientCPUMicros != 9 {
		t.Errorf("rabbitmq: server CPU %v, client CPU %v: want 0 (not measured) and 9", s.CPUMicros, s.ClientCPUMicros)
	}
}

func TestConsumerQueues(t *testing.T) {
	// Every queue has a consumer, whatever the counts.
	for _, tc := range []struct{ consumers, queues int }{{4, 1}, {4, 8}, {4, 64}, {3, 2}, {1, 5}} {
		seen := map[int]bool{}
		for i := range tc.consumers {
			for _, q := range peers.ConsumerQueues(i, tc.consumers, tc.queues) {
				seen[q] = true
			}
		}
		if len(seen) != tc.queues {
			t.Errorf("%d consumers, %d queues: covered %d", tc.consumers, tc.queues, len(seen))
		}
	}
}

// A run's streams are made again right after the run before deleted them.
// nats-server removes an account's emptied stream directory in the
// background after the last stream is deleted, and a create in that
// moment fails ("error creating store for stream"): Open tries it again.
// Without that, one cycle in a hundred or so failed (v2.15.2).
func TestNATSOpenAfterClose(t *testing.T) {
	url := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := peers.NATS{URL: url}
	for i := range 500 {
		s, err := n.Open(ctx, peers.Workload{Queues: 1, Consumers: 1, InFlight: 1})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", i, err)
		}
	}
}
