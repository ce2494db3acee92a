package queue

import (
	"math/rand"
	"slices"
	"testing"
	"time"
)

// TestTableAgainstMap drives the table with random adds (mostly in
// sequence order, some behind), removals and lookups, and checks it
// against a map.
func TestTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var tb table
	ref := map[uint64]*Msg{}
	var seq uint64
	var ptrs []*Msg // entries handed out: must keep their sequence
	for step := 0; step < 200000; step++ {
		switch op := rng.Intn(10); {
		case op < 4:
			seq += 1 + uint64(rng.Intn(3))
			s := seq
			if rng.Intn(50) == 0 && seq > 100 {
				s = seq - uint64(rng.Intn(100)) // behind: recovery, a put-back
			}
			if _, ok := ref[s]; ok {
				continue
			}
			p := tb.add(&Msg{Seq: s, Sent: int64(s)})
			ref[s] = p
			ptrs = append(ptrs, p)
		case op < 8 && len(ref) > 0:
			// remove a random live one (often the oldest, as consumers do)
			var s uint64
			if rng.Intn(2) == 0 {
				s = seq - uint64(rng.Intn(int(min(seq, 500))))
			} else if m := tb.oldest(); m != nil {
				s = m.Seq
			}
			if m, ok := ref[s]; ok {
				tb.del(m)
				delete(ref, s)
			}
		default:
			s := uint64(rng.Int63n(int64(seq + 2)))
			got, ok := tb.get(s)
			want, wok := ref[s]
			if ok != wok || ok && got != want {
				t.Fatalf("step %d: get(%d) = %v %v, want %v %v", step, s, got, ok, want, wok)
			}
		}
		if tb.n != len(ref) {
			t.Fatalf("step %d: n %d, want %d", step, tb.n, len(ref))
		}
	}
	var all []uint64
	tb.each(func(m *Msg) bool { all = append(all, m.Seq); return true })
	if !slices.IsSorted(all) || len(all) != len(ref) {
		t.Fatalf("each: %d entries (sorted %v), want %d", len(all), slices.IsSorted(all), len(ref))
	}
	for _, p := range ptrs {
		if live := ref[p.Seq] == p; live != !p.is(fGone) {
			t.Fatalf("entry %d: gone %v, live %v", p.Seq, p.is(fGone), live)
		}
	}
}

// TestHistoryDoesNotStay: a million messages pass through a queue while
// the first stays in flight; the queue holds a chunk or two, not the
// history behind the stuck message.
func TestHistoryDoesNotStay(t *testing.T) {
	q := New(Config{VisibilityTimeout: time.Hour, Retention: 4 * 24 * time.Hour})
	now := time.Unix(1700000000, 0)
	send(t, q, now, "", 0)
	if d := q.ReceiveAll(now, 1, time.Hour); len(d) != 1 {
		t.Fatal("no first message")
	}
	for i := 0; i < 1000000; i++ {
		send(t, q, now, "", 0)
		d := q.ReceiveAll(now, 1, time.Hour)
		if len(d) != 1 {
			t.Fatalf("message %d: %v", i, d)
		}
		apply(t, q, now, q.DeleteRecord(d[0].Msg.Seq, 0))
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
			q.TakeEffects()
		}
	}
	if live := len(q.t.chunks) - q.t.head - q.t.dead; live > 2 || len(q.t.chunks) > 64 {
		t.Fatalf("%d live chunks, %d in the list, after the history passed", live, len(q.t.chunks))
	}
	if c := q.Counts(now); c.InFlight != 1 || c.Visible != 0 || c.OldestSent != 1700000000000 {
		t.Fatalf("counts %+v", c)
	}
}

// TestRetentionPassesInFlight: a message in flight does not hold back the
// retention of the messages sent after it.
func TestRetentionPassesInFlight(t *testing.T) {
	q := New(Config{VisibilityTimeout: time.Hour, Retention: time.Minute})
	now := time.Unix(1700000000, 0)
	for i := 0; i < 10; i++ {
		send(t, q, now, "", 0)
	}
	if d := q.ReceiveAll(now, 1, 10*time.Hour); len(d) != 1 || d[0].Msg.Seq != 1 {
		t.Fatalf("first receive: %v", d)
	}
	now = now.Add(2 * time.Minute)
	if c := q.Counts(now); c.Visible != 0 || c.InFlight != 1 {
		t.Fatalf("after retention: %+v", c)
	}
	if st := q.Stats(); st.DroppedRetention != 9 {
		t.Fatalf("dropped %d, want 9", st.DroppedRetention)
	}
}
