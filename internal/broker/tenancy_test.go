package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

func sendAs(t *testing.T, b *broker.Broker, queue, tenant string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := b.Send(ctx, queue, st.SendInput{Body: fmt.Sprintf("%s-%d", tenant, i), GroupID: tenant}); err != nil {
			t.Fatal(err)
		}
	}
}

func groups(ms []st.Message) string {
	var g []string
	for _, m := range ms {
		g = append(g, m.GroupID)
	}
	return strings.Join(g, " ")
}

// TestFairDeliveryAcrossTenants: a tenant with a backlog does not hold up
// a quiet one; with FairDelivery=false it does (plain FIFO).
func TestFairDeliveryAcrossTenants(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		for _, q := range []struct {
			name, fair, want string
		}{
			{"fair", "true", "noisy quiet noisy quiet noisy noisy"},
			{"fifo", "false", "noisy noisy noisy noisy noisy noisy"},
		} {
			if _, err := b.CreateQueue(ctx, q.name, map[string]string{"FairDelivery": q.fair}, nil); err != nil {
				t.Fatal(err)
			}
			sendAs(t, b, q.name, "noisy", 50)
			sendAs(t, b, q.name, "quiet", 2)
			ms, err := b.Receive(ctx, q.name, st.ReceiveInput{MaxMessages: 6})
			if err != nil {
				t.Fatal(err)
			}
			if got := groups(ms); got != q.want {
				t.Errorf("%s: received %q, want %q", q.name, got, q.want)
			}
		}
	})
}

// TestTenantMaxInFlight: a tenant at its cap is skipped (not an error)
// until a delete frees a slot; other tenants are served meanwhile.
func TestTenantMaxInFlight(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		if _, err := b.CreateQueue(ctx, "q", map[string]string{"TenantMaxInFlight": "2"}, nil); err != nil {
			t.Fatal(err)
		}
		sendAs(t, b, "q", "a", 5)
		sendAs(t, b, "q", "b", 1)
		ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
		if got := groups(ms); got != "a b a" {
			t.Fatalf("received %q, want a b a", got)
		}
		if more, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10}); len(more) != 0 {
			t.Fatalf("tenant a over its cap got %q", groups(more))
		}
		info, err := b.Tenant("q", "a")
		if err != nil || !info.Capped || info.InFlight != 2 || info.Ready != 3 {
			t.Fatalf("tenant a: %+v %v", info, err)
		}
		if err := b.Delete(ctx, "q", ms[0].ReceiptHandle); err != nil {
			t.Fatal(err)
		}
		if more, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10}); groups(more) != "a" {
			t.Fatalf("after a delete: %q, want one of a", groups(more))
		}
		// A per-tenant override raises a's cap.
		if err := b.SetTenantLimits(ctx, "q", "a", broker.TenantLimits{MaxInFlight: 10}); err != nil {
			t.Fatal(err)
		}
		if more, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10}); groups(more) != "a a" {
			t.Fatalf("after raising the cap: %q", groups(more))
		}
	})
}

// TestTenantSendRate: over its send rate a tenant gets RequestThrottled
// with a retry hint, per entry in a batch; others are unaffected.
func TestTenantSendRate(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		if _, err := b.CreateQueue(ctx, "q", map[string]string{"TenantSendRate": "2", "TenantSendBurst": "2"}, nil); err != nil {
			t.Fatal(err)
		}
		in := []st.SendInput{{Body: "1", GroupID: "a"}, {Body: "2", GroupID: "a"}, {Body: "3", GroupID: "a"}, {Body: "4", GroupID: "b"}}
		_, errs, err := b.SendBatch(ctx, "q", in)
		if err != nil {
			t.Fatal(err)
		}
		if errs[0] != nil || errs[1] != nil || errs[3] != nil {
			t.Fatalf("errors %v", errs)
		}
		var e *st.Error
		if code(errs[2]) != st.CodeRequestThrottled {
			t.Fatalf("third send of a: %v, want RequestThrottled", errs[2])
		}
		e = errs[2].(*st.Error)
		if e.RetryAfter != 500*time.Millisecond {
			t.Errorf("retry hint %v, want 500ms", e.RetryAfter)
		}
		_, err = b.Send(ctx, "q", st.SendInput{Body: "5", GroupID: "a"})
		if code(err) != st.CodeRequestThrottled {
			t.Fatalf("single send: %v", err)
		}
		clk.Advance(500 * time.Millisecond)
		if _, err := b.Send(ctx, "q", st.SendInput{Body: "6", GroupID: "a"}); err != nil {
			t.Fatalf("after the hint: %v", err)
		}
	})
}

// TestMaxMessageAge: old messages are dropped, or dead-lettered, without
// anyone receiving; the dead-lettered ones carry their source.
func TestMaxMessageAge(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		dlq, _ := b.CreateQueue(ctx, "dlq", nil, nil)
		if _, err := b.CreateQueue(ctx, "drop", map[string]string{"MaxMessageAgeSeconds": "60"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateQueue(ctx, "dl", map[string]string{"MaxMessageAgeSeconds": "60", "ExpiredMessageAction": "DeadLetter",
			"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, dlq.ARN)}, nil); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"drop", "dl"} {
			sendAs(t, b, q, "t", 3)
		}
		clk.Advance(30 * time.Second)
		sendAs(t, b, "drop", "t", 1)
		clk.Advance(31 * time.Second) // the first three are 61 s old
		clk.Advance(time.Second)      // a maintenance pass
		a, _ := b.GetQueueAttributes("drop", []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDropped"})
		if a["ApproximateNumberOfMessages"] != "1" || a["ApproximateNumberOfMessagesDropped"] != "3" {
			t.Errorf("drop queue: %v", a)
		}
		a, _ = b.GetQueueAttributes("dlq", []string{"ApproximateNumberOfMessages"})
		if a["ApproximateNumberOfMessages"] != "3" {
			t.Fatalf("dead-letter queue: %v", a)
		}
		ms, _ := b.Receive(ctx, "dlq", st.ReceiveInput{MaxMessages: 10})
		if len(ms) != 3 || !strings.HasSuffix(ms[0].DeadLetterSourceArn, ":dl") {
			t.Fatalf("dead-lettered: %+v", ms)
		}
	})
}

// TestWatermark: DropBefore drops everything of a tenant (or all) sent
// before a time, durably.
func TestWatermark(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		b.CreateQueue(ctx, "q", nil, nil)
		sendAs(t, b, "q", "a", 3)
		sendAs(t, b, "q", "b", 2)
		cut := clk.Now().Add(time.Millisecond)
		clk.Advance(time.Second)
		sendAs(t, b, "q", "a", 1)
		n, err := b.DropBefore(ctx, "q", cut, "a", false)
		if err != nil || n != 3 {
			t.Fatalf("DropBefore a = %d, %v; want 3", n, err)
		}
		n, err = b.DropBefore(ctx, "q", cut, "", true)
		if err != nil || n != 2 {
			t.Fatalf("DropBefore all = %d, %v; want 2", n, err)
		}
		ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: ptr(0)})
		if len(ms) != 1 || ms[0].Body != "a-0" || ms[0].GroupID != "a" {
			t.Fatalf("left: %+v", ms)
		}
		if _, err := b.DropBefore(ctx, "nope", cut, "", true); code(err) != st.CodeQueueDoesNotExist {
			t.Fatalf("missing queue: %v", err)
		}
	})
}

// TestTenantKeyAttributeSurvivesReopen: the tenant taken from a message
// attribute, and the overrides, come back after a restart.
func TestTenantKeyAttributeSurvivesReopen(t *testing.T) {
	stores(t, func(t *testing.T, open func() *broker.Broker, clk *clock.Fake) {
		b := open()
		if _, err := b.CreateQueue(ctx, "q", map[string]string{"TenantKey": "MessageAttribute:customer"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.SetTenantLimits(ctx, "q", "acme", broker.TenantLimits{Weight: 3}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			for _, c := range []string{"acme", "zeta"} {
				attrs := map[string]st.AttributeValue{"customer": {DataType: "String", StringValue: ptr(c)}}
				if _, err := b.Send(ctx, "q", st.SendInput{Body: c, Attributes: attrs}); err != nil {
					t.Fatal(err)
				}
			}
		}
		check := func(b *broker.Broker) {
			t.Helper()
			ts, err := b.Tenants("q", 0)
			if err != nil || len(ts) != 2 || ts[0].Ready != 4 || ts[1].Ready != 4 {
				t.Fatalf("tenants %+v %v", ts, err)
			}
			for _, ti := range ts {
				if ti.Name == "acme" && (ti.Limits == nil || ti.Limits.Weight != 3) {
					t.Fatalf("acme's override: %+v", ti)
				}
			}
		}
		check(b)
		if strings.HasSuffix(t.Name(), "/disk") { // the memory store keeps nothing across Close
			b.Close()
			b = open()
			check(b)
		}
		ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 4})
		var got []string
		for _, m := range ms {
			got = append(got, m.Body)
		}
		// weight 3 against 1: three of acme per one of zeta
		if strings.Count(strings.Join(got, " "), "acme") != 3 {
			t.Errorf("first four after reopen: %v", got)
		}
	})
}

// TestSluiceAttributeValidation: out-of-range values are rejected with an
// error naming the attribute.
func TestSluiceAttributeValidation(t *testing.T) {
	b, err := broker.Open(broker.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for attr, v := range map[string]string{
		"TenantKey": "Nope", "FairDelivery": "yes", "TenantMaxInFlight": "-1", "TenantSendRate": "fast",
		"Partitions": "0", "LowerLaneShare": "0.9", "ExpiredMessageAction": "Keep", "SidelineAgeSeconds": "x",
		"TenantSendRateGrowth": "NaN", "TenantHeadroom": "1001",
	} {
		_, err := b.CreateQueue(ctx, "q", map[string]string{attr: v}, nil)
		if code(err) != st.CodeInvalidAttributeValue || !strings.Contains(err.Error(), attr) {
			t.Errorf("%s=%s: %v", attr, v, err)
		}
	}
	if _, err := b.CreateQueue(ctx, "q", map[string]string{"Partitions": "4", "PartitionsPerTenant": "2", "SidelineAgeSeconds": "60"}, nil); err != nil {
		t.Fatal(err)
	}
	a, err := b.GetQueueAttributes("q", []string{"All"})
	if err != nil || a["Shards"] != "4" || a["ShardsPerTenant"] != "2" || a["SidelineAgeSeconds"] != "60" || a["Partitions"] != "" {
		t.Fatalf("attributes (set under their former names, answered under the current ones): %v %v", a, err)
	}
	if a, err := b.GetQueueAttributes("q", []string{"Partitions"}); err != nil || a["Partitions"] != "4" {
		t.Fatalf("asked for by its former name: %v %v", a, err)
	}
	if _, ok := a["TenantKey"]; ok {
		t.Errorf("unset Sluice attributes should stay hidden: %v", a)
	}
	info, err := b.Tenant("q", "acme")
	if err != nil || len(info.Shards) != 2 {
		t.Fatalf("tenant shards: %+v %v", info, err)
	}
	// A receive bound to a shard that does not exist.
	if _, err := b.Receive(ctx, "q", st.ReceiveInput{Shard: ptr(4)}); code(err) != st.CodeInvalidParameterValue {
		t.Fatalf("shard 4 of 4: %v", err)
	}
}

// TestStoreBytes: the store's disk, live and dead bytes follow sends and
// deletes.
func TestStoreBytes(t *testing.T) {
	b, err := broker.Open(broker.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.CreateQueue(ctx, "q", nil, nil)
	body := strings.Repeat("x", 1024)
	for i := 0; i < 100; i++ {
		if _, err := b.Send(ctx, "q", st.SendInput{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	s := b.StoreStats()
	if s.DiskBytes < 100*1024 || s.LiveBytes < s.DiskBytes*9/10 || s.LiveMessages != 100 {
		t.Fatalf("after 100 sends: %+v", s)
	}
	ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
	for len(ms) > 0 {
		for _, m := range ms {
			b.Delete(ctx, "q", m.ReceiptHandle)
		}
		if s := b.StoreStats(); s.LiveMessages <= 50 {
			break
		}
		ms, _ = b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 10})
	}
	s2 := b.StoreStats()
	if s2.LiveMessages != 50 || s2.DeadBytes < s2.DiskBytes/3 || s2.LiveBytes > s2.DiskBytes*2/3 || s2.DeadRecords != 50 {
		t.Fatalf("after deleting half: %+v", s2)
	}
}

// TestTenantHeadroom: with TenantHeadroom=1, a long poll is not given a
// message of a tenant above its share of the messages in flight unless
// another long poll is waiting, so that a quiet tenant's next message finds
// that one waiting. A short poll, which cannot wait, is always served, and
// a tenant alone is always served.
func TestTenantHeadroom(t *testing.T) {
	storesInBubble(t, func(t *testing.T, b *broker.Broker) {
		if _, err := b.CreateQueue(ctx, "q", map[string]string{"TenantHeadroom": "1"}, nil); err != nil {
			t.Fatal(err)
		}
		long := func(max int) <-chan []st.Message {
			got := make(chan []st.Message, 1)
			go func() {
				ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: max, WaitTimeSeconds: ptr(20)})
				got <- ms
			}()
			return got
		}
		waitFor := func(n int) {
			t.Helper()
			synctest.Wait() // every receive has either returned or parked
			if got := waiting(b, "q"); got != n {
				t.Fatalf("waiting receives %d, want %d", got, n)
			}
		}
		sendAs(t, b, "q", "a", 5)
		if ms := <-long(2); groups(ms) != "a a" {
			t.Fatalf("tenant a alone: %q, want a a", groups(ms))
		}
		sendAs(t, b, "q", "b", 1)
		// b is within its share; a (2 of 2 in flight, 2 busy tenants) is
		// not, and no other receiver waits.
		if ms := <-long(10); groups(ms) != "b" {
			t.Fatalf("long poll with no other waiting: %q, want b", groups(ms))
		}
		// The next long poll waits (the bubble's clock does not move while
		// the test runs): it is the headroom, and the one after it may serve a.
		kept := long(1)
		waitFor(1)
		if ms := <-long(1); groups(ms) != "a" {
			t.Fatalf("long poll with one waiting: %q, want a", groups(ms))
		}
		// A short poll cannot wait: it is served.
		if ms, _ := b.Receive(ctx, "q", st.ReceiveInput{MaxMessages: 1}); groups(ms) != "a" {
			t.Fatalf("short poll: %q, want a", groups(ms))
		}
		// b's next message goes to the waiting receiver at once.
		sendAs(t, b, "q", "b", 1)
		if ms := <-kept; groups(ms) != "b" {
			t.Fatalf("the waiting receiver got %q, want b", groups(ms))
		}
		waitFor(0)
	})
}

func waiting(b *broker.Broker, queue string) int {
	for _, s := range b.Stats() {
		if s.Name == queue {
			return s.WaitingReceives
		}
	}
	return -1
}
