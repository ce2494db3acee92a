package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/cmdkit"
	"github.com/sluicemq/sluice/internal/peers"
	"github.com/sluicemq/sluice/internal/sqs"
)

// node is one SQS front of several over one broker, as every node of a
// cluster answers for every queue, and counts the requests it received
// by action.
type node struct {
	url   string
	mu    sync.Mutex
	calls map[string]int
}

func (n *node) counts() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.calls)
}

func (n *node) reset() {
	n.mu.Lock()
	n.calls = map[string]int{}
	n.mu.Unlock()
}

// serveNodes runs n SQS fronts on loopback ports over one broker in
// memory. A queue URL one front returned works on every other (the
// server resolves the queue from the URL's path), as on a cluster's nodes.
func serveNodes(t *testing.T, n int) []*node {
	t.Helper()
	b, err := broker.Open(broker.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv := sqs.NewServer(sqs.ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, b)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	nodes := make([]*node, n)
	for i := range nodes {
		nd := &node{calls: map[string]int{}}
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			nd.mu.Lock()
			nd.calls[strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")]++
			nd.mu.Unlock()
			srv.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		nd.url = hs.URL
		nodes[i] = nd
	}
	return nodes
}

// bench runs `sluice bench args...` with SLUICE_ENDPOINT set to endpoint
// and returns its standard output and error.
func bench(t *testing.T, endpoint string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := cmdkit.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "SLUICE_ENDPOINT" {
			return endpoint
		}
		return ""
	}}
	err := Bench(context.Background(), args, env)
	return out.String(), errb.String(), err
}

// The sluice-cluster peer spreads every kind of call over every node,
// with each client kind.
func TestBenchClusterSpreadsCalls(t *testing.T) {
	nodes := serveNodes(t, 3)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	for _, client := range []string{"--sdk=false", "--stdhttp", "--sdk=true"} {
		t.Run(client, func(t *testing.T) {
			for _, n := range nodes {
				n.reset()
			}
			out, errOut, err := bench(t, "http://127.0.0.1:1", "--peer", "sluice-cluster", "--cluster-endpoints", strings.Join(urls, ","),
				"--duration", "300ms", "--producers", "2", "--consumers", "2", "--tenants", "3", "--json", "-", client)
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, errOut)
			}
			var rep peers.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bench --json: %v\n%s", err, out)
			}
			if len(rep.Results) != 1 {
				t.Fatalf("%d results, want 1", len(rep.Results))
			}
			if res := rep.Results[0]; res.Sent == 0 || res.Received != res.Sent || res.Errors != 0 {
				t.Fatalf("sent %d, received %d, errors %d: want every message sent received", res.Sent, res.Received, res.Errors)
			}
			total := 0
			counts := make([]map[string]int, len(nodes))
			for i, n := range nodes {
				counts[i] = n.counts()
				for _, c := range counts[i] {
					total += c
				}
			}
			for i, c := range counts {
				for _, op := range []string{"SendMessageBatch", "ReceiveMessage", "DeleteMessageBatch"} {
					if c[op] == 0 {
						t.Errorf("node %d received no %s: %v", i, op, counts)
					}
				}
				sum := 0
				for _, v := range c {
					sum += v
				}
				// Calls go to each node in turn: a third each.
				if sum < total/4 {
					t.Errorf("node %d received %d of %d requests, want about a third: %v", i, sum, total, counts)
				}
			}
		})
	}
}

// The cluster's results are reported as sluice-cluster: in the JSON
// report, the table and the progress lines, beside the single server's.
func TestBenchClusterReport(t *testing.T) {
	nodes := serveNodes(t, 4) // a single server, and a cluster of three
	var urls []string
	for _, n := range nodes[1:] {
		urls = append(urls, n.url)
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	out, errOut, err := bench(t, nodes[0].url, "--peers", "sluice,sluice-cluster", "--cluster-endpoints", strings.Join(urls, ","),
		"--duration", "300ms", "--producers", "2", "--consumers", "2", "--json", path)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep peers.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, raw)
	}
	if want := []string{"sluice", "sluice-cluster"}; !slices.Equal(rep.Config.Peers, want) {
		t.Errorf("config peers %v, want %v", rep.Config.Peers, want)
	}
	var names []string
	for _, res := range rep.Results {
		names = append(names, res.Peer)
	}
	if want := []string{"sluice", "sluice-cluster"}; !slices.Equal(names, want) {
		t.Fatalf("results of %v, want %v", names, want)
	}
	if d := rep.Results[1].Durability; !strings.Contains(d, "R3 JetStream") || d == rep.Results[0].Durability {
		t.Errorf("sluice-cluster durability %q", d)
	}
	if n := nodes[0].counts()["SendMessageBatch"]; n == 0 {
		t.Errorf("the single server received no sends")
	}
	for _, res := range rep.Results {
		if res.ClientCPUMicros <= 0 {
			t.Errorf("%s: client CPU %v µs a message: want the load generator's, measured", res.Peer, res.ClientCPUMicros)
		}
	}
	for _, want := range []string{"\nsluice-cluster ", "R3 JetStream", "client CPU µs/msg"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "round 1  sluice-cluster ") || !strings.Contains(errOut, ", client CPU ") {
		t.Errorf("no progress line for sluice-cluster:\n%s", errOut)
	}

	_, _, err = bench(t, nodes[0].url, "--peers", "sluice,cluster")
	if err == nil || !strings.Contains(err.Error(), `unknown peer "cluster"`) || !strings.Contains(err.Error(), "sluice-cluster") {
		t.Errorf("unknown peer: %v", err)
	}
}
