package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/gcheadroom"
	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs/sqstest"
	st "github.com/sluicemq/sluice/sluicetype"

	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/peers"
)

func startServer(t *testing.T) string {
	url, _ := serveBroker(t, broker.Config{InMemory: true})
	return url
}

// serveBroker runs the SQS server on a loopback port over a broker opened
// with cfg, and returns its URL and the broker.
func serveBroker(t *testing.T, cfg broker.Config) (string, *broker.Broker) {
	return sqstest.Serve(t, cfg)
}

func sluiceCmd(t *testing.T, endpoint string, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		switch k {
		case "SLUICE_ENDPOINT":
			return endpoint
		case "SLUICE_ADMIN_ENDPOINT":
			// Nothing listens on port 1: a test that wants the admin API
			// passes --admin, and the default (127.0.0.1:9325) may be a
			// server of someone else's on the machine.
			return "http://127.0.0.1:1"
		}
		return ""
	}}
	code := Run(context.Background(), args, env)
	if code != 0 {
		return errb.String(), code
	}
	return out.String(), code
}

func TestClientCommands(t *testing.T) {
	ep := startServer(t)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"queues", "create", "dlq"}, "/000000000000/dlq"},
		{[]string{"queues", "create", "jobs", "--attr", "VisibilityTimeout=5", "--attr", `RedrivePolicy={"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`}, "/jobs"},
		{[]string{"send", "jobs", "hello world", "--group", "tenant-a"}, "-"},
		{[]string{"queues", "list"}, "jobs"},
		{[]string{"queues", "attrs", "jobs"}, "VisibilityTimeout"},
		{[]string{"queues", "set", "jobs", "DelaySeconds=0"}, ""},
		{[]string{"receive", "jobs", "--visibility", "0"}, "hello world"},
		{[]string{"receive", "jobs"}, "MESSAGE ID"}, // over maxReceiveCount: moves to the DLQ
		{[]string{"dlq", "list"}, "jobs"},
		{[]string{"dlq", "peek", "dlq"}, "hello world"},
		{[]string{"dlq", "redrive", "dlq"}, "redrive started"},
	}
	for _, s := range steps {
		out, code := sluiceCmd(t, ep, s.args...)
		if code != 0 || !strings.Contains(out, s.want) {
			t.Fatalf("sluice %v: code %d, output:\n%s", s.args, code, out)
		}
	}
	// Redrive is asynchronous; the message comes back to its source, and a
	// long poll wakes when it does.
	out, _ := sluiceCmd(t, ep, "receive", "jobs", "--json", "--delete", "--wait", "20")
	var msgs []msgRow
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(msgs) != 1 || msgs[0].Body != "hello world" {
		t.Fatalf("redriven message: %s", out)
	}
	out, _ = sluiceCmd(t, ep, "queues", "list", "--json")
	var rows []queueRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("queues list --json: %v %s", err, out)
	}
	if _, code := sluiceCmd(t, ep, "queues", "delete", "nope"); code == 0 {
		t.Fatal("deleting a missing queue succeeded")
	}
	if out, code := sluiceCmd(t, ep, "bogus"); code == 0 || !strings.Contains(out, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, out)
	}
}

func TestServeRefusesPublicAddressWithoutCredentials(t *testing.T) {
	var errb bytes.Buffer
	code := Run(context.Background(), []string{"serve", "--sqs-addr", "0.0.0.0:0", "--data-dir", t.TempDir()}, Env{Stderr: &errb, Getenv: func(string) string { return "" }})
	if code == 0 || !strings.Contains(errb.String(), "--insecure") {
		t.Fatalf("code %d: %s", code, errb.String())
	}
}

// TestServeRefusesPublicAdminWithoutToken: the admin API (message bodies,
// purge) is not served beyond loopback without a token, even with SQS
// credentials; with a token it starts.
func TestServeRefusesPublicAdminWithoutToken(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "creds.json")
	os.WriteFile(creds, []byte(`{"principals":[{"name":"a","access_key_id":"AK","secret_access_key":"s","queues":["*"]}]}`), 0o600)
	var errb bytes.Buffer
	code := Run(context.Background(), []string{"serve", "--credentials", creds, "--admin-addr", "0.0.0.0:0", "--data-dir", t.TempDir()}, Env{Stderr: &errb, Getenv: func(string) string { return "" }})
	if code == 0 || !strings.Contains(errb.String(), "--admin-token") {
		t.Fatalf("code %d: %s", code, errb.String())
	}
	errb.Reset()
	code = Run(context.Background(), []string{"serve", "--disk-reserve", "lots", "--data-dir", t.TempDir()}, Env{Stderr: &errb, Getenv: func(string) string { return "" }})
	if code == 0 || !strings.Contains(errb.String(), "--disk-reserve") {
		t.Fatalf("a bad --disk-reserve: code %d: %s", code, errb.String())
	}
}

// TestServeStoreFlags: the store's sizes, from flags or the environment
// (the flag wins), reach the broker's Config; a bad or zero size is refused
// naming its flag, before anything opens.
func TestServeStoreFlags(t *testing.T) {
	for _, tc := range []struct {
		name                string
		args                []string
		env                 map[string]string
		segment, checkpoint int64
		reserve             int64
	}{
		{"defaults", nil, nil, 64 << 20, 64 << 20, 256 << 20},
		{"flags", []string{"--segment-bytes", "1MiB", "--checkpoint-bytes", "512KiB", "--disk-reserve", "2GiB"}, nil, 1 << 20, 512 << 10, 2 << 30},
		{"plain bytes", []string{"--segment-bytes", "65536", "--checkpoint-bytes=131072"}, nil, 64 << 10, 128 << 10, 256 << 20},
		{"environment", nil, map[string]string{"SLUICE_SEGMENT_BYTES": "8MiB", "SLUICE_CHECKPOINT_BYTES": "16MiB"}, 8 << 20, 16 << 20, 256 << 20},
		{"flag wins", []string{"--segment-bytes", "2MiB"}, map[string]string{"SLUICE_SEGMENT_BYTES": "8MiB"}, 2 << 20, 64 << 20, 256 << 20},
		{"reserve 0", []string{"--disk-reserve", "0"}, nil, 64 << 20, 64 << 20, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, c := serveFlags(Env{Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }})
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := c.brokerConfig(nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SegmentBytes != tc.segment || cfg.CheckpointBytes != tc.checkpoint || cfg.DiskReserve != tc.reserve {
				t.Fatalf("SegmentBytes %d, CheckpointBytes %d, DiskReserve %d; want %d, %d, %d",
					cfg.SegmentBytes, cfg.CheckpointBytes, cfg.DiskReserve, tc.segment, tc.checkpoint, tc.reserve)
			}
		})
	}
	for _, args := range [][]string{
		{"--segment-bytes", "lots"},
		{"--segment-bytes", "0"},
		{"--checkpoint-bytes", "-1MiB"},
		{"--checkpoint-bytes", "0B"},
		{"--gc-headroom", "lots"},
		{"--gc-headroom", "-64MiB"},
	} {
		var errb bytes.Buffer
		code := Run(context.Background(), append([]string{"serve", "--data-dir", t.TempDir()}, args...), Env{Stderr: &errb, Getenv: func(string) string { return "" }})
		if code == 0 || !strings.Contains(errb.String(), args[0]) {
			t.Errorf("serve %v: code %d: %s", args, code, errb.String())
		}
	}
}

// TestAdminServerTimeouts: slow or idle connections to the admin address
// are cut like the SQS port's.
func TestAdminServerTimeouts(t *testing.T) {
	s := adminHTTPServer(http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("admin server without a bound: %+v", s)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "512MiB": 512 << 20, "2GiB": 2 << 30, "1.5 GiB": 3 << 29, "10MB": 10e6, "7B": 7} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1", "1PiB", "1e30"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

// watchWriter closes seen when its output first contains want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func TestServeStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	serving := make(chan struct{})
	errb := &watchWriter{want: "sluice serving", seen: serving}
	go func() {
		done <- Run(ctx, []string{"serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, Env{Stderr: errb, Getenv: func(string) string { return "" }})
	}()
	<-serving // cancel once it serves (cancelling earlier must work too, but is not this test)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestServeSetsTheCollectorsHeadroom: a serving `sluice serve` has raised
// the process's GC percent for --gc-headroom (with the little this test
// process holds live, well above Go's 100) and gives back the one it
// found when it stops; --gc-headroom 0 or GOGC in the environment leaves
// it alone.
func TestServeSetsTheCollectorsHeadroom(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set for this test process")
	}
	for _, c := range []struct {
		name   string
		args   []string
		env    map[string]string
		raised bool
	}{
		{"default", nil, nil, true},
		{"512MiB", []string{"--gc-headroom", "512MiB"}, nil, true},
		{"off", []string{"--gc-headroom", "0"}, nil, false},
		{"GOGC", nil, map[string]string{"GOGC": "100"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := gcheadroom.Current()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			serving := make(chan struct{})
			errb := &watchWriter{want: "sluice serving", seen: serving}
			args := append([]string{"serve", "--sqs-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--preallocate=false"}, c.args...)
			go func() { done <- Run(ctx, args, Env{Stderr: errb, Getenv: func(k string) string { return c.env[k] }}) }()
			select {
			case <-serving:
			case code := <-done:
				t.Fatalf("serve exited %d before serving: %s", code, errb.buf.String())
			}
			if got := gcheadroom.Current(); c.raised != (got > 100) || (!c.raised && got != before) {
				t.Errorf("GC percent %d while serving (%d before); want it raised: %v", got, before, c.raised)
			}
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("serve exited %d", code)
			}
			if got := gcheadroom.Current(); got != before {
				t.Errorf("GC percent %d after serve stopped, want %d as before", got, before)
			}
		})
	}
}

func TestBench(t *testing.T) {
	ep := startServer(t)
	for _, client := range []string{"--sdk=false", "--stdhttp", "--sdk=true"} {
		out, code := sluiceCmd(t, ep, "bench", "--duration", "300ms", "--producers", "2", "--consumers", "2", "--tenants", "3", "--json", "-", client)
		if code != 0 {
			t.Fatalf("bench %s: %s", client, out)
		}
		var rep peers.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("bench --json: %v\n%s", err, out)
		}
		if len(rep.Results) != 1 {
			t.Fatalf("bench %s: %d results, want 1", client, len(rep.Results))
		}
		res := rep.Results[0]
		if res.Sent == 0 || res.Received != res.Sent || res.Errors != 0 || res.SendLatencyMS["p99"] <= 0 || res.E2ELatencyMS["p999"] <= 0 {
			t.Fatalf("bench %s: %+v", client, res)
		}
	}
}

// startWithAdmin runs the SQS server and the admin API over one broker.
func startWithAdmin(t *testing.T) (sqsURL, adminURL string, b *broker.Broker) {
	t.Helper()
	sqsURL, b = serveBroker(t, broker.Config{Dir: t.TempDir()})
	adm := httptest.NewServer(admin.New(b, admin.Options{}))
	t.Cleanup(adm.Close)
	return sqsURL, adm.URL, b
}

// TestDeadLetterAndTenantCommands: dlq peek/purge/redrive with and
// without filters, tenants and their limits, and the watermark, through
// the CLI against a real server and admin API.
func TestDeadLetterAndTenantCommands(t *testing.T) {
	ep, adm, b := startWithAdmin(t)
	run := func(args ...string) string {
		t.Helper()
		out, code := sluiceCmd(t, ep, append(args, "--admin", adm)...)
		if code != 0 {
			t.Fatalf("sluice %v: %s", args, out)
		}
		return out
	}
	ctx := context.Background()
	dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
	b.CreateQueue(ctx, "src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlq.ARN + `","maxReceiveCount":1}`}, nil)
	for i, tenant := range []string{"acme", "acme", "acme", "zeta", "zeta"} {
		run("send", "src", tenant+"-order-"+string(rune('0'+i)), "--group", tenant)
	}
	for i := 0; i < 2; i++ {
		run("receive", "src", "--max", "10", "--visibility", "0")
	}
	// Peek: unfiltered and paged, then filtered; nothing is received.
	out := run("dlq", "peek", "dlq", "--max", "2")
	if strings.Count(out, "order-") != 2 || !strings.Contains(out, "more: --after") {
		t.Fatalf("peek page 1:\n%s", out)
	}
	token := strings.TrimSpace(out[strings.Index(out, "--after")+len("--after"):])
	if out := run("dlq", "peek", "dlq", "--max", "10", "--after", token); strings.Count(out, "order-") != 3 {
		t.Fatalf("peek page 2:\n%s", out)
	}
	out = run("dlq", "peek", "dlq", "--max", "10", "--tenant", "zeta", "--since", "1h")
	if strings.Count(out, "zeta-order") != 2 || strings.Contains(out, "acme") || !strings.Contains(out, "MaxReceiveCount") {
		t.Fatalf("filtered peek:\n%s", out)
	}
	var msgs struct{ Messages []map[string]any }
	json.Unmarshal([]byte(run("dlq", "peek", "dlq", "--max", "10", "--json")), &msgs)
	if len(msgs.Messages) != 5 || msgs.Messages[0]["receive_count"].(float64) != 1 {
		t.Fatalf("peek --json: %+v", msgs)
	}
	if out := run("dlq", "redrive", "dlq", "--tenant", "zeta"); !strings.Contains(out, "redrove 2") {
		t.Fatalf("filtered redrive: %s", out)
	}
	if out := run("dlq", "purge", "dlq", "--contains", "order-0"); !strings.Contains(out, "purged 1") {
		t.Fatalf("filtered purge: %s", out)
	}
	// The rest, with a filter that matches all: moved before the answer
	// (the unfiltered, paced task is TestCLI's).
	if out := run("dlq", "redrive", "dlq", "--since", "1h"); !strings.Contains(out, "redrove 2") {
		t.Fatalf("redrive the rest: %s", out)
	}
	if out := run("tenants", "src"); !strings.Contains(out, "acme") {
		t.Fatalf("acme's messages did not come back to src:\n%s", out)
	}
	out = run("tenants", "set", "src", "acme", "--weight", "3", "--max-in-flight", "5")
	if !strings.Contains(out, `"weight":3`) || !strings.Contains(out, `"max_in_flight":5`) {
		t.Fatalf("tenants set:\n%s", out)
	}
	if out, code := sluiceCmd(t, ep, "tenants", "set", "src", "acme", "--weight", "-2", "--admin", adm); code == 0 || !strings.Contains(out, "InvalidParameterValue") {
		t.Fatalf("negative weight: %d %s", code, out)
	}
	// The watermark.
	if out := run("queues", "drop-before", "src", "--before", "0s", "--tenant", "acme"); !strings.Contains(out, "dropped 2") {
		t.Fatalf("drop-before: %s", out)
	}
	if out := run("tenants", "src"); strings.Contains(out, "acme") || !strings.Contains(out, "zeta") {
		t.Fatalf("tenants after the watermark:\n%s", out)
	}
	if out, code := sluiceCmd(t, ep, "queues", "drop-before", "src", "--admin", adm); code == 0 || !strings.Contains(out, "--before is required") {
		t.Fatalf("drop-before without --before: %d %s", code, out)
	}
}

// The noisy-neighbour scenario end to end, small and short: every case
// runs, quiet messages are received, and the ratios are printed. (The
// figures themselves are measured with the full scenario, not here.)
func TestScenarioNoisySmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	ep := startServer(t)
	out, code := sluiceCmd(t, ep, "scenario", "--spike", "1s", "--capacity", "200", "--headroom", "2", "--cases", "baseline,both,fifo", "noisy")
	if code != 0 {
		t.Fatalf("scenario: %s", out)
	}
	for _, want := range []string{"baseline (no spike)", "spike, fair + rate + headroom 2", "spike, FairDelivery=false", "quiet p99 during the spike / baseline:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// 9 quiet tenants send 45% of capacity: about 90 messages in a second,
	// received with fair delivery (the scenario waits for every message
	// sent in the window, and counts only those: 98% is the margin for a
	// loaded machine, where its wait may end first).
	m := regexp.MustCompile(`quiet received (\d+) of (\d+) sent`).FindAllStringSubmatch(out, -1)
	if len(m) != 3 {
		t.Fatalf("want three runs with quiet counts:\n%s", out)
	}
	for _, r := range m[:2] {
		got, _ := strconv.Atoi(r[1])
		sent, _ := strconv.Atoi(r[2])
		if sent < 50 || got*100 < sent*98 {
			t.Errorf("quiet received %d of %d sent:\n%s", got, sent, out)
		}
	}
	if out, code := sluiceCmd(t, ep, "scenario", "--cases", "nope", "noisy"); code == 0 || !strings.Contains(out, "unknown noisy case") {
		t.Errorf("unknown case: %d %s", code, out)
	}
}

// TestServeClusterFlags: the cluster flags reach the broker's
// ClusterConfig; incomplete or bad ones are refused naming the flag.
func TestServeClusterFlags(t *testing.T) {
	fs, c := serveFlags(Env{Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"SLUICE_NODE": "b", "SLUICE_CLUSTER_ADVERTISE": "198.51.100.2:19326"}[k]
	}})
	if err := fs.Parse([]string{"--cluster", "prod", "--peers", "10.0.0.1:9326, 10.0.0.2:9326,10.0.0.3:9326", "--cluster-addr", "10.0.0.2:9326", "--lease-ttl", "10s"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.brokerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.Cluster
	if cc == nil || cc.Name != "prod" || cc.Node != "b" || len(cc.Peers) != 3 || cc.Peers[1] != "10.0.0.2:9326" || cc.Listen != "10.0.0.2:9326" ||
		cc.Advertise != "198.51.100.2:19326" || cc.LeaseTTL != 10*time.Second {
		t.Fatalf("cluster config %+v", cc)
	}
	// The flag wins over the environment.
	fs, c = serveFlags(Env{Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"SLUICE_CLUSTER_ADVERTISE": "198.51.100.2:19326"}[k]
	}})
	if err := fs.Parse([]string{"--cluster", "prod", "--node", "b", "--peers", "10.0.0.1:9326,10.0.0.2:9326", "--cluster-advertise", "nat.example:4248"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := c.brokerConfig(nil); err != nil || cfg.Cluster.Advertise != "nat.example:4248" {
		t.Fatalf("--cluster-advertise over SLUICE_CLUSTER_ADVERTISE: %+v, %v", cfg.Cluster, err)
	}
	if _, c := serveFlags(Env{Stderr: io.Discard, Getenv: func(string) string { return "" }}); func() bool { cfg, err := c.brokerConfig(nil); return err != nil || cfg.Cluster != nil }() {
		t.Fatal("without --cluster the broker is clustered, or refused")
	}

	// The cluster secret: from --cluster-secret-file (its line break
	// trimmed; over SLUICE_CLUSTER_SECRET), or from SLUICE_CLUSTER_SECRET.
	dir := t.TempDir()
	const secret, envSecret = "0123456789abcdef+/=", "fromtheenvironment-0123"
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	secretFile, crlfFile := file("secret", secret+"\n"), file("crlf", secret+"\r\n")
	peers := []string{"--cluster", "prod", "--node", "a", "--peers", "10.0.0.1:9326,10.0.0.2:9326"}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{append(peers, "--cluster-secret-file", secretFile), nil, secret},
		{append(peers, "--cluster-secret-file", crlfFile), map[string]string{"SLUICE_CLUSTER_SECRET": envSecret}, secret},
		{peers, map[string]string{"SLUICE_CLUSTER_SECRET_FILE": secretFile}, secret},
		{peers, map[string]string{"SLUICE_CLUSTER_SECRET": envSecret}, envSecret},
		{peers, nil, ""},
	} {
		fs, c := serveFlags(Env{Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }})
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if cfg, err := c.brokerConfig(nil); err != nil || cfg.Cluster.Secret != tc.want {
			t.Errorf("serve %v with %v: secret %q, %v; want %q", tc.args, tc.env, cfg.Cluster.Secret, err, tc.want)
		}
	}
	shortFile := file("short", "0123456789\n")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{append(peers, "--cluster-secret-file", filepath.Join(dir, "missing")), nil, "--cluster-secret-file: open " + filepath.Join(dir, "missing")},
		{append(peers, "--cluster-secret-file", file("empty", "\n")), nil, "--cluster-secret-file " + filepath.Join(dir, "empty") + " is empty"},
		{append(peers, "--cluster-secret-file", shortFile), nil, "--cluster-secret-file " + shortFile + ": cluster secret is 10 bytes long; it must have from 16 to 256"},
		{append(peers, "--cluster-secret-file", file("spaced", secret+" \n")), nil, "cluster secret contains a space"},
		{peers, map[string]string{"SLUICE_CLUSTER_SECRET": "0123456789:abcdef"}, "SLUICE_CLUSTER_SECRET: cluster secret contains a character other than"},
		{[]string{"--cluster", "prod", "--node", "a", "--cluster-secret-file", secretFile}, nil, "--cluster-secret-file (SLUICE_CLUSTER_SECRET) needs --peers"},
		{[]string{"--cluster", "prod", "--node", "a", "--nats-url", "nats://u:p@h1:4222"}, map[string]string{"SLUICE_CLUSTER_SECRET": envSecret}, "with --nats-url, give the credentials in the URL"},
		{[]string{"--cluster-secret-file", secretFile}, nil, "need --cluster"},
		{nil, map[string]string{"SLUICE_CLUSTER_SECRET": envSecret}, "need --cluster"},
	} {
		var errb bytes.Buffer
		code := Run(context.Background(), append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...), Env{Stderr: &errb, Getenv: func(k string) string { return tc.env[k] }})
		if code == 0 || !strings.Contains(errb.String(), tc.flag) {
			t.Errorf("serve %v with %v: code %d: %s\nwant %s", tc.args, tc.env, code, errb.String(), tc.flag)
		}
		for _, s := range []string{secret, envSecret, "0123456789"} {
			if strings.Contains(errb.String(), s) {
				t.Errorf("serve %v: the error quotes a secret: %s", tc.args, errb.String())
			}
		}
	}

	// Route TLS: three files, from the flags or the environment (flag
	// wins), passed on as they are (natsnode reads and checks them).
	tlsFlags := append(peers, "--cluster-tls-cert", "/etc/sluice/a.pem", "--cluster-tls-key", "/etc/sluice/a-key.pem", "--cluster-tls-ca", "/etc/sluice/ca.pem")
	tlsEnv := map[string]string{"SLUICE_CLUSTER_TLS_CERT": "/env/a.pem", "SLUICE_CLUSTER_TLS_KEY": "/env/a-key.pem", "SLUICE_CLUSTER_TLS_CA": "/env/ca.pem"}
	for _, tc := range []struct {
		args            []string
		env             map[string]string
		cert, key, cafi string
	}{
		{tlsFlags, nil, "/etc/sluice/a.pem", "/etc/sluice/a-key.pem", "/etc/sluice/ca.pem"},
		{peers, tlsEnv, "/env/a.pem", "/env/a-key.pem", "/env/ca.pem"},
		{append(peers, "--cluster-tls-ca", "/etc/sluice/ca.pem"), tlsEnv, "/env/a.pem", "/env/a-key.pem", "/etc/sluice/ca.pem"},
		{peers, nil, "", "", ""},
	} {
		fs, c := serveFlags(Env{Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }})
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := c.brokerConfig(nil)
		if err != nil || cfg.Cluster.TLSCert != tc.cert || cfg.Cluster.TLSKey != tc.key || cfg.Cluster.TLSCA != tc.cafi {
			t.Errorf("serve %v with %v: %+v, %v; want %s, %s, %s", tc.args, tc.env, cfg.Cluster, err, tc.cert, tc.key, tc.cafi)
		}
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{append(peers, "--cluster-tls-cert", "a.pem"), nil, "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together; missing: --cluster-tls-key, --cluster-tls-ca"},
		{append(peers, "--cluster-tls-cert", "a.pem", "--cluster-tls-key", "a-key.pem"), nil, "go together; missing: --cluster-tls-ca"},
		{peers, map[string]string{"SLUICE_CLUSTER_TLS_CA": "ca.pem"}, "go together; missing: --cluster-tls-cert, --cluster-tls-key"},
		{tlsFlags[6:], nil, "--cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca, --nats-addr, --nats-token (SLUICE_NATS_TOKEN) and --nats-url need --cluster"},
		{append([]string{"--cluster", "prod", "--node", "a"}, tlsFlags[6:]...), nil, "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca need --peers"},
		{append([]string{"--cluster", "prod", "--node", "a", "--nats-url", "nats://h1:4222"}, tlsFlags[6:]...), nil, "they do not apply with --nats-url"},
		{nil, map[string]string{"SLUICE_CLUSTER_TLS_KEY": "a-key.pem"}, "need --cluster"},
		// natsnode reads the files at start, and names the one it cannot.
		{tlsFlags, nil, "cluster TLS certificate: open /etc/sluice/a.pem"},
	} {
		// Bounded: a node that did start would wait for a quorum.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var errb bytes.Buffer
		code := Run(ctx, append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...), Env{Stderr: &errb, Getenv: func(k string) string { return tc.env[k] }})
		cancel()
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("serve %v with %v: code %d: %s\nwant %s", tc.args, tc.env, code, errb.String(), tc.want)
		}
	}

	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--cluster", "prod"}, "--node"},
		{[]string{"--node", "a"}, "--cluster"},
		{[]string{"--cluster", "prod", "--node", "a", "--peers", "10.0.0.1"}, "--peers"},
		{[]string{"--cluster", "prod", "--node", "a", "--lease-ttl", "1500ms"}, "--lease-ttl"},
		{[]string{"--cluster", "prod", "--node", "a", "--lease-ttl", "1s"}, "--lease-ttl"},
		{[]string{"--cluster-advertise", "10.0.0.1:9326"}, "--cluster"},
		{[]string{"--cluster", "prod", "--node", "a", "--cluster-advertise", "10.0.0.1:9326"}, "--cluster-advertise needs --peers"},
		{[]string{"--cluster", "prod", "--node", "a", "--peers", "10.0.0.1:9326,10.0.0.2:9326", "--cluster-advertise", "10.0.0.1"}, "--cluster-advertise"},
	} {
		var errb bytes.Buffer
		code := Run(context.Background(), append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...), Env{Stderr: &errb, Getenv: func(string) string { return "" }})
		if code == 0 || !strings.Contains(errb.String(), tc.flag) {
			t.Errorf("serve %v: code %d: %s", tc.args, code, errb.String())
		}
	}
}

// TestServeNATSToken: --nats-addr needs a token, from --nats-token or
// SLUICE_NATS_TOKEN (flag wins), which reaches the broker's ClusterConfig;
// a missing, stray or bad one is refused naming the flags, and no error
// quotes it.
func TestServeNATSToken(t *testing.T) {
	const token, envToken = "flag-0123456789abcdef", "environment-0123456789"
	peers := []string{"--cluster", "prod", "--node", "a", "--peers", "10.0.0.1:9326,10.0.0.2:9326"}
	withAddr := append(slices.Clone(peers), "--nats-addr", "127.0.0.1:4222")
	for _, tc := range []struct {
		args       []string
		env        map[string]string
		addr, want string
	}{
		{append(slices.Clone(withAddr), "--nats-token", token), nil, "127.0.0.1:4222", token},
		{withAddr, map[string]string{"SLUICE_NATS_TOKEN": envToken}, "127.0.0.1:4222", envToken},
		{append(slices.Clone(withAddr), "--nats-token", token), map[string]string{"SLUICE_NATS_TOKEN": envToken}, "127.0.0.1:4222", token},
		{peers, map[string]string{"SLUICE_NATS_ADDR": "127.0.0.1:4223", "SLUICE_NATS_TOKEN": envToken}, "127.0.0.1:4223", envToken},
		{[]string{"--cluster", "prod", "--node", "a", "--nats-addr", "127.0.0.1:4222"}, map[string]string{"SLUICE_NATS_TOKEN": envToken}, "127.0.0.1:4222", envToken},
		{peers, nil, "", ""},
	} {
		fs, c := serveFlags(Env{Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }})
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := c.brokerConfig(nil)
		if err != nil || cfg.Cluster.ClientListen != tc.addr || cfg.Cluster.ClientToken != tc.want {
			t.Errorf("serve %v with %v: %q, token %q, %v; want %q, %q", tc.args, tc.env, cfg.Cluster.ClientListen, cfg.Cluster.ClientToken, err, tc.addr, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{withAddr, nil, "--nats-addr needs --nats-token (or SLUICE_NATS_TOKEN"},
		{peers, map[string]string{"SLUICE_NATS_ADDR": "127.0.0.1:4222"}, "--nats-addr needs --nats-token"},
		{append(slices.Clone(peers), "--nats-token", token), nil, "--nats-token (SLUICE_NATS_TOKEN) needs --nats-addr"},
		{peers, map[string]string{"SLUICE_NATS_TOKEN": envToken}, "--nats-token (SLUICE_NATS_TOKEN) needs --nats-addr"},
		{append(slices.Clone(withAddr), "--nats-token", "0123456789"), nil, "--nats-token (SLUICE_NATS_TOKEN): client token is 10 bytes long; it must have from 16 to 256"},
		{withAddr, map[string]string{"SLUICE_NATS_TOKEN": "0123456789 abcdef"}, "--nats-token (SLUICE_NATS_TOKEN): client token contains a space or a line break (byte 11 of 17)"},
		{withAddr, map[string]string{"SLUICE_NATS_TOKEN": "0123456789:abcdef"}, "client token contains a character other than"},
		{[]string{"--cluster", "prod", "--node", "a", "--nats-url", "nats://h1:4222", "--nats-addr", "127.0.0.1:4222"}, map[string]string{"SLUICE_NATS_TOKEN": envToken},
			"with --nats-url there is none"},
		{[]string{"--cluster", "prod", "--node", "a", "--nats-url", "nats://h1:4222"}, map[string]string{"SLUICE_NATS_TOKEN": envToken},
			"with --nats-url, give the credentials in the URL"},
		{[]string{"--nats-addr", "127.0.0.1:4222", "--nats-token", token}, nil, "need --cluster"},
		{nil, map[string]string{"SLUICE_NATS_TOKEN": envToken}, "need --cluster"},
	} {
		var errb bytes.Buffer
		code := Run(context.Background(), append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...), Env{Stderr: &errb, Getenv: func(k string) string { return tc.env[k] }})
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("serve %v with %v: code %d: %s\nwant %s", tc.args, tc.env, code, errb.String(), tc.want)
		}
		for _, s := range []string{token, envToken, "0123456789"} {
			if strings.Contains(errb.String(), s) {
				t.Errorf("serve %v: the error quotes a token: %s", tc.args, errb.String())
			}
		}
	}
}

// TestAdminCommandsActAsThePrincipal: with a principal's AWS credentials
// in the environment and no admin token, the admin commands sign their
// requests and act as that principal: its own queues answer, another
// principal's are missing, and without credentials the server's answer
// says what to pass.
func TestAdminCommandsActAsThePrincipal(t *testing.T) {
	creds, err := sigv4.ParseCredentials([]byte(`{"principals": [
	  {"name": "team-a", "access_key_id": "AKIDTEAMA", "secret_access_key": "secret-a", "queues": ["a-*"]},
	  {"name": "team-b", "access_key_id": "AKIDTEAMB", "secret_access_key": "secret-b", "queues": ["b-*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ep, b := serveBroker(t, broker.Config{Dir: t.TempDir()})
	adm := httptest.NewServer(admin.Guard(admin.New(b, admin.Options{}), admin.GuardOptions{Credentials: creds}))
	t.Cleanup(adm.Close)
	ctx := context.Background()
	for _, q := range []string{"a-q", "a-dlq", "b-q", "b-dlq"} {
		if _, err := b.CreateQueue(ctx, q, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Send(ctx, q, st.SendInput{Body: q + " message", GroupID: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(key, secret string, args ...string) (string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
			switch k {
			case "SLUICE_ENDPOINT":
				return ep
			case "AWS_ACCESS_KEY_ID":
				return key
			case "AWS_SECRET_ACCESS_KEY":
				return secret
			case "AWS_PROFILE":
				return "sluice-test-no-such-profile" // not the machine's own default
			}
			return ""
		}}
		code := Run(ctx, append(args, "--admin", adm.URL), env)
		if code != 0 {
			return errb.String(), code
		}
		return out.String(), code
	}
	for _, c := range []struct {
		key, secret string
		args        []string
		ok          bool
		want        string
	}{
		{"AKIDTEAMA", "secret-a", []string{"tenants", "a-q"}, true, "acme"},
		{"AKIDTEAMA", "secret-a", []string{"tenants", "b-q"}, false, "QueueDoesNotExist"},
		{"AKIDTEAMB", "secret-b", []string{"tenants", "b-q"}, true, "acme"},
		{"AKIDTEAMA", "secret-a", []string{"dlq", "peek", "a-dlq"}, true, "a-dlq message"},
		{"AKIDTEAMA", "secret-a", []string{"dlq", "peek", "b-dlq"}, false, "QueueDoesNotExist"},
		{"AKIDTEAMA", "secret-a", []string{"dlq", "purge", "b-dlq", "--contains", "message"}, false, "QueueDoesNotExist"}, // filtered: the admin API
		{"AKIDTEAMA", "secret-a", []string{"tenants", "set", "b-q", "acme", "--weight", "3"}, false, "QueueDoesNotExist"},
		{"AKIDTEAMA", "wrong", []string{"tenants", "a-q"}, false, "SignatureDoesNotMatch"},
		{"", "", []string{"tenants", "a-q"}, false, "AWS_ACCESS_KEY_ID"},
	} {
		out, code := run(c.key, c.secret, c.args...)
		if (code == 0) != c.ok || !strings.Contains(out, c.want) {
			t.Errorf("as %q: sluice %v: exit %d, %s; want ok=%v and %q", c.key, c.args, code, out, c.ok, c.want)
		}
	}
	if n, _ := b.GetQueueAttributes("b-dlq", []string{"ApproximateNumberOfMessages"}); n["ApproximateNumberOfMessages"] != "1" {
		t.Errorf("b-dlq after team a's purge: %v, want its one message", n)
	}
}
