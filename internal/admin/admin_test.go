package admin_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden")

var ctx = context.Background()

func setup(t *testing.T) (*broker.Broker, *httptest.Server) {
	b, srv, _ := setupAdmin(t)
	return b, srv
}

func setupAdmin(t *testing.T) (*broker.Broker, *httptest.Server, *admin.Server) {
	t.Helper()
	return setupClock(t, nil)
}

// setupClock is setupAdmin with the broker on clk (nil: the real clock):
// a fake clock lets a test age the messages it sent.
func setupClock(t *testing.T, clk broker.Clock) (*broker.Broker, *httptest.Server, *admin.Server) {
	t.Helper()
	b, err := broker.Open(broker.Config{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a := admin.New(b, admin.Options{})
	srv := httptest.NewServer(admin.Guard(a, admin.GuardOptions{})) // as serve runs it: loopback, no token
	t.Cleanup(func() { srv.Close(); b.Close() })
	return b, srv, a
}

func call(t *testing.T, srv *httptest.Server, method, path, body string, out any) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(newRequest(method, srv.URL+path, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	decode(t, method, path, raw, out)
	return resp.StatusCode
}

// callHandler is call without a network, for synctest bubbles.
func callHandler(t *testing.T, h http.Handler, method, path, body string, out any) int {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, newRequest(method, path, body))
	decode(t, method, path, w.Body.Bytes(), out)
	return w.Code
}

func newRequest(method, url, body string) *http.Request {
	req := httptest.NewRequest(method, url, strings.NewReader(body))
	req.RequestURI = "" // a client's request
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func decode(t *testing.T, method, path string, raw []byte, out any) {
	t.Helper()
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

func send(t *testing.T, b *broker.Broker, q, tenant string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := b.Send(ctx, q, st.SendInput{Body: fmt.Sprintf("%s body %d", tenant, i), GroupID: tenant}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMetricsGolden pins the names, types and labels of every metric (not
// their values), so a rename is a deliberate change.
func TestMetricsGolden(t *testing.T) {
	b, srv := setup(t)
	b.CreateQueue(ctx, "orders", map[string]string{"SidelineAgeSeconds": "60"}, nil)
	send(t, b, "orders", "acme", 3)
	ms, _ := b.Receive(ctx, "orders", st.ReceiveInput{MaxMessages: 1})
	b.Delete(ctx, "orders", ms[0].ReceiptHandle)
	// A topic with one subscription, one publish delivered.
	b.CreateQueue(ctx, "fan", nil, nil)
	if _, _, err := b.CreateTopic(ctx, st.TopicInfo{Name: "events", Subs: map[string]st.Subscription{
		"s": {Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:fan"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, "events", []broker.PublishInput{{ID: "p1", Message: "m"}}); err != nil {
		t.Fatal(err)
	}
	wait := 5
	if got, err := b.Receive(ctx, "fan", st.ReceiveInput{MaxMessages: 1, WaitTimeSeconds: &wait}); err != nil || len(got) != 1 {
		t.Fatalf("the topic's delivery: %v %v", got, err)
	}
	// The fan-out counts a delivery after the queue took it, so a consumer
	// can have it first: wait for the count and its lag.
	eventually(t, "the delivery counted", func() bool {
		f, err := b.TopicFigures("events")
		var lags int64
		for _, n := range f.Lag {
			lags += n
		}
		return err == nil && f.Delivered == 1 && lags == 1
	})
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var lines []string
	seen := map[string]bool{}
	labelRe := regexp.MustCompile(`(\w+)="[^"]*"`)
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "# TYPE sluice_") {
			lines = append(lines, l)
			continue
		}
		if !strings.HasPrefix(l, "sluice_") {
			continue
		}
		name, rest, _ := strings.Cut(l, "{")
		if i := strings.IndexByte(name, ' '); i >= 0 {
			name = name[:i]
			rest = ""
		}
		labels := labelRe.FindAllStringSubmatch(rest, -1)
		var ks []string
		for _, m := range labels {
			ks = append(ks, m[1])
		}
		sort.Strings(ks)
		key := name + "{" + strings.Join(ks, ",") + "}"
		if !seen[key] {
			seen[key] = true
			lines = append(lines, key)
		}
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	if *update {
		os.WriteFile("testdata/metrics.golden", []byte(got), 0o644)
	}
	want, err := os.ReadFile("testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("metrics changed (run with -update if deliberate):\n%s", got)
	}
	for _, must := range []string{`sluice_queue_messages{queue="orders",state="visible"} 2`, `sluice_tenant_messages{queue="orders",state="ready",tenant="acme"} 2`,
		`sluice_queue_first_attempt_age_seconds_count{queue="orders"} 1`, `sluice_queue_deleted_total{queue="orders"} 1`,
		`sluice_queue_unreadable_total{queue="orders"} 0`, `sluice_messages_unreadable_total 0`, `sluice_store_bad_releases_total 0`,
		`sluice_store_segments_removed_total 0`, `sluice_topic_published_total{topic="events"} 1`,
		`sluice_topic_deliveries_total{outcome="delivered",topic="events"} 1`, `sluice_topic_fanout_lag_seconds_count{topic="events"} 1`} {
		if !strings.Contains(string(raw), must) {
			t.Errorf("metrics lack %s", must)
		}
	}
}

func TestTenantAPI(t *testing.T) {
	b, srv := setup(t)
	b.CreateQueue(ctx, "q", map[string]string{"Partitions": "4", "PartitionsPerTenant": "2"}, nil)
	send(t, b, "q", "acme", 3)
	send(t, b, "q", "zeta", 1)
	var ts []broker.TenantInfo
	if code := call(t, srv, "GET", "/api/queues/q/tenants", "", &ts); code != 200 || len(ts) != 2 || ts[0].Name != "acme" || ts[0].Ready != 3 {
		t.Fatalf("tenants %d %+v", code, ts)
	}
	var ti broker.TenantInfo
	if code := call(t, srv, "PUT", "/api/queues/q/tenants/acme", `{"weight": 4, "max_in_flight": 2}`, &ti); code != 200 || ti.Limits == nil || ti.Limits.Weight != 4 || len(ti.Shards) != 2 {
		t.Fatalf("set tenant %d %+v", code, ti)
	}
	var e map[string]string
	if code := call(t, srv, "PUT", "/api/queues/q/tenants/acme", `{"weight": -1}`, &e); code != 400 || e["code"] != "InvalidParameterValue" {
		t.Fatalf("negative weight: %d %v", code, e)
	}
	if code := call(t, srv, "PUT", "/api/queues/q/tenants/acme", `{"wieght": 1}`, &e); code != 400 || !strings.Contains(e["message"], "wieght") {
		t.Fatalf("unknown field: %d %v", code, e)
	}
	if code := call(t, srv, "GET", "/api/queues/nope/tenants", "", &e); code != 404 || e["code"] != "QueueDoesNotExist" {
		t.Fatalf("missing queue: %d %v", code, e)
	}
	// The watermark.
	var d map[string]int
	before := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	if code := call(t, srv, "POST", "/api/queues/q/drop-before", `{"before": "`+before+`", "tenant": "acme"}`, &d); code != 200 || d["dropped"] != 3 {
		t.Fatalf("drop-before acme: %d %v", code, d)
	}
	if code := call(t, srv, "POST", "/api/queues/q/drop-before", `{"tenant": "acme"}`, &e); code != 400 {
		t.Fatalf("drop-before without a time: %d %v", code, e)
	}
	var q map[string]any
	call(t, srv, "GET", "/api/queues/q", "", &q)
	if q["visible"].(float64) != 1 || q["dropped"].(map[string]any)["watermark"].(float64) != 3 {
		t.Fatalf("queue after the watermark: %v", q)
	}
}

func TestDeadLetterAPI(t *testing.T) {
	b, srv := setup(t)
	dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
	src, _ := b.CreateQueue(ctx, "src", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlq.ARN)}, nil)
	send(t, b, "src", "acme", 3)
	send(t, b, "src", "zeta", 2)
	for i := 0; i < 2; i++ { // the second receive moves them to the DLQ
		b.Receive(ctx, "src", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: new(int)})
	}
	var page struct {
		Messages []broker.PeekedMessage
		Next     string
	}
	if code := call(t, srv, "GET", "/api/queues/dlq/messages?max=2", "", &page); code != 200 || len(page.Messages) != 2 || page.Next == "" {
		t.Fatalf("peek page 1: %d %+v", code, page)
	}
	if page.Messages[0].Source != src.ARN {
		t.Errorf("source %q, want %q", page.Messages[0].Source, src.ARN)
	}
	call(t, srv, "GET", "/api/queues/dlq/messages?max=10&after="+page.Next, "", &page)
	if len(page.Messages) != 3 {
		t.Fatalf("peek page 2: %+v", page)
	}
	call(t, srv, "GET", "/api/queues/dlq/messages?tenant=zeta&contains=body%201", "", &page)
	if len(page.Messages) != 1 || page.Messages[0].Body != "zeta body 1" {
		t.Fatalf("filtered peek: %+v", page)
	}
	// Peeking does not receive.
	a, _ := b.GetQueueAttributes("dlq", []string{"ApproximateNumberOfMessages"})
	if a["ApproximateNumberOfMessages"] != "5" {
		t.Fatalf("dlq after peeking: %v", a)
	}
	var r map[string]int
	if code := call(t, srv, "POST", "/api/queues/dlq/redrive", `{"tenant": "zeta"}`, &r); code != 200 || r["redriven"] != 2 {
		t.Fatalf("filtered redrive: %d %v", code, r)
	}
	a, _ = b.GetQueueAttributes("src", []string{"ApproximateNumberOfMessages"})
	if a["ApproximateNumberOfMessages"] != "2" {
		t.Fatalf("source after redrive: %v", a)
	}
	if code := call(t, srv, "POST", "/api/queues/dlq/purge", `{"contains": "body 0"}`, &r); code != 200 || r["purged"] != 1 {
		t.Fatalf("filtered purge: %d %v", code, r)
	}
}

// TestRedriveTaskAPI: a redrive without a filter starts a move task, which
// moves the dead-letter queue's messages back in the background. It runs
// in a synctest bubble (a broker in memory, the handler called directly),
// so "the task has finished" is a fact, not a guess.
func TestRedriveTaskAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := broker.Open(broker.Config{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		h := admin.New(b, admin.Options{})
		dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
		b.CreateQueue(ctx, "src", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlq.ARN)}, nil)
		send(t, b, "src", "acme", 2)
		for i := 0; i < 2; i++ { // the second receive moves them to the DLQ
			b.Receive(ctx, "src", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: new(int)})
		}
		var task map[string]string
		if code := callHandler(t, h, "POST", "/api/queues/dlq/redrive", ``, &task); code != 202 || task["task_handle"] == "" {
			t.Fatalf("redrive all: %d %v", code, task)
		}
		synctest.Wait() // the task has finished, or waits for its pace
		var tasks []broker.MoveTask
		callHandler(t, h, "GET", "/api/movetasks?source=dlq", "", &tasks)
		if len(tasks) != 1 || tasks[0].Status != "COMPLETED" || tasks[0].ApproximateNumberOfMessagesMoved != 2 {
			t.Fatalf("move task: %+v", tasks)
		}
		a, _ := b.GetQueueAttributes("src", []string{"ApproximateNumberOfMessages"})
		if a["ApproximateNumberOfMessages"] != "2" {
			t.Fatalf("source after the move task: %v", a)
		}
	})
}

// eventually polls cond on a ticker until it holds; the test fails if it
// does not within 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within 20s", what)
		}
	}
}

// topicAPI is a topic as GET /api/topics answers it.
type topicAPI struct {
	Name          string `json:"name"`
	FIFO          bool   `json:"fifo"`
	Subscriptions []struct {
		ID              string `json:"id"`
		Protocol        string `json:"protocol"`
		Endpoint        string `json:"endpoint"`
		Queue           string `json:"queue"`
		Raw             bool   `json:"raw_message_delivery"`
		HasFilterPolicy bool   `json:"has_filter_policy"`
		DLQ             string `json:"dead_letter_queue"`
		QueueMissing    bool   `json:"queue_missing"`
		Backlog         *struct {
			Visible   int     `json:"visible"`
			InFlight  int     `json:"in_flight"`
			Delayed   int     `json:"delayed"`
			OldestAge float64 `json:"oldest_age_seconds"`
		} `json:"backlog"`
	} `json:"subscriptions"`
	Figures *topicFiguresAPI `json:"figures"`
}

type topicFiguresAPI struct {
	Published    int64 `json:"published"`
	Delivered    int64 `json:"delivered"`
	Filtered     int64 `json:"filtered"`
	Refused      int64 `json:"refused"`
	DeadLettered int64 `json:"dead_lettered"`
	Held         int64 `json:"held"`
}

// subscriptionsOf sums up a topic's subscriptions, one line each.
func subscriptionsOf(tp topicAPI) []string {
	var out []string
	for _, s := range tp.Subscriptions {
		l := fmt.Sprintf("%s %s %s raw=%v filter=%v dlq=%q", s.ID, s.Protocol, s.Queue, s.Raw, s.HasFilterPolicy, s.DLQ)
		if s.QueueMissing || s.Backlog == nil {
			l += fmt.Sprintf(" missing=%v backlog=%v", s.QueueMissing, s.Backlog != nil)
		} else {
			l += fmt.Sprintf(" visible=%d in_flight=%d delayed=%d oldest=%.0fs", s.Backlog.Visible, s.Backlog.InFlight, s.Backlog.Delayed, s.Backlog.OldestAge)
		}
		out = append(out, l)
	}
	return out
}

// TestTopicsAPI: GET /api/topics lists every topic with what became of
// its publishes, and each subscription with its queue's backlog, so the
// subscriber that falls behind shows; a subscription whose queue does not
// exist says so. GET /api/topics/{topic} answers one.
func TestTopicsAPI(t *testing.T) {
	clk := clock.NewFake(time.Now())
	b, srv, _ := setupClock(t, clk)
	var ts []topicAPI
	if code := call(t, srv, "GET", "/api/topics", "", &ts); code != 200 || ts == nil || len(ts) != 0 {
		t.Fatalf("no topics: %d %+v (want [])", code, ts)
	}
	arn := map[string]string{}
	for _, name := range []string{"billing", "audit", "audit-dlq"} {
		q, err := b.CreateQueue(ctx, name, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		arn[name] = q.ARN
	}
	arn["gone"] = strings.TrimSuffix(arn["billing"], "billing") + "gone" // no such queue
	if _, _, err := b.CreateTopic(ctx, st.TopicInfo{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	err := b.UpdateTopic(ctx, "orders", func(ti *st.TopicInfo) error {
		ti.Subs = map[string]st.Subscription{
			"s-billing": {Protocol: "sqs", Endpoint: arn["billing"], Attrs: map[string]string{"RawMessageDelivery": "true", "FilterPolicy": `{"kind":["order"]}`}},
			"s-audit":   {Protocol: "sqs", Endpoint: arn["audit"], Attrs: map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q}`, arn["audit-dlq"])}},
			"s-gone":    {Protocol: "sqs", Endpoint: arn["gone"]},
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kind := func(k string) map[string]st.AttributeValue {
		return map[string]st.AttributeValue{"kind": {DataType: "String", StringValue: &k}}
	}
	if _, err := b.Publish(ctx, "orders", []broker.PublishInput{{ID: "p1", Message: "order 1", Attrs: kind("order")},
		{ID: "p2", Message: "refund 1", Attrs: kind("refund")}, {ID: "p3", Message: "order 2", Attrs: kind("order")}}); err != nil {
		t.Fatal(err)
	}
	// Billing takes the two orders (its filter keeps the refund out),
	// audit all three; the missing queue refuses all three.
	eventually(t, "the publishes delivered", func() bool {
		call(t, srv, "GET", "/api/topics", "", &ts)
		if len(ts) != 1 || ts[0].Figures == nil {
			return false
		}
		f := ts[0].Figures
		return f.Held == 0 && f.Delivered == 5 && f.Filtered == 1 && f.Refused == 3
	})
	// Five minutes later audit's consumer has taken one message; billing's
	// none.
	clk.Advance(5 * time.Minute)
	if ms, err := b.Receive(ctx, "audit", st.ReceiveInput{MaxMessages: 1}); err != nil || len(ms) != 1 {
		t.Fatalf("receive from audit: %v %v", ms, err)
	}
	var tp topicAPI
	if code := call(t, srv, "GET", "/api/topics/orders", "", &tp); code != 200 {
		t.Fatalf("GET /api/topics/orders: %d", code)
	}
	call(t, srv, "GET", "/api/topics", "", &ts)
	if len(ts) != 1 {
		t.Fatalf("topics: %+v", ts)
	}
	for _, got := range []topicAPI{ts[0], tp} {
		if got.Name != "orders" || got.FIFO || got.Figures == nil || *got.Figures != (topicFiguresAPI{Published: 3, Delivered: 5, Filtered: 1, Refused: 3}) {
			t.Errorf("topic %q fifo %v figures %+v", got.Name, got.FIFO, got.Figures)
		}
		want := []string{
			`s-audit sqs audit raw=false filter=false dlq="audit-dlq" visible=2 in_flight=1 delayed=0 oldest=300s`,
			`s-billing sqs billing raw=true filter=true dlq="" visible=2 in_flight=0 delayed=0 oldest=300s`,
			`s-gone sqs gone raw=false filter=false dlq="" missing=true backlog=false`,
		}
		if sub := subscriptionsOf(got); strings.Join(sub, "\n") != strings.Join(want, "\n") {
			t.Errorf("subscriptions:\n%s\nwant:\n%s", strings.Join(sub, "\n"), strings.Join(want, "\n"))
		}
		if len(got.Subscriptions) == 3 && got.Subscriptions[0].Endpoint != arn["audit"] {
			t.Errorf("audit's endpoint %q, want %q", got.Subscriptions[0].Endpoint, arn["audit"])
		}
	}
	var e map[string]string
	if code := call(t, srv, "GET", "/api/topics/nope", "", &e); code != 404 || e["code"] != "ResourceNotFoundException" {
		t.Fatalf("a topic that does not exist: %d %v", code, e)
	}
}
