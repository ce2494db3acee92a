package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDifferential drives the scheduler with random operations next to a
// naive model that keeps every message in one list, and checks after each
// step: a pop returns a ready message of a tenant under its cap, the
// oldest of its tenant and lane; a pop returns nothing only when the model
// has no eligible message (nothing waits while capacity is idle); and the
// counts agree.
func TestDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { differential(t, seed) })
	}
}

func differential(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{Fair: r.IntN(4) != 0, Shards: 1 + r.IntN(3), RetryLevels: r.IntN(3),
		LowerLaneShare: []float64{0, 0.1, 0.5}[r.IntN(3)]}
	cfg.ShardsPerTenant = 1 + r.IntN(cfg.Shards)
	if r.IntN(2) == 0 {
		cfg.Limits.MaxInFlight = 1 + r.IntN(3)
	}
	if r.IntN(3) == 0 {
		cfg.Headroom = 1 + r.IntN(3)
	}
	cfg.Limits.Weight = []float64{0, 0, 0.3, 2}[r.IntN(4)]
	if r.IntN(3) == 0 {
		cfg.Limits.ReceiveRate, cfg.Limits.ReceiveBurst = 1+float64(r.IntN(5)), float64(r.IntN(3))
	}
	h := newHarness(cfg)
	tenants := []string{"a", "b", "c", "d", "e"}[:1+r.IntN(5)]
	lane := map[uint64]int{}
	for step := 0; step < 400; step++ {
		switch op := r.IntN(10); {
		case op < 4:
			l := 0
			if r.IntN(4) == 0 {
				l = r.IntN(cfg.RetryLevels + 2)
			}
			seq := h.push(tenants[r.IntN(len(tenants))], l, 0, false)
			lane[seq] = l
		case op < 7:
			h.spare = r.IntN(4)
			seq, ok := h.pop(-1)
			checkPop(t, h, cfg, seq, ok)
		case op < 9:
			// settle or delete a random in-flight message
			for s, it := range h.items {
				if it.state == "inflight" {
					if r.IntN(2) == 0 {
						h.del(s)
					} else {
						l := r.IntN(cfg.RetryLevels + 2)
						lane[s] = l
						h.release(s, l)
					}
					break
				}
			}
		default:
			h.now += int64(r.IntN(2000))
			// delete a random ready message (a delete with an old handle)
			for s, it := range h.items {
				if it.state == "ready" && r.IntN(3) == 0 {
					h.del(s)
				}
				break
			}
		}
		checkCounts(t, h, cfg)
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
}

func checkPop(t *testing.T, h *harness, cfg Config, seq uint64, ok bool) {
	t.Helper()
	inflight := map[string]int{}
	for _, it := range h.items {
		if it.state == "inflight" {
			inflight[key(cfg, it.tenant)]++
		}
	}
	capped := func(tn string) bool {
		return cfg.Fair && cfg.Limits.MaxInFlight > 0 && inflight[key(cfg, tn)] >= cfg.Limits.MaxInFlight
	}
	// Headroom: with fewer than cfg.Headroom receivers to spare, a tenant
	// that one more message in flight would put above its share of the
	// messages in flight (total / busy tenants) is passed over.
	busy, total := map[string]bool{}, 0
	for _, it := range h.items {
		busy[key(cfg, it.tenant)] = true
		if it.state == "inflight" {
			total++
		}
	}
	hold := cfg.Fair && h.spare < cfg.Headroom && len(busy) > 1
	if !ok {
		for s, it := range h.items {
			over := (inflight[key(cfg, it.tenant)]+1)*len(busy) > total+1
			if it.state == "ready" && !capped(it.tenant) && !(hold && over) {
				t.Errorf("pop found nothing, but %d (%s) is ready, under its cap and not held back", s, it.tenant)
			}
		}
		return
	}
	it := h.items[seq]
	// counts include the popped message
	if hold && inflight[key(cfg, it.tenant)]*len(busy) > total {
		t.Errorf("popped %d of %s above its share (%d of %d in flight, %d busy tenants) with %d receivers to spare, headroom %d",
			seq, it.tenant, inflight[key(cfg, it.tenant)], total, len(busy), h.spare, cfg.Headroom)
	}
	// it is already marked in flight; its tenant's count includes it
	if cfg.Fair && cfg.Limits.MaxInFlight > 0 && inflight[key(cfg, it.tenant)] > cfg.Limits.MaxInFlight {
		t.Errorf("tenant %s has %d in flight, cap %d", it.tenant, inflight[key(cfg, it.tenant)], cfg.Limits.MaxInFlight)
	}
	// FIFO within tenant, lane and shard: no older ready message of
	// the same tenant waits in the same lane of the same shard.
	for s, o := range h.items {
		if h.order[s] < h.order[seq] && o.state == "ready" && o.Entry.pt == it.Entry.pt && o.Entry.lane == it.Entry.lane {
			t.Errorf("popped %d before older %d of the same tenant, lane and shard", seq, s)
		}
	}
}

func key(cfg Config, tenant string) string {
	if !cfg.Fair {
		return ""
	}
	return tenant
}

func checkCounts(t *testing.T, h *harness, cfg Config) {
	t.Helper()
	ready, inflight := 0, 0
	per := map[string][2]int{}
	for _, it := range h.items {
		k := key(cfg, it.tenant)
		c := per[k]
		if it.state == "ready" {
			ready++
			c[0]++
		} else {
			inflight++
			c[1]++
		}
		per[k] = c
	}
	if h.s.Ready() != ready {
		t.Errorf("Ready() = %d, model %d", h.s.Ready(), ready)
	}
	// The headroom rule's counts: busy tenants and messages in flight.
	if h.s.busy != len(per) || h.s.inflight != inflight {
		t.Errorf("busy tenants %d, in flight %d; model %d, %d", h.s.busy, h.s.inflight, len(per), inflight)
	}
	for _, ts := range h.s.Stats(h.now) {
		if c := per[ts.Name]; c[0] != ts.Ready || c[1] != ts.InFlight {
			t.Errorf("tenant %q: ready %d inflight %d, model %d %d", ts.Name, ts.Ready, ts.InFlight, c[0], c[1])
		}
		delete(per, ts.Name)
	}
	for k, c := range per {
		if c[0]+c[1] > 0 {
			t.Errorf("tenant %q missing from stats (model %v)", k, c)
		}
	}
}

// TestEqualService: two backlogged tenants of equal weight receive equal
// service within one quantum, whatever the arrival pattern.
func TestEqualService(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := newHarness(Config{Fair: true})
	for i := 0; i < 1000; i++ {
		h.push("a", 0, 0, false)
		h.push("b", 0, 0, false)
	}
	served := map[string]int{}
	for i := 0; i < 1500; i++ {
		if r.IntN(2) == 0 {
			h.push([]string{"a", "b"}[r.IntN(2)], 0, 0, false)
		}
		seq, ok := h.pop(-1)
		if !ok {
			t.Fatal("nothing to pop with both tenants backlogged")
		}
		served[h.items[seq].tenant]++
		h.del(seq)
		if d := served["a"] - served["b"]; d > 1 || d < -1 {
			t.Fatalf("after %d pops: a=%d b=%d, more than one quantum apart", i+1, served["a"], served["b"])
		}
	}
}

// TestNoLaneStarves: with every lane backlogged and fresh work arriving in
// the live lane all the time, each lower lane still gets at least its
// share of the picks.
func TestNoLaneStarves(t *testing.T) {
	h := newHarness(Config{Fair: true, RetryLevels: 2, LowerLaneShare: 0.1, SidelineAge: 10_000})
	for i := 0; i < 300; i++ {
		h.push("t", Live, 60_000, false) // sidelined to the backlog lane when seen
	}
	for l := 0; l < 3; l++ {
		for i := 0; i < 300; i++ {
			h.push("t", l, 0, false)
		}
	}
	perLane := map[uint8]int{}
	for i := 0; i < 500; i++ {
		h.push("t", 0, 0, false)
		seq, ok := h.pop(-1)
		if !ok {
			t.Fatal("nothing popped")
		}
		perLane[h.items[seq].lane]++
		h.del(seq)
	}
	for l := uint8(1); l < 4; l++ {
		if perLane[l] < 45 {
			t.Errorf("lane %d got %d of 500 picks, want at least 10%%: %v", l, perLane[l], perLane)
		}
	}
}

// TestIdleTenantsForgotten: a million tenants that came and went leave no
// state behind.
func TestIdleTenantsForgotten(t *testing.T) {
	h := newHarness(Config{Fair: true, Limits: Limits{SendRate: 100, SendBurst: 100}})
	for i := 0; i < 100_000; i++ {
		name := fmt.Sprint("tenant-", i)
		if ok, _ := h.s.AllowSend(h.now, name, 1); !ok {
			t.Fatal("first send throttled")
		}
		seq := h.push(name, 0, 0, false)
		if got, ok := h.pop(-1); !ok || got != seq {
			t.Fatalf("pop = %d %v, want %d", got, ok, seq)
		}
		h.del(seq)
		h.now += 1
	}
	h.now += 10_000
	for i := 0; i < 100_000; i++ {
		h.push("last", 0, 0, false)
		seq, _ := h.pop(-1)
		h.del(seq)
	}
	if n := h.s.Tenants(); n > 1 {
		t.Errorf("%d tenants still held after all went idle", n)
	}
}

// TestSendRateGrowth: a tenant that uses its send limit steadily for a
// minute gets a larger one (by the growth factor, up to the ceiling), and
// one that stops using it shrinks back toward the base.
func TestSendRateGrowth(t *testing.T) {
	h := newHarness(Config{Fair: true, Limits: Limits{SendRate: 10, SendBurst: 1, SendRateGrowth: 0.5, SendRateCeiling: 20}})
	sent := func(seconds int) int {
		n := 0
		for ms := 0; ms < seconds*1000; ms += 10 {
			h.now += 10
			if ok, _ := h.s.AllowSend(h.now, "t", 1); ok {
				n++
			}
		}
		return n
	}
	if n := sent(61); n < 600 || n > 620 {
		t.Fatalf("first minute: %d sends at a 10/s limit", n)
	}
	if n := sent(10); n < 140 || n > 155 { // burst 1 in 10 ms steps: 14.3-15/s
		t.Fatalf("after a minute at the limit: %d sends in 10 s, want about 150 (limit 15/s)", n)
	}
	sent(61)
	if n := sent(10); n < 195 || n > 201 {
		t.Fatalf("after another minute: %d sends in 10 s, want the ceiling, 20/s", n)
	}
	h.now += 61_000 // a quiet minute
	h.s.AllowSend(h.now, "t", 1)
	if n := sent(10); n > 140 {
		t.Fatalf("after an idle minute: %d sends in 10 s, want the limit to shrink back", n)
	}
}

// TestBacklogBackpressureFromDrainRate: with no send rate, a tenant over
// its backlog target may send at its measured delivery rate scaled by
// target/backlog.
func TestBacklogBackpressureFromDrainRate(t *testing.T) {
	h := newHarness(Config{Fair: true, Limits: Limits{BacklogTarget: 10}})
	for i := 0; i < 40; i++ {
		h.push("t", 0, 0, false)
	}
	// Consumers take 4 a second for 30 s.
	for i := 0; i < 120; i++ {
		h.now += 250
		seq, ok := h.pop(-1)
		if !ok {
			t.Fatal("nothing to pop")
		}
		h.del(seq)
		h.push("t", 0, 0, false) // the producer keeps the backlog at 40
	}
	// Backlog 40, target 10: a quarter of about 4/s, about 1 a second.
	allowed := 0
	for i := 0; i < 1000; i++ {
		h.now += 10
		if ok, wait := h.s.AllowSend(h.now, "t", 1); ok {
			allowed++
		} else if wait <= 0 {
			t.Fatal("throttled without a retry hint")
		}
	}
	if allowed < 5 || allowed > 20 {
		t.Fatalf("%d sends allowed in 10 s, want about 10", allowed)
	}
}

// TestReserveSendSpacesAtTheRate: reservations over the limit are taken,
// each later than the one before by the rate's interval; a plain send
// meanwhile finds no room, and another tenant is not touched.
func TestReserveSendSpacesAtTheRate(t *testing.T) {
	h := newHarness(Config{Fair: true, Limits: Limits{SendRate: 2, SendBurst: 1}})
	var waits []time.Duration
	for range 4 {
		waits = append(waits, h.s.ReserveSend(h.now, "a", 1))
	}
	if want := []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond}; !slices.Equal(waits, want) {
		t.Fatalf("reservations wait %v, want %v", waits, want)
	}
	h.now += 1000
	if ok, wait := h.s.AllowSend(h.now, "a", 1); ok || wait != time.Second {
		t.Fatalf("a plain send a second later: %v, wait %v; want refused, 1s", ok, wait)
	}
	if ok, _ := h.s.AllowSend(h.now, "b", 1); !ok {
		t.Fatal("another tenant's send refused")
	}
}

// TestDeterministicAfterConfigChange: the same history gives the same
// delivery order every time, even across a configuration change that
// uncaps many tenants at once (it once followed Go's map order).
func TestDeterministicAfterConfigChange(t *testing.T) {
	run := func() []uint64 {
		type e struct {
			Entry
			seq    uint64
			tenant string
		}
		entries := map[uint64]*e{}
		var s *Sched
		s = New(Config{Fair: true, Limits: Limits{MaxInFlight: 1}}, func(seq uint64) (*Entry, int64, string, bool) {
			x, ok := entries[seq]
			if !ok {
				return nil, 0, "", false
			}
			return &x.Entry, 0, x.tenant, true
		})
		var seq uint64
		for i := 0; i < 60; i++ {
			for j := 0; j < 3; j++ {
				seq++
				x := &e{seq: seq, tenant: fmt.Sprint("t", i)}
				entries[seq] = x
				s.Push(0, seq, &x.Entry, x.tenant, 0)
			}
		}
		for { // one in flight per tenant: everyone capped
			if _, ok := s.Pop(0, -1, 1<<30); !ok {
				break
			}
		}
		s.SetConfig(0, Config{Fair: true})
		var order []uint64
		for {
			seq, ok := s.Pop(0, -1, 1<<30)
			if !ok {
				return order
			}
			order = append(order, seq)
		}
	}
	first := run()
	if len(first) != 120 {
		t.Fatalf("delivered %d after uncapping, want 120", len(first))
	}
	for i := 0; i < 10; i++ {
		if again := run(); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("run %d delivered in another order:\n%v\n%v", i, first, again)
		}
	}
}
