package topic

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/record"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// state is what a topic holds, for comparisons: its settings, its last
// publish number, and the publishes it holds (number, id, message).
func state(t *Topic) string {
	info := t.Info()
	s := fmt.Sprintf("topic=%s fifo=%v subs=%d seq=%d", info.Name, info.FIFO, len(info.Subs), t.LastNumber())
	for _, p := range t.pubs {
		s += fmt.Sprintf(" [%d %s %q %s %s]", p.Number, p.Payload.ID, p.Payload.Body, p.Payload.SeqNum, p.Group)
	}
	return s
}

// encoded round-trips a record through the codec, as the log does.
func encoded(t *testing.T, r *record.Record) *record.Record {
	t.Helper()
	got, err := record.Decode(record.Encode(r), true)
	if err != nil {
		t.Fatal(err)
	}
	got.Pos = r.Pos
	return got
}

// TestReplayMatchesLive: random publishes (some of whose writes fail),
// settings changes, trims and snapshots on a live topic; the topic rebuilt
// from its log (every record, or the newest snapshot and what follows)
// holds what the live one holds, after the same trim, answers the same
// duplicates, and numbers the next publish the same.
func TestReplayMatchesLive(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		fifo := seed%2 == 0
		t.Run(fmt.Sprintf("seed%d-fifo=%v", seed, fifo), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			now := t0
			live := New(record.TopicInfo{})
			var log []*record.Record // durable records, in position order
			snapAt := -1             // index in log of the newest snapshot's first record
			write := func(recs ...*record.Record) {
				for _, r := range recs {
					r = encoded(t, r)
					if err := live.Apply(r); err != nil {
						t.Fatal(err)
					}
					log = append(log, r)
				}
			}
			info := record.TopicInfo{ID: 3, Name: "t", FIFO: fifo, Created: 1, Subs: map[string]record.Subscription{}}
			write(live.MetaRecord(info))
			trimmed := uint64(0)
			for step := 0; step < 600; step++ {
				now = now.Add(time.Duration(rng.IntN(20)) * time.Second)
				switch op := rng.IntN(20); {
				case op < 12:
					in := PublishSpec{ID: fmt.Sprint("m", step), Message: fmt.Sprint("body", rng.IntN(30)), Group: fmt.Sprint("g", rng.IntN(3))}
					if fifo {
						in.Dedup = fmt.Sprint("d", rng.IntN(40))
					}
					res := live.Publish(now, in)
					if res.Dup {
						continue
					}
					if rng.IntN(10) == 0 { // the write failed
						live.Unwritten(res.Record)
						live.SetLast(res.Record.Pos - 1)
						continue
					}
					write(res.Record)
				case op < 14:
					info.Subs[fmt.Sprint("s", step)] = record.Subscription{Protocol: "sqs", Endpoint: fmt.Sprint("arn:aws:sqs:us-east-1:000000000000:q", step)}
					write(live.MetaRecord(info))
				case op < 17:
					if back := uint64(rng.IntN(5)); live.LastNumber() >= back {
						trimmed = max(trimmed, live.LastNumber()-back)
					}
					live.Trim(trimmed)
				default:
					recs := live.Snapshot(now)
					snapAt = len(log)
					for _, r := range recs {
						r.Pos = live.take()
					}
					write(recs...)
				}
			}
			want := state(live)
			from := []int{0}
			if snapAt >= 0 {
				from = append(from, snapAt)
			}
			for _, start := range from {
				re := New(record.TopicInfo{})
				for _, r := range log[start:] {
					if err := re.Apply(r); err != nil {
						t.Fatal(err)
					}
				}
				re.Trim(trimmed)
				if got := state(re); got != want {
					t.Fatalf("rebuilt from record %d of %d:\n got %s\nwant %s", start, len(log), got, want)
				}
				if re.Last() != live.Last() {
					t.Fatalf("rebuilt from %d: last position %d, live %d", start, re.Last(), live.Last())
				}
				// The same duplicates, and the same next number.
				for i := 0; i < 40 && fifo; i++ {
					in := PublishSpec{ID: "again", Message: "x", Group: "g0", Dedup: fmt.Sprint("d", i)}
					a, b := live.Publish(now, in), re.Publish(now, in)
					if a.Dup != b.Dup || a.ID != b.ID || a.SeqNum != b.SeqNum && a.Dup {
						t.Fatalf("rebuilt from %d: publish of d%d: live %+v, rebuilt %+v", start, i, a, b)
					}
					if !a.Dup {
						live.Unwritten(a.Record)
						live.SetLast(a.Record.Pos - 1)
						re.Unwritten(b.Record)
						re.SetLast(b.Record.Pos - 1)
					}
				}
				a, b := live.Publish(now, PublishSpec{ID: "n", Dedup: "new"}), re.Publish(now, PublishSpec{ID: "n", Dedup: "new"})
				if a.Record.Number != b.Record.Number {
					t.Fatalf("rebuilt from %d: next publish number %d, live %d", start, b.Record.Number, a.Record.Number)
				}
				live.Unwritten(a.Record)
				live.SetLast(a.Record.Pos - 1)
			}
		})
	}
}

// TestNumbersOutliveTrimming: with every publish trimmed, a snapshot still
// carries the last number, so the next publish gets a new one (a queue's
// mark of an old number would take it for a duplicate).
func TestNumbersOutliveTrimming(t *testing.T) {
	live := New(record.TopicInfo{})
	if err := live.Apply(encoded(t, live.MetaRecord(record.TopicInfo{ID: 1, Name: "t"}))); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := live.Apply(encoded(t, live.Publish(t0, PublishSpec{ID: fmt.Sprint(i), Message: "m"}).Record)); err != nil {
			t.Fatal(err)
		}
	}
	live.Trim(5)
	if live.Held() != 0 {
		t.Fatalf("%d publishes held after trimming all", live.Held())
	}
	re := New(record.TopicInfo{})
	for _, r := range live.Snapshot(t0) {
		r.Pos = live.take()
		if err := re.Apply(encoded(t, r)); err != nil {
			t.Fatal(err)
		}
	}
	if got := re.Publish(t0, PublishSpec{ID: "next", Message: "m"}).Record.Number; got != 6 {
		t.Fatalf("the next publish after a snapshot of a trimmed topic is number %d, want 6", got)
	}
}

// TestFIFODeduplication: a FIFO topic answers a publish with a
// deduplication id seen in the last five minutes with the first message's
// id and sequence number, also while the first is being written; a failed
// write lets the id go; per message group when FifoThroughputScope says so.
func TestFIFODeduplication(t *testing.T) {
	tp := New(record.TopicInfo{ID: 1, Name: "t.fifo", FIFO: true})
	first := tp.Publish(t0, PublishSpec{ID: "a", Message: "m", Group: "g", Dedup: "d"})
	if first.Dup || first.SeqNum == "" {
		t.Fatalf("first publish: %+v", first)
	}
	if again := tp.Publish(t0.Add(time.Second), PublishSpec{ID: "b", Message: "m", Group: "h", Dedup: "d"}); !again.Dup || again.ID != "a" || again.SeqNum != first.SeqNum {
		t.Fatalf("a duplicate while the first is written: %+v", again)
	}
	tp.Unwritten(first.Record)
	tp.SetLast(first.Record.Pos - 1)
	second := tp.Publish(t0.Add(2*time.Second), PublishSpec{ID: "c", Message: "m", Group: "g", Dedup: "d"})
	if second.Dup || second.Record.Number != 1 {
		t.Fatalf("after the first write failed: %+v (number %d, want 1)", second, second.Record.Number)
	}
	if err := tp.Apply(encoded(t, second.Record)); err != nil {
		t.Fatal(err)
	}
	if late := tp.Publish(t0.Add(2*time.Second+5*time.Minute), PublishSpec{ID: "e", Message: "m", Group: "g", Dedup: "d"}); late.Dup {
		t.Fatalf("a publish five minutes later is a duplicate: %+v", late)
	}
	perGroup := New(record.TopicInfo{ID: 2, Name: "p.fifo", FIFO: true, Attrs: map[string]string{"FifoThroughputScope": "MessageGroup"}})
	a := perGroup.Publish(t0, PublishSpec{ID: "a", Message: "m", Group: "g", Dedup: "d"})
	if b := perGroup.Publish(t0, PublishSpec{ID: "b", Message: "m", Group: "h", Dedup: "d"}); b.Dup {
		t.Fatalf("per-group deduplication: another group's id taken for a duplicate of %+v", a)
	}
}

// TestAfterReadsFromTheCursor: After returns the publishes after a
// number, in order, at most n; a trimmed one is gone.
func TestAfterReadsFromTheCursor(t *testing.T) {
	tp := New(record.TopicInfo{ID: 1, Name: "t"})
	for i := range 10 {
		if err := tp.Apply(encoded(t, tp.Publish(t0, PublishSpec{ID: fmt.Sprint(i + 1), Message: "m"}).Record)); err != nil {
			t.Fatal(err)
		}
	}
	seqs := func(rs []*record.Record) []uint64 {
		var out []uint64
		for _, r := range rs {
			out = append(out, r.Number)
		}
		return out
	}
	if got := seqs(tp.After(3, 4)); !reflect.DeepEqual(got, []uint64{4, 5, 6, 7}) {
		t.Fatalf("After(3, 4) = %v", got)
	}
	tp.Trim(5)
	if got := seqs(tp.After(0, 100)); !reflect.DeepEqual(got, []uint64{6, 7, 8, 9, 10}) {
		t.Fatalf("after trimming 5: %v", got)
	}
	if got := tp.After(10, 5); len(got) != 0 {
		t.Fatalf("After the last: %v", seqs(got))
	}
}
