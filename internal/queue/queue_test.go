package queue

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
)

// refMsg is the naive model's message: plain fields, linear scans.
type refMsg struct {
	seq       uint64
	group     string
	visibleAt time.Time
	inFlight  bool
	rc        int
	sent      time.Time
}

type refQueue struct {
	fifo   bool
	maxRC  int
	msgs   []*refMsg // in send order
	dlq    int
	expiry time.Duration
}

func (r *refQueue) find(seq uint64) (int, *refMsg) {
	for i, m := range r.msgs {
		if m.seq == seq {
			return i, m
		}
	}
	return -1, nil
}

func (r *refQueue) settle(now time.Time) {
	for _, m := range r.msgs {
		if m.inFlight && !m.visibleAt.After(now) {
			m.inFlight = false
		}
	}
	if r.expiry > 0 {
		kept := r.msgs[:0]
		for _, m := range r.msgs {
			if !m.inFlight && !m.visibleAt.After(now) && !m.sent.After(now.Add(-r.expiry)) {
				continue
			}
			kept = append(kept, m)
		}
		r.msgs = kept
	}
}

// deliverable reports whether the model allows m to be delivered now.
func (r *refQueue) deliverable(now time.Time, m *refMsg) bool {
	if m.inFlight || m.visibleAt.After(now) {
		return false
	}
	if !r.fifo {
		return true
	}
	// FIFO: the group has nothing in flight and every earlier message of
	// the group is ready too (a receive may take a prefix of the group).
	for _, x := range r.msgs {
		if x.group == m.group && x.inFlight {
			return false
		}
	}
	for _, x := range r.msgs {
		if x.group != m.group {
			continue
		}
		if x.inFlight {
			return false
		}
		if x == m {
			return true
		}
		if x.visibleAt.After(now) {
			return false
		}
	}
	return false
}

func (r *refQueue) counts(now time.Time) (visible, inflight, delayed int) {
	for _, m := range r.msgs {
		switch {
		case m.inFlight:
			inflight++
		case m.visibleAt.After(now):
			delayed++
		default:
			visible++
		}
	}
	return
}

func TestDifferentialAgainstReference(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		fifo := seed%2 == 0
		t.Run(fmt.Sprintf("seed%d-fifo=%v", seed, fifo), func(t *testing.T) {
			runDifferential(t, seed, fifo)
		})
	}
}

func runDifferential(t *testing.T, seed int64, fifo bool) {
	rng := rand.New(rand.NewSource(seed))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{FIFO: fifo, VisibilityTimeout: 30 * time.Second, Retention: time.Hour, MaxReceiveCount: 3}
	q := New(cfg)
	ref := &refQueue{fifo: fifo, maxRC: 3, expiry: time.Hour}
	groups := []string{"a", "b", "c", "d"}
	var seq uint64
	for step := 0; step < 600; step++ {
		switch op := rng.Intn(10); {
		case op < 3: // send
			seq++
			delay := time.Duration(0)
			if !fifo && rng.Intn(3) == 0 {
				delay = time.Duration(rng.Intn(20)) * time.Second
			}
			g := groups[rng.Intn(len(groups))]
			seq = send(t, q, now, g, delay)
			ref.msgs = append(ref.msgs, &refMsg{seq: seq, group: g, visibleAt: now.Add(delay), sent: now})
		case op < 6: // receive
			ref.settle(now)
			max := 1 + rng.Intn(10)
			vis := time.Duration(rng.Intn(40)) * time.Second
			want := 0
			for _, m := range ref.msgs {
				if ref.deliverable(now, m) {
					want++
				}
			}
			allowed := map[uint64]bool{}
			for _, m := range ref.msgs {
				if ref.deliverable(now, m) {
					allowed[m.seq] = true
				}
			}
			ds := q.ReceiveAll(now, max, vis)
			for _, h := range q.TakeEffects().Handoffs {
				rm := ref.findMsg(h.Msg.Seq)
				if rm == nil || !allowed[rm.seq] {
					t.Fatalf("step %d: dead-lettered %d, which the model holds back", step, h.Msg.Seq)
				}
				if rm.rc < ref.maxRC {
					t.Fatalf("step %d: dead-lettered %d after %d receives", step, rm.seq, rm.rc)
				}
				apply(t, q, now, q.DeleteRecord(h.Msg.Seq, record.ByMove)) // the move is done
				i, _ := ref.find(rm.seq)
				ref.msgs = append(ref.msgs[:i], ref.msgs[i+1:]...)
				ref.dlq++
				want--
			}
			got := 0
			lastInGroup := map[string]uint64{}
			for _, d := range ds {
				_, rm := ref.find(d.Msg.Seq)
				if rm == nil {
					t.Fatalf("step %d: delivered unknown or deleted message %d", step, d.Msg.Seq)
				}
				if fifo {
					if d.Msg.Seq < lastInGroup[rm.group] {
						t.Fatalf("step %d: group %s out of order", step, rm.group)
					}
					lastInGroup[rm.group] = d.Msg.Seq
				}
				if !allowed[rm.seq] {
					t.Fatalf("step %d: delivered message %d the model holds back", step, d.Msg.Seq)
				}
				got++
				rm.rc++
				if int(d.Msg.RecvCount()) != rm.rc {
					t.Fatalf("step %d: receive count %d, model %d", step, d.Msg.RecvCount(), rm.rc)
				}
				rm.inFlight = true
				rm.visibleAt = now.Add(vis)
			}
			if !fifo && len(ds) < max && len(ds) < want {
				t.Fatalf("step %d: delivered %d of %d ready (max %d): not work-conserving", step, len(ds), want, max)
			}
			if fifo && want > 0 && len(ds) == 0 {
				t.Fatalf("step %d: %d deliverable but nothing delivered\n%s", step, want, q.dump())
			}
		case op < 8: // delete something in flight
			var inflight []uint64
			for _, m := range ref.msgs {
				if m.inFlight {
					inflight = append(inflight, m.seq)
				}
			}
			if len(inflight) == 0 {
				continue
			}
			s := inflight[rng.Intn(len(inflight))]
			if _, ok := q.Lookup(s); !ok {
				t.Fatalf("step %d: in-flight %d not found", step, s)
			}
			apply(t, q, now, q.DeleteRecord(s, record.ByClient))
			i, _ := ref.find(s)
			ref.msgs = append(ref.msgs[:i], ref.msgs[i+1:]...)
		case op == 8: // change visibility
			for _, m := range ref.msgs {
				if m.inFlight {
					d := time.Duration(rng.Intn(5)) * time.Second
					apply(t, q, now, q.VisibilityRecord(m.seq, now.Add(d).UnixMilli()))
					m.visibleAt = now.Add(d)
					if d == 0 {
						m.inFlight = false
					}
					break
				}
			}
		case op == 9: // time passes, sometimes a lot
			d := time.Duration(rng.Intn(15)) * time.Second
			if rng.Intn(20) == 0 {
				d = 2 * time.Hour
			}
			now = now.Add(d)
		}
		ref.settle(now)
		c := q.Counts(now)
		v, f, dl := ref.counts(now)
		if c.Visible != v || c.InFlight != f || c.Delayed != dl {
			t.Fatalf("step %d: counts %+v, model visible %d in flight %d delayed %d", step, c, v, f, dl)
		}
	}
}

func TestFIFOGroupsDoNotStarveEachOther(t *testing.T) {
	now := time.Unix(1e9, 0)
	q := New(Config{FIFO: true, VisibilityTimeout: time.Minute})
	for i := 0; i < 50000; i++ { // a huge backlog in one group
		send(t, q, now, "big", 0)
	}
	send(t, q, now, "small", 0)
	first := q.ReceiveAll(now, 10, time.Minute)
	second := q.ReceiveAll(now, 10, time.Minute)
	if len(second) != 1 || second[0].Msg.Group() != "small" {
		t.Fatalf("the small group waited behind the big one: first %d, second %v", len(first), second)
	}
}

// TestExtraCopyOnWrite: entries are copied (into records, into other
// queues); changing a copy's rare fields never changes the original.
func TestExtraCopyOnWrite(t *testing.T) {
	m := withGroup(&Msg{}, "g")
	if m.Tenant() != "g" || m.x != nil {
		t.Fatalf("default tenant %q, extra %v", m.Tenant(), m.x)
	}
	m.SetTenant("g")
	if m.x != nil {
		t.Fatal("a tenant equal to the group allocated")
	}
	m.SetTenant("acme")
	m.Failed(1, "Retry", "boom")
	cp := *m
	cp.SetDLQSource("arn:src")
	cp.Failed(2, "Reject", "")
	cp.SetTenant("g")
	if m.DLQSource() != "" || m.Fail().Reason != "Retry" || m.Fail().Failures != 1 || m.Tenant() != "acme" {
		t.Fatalf("original changed: %q %+v %q", m.DLQSource(), m.Fail(), m.Tenant())
	}
	if cp.DLQSource() != "arn:src" || cp.Fail().Reason != "Reject" || cp.Fail().Failures != 2 || cp.Fail().LastError != "boom" || cp.Tenant() != "g" {
		t.Fatalf("copy: %q %+v %q", cp.DLQSource(), cp.Fail(), cp.Tenant())
	}
	cp.SetDLQSource("")
	cp.SetFail(nil)
	if cp.x != nil {
		t.Fatalf("cleared extra still allocated: %+v", cp.x)
	}
	if unsafe.Sizeof(Msg{}) > 112 {
		t.Errorf("Msg is %d bytes; it was 112 (the size class every waiting message pays)", unsafe.Sizeof(Msg{}))
	}
}

func withGroup(m *Msg, g string) *Msg { m.SetGroup(g); return m }

// TestPurgeForgetsTenants: a purge leaves no per-tenant scheduler state
// behind (it held hundreds of megabytes after purging a million distinct
// groups), and the queue works as new afterwards.
func TestPurgeForgetsTenants(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprint("partial=", partial), func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			q := New(Config{VisibilityTimeout: 30 * time.Second, Sched: sched.Config{Fair: true}})
			const n = 20000
			for i := 0; i < n; i++ {
				send(t, q, now, fmt.Sprint("t", i), 0)
			}
			if got := q.ReceiveAll(now, 10, time.Minute); len(got) != 10 {
				t.Fatalf("received %d", len(got))
			}
			q.TakeEffects()
			purge := q.PurgeRecord(now)
			if partial {
				send(t, q, now, "late", 0) // sent after the purge's record: it stays
			}
			apply(t, q, now, purge)
			if gone := q.TakeEffects().Gone; len(gone) != n {
				t.Fatalf("purge released %d messages, want %d", len(gone), n)
			}
			want := 0
			if partial {
				want = 1
			}
			if got := q.Sched().Tenants(); got != want {
				t.Fatalf("the scheduler holds %d tenants after the purge, want %d", got, want)
			}
			if c := q.Counts(now); c.Visible != want || c.InFlight != 0 || c.Delayed != 0 {
				t.Fatalf("counts after the purge: %+v", c)
			}
			send(t, q, now, "after", 0)
			got := q.ReceiveAll(now, 10, time.Minute)
			if len(got) != want+1 {
				t.Fatalf("received %d after the purge, want %d", len(got), want+1)
			}
		})
	}
}

// send sends one message to q and applies its record, as an owner does
// once it is durable; it returns the message's sequence.
func send(t testing.TB, q *Queue, now time.Time, group string, delay time.Duration) uint64 {
	t.Helper()
	res := q.Send(now, &SendSpec{Group: group, Tenant: group, Dedup: fmt.Sprint("d", q.Last()+1), Delay: delay, Payload: &record.Payload{ID: "id", Body: "b"}})
	if res.Record == nil {
		t.Fatalf("send: %+v", res)
	}
	loc := Loc{Seg: 1, Off: uint32(res.Record.Pos)}
	if err := q.Apply(now, res.Record, loc); err != nil {
		t.Fatal(err)
	}
	if !q.Hold(res.Record.Msg.Seq, loc) {
		t.Fatal("the message sent does not hold its body")
	}
	return res.Record.Pos
}

// apply applies a record as an owner does once it is durable.
func apply(t testing.TB, q *Queue, now time.Time, r *record.Record) {
	t.Helper()
	if err := q.Apply(now, r, Loc{}); err != nil {
		t.Fatal(err)
	}
}

func (r *refQueue) findMsg(seq uint64) *refMsg {
	_, m := r.find(seq)
	return m
}

// TestPurgeIntervalOutlivesReplay: a durable purge refuses another for
// PurgeInterval, also in a queue rebuilt from the log (a restart, a new
// owner) or from a snapshot taken within the interval, and no longer
// after it.
func TestPurgeIntervalOutlivesReplay(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	q := New(Config{VisibilityTimeout: 30 * time.Second})
	if !q.PurgeAllowed(now) {
		t.Fatal("a new queue refuses a purge")
	}
	send(t, q, now, "", 0)
	purge := q.PurgeRecord(now)
	apply(t, q, now, purge)
	later := now.Add(PurgeInterval - time.Millisecond)
	if q.PurgeAllowed(later) {
		t.Fatal("a purge is allowed within the interval")
	}
	fromLog := New(Config{VisibilityTimeout: 30 * time.Second})
	decoded, err := record.Decode(record.Encode(purge), true)
	if err != nil {
		t.Fatal(err)
	}
	decoded.Pos = purge.Pos
	apply(t, fromLog, later, decoded)
	fromSnap := New(Config{VisibilityTimeout: 30 * time.Second})
	for _, r := range q.Snapshot(later) {
		apply(t, fromSnap, later, r)
	}
	for name, r := range map[string]*Queue{"the log": fromLog, "a snapshot": fromSnap} {
		if r.PurgeAllowed(later) {
			t.Fatalf("rebuilt from %s: a purge is allowed within the interval", name)
		}
		if !r.PurgeAllowed(now.Add(PurgeInterval)) {
			t.Fatalf("rebuilt from %s: a purge is refused after the interval", name)
		}
	}
	// A snapshot after the interval carries nothing of it.
	for _, r := range q.Snapshot(now.Add(PurgeInterval)) {
		if r.Type == record.State && r.Until != 0 {
			t.Fatalf("a snapshot after the interval keeps it: %+v", r)
		}
	}
}
