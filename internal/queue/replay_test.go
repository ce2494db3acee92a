package queue

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
)

// recorder drives a queue as an owner does and keeps every record it
// would persist, in position order, with the time it was applied.
type recorder struct {
	t    *testing.T
	q    *Queue
	recs []timed
}

type timed struct {
	at  time.Time
	rec *record.Record
	loc Loc
}

func (r *recorder) keep(at time.Time, rec *record.Record, loc Loc) {
	r.recs = append(r.recs, timed{at, rec, loc})
}

// settle persists what the queue made on its own and finishes its moves.
func (r *recorder) settle(now time.Time) {
	for {
		e := r.q.TakeEffects()
		for _, rec := range e.Records {
			r.keep(now, rec, Loc{})
		}
		if len(e.Handoffs) == 0 {
			return
		}
		for _, h := range e.Handoffs {
			d := r.q.DeleteRecord(h.Msg.Seq, record.ByMove)
			r.keep(now, d, Loc{})
			if err := r.q.Apply(now, d, Loc{}); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// TestReplayMatchesLive: a queue driven by random commands, and a fresh
// queue that applies the same records at the same times through Apply (as
// recovery does), end in the same state; and a queue rebuilt from a
// snapshot holds what the snapshot says.
func TestReplayMatchesLive(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		fifo := seed%3 == 0
		t.Run(fmt.Sprintf("seed%d-fifo=%v", seed, fifo), func(t *testing.T) {
			cfg := Config{FIFO: fifo, VisibilityTimeout: 20 * time.Second, Retention: 30 * time.Minute, MaxReceiveCount: 4,
				Sched: sched.Config{Fair: true}}
			if seed%2 == 0 {
				cfg.RetryDelays = []time.Duration{5 * time.Second, 30 * time.Second}
			}
			if seed%5 == 0 {
				cfg.MaxAge, cfg.AgeToDLQ = 10*time.Minute, true
			}
			rng := rand.New(rand.NewSource(seed))
			now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			r := &recorder{t: t, q: New(cfg)}
			q := r.q
			var inflight []Delivery
			sent, taken := map[uint64]uint64{}, map[uint64]uint64{} // by origin partition
			for step := 0; step < 800; step++ {
				switch op := rng.Intn(12); {
				case op < 4:
					spec := &SendSpec{Group: fmt.Sprint("g", rng.Intn(5)), Tenant: fmt.Sprint("g", rng.Intn(5)), Dedup: fmt.Sprint(step),
						Delay: time.Duration(rng.Intn(3)) * time.Second * time.Duration(btoi(!fifo)), Payload: &record.Payload{ID: fmt.Sprint(step), Body: "b"}}
					if rng.Intn(3) == 0 { // a delivery from another partition: the next position, or one taken again
						p := uint64(100 + rng.Intn(2))
						spec.Origin = &Origin{Partition: p, Pos: sent[p] + uint64(rng.Intn(3)), After: sent[p]}
						if rng.Intn(8) == 0 { // a sender out of step: refused
							spec.Origin.After = sent[p] + 1
						}
					}
					res := q.Send(now, spec)
					if o := spec.Origin; o != nil && res.Dup != (o.Pos <= taken[o.Partition]) {
						t.Fatalf("delivery of %d:%d (taken up to %d): Dup=%v", o.Partition, o.Pos, taken[o.Partition], res.Dup)
					}
					if o := spec.Origin; o != nil && res.Gap != (o.Pos > taken[o.Partition] && o.After != taken[o.Partition]) {
						t.Fatalf("delivery of %d:%d after %d (taken up to %d): Gap=%v", o.Partition, o.Pos, o.After, taken[o.Partition], res.Gap)
					}
					var recs []*record.Record
					if res.Record != nil {
						recs = append(recs, res.Record)
					}
					if res.Marked {
						recs = append(recs, q.Marks([]uint64{spec.Origin.Partition})...)
					}
					if len(recs) == 0 {
						continue
					}
					if rng.Intn(15) == 0 { // the write failed
						for _, rec := range recs {
							q.Unwritten(rec)
						}
						q.SetLast(recs[0].Pos - 1)
						continue
					}
					if o := spec.Origin; o != nil {
						sent[o.Partition], taken[o.Partition] = o.Pos, o.Pos
					}
					for _, rec := range recs {
						loc := Loc{}
						if rec.Type == record.Send {
							loc = Loc{Seg: 1, Off: uint32(rec.Pos)}
						}
						r.keep(now, rec, loc)
						if err := q.Apply(now, rec, loc); err != nil {
							t.Fatal(err)
						}
					}
				case op < 7:
					ds := q.Receive(now, 1+rng.Intn(5), time.Duration(rng.Intn(30))*time.Second, -1, 1<<30)
					if rng.Intn(10) == 0 { // the write failed: undone
						for i := len(ds) - 1; i >= 0; i-- {
							q.Revert(now, ds[i].Prev)
						}
						q.SetLast(q.Last() - uint64(len(ds)))
						continue
					}
					for _, d := range ds {
						r.keep(now, d.Record, Loc{})
					}
					inflight = append(inflight, ds...)
				case op < 9 && len(inflight) > 0:
					i := rng.Intn(len(inflight))
					d := inflight[i]
					inflight = append(inflight[:i], inflight[i+1:]...)
					m, ok := q.Lookup(d.Msg.Seq)
					if !ok || m.Fence() != d.Msg.Fence() || m.State != InFlight {
						continue
					}
					var rec *record.Record
					switch rng.Intn(5) {
					case 0:
						rec = q.DeleteRecord(d.Msg.Seq, record.ByClient)
					case 1:
						rec = q.VisibilityRecord(d.Msg.Seq, now.Add(time.Duration(rng.Intn(10))*time.Second).UnixMilli())
					case 2:
						if rec, _, _ = q.Retry(now, d.Msg.Seq, -1, "x"); rec != nil {
							r.keep(now, rec, Loc{})
						}
						r.settle(now)
						continue
					case 3:
						if rec, _, _ = q.Defer(now, d.Msg.Seq, 3*time.Second); rec != nil {
							r.keep(now, rec, Loc{})
						}
						continue
					case 4:
						q.Reject(now, d.Msg.Seq, "bad")
						r.settle(now)
						continue
					}
					r.keep(now, rec, Loc{})
					if err := q.Apply(now, rec, Loc{}); err != nil {
						t.Fatal(err)
					}
				case op == 9 && rng.Intn(20) == 0:
					p := q.PurgeRecord(now)
					r.keep(now, p, Loc{})
					q.Apply(now, p, Loc{})
				default:
					now = now.Add(time.Duration(rng.Intn(20)) * time.Second)
					if rng.Intn(40) == 0 {
						now = now.Add(time.Hour)
					}
					q.Advance(now)
				}
				r.settle(now)
			}
			// Replay every record, in position order, at its time.
			sort.SliceStable(r.recs, func(i, j int) bool { return r.recs[i].rec.Pos < r.recs[j].rec.Pos })
			replay := New(cfg)
			for _, x := range r.recs {
				rec, err := record.Decode(record.Encode(x.rec), true)
				if err != nil {
					t.Fatal(err)
				}
				rec.Pos = x.rec.Pos
				if err := replay.Apply(x.at, rec, x.loc); err != nil {
					t.Fatal(err)
				}
				replay.TakeEffects()
			}
			replay.Advance(now)
			q.Advance(now)
			want, got := q.Snapshot(now), replay.Snapshot(now)
			if !reflect.DeepEqual(describe(want), describe(got)) {
				t.Fatalf("replayed state differs from the live one\nlive:   %v\nreplay: %v", describe(want), describe(got))
			}
			// A snapshot rebuilds the same state.
			fresh := New(cfg)
			for _, rec := range want {
				if err := fresh.Apply(now, rec, Loc{}); err != nil {
					t.Fatal(err)
				}
			}
			if again := fresh.Snapshot(now); !reflect.DeepEqual(describe(want), describe(again)) {
				t.Fatalf("a snapshot rebuilds another state\nsnapshot: %v\nrebuilt:  %v", describe(want), describe(again))
			}
			// Replayed or rebuilt, the queue takes nothing twice from an origin.
			for p, pos := range taken {
				for name, q := range map[string]*Queue{"replayed": replay, "rebuilt": fresh} {
					spec := &SendSpec{Dedup: "again", Payload: &record.Payload{ID: "again", Body: "b"}, Origin: &Origin{Partition: p, Pos: pos, After: pos - 1}}
					if res := q.Send(now, spec); !res.Dup || res.Record != nil || res.Marked {
						t.Fatalf("%s queue: delivery of %d:%d again was taken (%+v)", name, p, pos, res)
					}
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// describe is a comparable text of snapshot records.
func describe(recs []*record.Record) []string {
	var out []string
	for _, r := range recs {
		switch r.Type {
		case record.Index:
			for _, m := range r.Msgs {
				out = append(out, fmt.Sprintf("msg %d state=%d vis=%d count=%d fence=%d level=%d fail=%v", m.Seq, m.State, m.VisibleAt, m.Count, m.Fence, m.Level, m.Fail != nil))
			}
		case record.Dedup:
			out = append(out, fmt.Sprintf("dedup %s %s", r.Key, r.ID))
		case record.OriginMark:
			out = append(out, fmt.Sprintf("origin mark %d up to %d", r.Partition, r.OriginPos))
		}
	}
	return out
}

// TestReplayKeepsExtendedVisibility: a delivery whose visibility a later
// record extended is still in flight when recovery applies both records
// after the first visibility ran out (advanced after each record, the
// receive timed out before the change was applied, and the message was
// delivered again 15 minutes early).
func TestReplayKeepsExtendedVisibility(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	live := New(Config{VisibilityTimeout: 30 * time.Second})
	var log []*record.Record
	keep := func(r *record.Record) {
		log = append(log, r)
		if err := live.Apply(t0, r, Loc{}); err != nil {
			t.Fatal(err)
		}
	}
	keep(live.Send(t0, &SendSpec{Payload: &record.Payload{ID: "id", Body: "b"}}).Record)
	ds := live.ReceiveAll(t0, 1, 30*time.Second)
	if len(ds) != 1 {
		t.Fatalf("received %d", len(ds))
	}
	log = append(log, ds[0].Record)
	keep(live.VisibilityRecord(ds[0].Msg.Seq, t0.Add(920*time.Second).UnixMilli()))

	later := t0.Add(35 * time.Second) // past the receive's 30 s, well within the change's 900
	rebuilt := New(Config{VisibilityTimeout: 30 * time.Second})
	for _, r := range log {
		if err := rebuilt.Replay(later, r, Loc{}); err != nil {
			t.Fatal(err)
		}
	}
	rebuilt.Advance(later)
	if got := rebuilt.ReceiveAll(later, 1, 30*time.Second); len(got) != 0 {
		t.Fatal("a message whose visibility was extended to 15 minutes was delivered again after 35 s")
	}
	if c := rebuilt.Counts(later); c.InFlight != 1 {
		t.Fatalf("counts after replay: %+v", c)
	}
}

// TestReplayedChangeTimesOutNoOther: recovery applies a log's records at
// one later moment, so applying one must not move time on: a visibility
// change replayed for one message would time out another whose delivery a
// later record of the log extends, and that record would then find it
// visible (a power loss lost acknowledged visibility changes so).
func TestReplayedChangeTimesOutNoOther(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	cfg := Config{VisibilityTimeout: 30 * time.Second}
	q := New(cfg)
	var log []*record.Record
	for _, body := range []string{"a", "b"} {
		res := q.Send(t0, &SendSpec{Payload: &record.Payload{ID: body, Body: body}})
		apply(t, q, t0, res.Record)
		q.Hold(res.Record.Msg.Seq, Loc{Seg: 1, Off: uint32(res.Record.Pos)})
		log = append(log, res.Record)
	}
	ds := q.ReceiveAll(t0, 2, 30*time.Second)
	if len(ds) != 2 {
		t.Fatalf("received %d", len(ds))
	}
	for _, d := range ds {
		log = append(log, d.Record)
	}
	// Ten seconds on, both deliveries are extended to 15 minutes, b's first.
	t1 := t0.Add(10 * time.Second)
	for _, d := range []Delivery{ds[1], ds[0]} {
		r := q.VisibilityRecord(d.Msg.Seq, t1.Add(15*time.Minute).UnixMilli())
		apply(t, q, t1, r)
		log = append(log, r)
	}
	// A power loss; recovery a minute after the receive.
	now := t0.Add(time.Minute)
	replay := New(cfg)
	for _, r := range log {
		loc := Loc{}
		if r.Type == record.Send {
			loc = Loc{Seg: 1, Off: uint32(r.Pos)}
		}
		if err := replay.Replay(now, r, loc); err != nil {
			t.Fatal(err)
		}
		if r.Type == record.Send {
			replay.Hold(r.Msg.Seq, loc)
		}
	}
	replay.Advance(now)
	for _, d := range ds {
		m, ok := replay.Lookup(d.Msg.Seq)
		if !ok || m.State != InFlight || m.VisibleAt != t1.Add(15*time.Minute).UnixMilli() {
			t.Fatalf("message %d after replay: %+v (found %v), want in flight until %d", d.Msg.Seq, m, ok, t1.Add(15*time.Minute).UnixMilli())
		}
	}
}
